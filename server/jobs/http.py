"""The job endpoints through the project's client (its base URL, token and errors)."""

from __future__ import annotations

from typing import Any

from tracecard._requests import _json_call
from tracecard.client import TracecardClient

__all__ = ["get_json", "post_json"]


def post_json(client: TracecardClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST a JSON body; the answer's JSON (a `TracecardError` for an error status)."""
    return client._do(_json_call("POST", path, json=body))


def get_json(client: TracecardClient, path: str) -> dict[str, Any]:
    """GET a JSON document (a `TracecardError` for an error status)."""
    return client._do(_json_call("GET", path))
