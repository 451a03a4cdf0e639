"""Trajectories of BFCL entries: the ground truth turn by turn, and perturbed versions of it
(dropped call, changed argument, reordered, duplicated, a call a turn late, a call in a turn that
needs none, a wrong function, and the surface variations of `variations.py`), for the replay
agent and the agreement measurement."""

from __future__ import annotations

import random
from typing import Any

from tracecard.server.bfcl.answers import first_allowed, param_kinds
from tracecard.server.bfcl.env import Environment, parse_calls, possible_answers
from tracecard.server.bfcl.mcp_server import find_entry, tool_docs
from tracecard.server.bfcl.miss_func import hidden_at
from tracecard.server.bfcl.variations import VARIATIONS, vary

__all__ = ["PERTURBATIONS", "Trajectory", "ground_truth", "perturb"]

# One turn: the calls made in it, each {"tool", "arguments"}.
Trajectory = list[list[dict[str, Any]]]
PERTURBATIONS = (
    "dropped",
    "changed_argument",
    "reordered",
    "duplicated",
    "late",
    "call_where_none",
    "wrong_function",
    *VARIATIONS,  # surface variations of real model output (server/bfcl/variations.py)
)


def ground_truth(entry_id: str) -> Trajectory:
    """The calls BFCL's ground truth makes, turn by turn (single-turn entries: one turn, each
    argument's first allowed value; irrelevance: one turn without calls)."""
    entry = find_entry(entry_id)
    category = entry_id.rsplit("_", 1)[0]
    answer = possible_answers(category).get(entry_id)
    if "involved_classes" in entry:
        assert answer is not None
        environment = Environment(entry)
        return [
            [
                {"tool": c.name, "arguments": c.arguments}
                for text in turn
                for c in map(environment.bind, parse_calls(text))
            ]
            for turn in answer["ground_truth"]
        ]
    if answer is None:
        return [[]]
    calls = []
    for expected in answer["ground_truth"]:
        ((name, params),) = expected.items()
        kinds = param_kinds(entry, name)
        picked = {p: first_allowed(allowed, kinds.get(p)) for p, allowed in params.items()}
        calls.append({"tool": name, "arguments": {p: v for p, (ok, v) in picked.items() if ok}})
    return [calls]


def _changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 7
    if isinstance(value, str):
        return value + "_changed"
    if isinstance(value, list):
        return [*value, "extra"] if value else ["extra"]
    if isinstance(value, dict):
        return {**value, "extra": 1}
    return "changed"


def perturb(entry_id: str, trajectory: Trajectory, kind: str, seed: int) -> Trajectory | None:
    """`trajectory` changed in one way; None when that change does not apply to it."""
    if kind in VARIATIONS:
        return vary(entry_id, trajectory, kind, seed)
    rng = random.Random(f"{entry_id}:{kind}:{seed}")
    turns = [[dict(call) for call in turn] for turn in trajectory]
    with_calls = [i for i, turn in enumerate(turns) if turn]
    if kind == "call_where_none":
        empty = [i for i, turn in enumerate(turns) if not turn]
        names = [doc["name"] for doc in tool_docs(find_entry(entry_id))]
        if not empty or not names:
            return None
        later = [c for t in turns for c in t]
        call = dict(rng.choice(later)) if later else {"tool": names[0], "arguments": {}}
        turns[rng.choice(empty)].append(call)
        return turns
    if not with_calls:
        return None
    index = rng.choice(with_calls)
    turn = turns[index]
    position = rng.randrange(len(turn))
    if kind == "dropped":
        del turn[position]
    elif kind == "duplicated":
        turn.insert(position, dict(turn[position]))
    elif kind == "changed_argument":
        candidates = [(i, c) for i, c in enumerate(turn) if c["arguments"]]
        if not candidates:
            return None
        i, call = rng.choice(candidates)
        name = rng.choice(sorted(call["arguments"]))
        turn[i] = {
            **call,
            "arguments": {**call["arguments"], name: _changed(call["arguments"][name])},
        }
    elif kind == "reordered":
        if len(turn) < 2 or all(c == turn[0] for c in turn):
            return None
        turns[index] = list(reversed(turn))
    elif kind == "late":
        if index + 1 >= len(turns):
            return None
        turns[index + 1].insert(0, turn.pop())
    elif kind == "wrong_function":
        entry = find_entry(entry_id)
        shown = {doc["name"] for doc in tool_docs(entry)} - hidden_at(entry, index)
        names = sorted(shown - {turn[position]["tool"]})
        turn[position] = {
            **turn[position],
            "tool": rng.choice(names) if names else "no_such_function",
        }
    else:
        raise ValueError(f"unknown perturbation {kind!r}; known: {', '.join(PERTURBATIONS)}")
    return turns
