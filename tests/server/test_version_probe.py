"""What counts as a version probe (a client's `server/discover` that an older server refused, after
which its SDK falls back to `initialize`), checked against the MCP 2026-07-28 wording:

- transports/stdio, "Backward Compatibility": a DiscoverResult or a recognised modern error
  identifies a modern server; "any other error, or no response within a reasonable timeout,
  identifies a legacy server"; "the fallback MUST NOT be keyed to one specific error code:
  legacy servers respond to unknown pre-`initialize` requests with implementation-defined
  errors (commonly `-32601` or `-32602`) or not at all".
- transports/streamable-http, "Backward Compatibility": on a 4xx, "if the body is empty or is
  not a recognized modern JSON-RPC error, fall back to `initialize`".
- schema/2026-07-28/schema.ts: the spec's own codes are -32020 HeaderMismatch, -32021
  MissingRequiredClientCapability, -32022 UnsupportedProtocolVersion (the client retries with
  a supported version); -32000 to -32019 are implementation-defined.

The end-to-end case (the official client against a real session-protocol server through the
proxy) is tests/server/test_adhoc_runs.py.
"""

from __future__ import annotations

import pytest

from tracecard.server.recording.messages import is_version_probe
from tracecard.traces import semconv as sc


@pytest.mark.parametrize(
    "error",
    [
        "-32601",  # method not found: the common legacy answer
        "-32602",  # invalid params: the other code the spec names (was counted an error)
        "-32600",  # invalid request
        "-32000",  # an SDK's "not initialized" (implementation-defined range)
        "-32603",  # any other implementation-defined refusal
        "-32022",  # UnsupportedProtocolVersion: negotiation, the client retries
        "400",  # an HTTP 4xx with no modern JSON-RPC body
        "404",
        "405",
        "406",  # any 4xx, not a list of them
        sc.ERR_TIMEOUT,  # no answer at all: the spec's "or not at all"
        sc.ERR_CLIENT_DISCONNECTED,  # the client gave up waiting and fell back
    ],
)
def test_a_refused_or_unanswered_discover_is_a_version_probe(error: str) -> None:
    assert is_version_probe("server/discover", error)


@pytest.mark.parametrize(
    "error",
    [
        "-32020",  # HeaderMismatch: the request was wrong, a modern server said so
        "-32021",  # MissingRequiredClientCapability: likewise
        "500",  # an outage is never an era verdict
        "502",
        sc.ERR_UNAVAILABLE,
        sc.ERR_PROTOCOL,
        sc.ERR_BLOCKED,
    ],
)
def test_a_discover_that_failed_for_another_reason_is_an_error(error: str) -> None:
    assert not is_version_probe("server/discover", error)


@pytest.mark.parametrize("method", ["initialize", "tools/call", "tools/list", "ping"])
def test_only_discover_is_ever_a_probe(method: str) -> None:
    assert not is_version_probe(method, "-32601")
    assert not is_version_probe(method, "400")
