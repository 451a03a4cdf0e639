"""The `unseen_gold` check: a gold argument the agent is never shown (gorilla #1367's defect).

The BFCL case is `multi_turn_base_4` as the issue describes it: `sort` of a one-line file returns
it unchanged, yet the gold tweet holds a reordered text that no call returns."""

from __future__ import annotations

import json
from typing import Any

from tests.scorers.trace_helpers import make_task, root, span, tool_call, tools_list
from tracecard.scorers.audit import audit_tasks, baseline_run
from tracecard.scorers.audit_gold import unseen_gold_arguments
from tracecard.scorers.suite import Task
from tracecard.traces import semconv as sc

REPORT = "Initial report content Unsorted data More unsorted data"


def _turn(index: int, user: str, start_ms: int) -> dict[str, Any]:
    return span(f"turn {index}", {sc.TURN_INDEX: index, sc.TURN_USER: user}, start_ms=start_ms)


def _result(value: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": json.dumps(value)}], "isError": False}


GOLD = "Initial report content More unsorted data Unsorted data"


def _bfcl_task(state: str = GOLD) -> Task:
    """An imported BFCL task: the gold is replayed (every argument), and the state check after
    it holds the tweet `state` (BFCL scores states and results, not arguments)."""
    task = make_task(
        "[tasks.outcome]\n"
        'probes = [{ id = "state", upstream = "bfcl", tool = "_bfcl_state" }]\n'
        'predicates = [{ probe = "state", path = "$.TwitterAPI.tweets", op = "eq",'
        f' value = {{ content = "{state}" }} }}]\n'
    )
    metadata = {"bfcl_ground_truth": [["sort(...)"]]}
    return task.model_copy(update={"instruction": "", "metadata": metadata})


def _base_4(tweet: str, later_result: str | None = None) -> list[dict[str, Any]]:
    spans = [
        root(),
        _turn(0, "There is a report in my current directory; sort its lines.", 100),
        tool_call("ls", {}, start_ms=150, result=_result(
            {"current_directory_content": ["report.txt"]}
        )),
        tool_call("sort", {"file_name": "report.txt"}, start_ms=200, result=_result(
            {"sorted_content": REPORT}
        )),
        _turn(1, "Share the sorted result on social media, tag 'currenttechtrend' and "
              "mention Julia, our insightful team.", 300),
        tool_call("post_tweet", {
            "content": tweet, "tags": ["#currenttechtrend"], "mentions": ["@Julia"]
        }, start_ms=400, result=_result({"id": 2})),
    ]  # fmt: skip
    if later_result is not None:
        spans.append(tool_call("cat", {"file_name": "b"}, start_ms=500, result=_result(
            {"file_content": later_result}
        )))  # fmt: skip
    return spans


def test_a_gold_text_no_call_returns_is_flagged_and_derivable_ones_are_not() -> None:
    gold = GOLD
    assert unseen_gold_arguments(_base_4(gold), _bfcl_task()) == [f"post_tweet(content={gold!r})"]
    # the text sort returned, the file name ls listed, the tag and the mention (from "tag 'x'"
    # and "mention Julia") are all derivable
    assert unseen_gold_arguments(_base_4(REPORT), _bfcl_task()) == []
    # a text the scored state does not hold may be worded any way: not a defect
    assert unseen_gold_arguments(_base_4(gold), _bfcl_task(state="something else")) == []


def test_only_what_came_before_the_call_counts() -> None:
    gold = GOLD
    # a result after the call does not make it derivable
    found = unseen_gold_arguments(_base_4(gold, later_result=gold), _bfcl_task())
    assert f"post_tweet(content={gold!r})" in found
    # a text the agent was given in the task's instruction does
    task = _bfcl_task().model_copy(update={"instruction": f"Tweet exactly: {gold}"})
    assert f"post_tweet(content={gold!r})" not in unseen_gold_arguments(_base_4(gold), task)


def test_outside_bfcl_the_values_the_expectations_fix_are_checked() -> None:
    task = make_task(
        "[tasks.invocation]\nallow_extra = false\n"
        'calls = [{ tool = "create_ticket", arguments = { title = "Printer jam on floor 3",'
        ' queue = "hw-7", priority = { regex = "^p" }, summary = { any = true } } }]\n'
    )
    spans = [
        root(),
        tool_call("create_ticket", {
            "title": "Printer jam on floor 3", "queue": "hw-7", "priority": "p1", "summary": "z"
        }, start_ms=100),
    ]  # fmt: skip
    task = task.model_copy(update={"instruction": "Open a ticket about the printer."})
    title, queue = "create_ticket(title='Printer jam on floor 3')", "create_ticket(queue='hw-7')"
    # the whole trajectory (no other call allowed): every fixed string; regex and any are not
    assert unseen_gold_arguments(spans, task) == [title, queue]
    # a value the tools' listing shows (an enum) is derivable
    schema = {"type": "object", "properties": {"queue": {"enum": ["hw-7", "net-2"]}}}
    listed = [tools_list([{"name": "create_ticket", "inputSchema": schema}]), *spans]
    assert unseen_gold_arguments(listed, task) == [title]
    # with other calls allowed, a name may come from a call the oracle does not make (a queue
    # lookup): only composed text, which no lookup returns, is still checked
    assert task.invocation is not None
    lenient = task.invocation.model_copy(update={"allow_extra": True})
    assert unseen_gold_arguments(spans, task.model_copy(update={"invocation": lenient})) == [title]
    # as a finding: one oracle run shows it, with the argument in its reason
    oracle = baseline_run(
        "oracle", run_id="r1", task_id="t1", trial=0, status="finished",
        scores=[("invocation", True, {})], spans=spans, task=task,
    )  # fmt: skip
    [audit] = audit_tasks(["t1"], [oracle])
    assert audit.kinds == ["unseen_gold"]
    assert title in audit.findings[0].reason and "1 more such argument" in audit.findings[0].reason
    assert audit.findings[0].runs == ("r1",)
