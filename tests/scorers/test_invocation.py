from __future__ import annotations

import pytest

from tracecard.scorers import RunFacts, parse_suite, score_invocation
from tracecard.traces import semconv as sc

from .trace_helpers import FINISHED, make_task, root, tool_call

READ_THEN_WRITE = """
[tasks.invocation]
order = "{order}"
allow_extra = {extra}
[[tasks.invocation.calls]]
tool = "read_file"
arguments = {{ path = {{ regex = "notes\\\\.txt$" }} }}
[[tasks.invocation.calls]]
tool = "write_file"
arguments = {{ path = "out.txt", content = {{ any = true }} }}
"""


def task(order: str = "any", extra: str = "true"):  # type: ignore[no-untyped-def]
    return make_task(READ_THEN_WRITE.format(order=order, extra=extra))


READ = tool_call("read_file", {"path": "/s/notes.txt"})
WRITE = tool_call("write_file", {"path": "out.txt", "content": "x"})
LIST = tool_call("list_dir", {"path": "."})


def test_all_expected_calls_matched_is_a_pass() -> None:
    score = score_invocation(task(), [root(), READ, WRITE], FINISHED)
    assert score.value == 1.0 and score.passed is True
    assert [e["span_id"] for e in score.evidence["expected"]] == [READ["span_id"], WRITE["span_id"]]


def test_wrong_argument_is_unmatched_with_the_reason() -> None:
    wrong = tool_call("write_file", {"path": "other.txt", "content": "x"})
    score = score_invocation(task(), [READ, wrong], FINISHED)
    assert score.value == pytest.approx(2 * 1 / (2 + 1))  # allow_extra: extras not counted
    assert score.passed is False
    closest = score.evidence["expected"][1]["closest"][0]
    assert closest["span_id"] == wrong["span_id"]
    assert "path" in closest["why"][0]


def test_extras_lower_precision_when_not_allowed() -> None:
    allowed = score_invocation(task(extra="true"), [READ, LIST, WRITE], FINISHED)
    strict = score_invocation(task(extra="false"), [READ, LIST, WRITE], FINISHED)
    assert allowed.value == 1.0 and allowed.passed
    assert strict.value == pytest.approx(2 * 2 / (2 + 3)) and strict.passed is False
    assert strict.evidence["extra_calls"] == [{"span_id": LIST["span_id"], "tool": "list_dir"}]


@pytest.mark.parametrize(
    ("order", "calls", "matched"),
    [
        ("any", [WRITE, READ], 2),
        ("subsequence", [WRITE, READ], 1),
        ("sequence", [WRITE, READ], 1),
        ("subsequence", [READ, LIST, WRITE], 2),  # interleaved call allowed
        ("sequence", [READ, LIST, WRITE], 1),  # no call may come between
        ("sequence", [LIST, READ, WRITE], 2),
    ],
)
def test_order_modes(order: str, calls: list[dict[str, object]], matched: int) -> None:
    score = score_invocation(task(order=order), in_order(calls), FINISHED)
    assert score.evidence["matched"] == matched


def in_order(spans: list[dict[str, object]]) -> list[dict[str, object]]:
    """Copies restarted one after another in list order (scorers order calls by start time)."""
    out = []
    for i, s in enumerate(spans):
        start = (i + 1) * 1_000_000_000
        out.append({**s, "start_time_unix_nano": start, "end_time_unix_nano": start + 10})
    return out


def test_any_order_finds_the_maximum_matching() -> None:
    spec = """
[tasks.invocation]
[[tasks.invocation.calls]]
tool = "f"
arguments = { x = { any = true } }
[[tasks.invocation.calls]]
tool = "f"
arguments = { x = 1 }
"""
    # A greedy matcher would give the x=1 call to the first expectation and miss the second.
    calls = [tool_call("f", {"x": 1}), tool_call("f", {"x": 2})]
    assert score_invocation(make_task(spec), calls, FINISHED).value == 1.0


def test_only_agent_spans_count() -> None:
    verifier = tool_call("read_file", {"path": "notes.txt"}, role=sc.ROLE_VERIFIER)
    score = score_invocation(task(), [verifier, WRITE], FINISHED)
    assert score.evidence["matched"] == 1


def test_blocked_calls_count_as_attempted() -> None:
    blocked = tool_call("write_file", {"path": "out.txt", "content": "x"}, blocked_rule="r1")
    score = score_invocation(task(), [READ, blocked], FINISHED)
    assert score.value == 1.0


def test_upstream_must_match_when_given() -> None:
    spec = """
[tasks.invocation]
[[tasks.invocation.calls]]
tool = "q"
upstream = "db"
"""
    assert score_invocation(make_task(spec), [tool_call("q", upstream="db")], FINISHED).passed
    assert not score_invocation(make_task(spec), [tool_call("q", upstream="x")], FINISHED).passed


