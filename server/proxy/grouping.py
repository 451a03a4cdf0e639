"""Which ad-hoc run a request that names no run joins: its session's, else one grouped by the
trace context it sends, its baggage, or its client (docs/proxy.md, Ad-hoc runs)."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tracecard.server.runs.registry import RunInfo, RunRegistry

__all__ = [
    "Unbound",
    "adhoc_for_request",
    "baggage_member",
    "client_info",
    "session_key",
    "session_run",
]

BAGGAGE_SESSION_KEY = "session.id"  # W3C baggage member grouping a stateless client's requests
CLIENT_INFO_META = "io.modelcontextprotocol/clientInfo"  # 2026-07-28 per-request `_meta` key


def session_key(upstream: str, session_id: str) -> str:
    """The ad-hoc run key of an MCP session that named no run."""
    return f"mcp-session:{upstream}:{session_id}"


def _trace_id(traceparent: Any) -> str | None:
    """The trace id of a W3C `traceparent` value, if it is a valid one."""
    if not isinstance(traceparent, str):
        return None
    parts = traceparent.strip().split("-")
    if len(parts) < 4 or len(parts[1]) != 32:
        return None
    trace_id = parts[1].lower()
    try:
        valid = int(trace_id, 16) != 0
    except ValueError:
        return None
    return trace_id if valid else None


def baggage_member(baggage: str | None, key: str) -> str | None:
    """One member of a W3C `baggage` header value."""
    if not baggage or key not in baggage:
        return None
    for member in baggage.split(","):
        name, _, value = member.partition("=")
        if name.strip() == key:
            return value.split(";", 1)[0].strip()[:200] or None
    return None


def message_meta(message: Mapping[str, Any] | None) -> Mapping[str, Any]:
    params = message.get("params") if message is not None else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta if isinstance(meta, dict) else {}


def client_info(message: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The client's `clientInfo`: initialize's params, else the 2026-07-28 `_meta` envelope."""
    params = message.get("params") if message is not None else None
    info = params.get("clientInfo") if isinstance(params, dict) else None
    if not isinstance(info, dict):
        info = message_meta(message).get(CLIENT_INFO_META)
    if not isinstance(info, dict) or not isinstance(info.get("name"), str):
        return None
    return {k: str(info[k])[:100] for k in ("name", "version") if k in info}


@dataclass(slots=True)
class Unbound:
    """A request in no session and naming no run: what its ad-hoc run is chosen by."""

    address: str
    upstream: str
    message: Mapping[str, Any] | None
    traceparent: str | None
    baggage: str | None
    user_agent: str
    client: dict[str, Any] | None = field(init=False)  # `client_info` of its message

    def __post_init__(self) -> None:
        self.client = client_info(self.message)

    @property
    def method(self) -> Any:
        return self.message.get("method") if self.message is not None else None

    def key(self) -> tuple[str, str | None]:
        """Its ad-hoc run key, and the agent's trace id if the key is its trace: the trace
        context it sends (`params._meta.traceparent`, SEP-414; the `traceparent` header), else
        baggage `session.id`, else the client (`clientInfo` name and version, or its
        User-Agent) at its address through this upstream."""
        meta_parent = message_meta(self.message).get("traceparent")
        trace_id = _trace_id(meta_parent) or _trace_id(self.traceparent)
        if trace_id is not None:
            return f"trace:{trace_id}", trace_id
        session = baggage_member(self.baggage, BAGGAGE_SESSION_KEY)
        if session is not None:
            return f"baggage:{session}", None
        info = self.client
        who = f"{info['name']}/{info.get('version', '')}" if info else f"ua:{self.user_agent}"
        return f"client:{self.address}:{self.upstream}:{who}", None


def adhoc_for_request(runs: RunRegistry, request: Unbound) -> RunInfo:
    """The ad-hoc run of a request that is in no session (stateless protocol, plain HTTP)."""
    key, trace_id = request.key()
    method = request.method
    fresh = runs.cached_adhoc(key) is None
    info = runs.adhoc(key, trace_id=trace_id, client=request.client)
    if fresh and method == "server/discover":
        info.probe_only = True  # a version probe: the session that may follow adopts it
    elif method != "server/discover":
        info.probe_only = False
    if info.client is None:
        info.client = request.client
    return info


def session_run(runs: RunRegistry, request: Unbound) -> RunInfo:
    """The run of a session being opened (`initialize`): a run of its own, or the run of the
    `server/discover` probe this client sent just before (an SDK's fallback to an older server).
    Its key is set to the session's once the session id is known."""
    key, _trace = request.key()
    probe = runs.cached_adhoc(key)
    provisional = session_key(request.upstream, f"new-{secrets.token_hex(8)}")
    if probe is not None and probe.probe_only and probe.status == "running":
        probe.probe_only = False
        runs.rekey_adhoc(probe, provisional)
        info = probe
    else:
        info = runs.adhoc(provisional, client=request.client)
    runs.forget_adhoc(provisional)  # a random key is never asked for again: keep no entry
    info.client = request.client or info.client
    return info
