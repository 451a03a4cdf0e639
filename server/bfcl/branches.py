"""The branches of BFCL's checkers that accept or reject a trajectory, and which of them one
judged trajectory exercised, in which direction.

A rejection is the branch that returned it (BFCL's `error_type`, and the parameter its message
names). An acceptance exercised every branch the checker went through on its way to `valid`:
for an AST check, the count, the name, the required and unexpected parameters, each given
argument's type check and value check (by the type the doc declares), the optional parameters
left out, and the parallel pairing; for a multi-turn check, the state and response checks of
every turn (and the irrelevance check where a turn expects no call).
"""

from __future__ import annotations

import re
from typing import Any

from tracecard.server.bfcl.env import possible_answers
from tracecard.server.bfcl.mcp_server import find_entry

__all__ = ["BRANCHES", "exercised"]

BRANCHES: dict[str, str] = {
    "ast:wrong_count": "the number of calls (one; a parallel entry: as many as the answer)",
    "ast:wrong_func_name": "the function's name",
    "ast:missing_required": "every parameter the doc requires is given",
    "ast:unexpected_param": "no parameter the doc or the answer does not name",
    "ast:type:string": "a string (or `any`) parameter is given a str",
    "ast:type:integer": "an integer parameter is given an int (not 2.0, not a bool)",
    "ast:type:float": "a float parameter is given a float or an int",
    "ast:type:boolean": "a boolean parameter is given a bool",
    "ast:type:array": "an array (or tuple) parameter is given a list",
    "ast:type:dict": "a dict parameter is given an object",
    "ast:type:nested": "the items of an array have the item type",
    "ast:value:string": "a string equals an allowed one after standardize_string",
    "ast:value:list": "a list equals an allowed one, its strings standardised, in order",
    "ast:value:dict": "an object: known keys, standardised values, required keys present",
    "ast:value:list_dict": "a list of objects: as many as allowed, each as an object",
    "ast:value:others": "a number or boolean is in the allowed values (Python's ==)",
    "ast:variable": "the answer's own type where it is not the doc's, compared as written",
    "ast:missing_optional": "a parameter is left out only where the answer allows it",
    "ast:parallel_pairing": "parallel calls paired with the answer's calls in any order",
    "irrelevance": "no call where no function is relevant",
    "multi_turn:empty_turn": "a turn that expects calls gets some",
    "multi_turn:state": "each class's state equals the ground truth's (Python's ==)",
    "multi_turn:response": "the turn's expected results are among the results so far",
    "multi_turn:irrelevance": "no call in a turn that expects none",
}
_REJECTED_BY = {
    "simple_function_checker:wrong_count": "ast:wrong_count",
    "multiple_function_checker:wrong_count": "ast:wrong_count",
    "parallel_function_checker_no_order:wrong_count": "ast:wrong_count",
    "simple_function_checker:wrong_func_name": "ast:wrong_func_name",
    "simple_function_checker:missing_required": "ast:missing_required",
    "simple_function_checker:unexpected_param": "ast:unexpected_param",
    "type_error:nested": "ast:type:nested",
    "value_error:string": "ast:value:string",
    "value_error:list/tuple": "ast:value:list",
    "value_error:dict_key": "ast:value:dict",
    "value_error:dict_value": "ast:value:dict",
    "dict_checker:unclear": "ast:value:dict",
    "value_error:list_dict_count": "ast:value:list_dict",
    "list_dict_checker:unclear": "ast:value:list_dict",
    "value_error:others": "ast:value:others",
    "simple_function_checker:missing_optional": "ast:missing_optional",
    "parallel_function_checker_no_order:cannot_find_match": "ast:parallel_pairing",
    "irrelevance:called": "irrelevance",
    "multi_turn:empty_turn_model_response": "multi_turn:empty_turn",
    "multi_turn:instance_state_mismatch": "multi_turn:state",
    "multi_turn:execution_response_mismatch": "multi_turn:response",
    "multi_turn:irrelevance_error:decoder_success": "multi_turn:irrelevance",
}
_TYPES = {"any": "string", "tuple": "array"}
_PYTHON = {
    "string": str,
    "any": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
}
_PARAMETER = re.compile(r"parameter '([^']+)'")