def test_strict_arguments_reject_unlisted_arguments() -> None:
    spec = """
[tasks.invocation]
[[tasks.invocation.calls]]
tool = "q"
strict_arguments = true
arguments = { a = 1 }
"""
    assert not score_invocation(
        make_task(spec), [tool_call("q", {"a": 1, "b": 2})], FINISHED
    ).passed


def test_truncated_unparsable_arguments_are_unmatched_not_a_crash() -> None:
    cut = tool_call("read_file", '{"path": "/s/notes.t', truncated=True)
    score = score_invocation(task(), [cut, WRITE], FINISHED)
    assert score.evidence["matched"] == 1
    why = score.evidence["expected"][0]["closest"][0]["why"][0]
    assert "truncated" in why and "unmatched" in why


ABSTAIN = """
[tasks.invocation]
expect_no_calls = true
"""


def test_abstention_passes_without_calls() -> None:
    score = score_invocation(make_task(ABSTAIN), [root()], RunFacts(status="finished"))
    assert (score.value, score.passed) == (1.0, True)


def test_abstention_fails_with_any_call() -> None:
    score = score_invocation(make_task(ABSTAIN), [root(), LIST], FINISHED)
    assert (score.value, score.passed) == (0.0, False)
    assert score.evidence["calls"][0]["span_id"] == LIST["span_id"]


def test_no_expectations_is_not_evaluated() -> None:
    score = score_invocation(make_task(""), [READ], FINISHED)
    assert score.value is None and score.passed is None


def test_plain_http_tool_calls_are_calls() -> None:
    from .trace_helpers import span

    http = span(
        "POST /items",
        {
            sc.ROLE: sc.ROLE_AGENT,
            sc.HTTP_REQUEST_METHOD: "POST",
            sc.URL_PATH: "/items",
            sc.UPSTREAM: "api",
            sc.REQUEST_BODY: '{"name": "x"}',
            sc.HTTP_RESPONSE_STATUS_CODE: 201,
        },
    )
    spec = """
[tasks.invocation]
[[tasks.invocation.calls]]
tool = "POST /items"
arguments = { name = "x" }
"""
    assert score_invocation(make_task(spec), [http], FINISHED).passed


LOOSE = '[tasks.invocation]\ncalls = [{ tool = "find_users" }]\nallow_extra = true\n'


def test_identical_repeats_beyond_max_repeats_fail_even_with_allow_extra() -> None:
    """The demo's looping run: 15 identical find_users calls scored invocation 1.00."""
    loop = [tool_call("find_users", {"q": "inactive"}) for _ in range(15)]
    score = score_invocation(make_task(LOOSE), loop, FINISHED)
    # 1 matched; 13 identical calls beyond max_repeats = 2 charged: precision 1/14
    assert score.passed is False and score.version == "7"
    assert score.value == pytest.approx(2 * 1 / (1 + 14))
    assert score.evidence["reason"] == "identical calls beyond max_repeats = 2: find_users ×15"
    (repeat,) = score.evidence["repeated"]
    assert repeat["times"] == 15 and repeat["charged"] == [c["span_id"] for c in loop[2:]]
    # two identical calls are within the allowance; other extra calls stay free
    two = [tool_call("find_users", {"q": "x"}), tool_call("find_users", {"q": "x"})]
    fine = score_invocation(make_task(LOOSE), [*two, tool_call("other")], FINISHED)
    assert (fine.value, fine.passed) == (1.0, True)


def test_the_suite_sets_max_repeats() -> None:
    text = (
        'schema_version = 1\nname = "s"\n[scoring]\nmax_repeats = 4\n\n[[tasks]]\nid = "t1"\n'
        f'instruction = "x"\n{LOOSE}'
    )
    task = parse_suite(text, "toml").tasks[0]
    calls = [tool_call("find_users", {"q": "x"}) for _ in range(4)]
    assert score_invocation(task, calls, FINISHED).passed is True
    five = score_invocation(task, [*calls, tool_call("find_users", {"q": "x"})], FINISHED)
    assert five.passed is False and five.evidence["max_repeats"] == 4


@pytest.mark.parametrize("status", ["errored", "timed_out", "aborted"])
def test_a_run_that_did_not_end_on_its_own_never_passes(status: str) -> None:
    calls = [tool_call("find_users", {"q": "x"})]
    score = score_invocation(make_task(LOOSE), calls, RunFacts(status=status))  # type: ignore[arg-type]
    assert (score.value, score.passed) == (1.0, False)
    assert score.evidence["reason"] == f"run did not end on its own ({status})"
