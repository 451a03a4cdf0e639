"""Start real servers for tests: subprocesses on free 127.0.0.1 ports, stopped afterwards."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

ROOT = Path(__file__).resolve().parents[2]

if TYPE_CHECKING:
    from mcp.client.stdio import StdioServerParameters


def ctrl_c_reaches_it() -> None:
    """A `preexec_fn` for a child a test will send Ctrl-C (SIGINT): its default action, as a
    terminal would deliver it. A test run started in the background (`scripts/test &`, a job
    runner) has SIGINT ignored, an ignored signal is inherited across exec, and Python then keeps
    it ignored: the child would never see the test's Ctrl-C (seen: the demo, `run` and the
    quickstart's demo all waited out their timeouts in such a run)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(
    port: int, timeout: float = 20.0, proc: subprocess.Popen[bytes] | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            out = _output(proc)
            raise RuntimeError(
                f"server exited with {proc.returncode} before listening:\n{out[-3000:]}"
            )
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


def stop(proc: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout)


def _output(proc: subprocess.Popen[bytes]) -> str:
    log = getattr(proc, "log_file", None)
    if log is None:
        return ""
    log.seek(0)
    return str(log.read().decode(errors="replace"))


@contextlib.contextmanager
def spawn(
    args: list[str], port: int, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run `args` in its own process group, wait until it listens on `port`, stop it after.

    Output goes to a temporary file, not a pipe: a pipe nobody reads fills up (64 KB of logged
    tracebacks) and then blocks the server in the middle of a request.
    """
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        args,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    proc.log_file = log  # type: ignore[attr-defined]
    try:
        wait_for_port(port, proc=proc)
        yield proc
    finally:
        stop(proc)
        log.close()


@contextlib.contextmanager
def mcp_tool_server(*flags: str) -> Iterator[str]:
    """The SDK test server (tests/servers/tool_server.py); yields its MCP URL."""
    port = free_port()
    script = str(ROOT / "tests" / "servers" / "tool_server.py")
    with spawn([sys.executable, script, str(port), *flags], port):
        yield f"http://127.0.0.1:{port}/mcp"


def fresh_interpreter(script: str, *args: str, timeout: float = 300) -> Any:
    """Run `script` with `args` in a new interpreter (the checkout on its path, nothing else
    inherited) and return the JSON its last line of output prints. For counts of the whole
    process, such as `gc.get_objects()`, that other tests' leftovers would blur."""
    done = subprocess.run(
        [sys.executable, script, *args],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def get_json(url: str) -> object:
    return httpx.get(url, timeout=10).json()


def wrapped_server(
    server_url: str, run_id: str, upstream: str, spool: Path, command: list[str]
) -> StdioServerParameters:
    """`tracecard wrap --run ... -- COMMAND` as an MCP stdio client starts it."""
    from mcp.client.stdio import StdioServerParameters

    tracecard = str(ROOT / ".venv" / "bin" / "tracecard")
    args = ["wrap", "--server", server_url, "--run", run_id, "--upstream", upstream]
    return StdioServerParameters(
        command=tracecard, args=[*args, "--spool", str(spool), "--", *command]
    )