def _declared(entry: dict[str, Any], function: str) -> dict[str, Any]:
    for doc in entry.get("function", []):
        if doc.get("name") == function:
            return dict((doc.get("parameters") or {}).get("properties") or {})
    return {}


def _answers(entry_id: str) -> dict[str, dict[str, list[Any]]]:
    """The answer's allowed values per function (the first answer of a repeated function)."""
    answer = possible_answers(entry_id.rsplit("_", 1)[0]).get(entry_id) or {}
    found: dict[str, dict[str, list[Any]]] = {}
    for expected in answer.get("ground_truth", []):
        for name, params in expected.items():
            found.setdefault(name, params)
    return found


def _is_variable(schema: dict[str, Any], allowed: list[Any]) -> bool:
    values = [v for v in allowed if v != ""]
    expected = _PYTHON.get(str(schema.get("type")))
    return bool(values) and expected is not None and type(values[0]) is not expected


def _argument_branches(schema: dict[str, Any], allowed: list[Any]) -> list[str]:
    declared = str(schema.get("type"))
    if _is_variable(schema, allowed):
        return ["ast:variable"]
    found = [f"ast:type:{_TYPES.get(declared, declared)}"]
    items = schema.get("items")
    if declared in ("array", "tuple"):
        found.append("ast:type:nested")
        of_dicts = isinstance(items, dict) and items.get("type") == "dict"
        found.append("ast:value:list_dict" if of_dicts else "ast:value:list")
    elif declared == "dict":
        found.append("ast:value:dict")
    elif declared in ("string", "any"):
        found.append("ast:value:string")
    else:
        found.append("ast:value:others")
    return found


def _accepted_ast(entry: dict[str, Any], calls: list[dict[str, Any]]) -> list[str]:
    found = ["ast:wrong_count", "ast:wrong_func_name"]
    found += ["ast:missing_required", "ast:unexpected_param"]
    answers = _answers(entry["id"])
    for call in calls:
        declared = _declared(entry, call["tool"])
        allowed = answers.get(call["tool"], {})
        for name in call["arguments"]:
            found += _argument_branches(declared.get(name) or {}, allowed.get(name, []))
        if any(p not in call["arguments"] for p in allowed):
            found.append("ast:missing_optional")
    if "parallel" in entry["id"] and len(calls) >= 2:
        found.append("ast:parallel_pairing")
    return found


def _rejected_ast(entry: dict[str, Any], error_type: str, messages: list[str]) -> str:
    found = _REJECTED_BY.get(error_type, error_type)
    named = _PARAMETER.search(" ".join(messages))
    if error_type not in ("type_error:simple", "value_error:others") or named is None:
        return found
    parameter = named.group(1)
    for function, allowed in _answers(entry["id"]).items():
        schema = _declared(entry, function).get(parameter)
        if parameter in allowed and schema is not None:
            if _is_variable(schema, allowed[parameter]):
                return "ast:variable"
            declared = str(schema.get("type"))
            return f"ast:type:{_TYPES.get(declared, declared)}" if "type" in error_type else found
    return found


def exercised(
    entry_id: str,
    trajectory: list[list[dict[str, Any]]],
    valid: bool,
    error: str,
    messages: list[str],
) -> list[tuple[str, bool]]:
    """(branch, accepted) for every branch BFCL's checker went through on `trajectory`."""
    entry = find_entry(entry_id)
    if "involved_classes" in entry:
        if not valid:
            return [(_REJECTED_BY.get(error, error), False)]
        truth = possible_answers(entry_id.rsplit("_", 1)[0])[entry_id]["ground_truth"]
        found = ["multi_turn:empty_turn", "multi_turn:state", "multi_turn:response"]
        if any(not turn for turn in truth):
            found.append("multi_turn:irrelevance")
        return [(branch, True) for branch in found]
    if "irrelevance" in entry_id:
        return [("irrelevance", valid)]
    if not valid:
        return [(_rejected_ast(entry, error, messages), False)]
    calls = trajectory[0] if trajectory else []
    return [(branch, True) for branch in dict.fromkeys(_accepted_ast(entry, calls))]
