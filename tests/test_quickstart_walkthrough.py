"""docs/quickstart.md followed literally, in a temporary folder: every command of the page, in
order, as a new user would type it (#14). It fails when a command of the doc stops working, or
prints what the doc does not say (a traceback, log lines, a deprecation warning).

Fast and offline: the temporary folder links the checkout's installed `.venv` and
`node_modules` (so `scripts/setup` finds everything installed), the demo runs 1 trial per task
instead of 5 (`--trials`, which the doc names) on a free port (`--port 0`)."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.examples.helpers import code_blocks
from tests.support.processes import ctrl_c_reaches_it

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "docs" / "quickstart.md"
LINKED = ("scripts", "examples", ".venv", "node_modules", "pyproject.toml", "package.json",
          "package-lock.json")  # fmt: skip
QUICK = ["--trials", "1", "--port", "0"]  # both named in the doc


def doc_commands() -> list[str]:
    """Every shell command of the page: the `sh` blocks (continuation lines joined, comments
    dropped), then the inline `tracecard export` / `tracecard gate` of its last paragraph."""
    commands = []
    for block in code_blocks(QUICKSTART, "sh"):
        for line in block.replace("\\\n", " ").splitlines():
            command = line.split("  #", 1)[0].strip()
            if command:
                commands.append(re.sub(r"\s+", " ", command))
    text = QUICKSTART.read_text(encoding="utf-8")
    commands += re.findall(r"`(tracecard (?:export|gate) [^`]+)`", text)
    return commands


def _environment(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACECARD_", "OTEL_"))}
    env.pop("VIRTUAL_ENV", None)
    return {**env, "COLUMNS": "80", "HOME": str(folder / "home")}


def _said_nothing_else(output: str) -> None:
    assert "Traceback" not in output and "INFO" not in output, output[-3000:]
    assert "deprecated" not in output, output  # the doc must use the current spellings


def _shell(folder: Path, command: str, activated: bool) -> subprocess.CompletedProcess[str]:
    script = (". .venv/bin/activate && " if activated else "") + command
    return subprocess.run(
        ["bash", "-c", script], cwd=folder, env=_environment(folder), capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(400)  # three demo-sized steps; a loaded 2-core machine needs the room
def test_the_quickstart_as_written(tmp_path: Path) -> None:
    stamp = ROOT / ".venv" / ".tracecard-installed"
    if not stamp.is_file() or (ROOT / "pyproject.toml").stat().st_mtime > stamp.stat().st_mtime:
        pytest.skip("scripts/setup has not installed the current pyproject.toml")
    folder = tmp_path / "checkout"
    (folder / "home").mkdir(parents=True)
    for name in LINKED:
        (folder / name).symlink_to(ROOT / name)

    commands = doc_commands()
    assert commands == [
        "scripts/demo",
        ". .venv/bin/activate",
        "tracecard demo",
        "tracecard run --config examples/helpdesk/tracecard.toml --suite "
        "examples/helpdesk/suite.toml --name careful --trials 1 --concurrency 4 --agent "
        "'python examples/agents/helpdesk_agent.py --style careful'",
        "tracecard export --experiment ID --format md",
        "tracecard gate --experiment ID --min outcome=0.8",
    ], "docs/quickstart.md changed its commands: walk through the new ones here"

    # 1. scripts/demo: installs (already done), runs the demo, serves the viewer until Ctrl-C
    demo = subprocess.Popen(
        ["bash", "-c", f"exec {commands[0]} {shlex.join(QUICK)}"], cwd=folder,
        env=_environment(folder), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=ctrl_c_reaches_it,
    )  # fmt: skip
    assert demo.stdout is not None
    lines: list[str] = []
    for line in demo.stdout:
        lines.append(line)
        if line.startswith("serving until Ctrl-C"):
            break
    printed = "".join(lines)
    served = re.search(r"serving until Ctrl-C at (http://127\.0\.0\.1:\d+)", printed)
    assert served, printed[-3000:]
    page = httpx.get(f"{served.group(1)}/experiments", timeout=30)
    assert page.status_code == 200 and "careful" in page.text and "hasty" in page.text
    demo.send_signal(signal.SIGINT)  # Ctrl-C
    rest, _ = demo.communicate(timeout=60)
    assert demo.returncode == 0, rest
    printed += rest
    ports = set(re.findall(r"http://127\.0\.0\.1:(\d+)", printed))
    assert ports == {served.group(1).rsplit(":", 1)[1]}, ports  # every link: the bound port
    for said in ("careful · helpdesk", "hasty · helpdesk", "verdict on outcome:",
                 "/compare/experiments?a=", "/scorecard.md"):  # fmt: skip
        assert said in printed, (said, printed[-3000:])
    assert (folder / ".tracecard" / "demo" / "tracecard.db").is_file()  # under .tracecard/demo/
    _said_nothing_else(printed)
    # sentences may wrap, and a command to copy (with the database's path) is not a table
    prose = ("tracecard demo:", "verdict on", "runs:", "finished in", "the results are in",
             "  tracecard ")  # fmt: skip
    wide = [
        line
        for line in printed.splitlines()
        if len(line) > 80 and "http" not in line and not line.startswith(prose)
    ]
    assert wide == [], wide  # the tables are readable at 80 columns

    # 2. `. .venv/bin/activate`, then `tracecard demo` (here with --no-serve: exit after printing)
    again = _shell(folder, f"{commands[2]} {shlex.join(QUICK)} --no-serve", activated=True)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "careful · helpdesk" in again.stdout and "verdict on outcome:" in again.stdout
    # "it then says how to reopen the results with `tracecard serve`"
    assert "The demo's server has stopped" in again.stdout, again.stdout[-2000:]
    assert "\n  tracecard serve --db " in again.stdout, again.stdout[-2000:]
    _said_nothing_else(again.stdout + again.stderr)

    # 3. tracecard run: the table per task and component, and the viewer URL
    run = _shell(folder, commands[3], activated=True)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "careful · helpdesk" in run.stdout and "runs: 10 finished" in run.stdout
    assert re.search(r"viewer: http://127\.0\.0\.1:\d+/experiments/\w+", run.stdout)
    assert "config: examples/helpdesk/tracecard.toml" in run.stderr
    _said_nothing_else(run.stdout + run.stderr)
    found = re.search(r"^experiment (\w+): careful on suite helpdesk", run.stdout, re.M)
    assert found, run.stdout
    experiment = found.group(1)

    # 4. the scorecard stays in the database: export it, gate on it
    export = _shell(folder, commands[4].replace("ID", experiment), activated=True)
    assert export.returncode == 0, export.stderr
    assert export.stdout.startswith("#") and "| outcome |" in export.stdout
    gate = _shell(folder, commands[5].replace("ID", experiment), activated=True)
    assert gate.returncode == 0, gate.stdout + gate.stderr  # careful: outcome 0.9 on 1 trial
    *checks, verdict = gate.stdout.strip().splitlines()  # each threshold, then the verdict
    assert verdict.startswith("gate passed: careful")
    assert re.fullmatch(r"PASS outcome pass_rate \d\.\d\d >= 0\.80", checks[-1]), checks
    _said_nothing_else(export.stderr + gate.stdout + gate.stderr)
