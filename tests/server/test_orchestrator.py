"""The orchestrator and its agent processes: the environment contract, answers, and every fault
(a command that does not exist, exits non-zero, hangs, floods stdout, ignores SIGTERM, leaves
children behind, is interrupted): each run is marked with the reason, the others go on, and no
process is left behind."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.in_process import in_process_tracecard
from tracecard.client import RunHandle, TracecardClient
from tracecard.server.orchestration.agents import CommandAgent, PythonAgent, agent_environment
from tracecard.server.orchestration.orchestrator import Orchestrator
from tracecard.server.orchestration.process import TailBuffer, group_members
from tracecard.server.settings import Settings

# One script, many behaviours: the task id says which (it is in TRACECARD_TASK_ID).
FAULT_AGENT = textwrap.dedent(
    """
    import json, os, signal, subprocess, sys, time
    task = os.environ["TRACECARD_TASK_ID"]
    pids = os.path.join(os.path.dirname(os.environ["TRACECARD_ANSWER_FILE"]), "pids.json")

    def note(*extra):
        # written whole, then renamed: the test polls this file and must never read it half-written
        with open(pids + ".tmp", "w") as handle:
            json.dump([os.getpid(), *extra], handle)
        os.replace(pids + ".tmp", pids)

    if task == "ok":
        note()
        with open(os.environ["TRACECARD_ANSWER_FILE"], "w") as handle:
            handle.write("the answer is 42")
        print("some chatter, not the answer")
    elif task == "stdout-answer":
        note()
        print("thinking...")
        print("the answer is 42")
    elif task == "crash":
        note()
        print("Traceback (most recent call last):\\nValueError: boom", file=sys.stderr)
        sys.exit(3)
    elif task == "hang":
        note()
        time.sleep(600)
    elif task == "flood":
        note()
        chunk = "x" * 65536 + "\\n"
        for _ in range(320):  # 20 MiB
            sys.stdout.write(chunk)
        print("the answer is 42")
    elif task == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen([sys.executable, "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
        note(child.pid)
        time.sleep(600)
    elif task == "leaves-child":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        note(child.pid)
        print("the answer is 42")
    """
)

TASKS = ["ok", "stdout-answer", "crash", "hang", "flood", "stubborn", "leaves-child"]
SUITE = {
    "schema_version": 1,
    "name": "faults",
    "tasks": [
        {"id": t, "instruction": f"behave: {t}", "completion": {"checks": [{"contains": "42"}]}}
        for t in TASKS
    ],
}


@pytest.fixture
def agent_script(tmp_path: Path) -> Path:
    path = tmp_path / "fault_agent.py"
    path.write_text(FAULT_AGENT)
    return path


@pytest.fixture
def server(settings: Settings) -> Iterator[TracecardClient]:
    # the agents here never call tracecard; the orchestrator's client reaches it in process
    with (
        in_process_tracecard(settings) as tracecard,
        TracecardClient(tracecard.url, transport=tracecard.transport) as client,
    ):
        client.add_suite(json.dumps(SUITE))
        yield client


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def recorded_pids(work_dir: Path) -> list[int]:
    pids: list[int] = []
    for path in work_dir.glob("*/pids.json"):
        pids.extend(json.loads(path.read_text()))
    return pids


def test_tail_buffer_keeps_the_end_and_counts_everything() -> None:
    tail = TailBuffer(10)
    for chunk in (b"0123456789", b"abcdefghij", b"KLMNOPQRST"):
        tail.write(chunk)
    assert tail.text() == "KLMNOPQRST" and tail.total == 30 and tail.truncated


def test_environment_contract() -> None:
    run = RunHandle(
        id="r1",
        task_id="t1",
        trial=2,
        instruction="do it",
        urls={
            "helpdesk": "http://h/runs/r1/mcp/helpdesk",
            "web-search": "http://h/runs/r1/http/web-search/",
        },
    )
    env = agent_environment(
        run,
        server_url="http://h",
        experiment_id="e1",
        config_name="careful",
        answer_file=Path("/tmp/a.txt"),
        token="s3cret",
        base={"PATH": "/bin", "OTEL_RESOURCE_ATTRIBUTES": "team=x"},
    )
    assert env["PATH"] == "/bin"
    assert env["TRACECARD_RUN_ID"] == "r1" and env["TRACECARD_TRIAL"] == "2"
    assert env["TRACECARD_TASK_ID"] == "t1" and env["TRACECARD_INSTRUCTION"] == "do it"
    assert env["TRACECARD_URL"] == "http://h" and env["TRACECARD_EXPERIMENT_ID"] == "e1"
    assert env["TRACECARD_RUN"] == "r1" and env["TRACECARD_SERVER"] == "http://h"  # for wrap
    assert env["TRACECARD_CONFIG"] == "careful" and env["TRACECARD_ANSWER_FILE"] == "/tmp/a.txt"
    assert json.loads(env["TRACECARD_UPSTREAMS"]) == run.urls
    assert env["TRACECARD_UPSTREAM_HELPDESK"] == run.urls["helpdesk"]
    assert env["TRACECARD_UPSTREAM_WEB_SEARCH"] == run.urls["web-search"]
    assert "TRACECARD_MCP_URL" not in env  # only when there is exactly one upstream
    assert env["TRACECARD_API_TOKEN"] == "s3cret"
    assert env["OTEL_RESOURCE_ATTRIBUTES"] == "team=x,tracecard.run.id=r1"
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://h"
    assert "TRACEPARENT" not in env  # a run handle without a trace context hands none over


def test_every_fault_is_marked_with_its_reason_and_nothing_is_left_running(
    server: TracecardClient, agent_script: Path, tmp_path: Path
) -> None:
    experiment = server.create_experiment("faults", {"name": "faulty"}, trials=1)
    work_dir = tmp_path / "work"
    agent = CommandAgent([sys.executable, str(agent_script)], grace_s=0.5, stdout_limit=4096)
    orchestrator = Orchestrator(server, agent, concurrency=4, timeout_s=4, work_dir=work_dir)
    started = time.monotonic()
    outcomes = {o.run.task_id: o for o in asyncio.run(orchestrator.run(experiment))}
    elapsed = time.monotonic() - started

    assert outcomes["ok"].status == "finished"
    assert outcomes["ok"].final_answer == "the answer is 42"  # the answer file wins
    assert outcomes["ok"].passed("completion") is True
    assert outcomes["stdout-answer"].final_answer == "the answer is 42"  # else stdout's last line
    crash = outcomes["crash"]
    assert crash.status == "errored" and crash.exit_code == 3
    assert crash.error is not None and "exited with code 3" in crash.error
    assert "ValueError: boom" in crash.error  # the stderr tail
    assert crash.passed("completion") is False
    for task in ("hang", "stubborn"):
        assert outcomes[task].status == "timed_out", task
        assert "timed out after 4s" in (outcomes[task].error or "")
    flood = outcomes["flood"]
    assert flood.status == "finished" and flood.final_answer == "the answer is 42"
    stdout_file = work_dir / flood.run.id / "stdout.txt"
    assert len(stdout_file.read_bytes()) <= 4096  # capped: the tail only
    assert outcomes["leaves-child"].status == "finished"
    assert elapsed < 30  # the hanging runs did not hold the others up

    for task, outcome in outcomes.items():
        stored = server.get_run(outcome.run.id)
        assert stored["status"] == outcome.status, task
        assert stored["scores"], task
    pids = recorded_pids(work_dir)
    assert len(pids) >= len(TASKS) + 2  # every agent, the stubborn child and the left-over child
    assert [pid for pid in pids if alive(pid)] == []


def test_a_command_that_does_not_exist_errors_every_run_with_the_reason(
    server: TracecardClient, tmp_path: Path
) -> None:
    experiment = server.create_experiment("faults", {"name": "missing"}, trials=1)
    agent = CommandAgent(["/nonexistent/agent", "--flag"])
    orchestrator = Orchestrator(server, agent, concurrency=2, timeout_s=5, work_dir=tmp_path)
    outcomes = asyncio.run(orchestrator.run(experiment))
    assert len(outcomes) == len(TASKS)
    for outcome in outcomes:
        assert outcome.status == "errored"
        assert outcome.error is not None and "cannot start '/nonexistent/agent'" in outcome.error
        assert "No such file" in outcome.error
        assert server.get_run(outcome.run.id)["status"] == "errored"


def test_interrupting_keeps_finished_runs_aborts_the_rest_and_stops_every_agent(
    server: TracecardClient, agent_script: Path, tmp_path: Path
) -> None:
    experiment = server.create_experiment("faults", {"name": "interrupted"}, trials=2)
    work_dir = tmp_path / "work"
    ended: list[str] = []

    def listener(event: str, run: RunHandle, outcome: object) -> None:
        if event == "ended":
            ended.append(run.task_id)

    agent = CommandAgent([sys.executable, str(agent_script)], grace_s=0.5)
    orchestrator = Orchestrator(
        server, agent, concurrency=3, timeout_s=120, work_dir=work_dir, listener=listener
    )

    async def interrupt() -> None:
        task = asyncio.create_task(orchestrator.run(experiment))
        deadline = time.monotonic() + 60
        # wait until the quick runs ended and the slow ones hold every slot
        while len(recorded_pids(work_dir)) < 3 or not ended:
            assert time.monotonic() < deadline, "the agents did not start"
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(interrupt())
    outcomes = orchestrator.outcomes
    assert len(outcomes) == len(experiment.runs)  # every run has an outcome
    statuses = {o.status for o in outcomes.values()}
    assert "aborted" in statuses and "finished" in statuses
    for outcome in outcomes.values():
        stored = server.get_run(outcome.run.id)
        assert stored["status"] == outcome.status
        if outcome.status == "aborted":
            assert stored["scores"]  # scored like any ended run: completion 0
    assert [pid for pid in recorded_pids(work_dir) if alive(pid)] == []


def test_python_agents_time_out_and_fail_like_commands(
    server: TracecardClient, tmp_path: Path
) -> None:
    experiment = server.create_experiment("faults", {"name": "in-process"}, trials=1)

    async def agent(env: dict[str, str]) -> str:
        task = env["TRACECARD_TASK_ID"]
        if task in ("hang", "stubborn"):
            await asyncio.sleep(60)
        if task == "crash":
            raise ValueError("boom")
        return "the answer is 42"

    orchestrator = Orchestrator(
        server, PythonAgent(agent), concurrency=7, timeout_s=1, work_dir=tmp_path
    )
    outcomes = {o.run.task_id: o for o in asyncio.run(orchestrator.run(experiment))}
    assert outcomes["hang"].status == "timed_out"
    assert outcomes["crash"].status == "errored" and "ValueError: boom" in (
        outcomes["crash"].error or ""
    )
    assert outcomes["ok"].status == "finished" and outcomes["ok"].passed("completion")


def test_group_members_sees_a_live_group_and_not_a_finished_one() -> None:
    async def go() -> tuple[list[int], list[int]]:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "import time; time.sleep(30)", start_new_session=True
        )
        during = group_members(process.pid)
        process.kill()
        await process.wait()
        return during, group_members(process.pid)

    during, after = asyncio.run(go())
    assert during and after == []
    assert os.getpgid(0) not in during
