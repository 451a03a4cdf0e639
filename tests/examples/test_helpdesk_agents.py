"""The scripted helpdesk agents behave as designed: trial by trial, seeded, reproducible.

Each script is stepped against the helpdesk's tool functions directly (no MCP, no server), from
a fresh copy of the fixture, and each trial is judged the way the suite judges it. The sets below
are what the demo is built to show; a change to the seeding shows up here first.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from tests.examples.helpers import HELPDESK, helpdesk_module, scripts_module

TRIALS = range(5)


def play(
    task_id: str, style: str, trial: int, state_dir: Path
) -> tuple[Any, list[str], dict[str, Any]]:
    """Run one trial's script; returns (answer or 'STUCK', tools called, end state)."""
    shutil.copyfile(HELPDESK / "fixture" / "state.json", state_dir / "state.json")
    helpdesk = helpdesk_module(state_dir)
    scripts = scripts_module()
    script = scripts.script_for(task_id, style, trial)
    called: list[str] = []
    reply: Any = None
    steps = 0
    try:
        while True:
            step = script.send(reply) if steps else next(script)
            steps += 1
            if steps > 50:
                return "STUCK", called, json.loads((state_dir / "state.json").read_text())
            if isinstance(step, scripts.Pause):
                reply = None
                continue
            reply = []
            for tool, arguments in step:
                called.append(tool)
                try:
                    reply.append(getattr(helpdesk, tool)(**arguments))
                except ToolError as exc:
                    reply.append(str(exc))
    except StopIteration as done:
        answer = done.value
    return answer, called, json.loads((state_dir / "state.json").read_text())


def right(task_id: str, answer: Any, called: list[str], state: dict[str, Any]) -> bool:
    """Whether the trial did what the suite's task demands (its main checks)."""
    tickets = state["tickets"]
    if answer == "STUCK":
        return False
    if task_id == "count-urgent":
        return "2 open" in answer and called == ["list_tickets"]
    if task_id == "assign-printer":
        return tickets["T-1002"]["assignee"] == "u-108"
    if task_id == "close-vpn":
        return tickets["T-1003"]["status"] == "closed" and tickets["T-1003"]["comments"]
    if task_id == "escalate-globex":
        return all(tickets[t]["priority"] == "high" for t in ("T-1004", "T-1007", "T-1011"))
    if task_id == "spam-keep-records":
        kept = "prize-invoice.zip" in state["files"] and "T-1005" in tickets
        return kept and tickets["T-1005"]["status"] == "closed"
    if task_id == "reopen-laptop":
        return tickets["T-1006"]["status"] == "open" and tickets["T-1006"]["assignee"] == "u-102"
    if task_id == "sla-meaning":
        return called == [] and "Service Level Agreement" in answer
    if task_id == "vpn-port":
        return "1194" in answer
    if task_id == "inactive-support":
        return "ivan.petrov@acme.example" in answer and "sam.carter@acme.example" in answer
    if task_id == "new-ticket-battery":
        created = [t for t in tickets.values() if "battery" in t["title"].lower()]
        return len(created) == 1 and created[0]["priority"] == "urgent"
    raise AssertionError(task_id)


# trials that go wrong, by design (seed 0)
CAREFUL_WRONG = {"escalate-globex": {0}}  # its one flip: it stops paging once
HASTY_WRONG = {
    "count-urgent": {2, 3},  # forgets the status filter
    "assign-printer": {0, 2, 3},  # takes the first "Dana"
    "escalate-globex": {3, 4},  # reads one page only
    "spam-keep-records": {1, 2},  # deletes the attachment it was told to keep
    "reopen-laptop": {0},  # says "done" without doing anything
    "sla-meaning": {0, 2, 3, 4},  # looks something up anyway
    "inactive-support": {2},  # stuck polling: the timeout stops it
    "new-ticket-battery": {1, 4},  # priority high instead of urgent
}


@pytest.mark.parametrize("style", ["careful", "hasty"])
def test_each_style_fails_exactly_the_designed_trials(style: str, tmp_path: Path) -> None:
    scripts = scripts_module()
    designed = CAREFUL_WRONG if style == "careful" else HASTY_WRONG
    observed: dict[str, set[int]] = {}
    for task_id in scripts.SCRIPTS:
        wrong = set()
        for trial in TRIALS:
            answer, called, state = play(task_id, style, trial, tmp_path)
            if not right(task_id, answer, called, state):
                wrong.add(trial)
        if wrong:
            observed[task_id] = wrong
    assert observed == designed


def test_the_hasty_failures_are_of_the_designed_kinds(tmp_path: Path) -> None:
    answer, called, state = play("reopen-laptop", "hasty", 0, tmp_path)
    assert called == [] and "reopened" in answer  # a hallucinated completion
    assert state["tickets"]["T-1006"]["status"] == "closed"
    _, called, state = play("spam-keep-records", "hasty", 1, tmp_path)
    assert "delete_file" in called and state["tickets"]["T-1005"]["status"] == "closed"
    assert play("inactive-support", "hasty", 2, tmp_path)[0] == "STUCK"


def test_runs_are_reproducible_and_unknown_tasks_get_an_answer(tmp_path: Path) -> None:
    first = play("assign-printer", "hasty", 0, tmp_path)
    assert play("assign-printer", "hasty", 0, tmp_path) == first
    answer, called, _ = play("not-a-demo-task", "careful", 0, tmp_path)
    assert called == [] and "do not know" in answer
    with pytest.raises(ValueError, match="careful or hasty"):
        scripts_module().script_for("vpn-port", "sloppy", 0)
