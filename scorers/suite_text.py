"""Suite text: writing a suite as TOML or JSON, and the TOML convention for JSON `null`.

TOML has no null. In a TOML suite the inline table `{ "$null" = true }` (that one key, that
value) stands for JSON `null` wherever a value may be null (a predicate's `value`, a reference
state); the TOML writer emits it for every `None`. JSON suites write `null` as JSON does.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

import tomli_w

if TYPE_CHECKING:
    from .suite import Suite

__all__ = ["NULL_KEY", "decode_toml_nulls", "dump_suite", "encode_toml_nulls"]

NULL_KEY = "$null"


def decode_toml_nulls(value: Any) -> Any:
    """Replace every `{ "$null" = true }` table with None (the TOML reader's side)."""
    if isinstance(value, dict):
        if len(value) == 1 and value.get(NULL_KEY) is True:
            return None
        return {key: decode_toml_nulls(item) for key, item in value.items()}
    if isinstance(value, list):
        return [decode_toml_nulls(item) for item in value]
    return value


def encode_toml_nulls(value: Any) -> Any:
    """Replace every None with `{ "$null" = true }` (the TOML writer's side)."""
    if value is None:
        return {NULL_KEY: True}
    if isinstance(value, dict):
        return {key: encode_toml_nulls(item) for key, item in value.items()}
    if isinstance(value, list):
        return [encode_toml_nulls(item) for item in value]
    return value


def dump_suite(suite: Suite, fmt: Literal["toml", "json"] = "toml") -> str:
    """The suite as text that `parse_suite` reads back to an equal suite (same version)."""
    # Only what was set: defaults stay implicit, and an explicit null (a predicate's value) stays.
    document = suite.model_dump(mode="json", exclude_unset=True)
    if fmt == "json":
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    return tomli_w.dumps(encode_toml_nulls(document))
