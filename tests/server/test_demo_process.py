"""`tracecard demo` as a process: a taken port is reported, and Ctrl-C leaves nothing running
(the helpdesk in its sandbox, the preloader). Apart from test_demo.py, whose module fixture runs
the whole demo once, so these run beside it on another test worker."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.examples.helpers import ROOT
from tests.support.processes import ctrl_c_reaches_it
from tracecard.server.cli.main import main
from tracecard.server.orchestration.embedded import free_port


def test_a_taken_port_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["demo", "--no-serve", "--port", str(port), "--dir", str(tmp_path / "d")])
    assert code == 2
    err = capsys.readouterr().err
    assert f"port {port} on 127.0.0.1 is taken" in err
    assert "pass --port N, or --port 0 for a free port" in err and "--server" not in err  # #14


def _descendants(pid: int) -> list[int]:
    """Every live process under `pid`, read from /proc (parent pid is stat's 4th field)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, ppid in parents.items() if ppid == parent]
        found += children
        frontier += children
    return found


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if text in cmdline and state != "Z":
                found.append(int(entry.name))
    return found


@pytest.mark.timeout(300)  # a whole demo (one trial) runs first
def test_the_demo_serves_until_ctrl_c_and_leaves_nothing_running(tmp_path: Path) -> None:
    port = free_port()
    folder = tmp_path / "demo"
    process = subprocess.Popen(
        [sys.executable, "-m", "tracecard.server.cli", "demo", "--trials", "1"]
        + ["--port", str(port), "--dir", str(folder), "--quiet"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        preexec_fn=ctrl_c_reaches_it,
    )
    try:
        _serve_then_ctrl_c(process, port, folder)
    finally:  # a failed check leaves no demo (and its sandboxed helpdesk) running
        if process.poll() is None:
            for pid in [*_descendants(process.pid), process.pid]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            process.wait(10)


def _serve_then_ctrl_c(process: subprocess.Popen[str], port: int, folder: Path) -> None:
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if "serving until Ctrl-C" in line:
            break
    else:
        pytest.fail("".join(lines))
    page = httpx.get(f"http://127.0.0.1:{port}/experiments", timeout=10)
    assert page.status_code == 200 and "careful" in page.text and "hasty" in page.text
    # the preloaded helpdesk is up, as this demo's own descendant (other demos may run beside it)
    preloaders = [p for p in _descendants(process.pid) if p in _processes_mentioning("preload.py")]
    assert preloaders
    process.send_signal(signal.SIGINT)
    assert process.wait(30) == 0
    deadline = time.monotonic() + 5
    while _processes_mentioning(str(folder)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_mentioning(str(folder)) == []  # no helpdesk left in a sandbox
    deadline = time.monotonic() + 5
    while set(preloaders) & set(_processes_mentioning("preload.py")):
        assert time.monotonic() < deadline, f"the demo's preloader outlived it: {preloaders}"
        time.sleep(0.1)
