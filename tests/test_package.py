"""The installed package, as a user gets it: the wheel built from this checkout, installed into a
fresh virtualenv with nothing else of the checkout on the path, used from an unrelated folder.

One namespace in site-packages (a user's own `server.py` keeps working), htmx inside the wheel
(a viewer that loads its script in Chromium), the demo's suite and agents as package data.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx
import pytest

from tests.support.processes import ROOT, free_port, stop, wait_for_port

CHROMIUM = Path("/usr/bin/chromium")
HTMX = ROOT / "node_modules" / "htmx.org" / "dist" / "htmx.min.js"
LAYERS = ("server", "viewer", "scorers", "traces")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),  # the fixtures build a wheel and a virtualenv
    pytest.mark.skipif(not HTMX.is_file(), reason="needs npm ci (htmx) to build the wheel"),
]


def _clean_env() -> dict[str, str]:
    """No virtualenv, no PYTHONPATH, no pytest variables: what a user's shell has."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VIRTUAL_ENV", "PYTEST", "PYTHON", "TRACECARD_"))
    }
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p
    )
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)],
        check=True,
        timeout=300,
        env=_clean_env(),
    )
    (built,) = out.glob("tracecard-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the wheel (and the demo extra) and its dependencies only."""
    folder = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, timeout=120)
    subprocess.run(
        [str(folder / "bin" / "pip"), "install", "--quiet", f"{wheel}[demo]"],
        check=True,
        timeout=600,
        env=_clean_env(),
    )
    return folder


@pytest.fixture()
def elsewhere(tmp_path: Path) -> Path:
    """A user's agent folder, far from the checkout, with its own `server.py` (an MCP author's)."""
    folder = tmp_path / "my-agent"
    folder.mkdir()
    (folder / "server.py").write_text("NAME = 'my own server'\n")
    return folder


def _python(venv: Path, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", code],
        cwd=cwd,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_wheel_holds_one_namespace_htmx_and_the_examples(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        top_level = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
        assert archive.read(top_level).decode().split() == ["tracecard"]
        htmx = archive.read("tracecard/viewer/static/vendor/htmx.min.js")
        # the /schema page's Swagger UI, from its npm package like htmx
        for name in ("swagger-ui-bundle.js", "swagger-ui.css"):
            shipped = archive.read(f"tracecard/viewer/static/vendor/{name}")
            assert shipped == (ROOT / "node_modules" / "swagger-ui-dist" / name).read_bytes()
        # the trace page's live refresh morphs with htmx's idiomorph extension
        morph = archive.read("tracecard/viewer/static/vendor/idiomorph-ext.min.js")
        assert morph == (ROOT / "node_modules/idiomorph/dist/idiomorph-ext.min.js").read_bytes()
    outside = [n for n in names if not n.startswith(("tracecard/", "tracecard-"))]
    assert outside == []
    assert htmx == HTMX.read_bytes()
    for needed in (
        "tracecard/__init__.py",
        "tracecard/client.py",
        "tracecard/py.typed",
        "tracecard/server/cli/main.py",
        "tracecard/viewer/templates/base.html",
        "tracecard/traces/migrations/env.py",
        "tracecard/examples/helpdesk/suite.toml",
        "tracecard/examples/helpdesk/server.py",
        "tracecard/examples/agents/helpdesk_agent.py",
    ):
        assert needed in names, needed
    assert not [n for n in names if n.endswith(".pyc") or "__pycache__" in n]


def test_only_the_tracecard_namespace_is_importable(venv: Path, elsewhere: Path) -> None:
    code = (
        "import importlib.util, json, server, tracecard\n"
        "from tracecard import TracecardClient\n"
        "import tracecard.server.cli, tracecard.viewer, tracecard.scorers, tracecard.traces\n"
        f"print(json.dumps({{'server': server.NAME, 'version': tracecard.__version__, "
        f"'bare': [n for n in {list(LAYERS[1:])!r} if importlib.util.find_spec(n)], "
        "'client': TracecardClient.__module__}))"
    )
    done = _python(venv, code, elsewhere)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    # the user's own server.py wins; no bare viewer/scorers/traces was installed
    assert found["server"] == "my own server"
    assert found["bare"] == []
    assert found["client"] == "tracecard.client"
    site = _python(venv, "import sysconfig; print(sysconfig.get_paths()['purelib'])", elsewhere)
    installed = {p.name for p in Path(site.stdout.strip()).iterdir()}
    assert not set(LAYERS) & installed


def test_installed_demo_and_viewer_work_in_chromium(venv: Path, elsewhere: Path) -> None:
    data = elsewhere / "demo-data"
    port = free_port()
    demo = subprocess.run(
        [str(venv / "bin" / "tracecard"), "demo", "--trials", "1", "--no-serve", "--quiet"]
        + ["--port", str(port), "--dir", str(data)],
        cwd=elsewhere,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "verdict" in demo.stdout.lower()
    with _serving(venv, elsewhere, data / "tracecard.db") as base:
        script = httpx.get(f"{base}/static/vendor/htmx.min.js", timeout=10)
        assert script.status_code == 200 and script.content == HTMX.read_bytes()
        swagger = httpx.get(f"{base}/static/vendor/swagger-ui-bundle.js", timeout=10)
        assert swagger.status_code == 200 and len(swagger.content) > 100_000
        if not CHROMIUM.exists():
            pytest.skip("needs Debian's chromium for the browser half")
        _check_viewer_in_chromium(base, elsewhere)


class _serving:
    """`tracecard serve` from the fresh virtualenv on the demo's database."""

    def __init__(self, venv: Path, cwd: Path, db: Path) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [str(venv / "bin" / "tracecard"), "serve", "--port", str(self.port)]
            + ["--db", f"sqlite:///{db}"],
            cwd=cwd,
            env=_clean_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def __enter__(self) -> str:
        wait_for_port(self.port, timeout=60, proc=self.proc)  # type: ignore[arg-type]
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *_exc: object) -> None:
        stop(self.proc)  # type: ignore[arg-type]


def _check_viewer_in_chromium(base: str, profile_parent: Path) -> None:
    from playwright.sync_api import sync_playwright

    from tests.viewer.test_browser import ARGS

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile_parent / "chromium-profile"),
            executable_path=str(CHROMIUM),
            headless=True,
            args=ARGS,
        )
        try:
            page = context.new_page()
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{base}/experiments")
            assert page.evaluate("typeof window.htmx") == "object", "htmx did not load"
            page.locator("a[href^='/experiments/']").first.click()
            page.wait_for_load_state("networkidle")
            assert "/experiments/" in page.url and page.locator("table").count() > 0
            # htmx at work: the runs page's filter options are swapped in by an hx-get on load
            page.goto(f"{base}/runs")
            # a function, not an expression: Playwright polls an expression with eval, which the
            # viewer's CSP (script-src 'self') refuses whenever the first check comes too early
            page.wait_for_function(
                "() => !document.querySelector('[hx-get=\"/runs/options\"]')", timeout=10_000
            )
            assert errors == []
        finally:
            context.close()
