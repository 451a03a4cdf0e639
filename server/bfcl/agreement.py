"""Agreement with BFCL's own checkers: BFCL's verdict on a trajectory (its AST checker for
single-turn entries, its multi-turn checker with the state and response checks, and its
multi-turn irrelevance checker), and tracecard's verdict on the same trajectory.

tracecard's side scores a trace in the shape the proxy records (GET /api/runs/{id}/spans): each
call executed on a fresh BFCL environment by the same code the BFCL MCP server runs, the state
after each turn as that turn's probe observed it. `tests/server/test_bfcl_e2e.py` checks that
runs through a real server score the same.
"""

from __future__ import annotations

import importlib
import itertools
import json
import sys
import types
from dataclasses import dataclass
from typing import Any

from tracecard.scorers import RunFacts, Task, score_run
from tracecard.server.bfcl.env import Environment, possible_answers
from tracecard.server.bfcl.importer import UPSTREAM
from tracecard.server.bfcl.mcp_server import NEUTRAL_RESULT, STATE_TOOL, find_entry
from tracecard.server.bfcl.trajectories import Trajectory
from tracecard.traces import semconv as sc

__all__ = ["BfclVerdict", "bfcl_verdict", "simulated_spans", "tracecard_verdict"]

_names = itertools.count()
_TRACE = "0" * 31 + "1"


@dataclass(frozen=True)
class BfclVerdict:
    """BFCL's judgement: `valid` (every checker BFCL ships), and its v4 runner's (which does not
    call the multi-turn irrelevance checker)."""

    valid: bool
    runner_valid: bool
    error: str
    messages: tuple[str, ...] = ()  # the checker's error messages (they name the parameter)


def _ast_checker() -> Any:
    # BFCL's model registry imports every vendor SDK; its AST checker reads one flag from it
    # (underscore_to_dot), so a registry that answers False for every model stands in for it.
    name = "bfcl_eval.constants.model_config"
    if name not in sys.modules:
        try:
            importlib.import_module(name)
        except ImportError:
            stub = types.ModuleType(name)

            class _Configs(dict[str, Any]):
                def __missing__(self, key: str) -> Any:
                    return types.SimpleNamespace(underscore_to_dot=False)

            stub.MODEL_CONFIG_MAPPING = _Configs()  # type: ignore[attr-defined]
            sys.modules[name] = stub
    return importlib.import_module("bfcl_eval.eval_checker.ast_eval.ast_checker")


def _call_text(call: dict[str, Any]) -> str:
    arguments = ", ".join(f"{k}={v!r}" for k, v in call["arguments"].items())
    return f"{call['tool']}({arguments})"


def bfcl_verdict(entry_id: str, trajectory: Trajectory) -> BfclVerdict:
    """What BFCL's checkers say of `trajectory` (calls per turn) for one entry."""
    entry = find_entry(entry_id)
    category = entry_id.rsplit("_", 1)[0]
    if "involved_classes" in entry:
        checker = importlib.import_module(
            "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker"
        )
        truth = possible_answers(category)[entry_id]["ground_truth"]
        decoded = [[[_call_text(c) for c in turn]] if turn else [] for turn in trajectory]
        # BFCL caches instances by model name: a new name per check is a fresh environment
        model = f"tracecard_agreement_{next(_names)}"
        state = checker.multi_turn_checker(decoded, truth, dict(entry), category, model)
        irrelevance = checker.multi_turn_irrelevance_checker(decoded, truth)
        valid = bool(state["valid"]) and bool(irrelevance["valid"])
        error = str(state.get("error_type") or irrelevance.get("error_type") or "")
        message = str(state.get("error_message") or irrelevance.get("error_message") or "")
        return BfclVerdict(valid, bool(state["valid"]), error, (message,) if message else ())
    calls = trajectory[0] if trajectory else []
    if "irrelevance" in category:
        return BfclVerdict(not calls, not calls, "" if not calls else "irrelevance:called")
    answer = possible_answers(category)[entry_id]["ground_truth"]
    ast = _ast_checker()
    language = importlib.import_module("bfcl_eval.constants.enums").Language.PYTHON
    output = [{c["tool"]: dict(c["arguments"])} for c in calls]
    result = ast.ast_checker(entry["function"], output, answer, language, category, "tracecard")
    valid = bool(result["valid"])
    messages = tuple(m for m in result.get("error", []) if isinstance(m, str))
    return BfclVerdict(valid, valid, str(result.get("error_type", "")), messages)


def _span(name: str, attributes: dict[str, Any], start: int, parent: str | None) -> dict[str, Any]:
    return {
        "trace_id": _TRACE,
        "span_id": f"{start:016x}",
        "parent_span_id": parent,
        "name": name,
        "kind": sc.KIND_CLIENT,
        "start_time_unix_nano": start,
        "end_time_unix_nano": start + 1,
        "status": {"code": sc.STATUS_UNSET, "message": ""},
        "attributes": attributes,
        "events": [],
    }


def simulated_spans(task: Task, entry_id: str, trajectory: Trajectory) -> list[dict[str, Any]]:
    """The trace a run of `trajectory` records: turn spans, agent calls with their results from
    a fresh environment, and each turn's state probe at its boundary."""
    entry = find_entry(entry_id)
    environment = Environment(entry) if "involved_classes" in entry else None
    clock = itertools.count(1000, 10)
    root = "00000000000000aa"
    spans = [_span("invoke_agent replay", {sc.RUN_ID: "r"}, 1, None)]
    for index, calls in enumerate(trajectory):
        turn_start = next(clock)
        turn_id = f"{turn_start:016x}"
        if task.turns:
            spans.append(_span(f"turn {index}", {sc.TURN_INDEX: index}, turn_start, root))
        for call in calls:
            if environment is not None:
                text = environment.execute(call["tool"], dict(call["arguments"]))
            else:
                text = NEUTRAL_RESULT
            result = {"content": [{"type": "text", "text": text}], "isError": False}
            attributes = {
                sc.MCP_METHOD_NAME: "tools/call",
                sc.GEN_AI_TOOL_NAME: call["tool"],
                sc.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps(call["arguments"]),
                sc.GEN_AI_TOOL_CALL_RESULT: json.dumps(result),
                sc.UPSTREAM: UPSTREAM,
                sc.ROLE: sc.ROLE_AGENT,
            }
            spans.append(_span(f"tools/call {call['tool']}", attributes, next(clock), turn_id))
        outcome = task.turns[index].outcome if index < len(task.turns) else None
        if outcome is not None and environment is not None:
            probe = {
                sc.ROLE: sc.ROLE_VERIFIER,
                sc.PROBE_ID: "state",
                sc.PROBE_KIND: "tool",
                sc.TURN_INDEX: index,
                sc.PROBE_VALUE: json.dumps({"structuredContent": environment.state()}),
            }
            spans.append(_span(f"tools/call {STATE_TOOL}", probe, next(clock), turn_id))
    return spans


def tracecard_verdict(task: Task, spans: list[dict[str, Any]]) -> tuple[bool, dict[str, Any]]:
    """Pass when invocation passes and, where the task has an outcome, the outcome passes."""
    scores = score_run(task, spans, RunFacts(status="finished", final_answer="done"))
    invocation, outcome = scores.get("invocation"), scores.get("outcome")
    ok = invocation is not None and invocation.passed is True
    if outcome is not None and outcome.evaluated is not False and outcome.value is not None:
        ok = ok and outcome.passed is True
    elif any(t.outcome for t in task.turns):
        ok = False  # an outcome that could not be evaluated is never a pass
    return ok, {c.component: c.value for c in scores.components}
