"""Which run a proxied request belongs to, and the bounded session map (proxy and stdio)."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from tracecard.server.asgi import Scope, baggage_run
from tracecard.server.proxy.errors import ProxyError
from tracecard.server.proxy.forward import RequestHeaders
from tracecard.server.proxy.grouping import Unbound, adhoc_for_request, session_key, session_run
from tracecard.server.runs.registry import RunInfo

if TYPE_CHECKING:
    from tracecard.server.proxy.state import ProxyState, Upstream

SessionKey = tuple[str, str]  # (upstream name, Mcp-Session-Id)
K = TypeVar("K")
V = TypeVar("V")
SESSIONS_MAX = 10_000  # sessions remembered at once; the least recently used goes first
SESSION_IDLE_S = 6 * 3600.0  # a session unused this long is forgotten (a later call: new run)


class IdleLru(Generic[K, V]):
    """Sessions by key: LRU-bounded and idle-expiring, not just shrunk on DELETE.

    Without a bound a server that never sees DELETE (clients that just disconnect) grows
    forever; `on_forget` is told of every entry dropped (evicted, expired or popped) so that
    what hangs off it (an ad-hoc run cache entry, a stdio session's stream) can follow.
    """

    def __init__(
        self,
        capacity: int = SESSIONS_MAX,
        idle_s: float = SESSION_IDLE_S,
        on_forget: Callable[[K, V], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._entries: OrderedDict[K, tuple[V, float]] = OrderedDict()
        self.capacity = capacity
        self.idle_s = idle_s
        self._on_forget = on_forget
        self._clock = clock

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def values(self) -> list[V]:
        return [value for value, _seen in self._entries.values()]

    def get(self, key: K) -> V | None:
        """The session's value, refreshed as recently used; None if unknown or expired."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        now = self._clock()
        if now - entry[1] > self.idle_s:
            self.pop(key)
            return None
        self._entries[key] = (entry[0], now)
        self._entries.move_to_end(key)
        return entry[0]

    def bind(self, key: K, value: V) -> V:
        """Remember `value` for the session unless it has one already; return the session's."""
        found = self.get(key)
        if found is not None:
            return found
        now = self._clock()
        self._entries[key] = (value, now)
        self._expire(now)
        return value

    def pop(self, key: K) -> V | None:
        """Forget the session (its DELETE, or eviction)."""
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        if self._on_forget is not None:
            self._on_forget(key, entry[0])
        return entry[0]

    def _expire(self, now: float) -> None:
        entries = self._entries
        while len(entries) > self.capacity:
            self.pop(next(iter(entries)))
        while entries:  # oldest first: stop at the first one still in use
            key, (_value, seen) = next(iter(entries.items()))
            if now - seen <= self.idle_s:
                break
            self.pop(key)


SessionRuns = IdleLru[SessionKey, RunInfo]


async def named_run(
    state: ProxyState, headers: RequestHeaders, path_run: str | None
) -> RunInfo | None:
    """The run the request names (path, `Tracecard-Run`, baggage); 404 for an unknown id."""
    explicit = path_run or headers.run_id or baggage_run(headers.baggage)
    if not explicit:
        return None
    runs = state.runtime.runs
    info = runs.cached(explicit) or await runs.resolve(explicit)
    if info is None:
        raise ProxyError(
            404, f"no run with id {explicit!r}: create one with POST /api/runs", run_id=explicit
        )
    return info


async def choose_run(
    state: ProxyState,
    scope: Scope,
    upstream: Upstream,
    headers: RequestHeaders,
    path_run: str | None,
    first: Mapping[str, Any] | None,
) -> RunInfo:
    """The run: path, then `Tracecard-Run`, then baggage, else ad hoc: the MCP session's, else
    grouped by trace context or client (`stateless_key`)."""
    if names_a_run(headers, path_run):
        info = await named_run(state, headers, path_run)
        if info is not None:
            return info
    return unnamed_run(state, scope, upstream, headers, first)


def names_a_run(headers: RequestHeaders, path_run: str | None) -> bool:
    """Whether the request may name its run (path, `Tracecard-Run`, baggage): only then does
    `choose_run` need to look a run up (and be awaited); else `unnamed_run` chooses at once."""
    return bool(path_run or headers.run_id or headers.baggage)


def unnamed_run(
    state: ProxyState,
    scope: Scope,
    upstream: Upstream,
    headers: RequestHeaders,
    first: Mapping[str, Any] | None,
) -> RunInfo:
    """`choose_run` for a request that names no run: its MCP session's, else ad hoc."""
    runs = state.runtime.runs
    if headers.session_id:
        key = (upstream.name, headers.session_id)
        info = state.session_runs.get(key)
        if info is None or info.status != "running":  # unknown, or ended (idle): a new run
            state.session_runs.pop(key)
            info = runs.adhoc(session_key(upstream.name, headers.session_id))
            state.session_runs.bind(key, info)
        info.last_seen = time.monotonic()
        return info
    client = scope.get("client")
    request = Unbound(
        address=str(client[0]) if client else "unknown",
        upstream=upstream.name,
        message=first,
        traceparent=headers.traceparent,
        baggage=headers.baggage,
        user_agent=headers.user_agent,
    )
    if request.method == "initialize":  # a new session: its run is bound to the session id later
        return session_run(runs, request)
    return adhoc_for_request(runs, request)
