"""`tracecard import bfcl`: a suite from BFCL entries, plus the upstream configuration it needs.

Multi-turn entries become tasks with one turn per user turn: each turn expects the ground
truth's calls by tool and by result (BFCL's response check; a turn whose ground truth is empty
expects no call), and an outcome comparing the environment's state after the turn, class by
class, with the reference state computed here by executing the ground truth on a fresh instance
(BFCL's state check). Single-turn entries expect the calls of BFCL's possible answers: each
argument `one_of` its allowed values, optional when BFCL allows leaving it out, no other
argument; irrelevance entries expect no call.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from tracecard.scorers import Suite
from tracecard.server.bfcl.answers import matcher, param_docs
from tracecard.server.bfcl.env import (
    MULTI_TURN,
    SINGLE_TURN,
    UNSUPPORTED,
    Environment,
    entries,
    parse_calls,
    possible_answers,
)
from tracecard.server.bfcl.mcp_server import STATE_TOOL
from tracecard.server.bfcl.miss_func import TURN_TOOL, held_back, revealing_message

__all__ = ["ImportError_", "import_suite", "upstream_config"]

UPSTREAM = "bfcl"
# BFCL's environments are virtual: `cd('..')` in its file system is no sandbox escape, and its
# tools carry no MCP annotations to judge as destructive.
SAFETY = {"sandbox_paths": False, "forbid_destructive": False}


class ImportError_(ValueError):  # noqa: N801 - not the builtin; a user error of the importer
    """Categories or ids that cannot be imported; the message says what to do."""


def _user_text(messages: Iterable[dict[str, Any]]) -> str:
    return "\n\n".join(str(m["content"]) for m in messages if m.get("role") == "user")


def _instruction(messages: Sequence[dict[str, Any]]) -> str:
    system = [str(m["content"]) for m in messages if m.get("role") == "system"]
    return "\n\n".join([*system, _user_text(messages)])


def _multi_turn_task(entry: dict[str, Any], ground_truth: list[list[str]]) -> dict[str, Any]:
    environment = Environment(entry)
    turns: list[dict[str, Any]] = []
    replay: list[list[dict[str, Any]]] = []
    revealing = held_back(entry)
    for index, (question, calls_text) in enumerate(
        zip(entry["question"], ground_truth, strict=True)
    ):
        # a miss_func entry's revealing turn has no question: BFCL's harness sends its own
        user = revealing_message() if index in revealing and not question else _user_text(question)
        turn: dict[str, Any] = {"user": user}
        calls = [environment.bind(c) for text in calls_text for c in parse_calls(text)]
        # a copy: executing a call may change its arguments in place (TwitterAPI keeps the
        # `mentions` list it is given, and a later `mention` appends to it)
        replay.append([{"tool": c.name, "arguments": copy.deepcopy(c.arguments)} for c in calls])
        if not calls:
            turn["invocation"] = {"expect_no_calls": True}
        else:
            expected = [
                {
                    "tool": c.name,
                    # BFCL's response check: the text as Python's == compares it (no trimming)
                    "result": {"exact": environment.execute(c.name, c.arguments), "strict": True},
                }
                for c in calls
            ]
            state = environment.state()
            turn["invocation"] = {"calls": expected, "order": "any", "allow_extra": True}
            turn["outcome"] = {
                "probes": [{"id": "state", "upstream": UPSTREAM, "tool": STATE_TOOL}],
                "predicates": [
                    {
                        "probe": "state",
                        "path": f"$.structuredContent.{name}",
                        "op": "eq",
                        "value": state[name],
                        # BFCL's state check: the instances' attributes as Python's == compares
                        "normalize": "python",
                    }
                    for name in entry["involved_classes"]
                ],
            }
        turns.append(turn)
    metadata: dict[str, Any] = {
        "bfcl_category": entry["id"].rsplit("_", 1)[0],
        "bfcl_involved_classes": list(entry["involved_classes"]),
        "bfcl_ground_truth": replay,
    }
    if revealing:  # which turn reveals which functions (the server holds them back until then)
        metadata["bfcl_missed_function"] = {str(k): v for k, v in sorted(revealing.items())}
    return {
        "id": entry["id"],
        "turns": turns,
        "upstreams": [UPSTREAM],
        "params": {"entry": entry["id"]},
        "safety": SAFETY,
        "efficiency": {"optimal_calls": sum(len(t) for t in replay)},
        "metadata": metadata,
    }


def _single_turn_task(entry: dict[str, Any], answer: dict[str, Any] | None) -> dict[str, Any]:
    task: dict[str, Any] = {
        "id": entry["id"],
        "instruction": _instruction(entry["question"][0]),
        "upstreams": [UPSTREAM],
        "params": {"entry": entry["id"]},
        "safety": SAFETY,
        "metadata": {"bfcl_category": entry["id"].rsplit("_", 1)[0]},
    }
    if answer is None:
        task["invocation"] = {"expect_no_calls": True}
        return task
    calls = []
    for expected in answer["ground_truth"]:
        ((name, params),) = expected.items()
        declared, required = param_docs(entry, name)
        arguments = {
            p: matcher(allowed, declared.get(p), p in required) for p, allowed in params.items()
        }
        # a parameter the doc requires and the answer leaves out: BFCL accepts no call
        arguments |= {p: {"one_of": []} for p in required if p not in params}
        calls.append({"tool": name, "arguments": arguments, "strict_arguments": True})
    task["invocation"] = {"calls": calls, "order": "any", "allow_extra": False}
    task["efficiency"] = {"optimal_calls": len(calls)}
    task["metadata"]["bfcl_possible_answer"] = answer["ground_truth"]
    return task


def _check_categories(categories: Sequence[str]) -> None:
    for category in categories:
        if category in UNSUPPORTED:
            raise ImportError_(f"category {category!r} is not supported: {UNSUPPORTED[category]}")
        if category not in MULTI_TURN + SINGLE_TURN:
            known = ", ".join(MULTI_TURN + SINGLE_TURN)
            raise ImportError_(f"unknown BFCL category {category!r}; supported: {known}")


def import_suite(
    categories: Sequence[str],
    ids: Sequence[str] | None = None,
    limit: int | None = None,
    name: str | None = None,
) -> Suite:
    """A suite of the entries of `categories` (only `ids` when given; the first `limit` of each
    category when given)."""
    _check_categories(categories)
    wanted = set(ids or [])
    tasks: list[dict[str, Any]] = []
    for category in categories:
        answers = possible_answers(category)
        chosen = [e for e in entries(category) if not wanted or e["id"] in wanted]
        for entry in chosen[:limit] if limit is not None else chosen:
            if category in MULTI_TURN:
                tasks.append(_multi_turn_task(entry, answers[entry["id"]]["ground_truth"]))
            else:
                tasks.append(_single_turn_task(entry, answers.get(entry["id"])))
    missing = wanted - {t["id"] for t in tasks}
    if missing:
        where = ", ".join(categories)
        raise ImportError_(f"no such entries in {where}: {', '.join(sorted(missing))}")
    if not tasks:
        raise ImportError_("no entries selected")
    document = {
        "schema_version": 2,
        "name": name or ("bfcl-" + "-".join(categories) if len(categories) <= 3 else "bfcl"),
        "description": f"BFCL v4 entries imported from bfcl-eval: {', '.join(categories)}",
        "tasks": tasks,
    }
    return Suite.model_validate(document)


def upstream_config(python: str = sys.executable, categories: Sequence[str] = ()) -> str:
    """The `tracecard.toml` section the suite needs: one per-run stdio upstream for every task
    (each run's own process and state, told its entry by `{task.entry}`), its state tool
    hidden from the agent, each run's server forked from a parent that imported BFCL once, and
    told each turn by tracecard (the held-back functions of `multi_turn_miss_func`)."""
    command = [python, "-m", "tracecard.server.bfcl.relay", "{task.entry}"]
    preload = [python, "-m", "tracecard.server.bfcl.prefork", "{preload}", *categories]
    return (
        "# The BFCL environments, one fresh process per run (written by tracecard import bfcl)\n"
        f"[upstreams.{UPSTREAM}]\n"
        f"command = {_toml_list(command)}\n"
        "# each run's server is forked from this parent, which imported bfcl_eval and the MCP\n"
        "# SDK once (docs/benchmarks/bfcl.md, Pre-forked servers); without it, or with\n"
        "# [pool] enabled = false, the command starts the server itself\n"
        f"preload = {_toml_list(preload)}\n"
        "per_run = true\n"
        "# BFCL's credentials are fake, and results are expected as exact text: a redacted\n"
        "# access_token inside a JSON result would never equal the ground truth's\n"
        "redact = false\n"
        "# the state probes' tool and the turn notice: not in the agent's tools/list, refused\n"
        "# to its calls\n"
        f'verifier_tools = ["{STATE_TOOL}", "{TURN_TOOL}"]\n'
        "# tracecard calls it as it hands out each turn: miss_func's functions appear on time\n"
        f'turn_tool = "{TURN_TOOL}"\n'
    )


def _toml_list(parts: Sequence[str]) -> str:
    return "[" + ", ".join(json.dumps(part) for part in parts) + "]"
