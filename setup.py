"""Build hook only (everything else is in pyproject.toml): the wheel ships htmx.

htmx comes from its npm package (`npm ci`, pinned in package-lock.json) and is never committed;
`build_py` copies it into the built package as `tracecard/viewer/static/vendor/htmx.min.js`, the
path the viewer serves when there is no node_modules beside it (an installed wheel).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
HTMX = HERE / "node_modules" / "htmx.org" / "dist" / "htmx.min.js"
VENDORED = HERE / "viewer" / "static" / "vendor" / "htmx.min.js"  # an sdist's or Docker's copy


class BuildPyWithHtmx(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # a checkout serves node_modules directly
            return
        source = HTMX if HTMX.is_file() else VENDORED
        if not source.is_file():
            raise SystemExit(
                "tracecard's wheel needs htmx: run `npm ci` (or scripts/setup) first, so that "
                f"{HTMX.relative_to(HERE)} exists"
            )
        target = Path(self.build_lib) / "tracecard" / "viewer" / "static" / "vendor"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target / "htmx.min.js")


setup(cmdclass={"build_py": BuildPyWithHtmx})
