"""BFCL possible answers as matchers (server/bfcl/answers.py), read the way BFCL's AST checker
reads them: by the parameter's type in the function doc."""

from __future__ import annotations

from typing import Any

from tracecard.server.bfcl.answers import MAX_COMBINATIONS, first_allowed, matcher, param_kinds

ENTRY: dict[str, Any] = {
    "function": [
        {
            "name": "query",
            "parameters": {
                "type": "dict",
                "properties": {
                    "filter": {"type": "dict"},
                    "rows": {"type": "array", "items": {"type": "dict"}},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "limit": {"type": "integer"},
                },
            },
        }
    ]
}


def test_kinds_come_from_the_function_doc() -> None:
    kinds = param_kinds(ENTRY, "query")
    assert kinds == {"filter": "dict", "rows": "list_dict", "tags": "plain", "limit": "plain"}
    assert param_kinds(ENTRY, "other") == {}


def test_an_object_expands_its_keys_and_keeps_an_inner_object_whole() -> None:
    allowed = [{"op": [">", "gt"], "at": [{"x": 1, "y": [2]}], "note": ["", "n"]}]
    found = matcher(allowed, "dict")
    assert found == {
        "one_of": [
            {"op": ">", "at": {"x": 1, "y": [2]}, "note": "n"},
            {"op": ">", "at": {"x": 1, "y": [2]}},
            {"op": "gt", "at": {"x": 1, "y": [2]}, "note": "n"},
            {"op": "gt", "at": {"x": 1, "y": [2]}},
        ]
    }
    assert first_allowed(allowed, "dict") == (
        True,
        {"op": ">", "at": {"x": 1, "y": [2]}, "note": "n"},
    )


def test_a_list_of_objects_expands_position_by_position() -> None:
    allowed = [[{"field": ["age"], "value": ["25", 25]}, {"field": ["job"], "value": ["dev"]}]]
    found = matcher(allowed, "list_dict")
    assert found["one_of"] == [
        [{"field": "age", "value": "25"}, {"field": "job", "value": "dev"}],
        [{"field": "age", "value": 25}, {"field": "job", "value": "dev"}],
    ]
    assert first_allowed(allowed, "list_dict")[1] == found["one_of"][0]
    # a list of plain values stays a value
    assert matcher([["a", "b"], ""], "plain") == {"one_of": [["a", "b"]], "optional": True}


def test_the_shape_decides_when_the_doc_says_nothing() -> None:
    assert matcher([{"k": [1, 2]}]) == {"one_of": [{"k": 1}, {"k": 2}]}
    assert matcher([[{"k": [1]}]]) == {"one_of": [[{"k": 1}]]}
    assert first_allowed([""]) == (False, None)


def test_past_the_cap_an_argument_is_only_required_present() -> None:
    keys = {f"k{i}": [1, 2] for i in range(MAX_COMBINATIONS.bit_length())}
    assert matcher([keys], "dict") == {"any": True}
    assert matcher([keys, ""], "dict") == {"any": True, "optional": True}
