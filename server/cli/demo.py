"""`tracecard demo`: two scripted agent configurations, five trials each, on the helpdesk suite.

Everything is local and fresh each time: a SQLite database and sandboxes under `.tracecard/demo/`,
an embedded server with the helpdesk as a per-run stdio upstream (every trial starts from the
fixture), and the agents of `examples/agents/helpdesk_agent.py` (pydantic-ai with a scripted
model). The agents run in this process (`PythonAgent`) rather than as one command per run: a
Python start-up with pydantic-ai costs about two CPU-seconds, a hundred of them would not fit in
a minute on two cores. They get the same environment variables a command would.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from rich.console import Console

import tracecard
from tracecard.client import TracecardClient
from tracecard.server.cli.run_output import print_summary
from tracecard.server.cli.run_process import interrupt_on_sigterm, orchestrate, serve_forever
from tracecard.server.orchestration.agents import PythonAgent
from tracecard.server.orchestration.embedded import embedded_server
from tracecard.server.orchestration.orchestrator import RunOutcome
from tracecard.server.orchestration.summary import comparison_table, verdict_line
from tracecard.server.runs.service import RunError
from tracecard.server.settings import Settings, UpstreamSettings

# examples/ in a checkout (linked as tracecard/examples), package data in an installed wheel
EXAMPLES = Path(tracecard.__file__).resolve().parent / "examples"
STYLES = ("careful", "hasty")  # A (the baseline) and B


def _examples() -> Path:
    if not (EXAMPLES / "helpdesk" / "suite.toml").is_file():
        raise RunError(
            f"tracecard demo needs its example suite, not found at {EXAMPLES}: reinstall "
            "tracecard (the wheel ships it) or run it from a checkout"
        )
    return EXAMPLES


def load_agent_module() -> ModuleType:
    """examples/agents/helpdesk_agent.py, imported by path (examples/ is not a package)."""
    folder = _examples() / "agents"
    if importlib.util.find_spec("pydantic_ai") is None:
        raise RunError(
            "tracecard demo's scripted agents need pydantic-ai: pip install 'tracecard[demo]'"
        )
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))  # its sibling module helpdesk_scripts
    spec = importlib.util.spec_from_file_location("helpdesk_agent", folder / "helpdesk_agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def demo_settings(folder: Path, port: int, preloaded: str | None = None) -> Settings:
    """The embedded server's settings: SQLite and sandboxes in `folder`, the helpdesk upstream
    (a fresh stdio process per run, relaying to the preloaded helpdesk at `preloaded`)."""
    examples = _examples()
    helpdesk = UpstreamSettings(
        command=[sys.executable, str(examples / "helpdesk" / "server.py"), "{sandbox}"],
        per_run=True,
        fixture=str(examples / "helpdesk" / "fixture"),
        env={"HELPDESK_PRELOADED": preloaded} if preloaded else {},
    )
    return Settings(
        db=f"sqlite:///{folder / 'tracecard.db'}",
        port=port,
        sandbox_root=str(folder / "sandboxes"),
        sandbox_retention=10_000,
        upstreams={"helpdesk": helpdesk},
        recording={"batch_delay_ms": 100},
    )


def fresh_folder(path: Path) -> Path:
    """Empty `path` (a previous demo's database and sandboxes) and create it again."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path.resolve()


@contextlib.contextmanager
def preloaded_helpdesk() -> Iterator[str | None]:
    """Start examples/helpdesk/preload.py (one import of the MCP SDK for every run's server);
    yields its socket, or None where there are no Unix sockets. Stopped with its children."""
    if not hasattr(socket, "AF_UNIX") or not hasattr(os, "fork"):
        yield None
        return
    folder = tempfile.mkdtemp(prefix="tracecard-demo-")  # short: socket paths are limited
    path = str(Path(folder) / "helpdesk.sock")
    process = subprocess.Popen(
        [sys.executable, str(_examples() / "helpdesk" / "preload.py"), path],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        if process.stdout.readline().strip() != b"ready":
            raise RunError("the preloaded helpdesk (examples/helpdesk/preload.py) did not start")
        yield path
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        shutil.rmtree(folder, ignore_errors=True)


def flaky_tasks(card: dict[str, Any]) -> list[str]:
    """Tasks whose trials disagreed on the outcome, the completion or the invocation."""
    flaky = []
    for task in card["tasks"]:
        flips = {c["component"] for c in task["components"] if c.get("flip")}
        if flips & {"outcome", "completion", "invocation"}:
            flaky.append(task["task_id"])
    return flaky


def _agent(module: ModuleType, style: str) -> PythonAgent:
    async def run(env: Mapping[str, str]) -> str:
        answer: str = await module.run_helpdesk_agent(env, style)
        return answer

    return PythonAgent(run)


def _demo(args: argparse.Namespace) -> int:
    console = Console(soft_wrap=True)  # URLs stay whole; tables still fit the width
    started = time.monotonic()
    interrupt_on_sigterm()
    folder = fresh_folder(Path(args.dir))
    module = load_agent_module()
    experiments: dict[str, str] = {}
    outcomes: dict[str, list[RunOutcome]] = {}
    with contextlib.ExitStack() as stack:
        preloaded = stack.enter_context(preloaded_helpdesk())
        settings = demo_settings(folder, args.port, preloaded)
        served = stack.enter_context(embedded_server(settings, use_running=False))
        client = stack.enter_context(TracecardClient(served.base_url))
        suite = client.add_suite(_examples() / "helpdesk" / "suite.toml")
        trials = f"{args.trials} trial" + ("" if args.trials == 1 else "s")
        console.print(
            f"tracecard demo: suite {suite['name']} ({len(suite['tasks'])} tasks), "
            f"configurations {' and '.join(STYLES)} × {trials}, "
            f"server {served.base_url}, data in {folder}"
        )
        for style in STYLES:
            config: dict[str, Any] = {
                "name": style,
                "agent": f"python examples/agents/helpdesk_agent.py --style {style}",
                "framework": "pydantic-ai",
                "model": "scripted FunctionModel",
            }
            experiment = client.create_experiment(suite["version"], config, args.trials)
            experiments[style] = experiment.id
            outcomes[style], interrupted = orchestrate(
                client,
                experiment,
                _agent(module, style),
                console=console,
                concurrency=args.concurrency,
                timeout_s=args.timeout,
                work_dir=folder / "agent-runs" / experiment.id,
                progress=not args.quiet,
                label=style,
            )
            if interrupted:
                console.print("interrupted: finished runs kept, the others aborted")
                return 130
        cards = {
            style: print_summary(console, client, experiments[style], outcomes[style])
            for style in STYLES
        }
        a, b = experiments[STYLES[0]], experiments[STYLES[1]]
        comparison = client.compare(a, b, "outcome")
        console.print(comparison_table(comparison, *STYLES))
        console.print(verdict_line(comparison, *STYLES))
        base = served.base_url
        if args.no_serve:
            # This server stops with the command: the links are for `tracecard serve` on it.
            port = args.port or 7800
            base = f"http://127.0.0.1:{port}"
            reopen = f"tracecard serve --db {folder / 'tracecard.db'}"
            reopen += f" --port {port}" if port != 7800 else ""
            console.print(
                f"\nfinished in {time.monotonic() - started:.0f}s. The demo's server has "
                f"stopped (--no-serve); to look at the results in the browser, run\n"
                f"  {reopen}\nand open:"
            )
        else:
            console.print(
                f"\nfinished in {time.monotonic() - started:.0f}s. Look at it in the browser:"
            )
        console.print(f"  experiments:      {base}/experiments")
        for style in STYLES:
            console.print(f"  {style + ':':<17} {base}/experiments/{experiments[style]}")
        console.print(f"  side by side:     {base}/compare/experiments?a={a}&b={b}")
        flaky = flaky_tasks(cards[STYLES[1]])
        if flaky:
            console.print(f"  {STYLES[1]}'s flaky tasks, trials side by side:")
            for task_id in flaky[:5]:
                console.print(
                    f"    {task_id:<20} {base}/compare/runs?experiment={b}&task={task_id}"
                )
        console.print(
            f"  scorecard export: {base}/api/experiments/{b}/scorecard.md (.json .csv .junit)"
        )
        database = folder / "tracecard.db"
        console.print(
            f"the results are in {database}: later commands read it with --db, e.g.\n"
            f"  tracecard export --experiment {STYLES[1]} --format md --db {database}\n"
            f"  tracecard gate --experiment {STYLES[1]} --min outcome=0.8 --db {database}"
        )
        if args.no_serve:
            return 0
        console.print(f"serving until Ctrl-C at {served.base_url}")
        serve_forever()
    return 0


def register(sub: Any) -> None:
    """Add `tracecard demo`."""
    demo = sub.add_parser(
        "demo",
        help="evaluate two scripted agents on the helpdesk suite and open the viewer",
        description="Run the careful and the hasty helpdesk agents 5 times on each of the "
        "helpdesk suite's tasks against a fresh local database, print the scorecards and their "
        "comparison, then serve the viewer until Ctrl-C.",
    )
    demo.add_argument(
        "--port", type=int, default=7800, help="port to serve on (default 7800; 0: any free port)"
    )
    demo.add_argument("--trials", type=int, default=5, help="trials per task (default 5)")
    demo.add_argument("--concurrency", type=int, default=6, help="runs at a time (default 6)")
    demo.add_argument("--timeout", type=float, default=8.0, help="seconds per run (default 8)")
    demo.add_argument("--dir", default=".tracecard/demo", help="data folder, emptied first")
    demo.add_argument("--no-serve", action="store_true", help="exit after printing")
    demo.add_argument("--quiet", action="store_true", help="no progress bars")
    demo.set_defaults(handler=_demo)
