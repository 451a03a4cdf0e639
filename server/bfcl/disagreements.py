"""Why tracecard and BFCL's checkers disagree on a trajectory, decided by evidence, not by list:

- `BFCL artifact: greedy pairing` — BFCL's parallel checker rejects the calls in this order
  (`cannot_find_match`), and some other order of the same calls passes it: its pairing takes the
  first answer that matches, where tracecard pairs by maximum matching.
- `BFCL artifact: state leaks between entries` — BFCL's multi-turn checker rejects the state,
  and accepts the same trajectory checked alone, in a fresh process.
- `documented: ordered across turns` — BFCL accepts (the state matched at every turn), and each
  expected call tracecard misses in its turn produced its result in an earlier turn, which
  BFCL's response check (over every turn so far) counts and tracecard's per-turn invocation does
  not.
- `documented: result of another function` — BFCL accepts, and the missing call's expected result
  was produced in its turn by another function: BFCL's response check compares results only.
- `tracecard wrong` — anything else (the measurement requires none).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections import Counter
from typing import Any

from tracecard.server.bfcl.agreement import BfclVerdict, bfcl_verdict
from tracecard.server.bfcl.env import Environment, parse_calls, possible_answers
from tracecard.server.bfcl.mcp_server import find_entry
from tracecard.server.bfcl.trajectories import Trajectory

__all__ = ["CLASSES", "TRACECARD_WRONG", "bfcl_verdict_alone", "classify"]

GREEDY = "BFCL artifact: greedy pairing"
LEAK = "BFCL artifact: state leaks between entries"
ORDERED = "documented: ordered across turns"
OTHER_FUNCTION = "documented: result of another function"
TRACECARD_WRONG = "tracecard wrong"
CLASSES = (GREEDY, LEAK, ORDERED, OTHER_FUNCTION, TRACECARD_WRONG)
_MAX_ORDERS = 720  # orders of a parallel trajectory tried (6 calls)


def bfcl_verdict_alone(entry_id: str, trajectory: Trajectory) -> BfclVerdict:
    """BFCL's verdict in a fresh Python process, where no other entry ran before."""
    code = (
        "import json, sys\n"
        "from tracecard.server.bfcl.agreement import bfcl_verdict\n"
        "entry, trajectory = json.load(sys.stdin)\n"
        "v = bfcl_verdict(entry, trajectory)\n"
        "print(json.dumps([v.valid, v.runner_valid, v.error]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps([entry_id, trajectory]),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    valid, runner_valid, error = json.loads(done.stdout.strip().splitlines()[-1])
    return BfclVerdict(bool(valid), bool(runner_valid), str(error))


def _some_order_passes(entry_id: str, calls: list[dict[str, Any]]) -> bool:
    for order in itertools.islice(itertools.permutations(calls), 1, _MAX_ORDERS):
        if bfcl_verdict(entry_id, [list(order)]).valid:
            return True
    return False


def _results(entry: dict[str, Any], turns: list[list[tuple[str, dict[str, Any]]]]) -> Any:
    environment = Environment(entry)
    return [[(name, environment.execute(name, dict(args))) for name, args in t] for t in turns]


def _missing_explained(entry_id: str, trajectory: Trajectory) -> str:
    """ORDERED / OTHER_FUNCTION when every expected (function, result) tracecard misses in its
    turn is explained so; "" otherwise."""
    entry = find_entry(entry_id)
    truth_text = possible_answers(entry_id.rsplit("_", 1)[0])[entry_id]["ground_truth"]
    binder = Environment(entry)
    truth = [
        [(c.name, binder.bind(c).arguments) for t in turn for c in parse_calls(t)]
        for turn in truth_text
    ]
    expected = _results(entry, truth)
    made = _results(entry, [[(c["tool"], c["arguments"]) for c in turn] for turn in trajectory])
    reasons: set[str] = set()
    for index, wanted in enumerate(expected):
        here = Counter(made[index])
        for call in wanted:
            if here[call] > 0:
                here[call] -= 1
                continue
            earlier = [result for turn in made[:index] for _, result in turn]
            if call[1] in [result for name, result in here.elements() if name != call[0]]:
                reasons.add(OTHER_FUNCTION)
            elif call[1] in earlier:
                reasons.add(ORDERED)
            else:
                return ""
    return ORDERED if ORDERED in reasons else (OTHER_FUNCTION if reasons else "")


def classify(
    entry_id: str,
    trajectory: Trajectory,
    ours: bool,
    components: dict[str, Any],
    theirs: BfclVerdict,
) -> str:
    """ "" when tracecard and BFCL agree; else the class of the disagreement (`CLASSES`)."""
    if ours == theirs.valid:
        return ""
    entry = find_entry(entry_id)
    if "involved_classes" not in entry:
        calls = trajectory[0] if trajectory else []
        if theirs.error.endswith("cannot_find_match") and _some_order_passes(entry_id, calls):
            return GREEDY
        return TRACECARD_WRONG
    if not theirs.valid and theirs.error == "multi_turn:instance_state_mismatch":
        return LEAK if bfcl_verdict_alone(entry_id, trajectory).valid else TRACECARD_WRONG
    if theirs.valid and components.get("outcome") == 1.0:
        return _missing_explained(entry_id, trajectory) or TRACECARD_WRONG
    return TRACECARD_WRONG
