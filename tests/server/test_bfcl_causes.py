"""The four places where tracecard's meaning differed from the code of BFCL's checkers (issue 25),
each on a real imported entry, in both directions: a variation BFCL's own checker accepts passes
tracecard, one it rejects fails tracecard. BFCL's verdict is asked of BFCL's checker here (never
assumed), and the suite goes through its TOML text, as a user's does."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tracecard.scorers import Task, dump_suite, parse_suite
from tracecard.server.bfcl.agreement import bfcl_verdict, simulated_spans, tracecard_verdict
from tracecard.server.bfcl.env import Environment
from tracecard.server.bfcl.importer import import_suite
from tracecard.server.bfcl.mcp_server import find_entry
from tracecard.server.bfcl.trajectories import Trajectory, ground_truth

ENTRIES = ["simple_python_35", "simple_python_0", "multi_turn_base_14", "multi_turn_base_5"]
SUITE = parse_suite(
    dump_suite(import_suite(["simple_python", "multi_turn_base"], ids=ENTRIES)), "toml"
)


def verdicts(entry: str, trajectory: Trajectory) -> tuple[bool, bool, dict[str, Any]]:
    """(BFCL's verdict, tracecard's verdict, tracecard's components) on one trajectory."""
    task: Task = SUITE.task(entry)
    ours, components = tracecard_verdict(task, simulated_spans(task, entry, trajectory))
    return bfcl_verdict(entry, trajectory).valid, ours, components


def with_argument(entry: str, tool: str, name: str, value: Any) -> Trajectory:
    """The ground truth with `name` of the first call of `tool` set to `value`."""
    trajectory = copy.deepcopy(ground_truth(entry))
    call = next(c for turn in trajectory for c in turn if c["tool"] == tool)
    call["arguments"][name] = value
    return trajectory


@pytest.mark.parametrize(
    ("value", "bfcl_accepts"),
    [
        ("new york ny", True),  # case, comma and space are standardised away
        ("New York,NY", True),
        ("NEW-YORK, N.Y.", True),  # - and . are among the removed characters
        ("New York\tNY", False),  # a tab is not
        ("New York, NY!", False),  # nor is !
        ("Newark, NJ", False),
    ],
)
def test_cause_1_single_turn_strings_are_standardised_as_bfcl_does(
    value: str, bfcl_accepts: bool
) -> None:
    # simple_python_35: location one of ['New York, NY'] (a string parameter)
    tool = ground_truth("simple_python_35")[0][0]["tool"]
    theirs, ours, _ = verdicts(
        "simple_python_35", with_argument("simple_python_35", tool, "location", value)
    )
    assert theirs is bfcl_accepts
    assert ours is theirs


@pytest.mark.parametrize(
    ("name", "value", "bfcl_accepts"),
    [
        ("base", 10, True),
        ("base", 10.0, False),  # an integer parameter: a float fails BFCL's type check
        ("base", "10", False),
        ("base", True, False),
        ("height", 5.0, False),
    ],
)
def test_cause_2_single_turn_numbers_keep_their_type(
    name: str, value: Any, bfcl_accepts: bool
) -> None:
    # simple_python_0: calculate_triangle_area(base: integer = 10, height: integer = 5, unit?)
    theirs, ours, _ = verdicts(
        "simple_python_0", with_argument("simple_python_0", "calculate_triangle_area", name, value)
    )
    assert theirs is bfcl_accepts
    assert ours is theirs


def test_cause_3_multi_turn_state_is_compared_without_trimming() -> None:
    # multi_turn_base_14: send_message(receiver_id='USR005', message='Latest Quarter ...')
    truth = ground_truth("multi_turn_base_14")
    message = next(c for t in truth for c in t if c["tool"] == "send_message")["arguments"]
    spaced = with_argument(
        "multi_turn_base_14", "send_message", "message", message["message"] + " "
    )
    theirs, ours, components = verdicts("multi_turn_base_14", spaced)
    assert theirs is False  # the body reaches the state only, and BFCL compares it with ==
    assert ours is False and components["outcome"] < 1.0
    # accepted: the same calls with an extra read-only call and the arguments' order reversed
    varied = copy.deepcopy(truth)
    turn = next(t for t in varied if any(c["tool"] == "send_message" for c in t))
    call = next(c for c in turn if c["tool"] == "send_message")
    call["arguments"] = dict(reversed(list(call["arguments"].items())))
    turn.append({"tool": "view_messages_sent", "arguments": {}})
    theirs, ours, components = verdicts("multi_turn_base_14", varied)
    assert theirs is True
    assert ours is True and components["outcome"] == 1.0


@pytest.mark.parametrize(
    ("tweet_id", "bfcl_accepts"),
    [
        (0.0, True),  # the comment is keyed by 0.0, and Python's 0.0 == 0 makes the states equal
        ("0", False),  # a string id is no tweet of the environment's
        (1, False),
    ],
)
def test_cause_4_multi_turn_state_keys_stay_numbers(tweet_id: Any, bfcl_accepts: bool) -> None:
    # multi_turn_base_5: comment(tweet_id=0, ...) -> TwitterAPI.comments[tweet_id]
    trajectory = with_argument("multi_turn_base_5", "comment", "tweet_id", tweet_id)
    theirs, ours, _ = verdicts("multi_turn_base_5", trajectory)
    assert theirs is bfcl_accepts
    assert ours is theirs


def test_environments_in_one_process_start_as_in_a_fresh_one() -> None:
    # TwitterAPI.post_tweet(mentions=[]) shares its default list, and mention() extends the
    # tweet's list: the importer and the measurement run many environments in one process (a
    # per-run server, one), and a trajectory's arguments are used again after a run
    entry = find_entry("multi_turn_base_90")
    first = Environment(entry)
    given = {"content": "hi", "mentions": ["@a"]}
    posted = json.loads(first.execute("post_tweet", given))
    by_default = json.loads(first.execute("post_tweet", {"content": "hi"}))
    for tweet in (posted, by_default):
        arguments = {"tweet_id": tweet["id"], "mentioned_usernames": ["@x"]}
        assert "success" in first.execute("mention", arguments)
    assert given["mentions"] == ["@a"]  # what the environment was given is left as it was
    second = json.loads(Environment(entry).execute("post_tweet", {"content": "hi"}))
    assert second["mentions"] == []
