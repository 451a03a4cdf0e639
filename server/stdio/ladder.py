"""The checks a 2026-07-28 server makes before it serves a stateless request, for the bridge.

A stdio server speaks the session protocol to tracecard, so the bridge is the stateless server
its HTTP clients talk to, and it refuses what the official SDK's own HTTP server refuses, with
the SDK's own code (`mcp.shared.inbound`): a duplicated routing header, a request without the
`_meta` envelope (protocol version, client capabilities), `Mcp-Method`/`Mcp-Name`/
`MCP-Protocol-Version` headers that disagree with the body (-32020), an unsupported version,
and a method the 2026-07-28 protocol removed (`initialize`, `ping`, `logging/setLevel`,
`resources/subscribe`...: -32601). Each error gets the HTTP status the SDK's table gives it
(400, or 404 for an unknown method), as every answer of the bridge's stateless side does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
)
from mcp_types import HEADER_MISMATCH, INVALID_PARAMS, METHOD_NOT_FOUND
from mcp_types import methods as spec_methods
from pydantic import ValidationError

from tracecard.server.asgi import Scope


def refusal(
    message: Mapping[str, Any], scope: Scope, headers: Mapping[str, str]
) -> dict[str, Any] | None:
    """The JSON-RPC error the SDK's stateless server answers `message` with before serving
    it, or None when it would serve it."""
    raw = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in scope.get("headers", [])]
    duplicated = find_duplicated_routing_header(raw)
    if duplicated is not None:
        message_text = f"{duplicated} header appears more than once"
        return _error(message, InboundLadderRejection(HEADER_MISMATCH, message_text))
    verdict = classify_inbound_request(message, headers=headers)
    if isinstance(verdict, InboundLadderRejection):
        return _error(message, verdict)
    method = str(message.get("method"))
    if method not in spec_methods.SPEC_CLIENT_METHODS:
        return None  # a custom method: the server says whether it has it
    try:
        spec_methods.validate_client_request(
            method, verdict.protocol_version, message.get("params")
        )
    except KeyError:  # not a method of this protocol version (removed in 2026-07-28)
        return _error(message, InboundLadderRejection(METHOD_NOT_FOUND, "Method not found", method))
    except (ValueError, ValidationError):
        invalid = InboundLadderRejection(INVALID_PARAMS, "Invalid request parameters", "")
        return _error(message, invalid)
    return None


def http_status(reply: Mapping[str, Any]) -> int:
    """The HTTP status of a stateless answer: the SDK's table for an error, else 200."""
    error = reply.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return ERROR_CODE_HTTP_STATUS.get(code, 200) if isinstance(code, int) else 200


def _error(message: Mapping[str, Any], rejection: InboundLadderRejection) -> dict[str, Any]:
    error: dict[str, Any] = {"code": rejection.code, "message": rejection.message}
    if rejection.data is not None:
        error["data"] = rejection.data
    return {"jsonrpc": "2.0", "id": message.get("id"), "error": error}
