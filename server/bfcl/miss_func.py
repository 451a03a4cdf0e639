"""BFCL's `multi_turn_miss_func`: a function held back until a later turn.

An entry names the held-back functions by the turn that reveals them (`missed_function = {"3":
["sort"]}`; in the data, one turn per entry). BFCL's harness (`base_handler.py`,
`inference_multi_turn_FC`) removes them from the model's functions, and at that turn, whose question
is empty, adds their docs back and sends the model, as the turn's user message, its
`DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC` ("I have updated some more functions you can choose
from. What about now?"). The turn before it asks for what needs the function and expects no call
(BFCL's multi-turn irrelevance check).

Through tracecard: the per-run BFCL server leaves the functions out of its `tools/list` until
tracecard's turn notice for that turn (`_bfcl_turn`, the upstream's `turn_tool`); then it lists them
and sends `notifications/tools/list_changed`. A call of one before its turn is executed, as BFCL's
executor executes any call the model makes (its checker judges it: in the turn before, any call
fails the irrelevance check; `multi_turn_miss_func_49`'s own ground truth calls `tail` two turns
before the turn that reveals it, and BFCL accepts it). The suite's revealing turn carries BFCL's own
message, read from bfcl_eval at import: the text BFCL's function-calling harness sends, not one
tracecard invents (its prompting harness also writes the docs into that message; tracecard's agents
get them from `tools/list`, as function-calling models get them from the tools BFCL recompiles).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

__all__ = ["TURN_TOOL", "held_back", "hidden_at", "revealing_message"]

TURN_TOOL = "_bfcl_turn"  # verifier-only: tracecard's turn notice (server/evaluation/turn_notice)


def held_back(entry: Mapping[str, Any]) -> dict[int, list[str]]:
    """The held-back functions of an entry by the turn that reveals them ({} for other
    categories)."""
    missed = entry.get("missed_function") or {}
    return {int(turn): list(names) for turn, names in missed.items()}


def hidden_at(entry: Mapping[str, Any], turn: int) -> set[str]:
    """The functions an agent is not shown (and may not call) during `turn`."""
    return {name for at, names in held_back(entry).items() if at > turn for name in names}


def revealing_message() -> str:
    """The user message BFCL's function-calling harness sends at a revealing turn."""
    prompts = importlib.import_module("bfcl_eval.constants.default_prompts")
    return str(prompts.DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC)
