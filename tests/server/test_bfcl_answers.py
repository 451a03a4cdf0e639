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


DICT = {"type": "dict"}
ROWS = {"type": "array", "items": {"type": "dict"}}
TAGS = {"type": "array", "items": {"type": "string"}}


def test_an_object_expands_its_keys_and_keeps_an_inner_object_whole() -> None:
    allowed = [{"op": [">", "gt"], "at": [{"x": 1, "y": [2]}], "note": ["", "n"]}]
    found = matcher(allowed, DICT)
    assert found == {
        "one_of": [
            {"op": ">", "at": {"x": 1, "y": [2]}, "note": "n"},
            {"op": ">", "at": {"x": 1, "y": [2]}},
            {"op": "gt", "at": {"x": 1, "y": [2]}, "note": "n"},
            {"op": "gt", "at": {"x": 1, "y": [2]}},
        ],
        "normalize": "bfcl",
        "type": ["object"],
    }
    assert first_allowed(allowed, "dict") == (
        True,
        {"op": ">", "at": {"x": 1, "y": [2]}, "note": "n"},
    )


def test_a_list_of_objects_expands_position_by_position() -> None:
    allowed = [[{"field": ["age"], "value": ["25", 25]}, {"field": ["job"], "value": ["dev"]}]]
    found = matcher(allowed, ROWS)
    assert found["one_of"] == [
        [{"field": "age", "value": "25"}, {"field": "job", "value": "dev"}],
        [{"field": "age", "value": 25}, {"field": "job", "value": "dev"}],
    ]
    assert found["items"] == ["object"]
    assert first_allowed(allowed, "list_dict")[1] == found["one_of"][0]
    # a list of plain values stays a value; BFCL reads the `""` of a list as the empty list, and
    # skips its item type check when an allowed value is not a list
    assert matcher([["a", "b"], ""], TAGS) == {
        "one_of": [["a", "b"], []],
        "normalize": "bfcl",
        "type": ["array"],
        "optional": True,
    }
    assert matcher([["a", "b"]], TAGS)["items"] == ["string"]


def test_types_follow_the_doc_and_the_answer() -> None:
    # an integer parameter takes an int only; a float one an int too (BFCL converts it)
    assert matcher([2], {"type": "integer"})["type"] == ["integer"]
    assert matcher([2.5], {"type": "float"})["type"] == ["number"]
    # an answer of another type than the doc's (BFCL's "variable"): that type passes too, and
    # values are compared without standardisation
    assert matcher([None], {"type": "string"}) == {
        "one_of": [None],
        "normalize": "python",
        "type": ["string", "null"],
    }
    # strings are standardised; non-string answers of a string parameter never match
    assert matcher(["New York, NY", 3], {"type": "string"})["one_of"] == ["New York, NY"]


def test_what_the_doc_does_not_declare_or_requires_decides_presence() -> None:
    assert matcher(["x"], None) == {"one_of": []}  # never given: BFCL's unexpected_param
    assert matcher(["x", ""], None) == {"one_of": [], "optional": True}
    # required by the doc: a `""` in the answer does not make it optional
    assert "optional" not in matcher(["x", ""], {"type": "string"}, required=True)
    assert first_allowed([""]) == (False, None)


def test_past_the_cap_an_argument_is_only_required_present() -> None:
    keys = {f"k{i}": [1, 2] for i in range(MAX_COMBINATIONS.bit_length())}
    assert matcher([keys], DICT) == {"any": True, "type": ["object"]}
    assert matcher([keys, ""], DICT) == {"any": True, "type": ["object"], "optional": True}
