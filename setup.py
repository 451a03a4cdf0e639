"""Build hook only (everything else is in pyproject.toml): the wheel ships htmx and Swagger UI.

Both come from their npm packages (`npm ci`, pinned in package-lock.json) and are never
committed; `build_py` copies each into the built package under `tracecard/viewer/static/vendor/`
(htmx.min.js, and swagger-ui-bundle.js and swagger-ui.css for the /schema page), the path the
viewer serves when there is no node_modules beside it (an installed wheel).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
# name under static/vendor/ -> its file in node_modules (the viewer's `assets.VENDOR_FILES`)
VENDOR_FILES = {
    "htmx.min.js": "htmx.org/dist/htmx.min.js",
    "idiomorph-ext.min.js": "idiomorph/dist/idiomorph-ext.min.js",  # live trace refresh (morph)
    "swagger-ui-bundle.js": "swagger-ui-dist/swagger-ui-bundle.js",
    "swagger-ui.css": "swagger-ui-dist/swagger-ui.css",
}
VENDORED = HERE / "viewer" / "static" / "vendor"  # an sdist's or Docker's copy


class BuildPyWithVendorFiles(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # a checkout serves node_modules directly
            return
        target = Path(self.build_lib) / "tracecard" / "viewer" / "static" / "vendor"
        target.mkdir(parents=True, exist_ok=True)
        for name, packaged in VENDOR_FILES.items():
            npm = HERE / "node_modules" / packaged
            source = npm if npm.is_file() else VENDORED / name
            if not source.is_file():
                raise SystemExit(
                    f"tracecard's wheel needs {name}: run `npm ci` (or scripts/setup) first, so "
                    f"that node_modules/{packaged} exists"
                )
            shutil.copyfile(source, target / name)


setup(cmdclass={"build_py": BuildPyWithVendorFiles})
