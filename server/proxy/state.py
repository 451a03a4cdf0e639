"""What the proxy keeps between requests: the upstream table, the HTTP client, small caches."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from yarl import URL

from tracecard.server.proxy.forward import as_url
from tracecard.server.proxy.grouping import session_key
from tracecard.server.proxy.sessions import SessionKey, SessionRuns
from tracecard.server.proxy.transport import UpstreamClient, make_proxy_client
from tracecard.server.recording.recorder import PendingCall, Recorder
from tracecard.server.runs.registry import RunInfo
from tracecard.server.runtime import Runtime
from tracecard.server.settings import UpstreamSettings
from tracecard.traces import semconv

RequestKey = tuple[str, str, str]  # (upstream, session id, JSON-RPC id as text)
_SERVER_REQUEST_CAP = 4096  # open server->client requests remembered for their replies


@dataclass(slots=True)
class Upstream:
    """A configured upstream, resolved once: its URL parts and the headers to add."""

    name: str
    settings: UpstreamSettings
    url: str
    target: URL  # parsed once: aiohttp would parse a str URL on every request
    host: str | None
    port: int | None
    path: str
    timeout_s: float
    extra_headers: list[tuple[str, str]]

    @classmethod
    def build(cls, name: str, settings: UpstreamSettings, default_timeout: float) -> Upstream:
        url = settings.url or ""
        if settings.kind != "mcp":  # a base URL that paths are appended to
            url = url.rstrip("/")
        parts = urlsplit(url)
        default_port = 443 if parts.scheme == "https" else 80
        return cls(
            name=name,
            settings=settings,
            url=url,
            target=as_url(url) if parts.scheme else URL(),
            host=parts.hostname,
            port=parts.port or (default_port if parts.hostname else None),
            path=parts.path,
            timeout_s=settings.timeout_s or default_timeout,
            extra_headers=list(settings.headers.items()),
        )


@dataclass
class ProxyState:
    """Per-app proxy state, built in the app's lifespan and closed with it."""

    runtime: Runtime
    recorder: Recorder
    client: UpstreamClient
    upstreams: dict[str, Upstream]
    # tools/list results per upstream: tool name -> annotations (for tools/call spans, enforce)
    annotations: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    # runs of MCP sessions, keyed (upstream, session id): LRU-bounded, idle entries expire
    session_runs: SessionRuns = field(default_factory=SessionRuns)
    # whether an upstream answered its last POST with SSE (the form blocked calls are answered in)
    answers_sse: dict[str, bool] = field(default_factory=dict)
    # server->client requests awaiting the agent's reply, keyed (upstream, session id, request id)
    server_requests: OrderedDict[RequestKey, PendingCall] = field(default_factory=OrderedDict)
    # requests whose POST stream closed after an event id, keyed like server_requests: their
    # answer comes on the stream the client resumes (GET with Last-Event-ID)
    resumed: OrderedDict[RequestKey, PendingCall] = field(default_factory=OrderedDict)

    def remember_server_request(self, key: RequestKey, pending: PendingCall) -> None:
        """Keep a server->client request open until the agent replies (bounded)."""
        self.server_requests[key] = pending
        while len(self.server_requests) > _SERVER_REQUEST_CAP:
            _key, stale = self.server_requests.popitem(last=False)
            self.recorder.fail(stale, "no_reply", "the agent never replied")

    def await_resumed(self, key: RequestKey, pending: PendingCall, deadline: float) -> None:
        """Keep a request open for its answer on a resumed stream (SEP-1699), until `deadline`."""
        self.resumed[key] = pending
        while len(self.resumed) > _SERVER_REQUEST_CAP:
            _key, stale = self.resumed.popitem(last=False)
            self.recorder.fail(stale, semconv.ERR_TIMEOUT, "no answer on a resumed stream")
        asyncio.get_running_loop().call_at(deadline, self._expire_resumed, key, pending)

    def take_resumed(self, key: RequestKey) -> PendingCall | None:
        return self.resumed.pop(key, None)

    def _expire_resumed(self, key: RequestKey, pending: PendingCall) -> None:
        if self.resumed.get(key) is pending:
            del self.resumed[key]
            self.recorder.fail(
                pending, semconv.ERR_TIMEOUT, "no answer on a resumed stream in time"
            )

    def tool_annotations(self, upstream: str, tool: str) -> dict[str, Any] | None:
        return self.annotations.get(upstream, {}).get(tool)


def build_state(runtime: Runtime) -> ProxyState:
    """The proxy state for `runtime` (call inside a running event loop)."""
    settings = runtime.settings
    upstreams = {
        name: Upstream.build(name, upstream, settings.upstream_timeout_s)
        for name, upstream in settings.upstreams.items()
    }
    runs = runtime.runs

    def forget(key: SessionKey, run: RunInfo) -> None:
        """A session forgotten (DELETE, eviction, 6 h unused): its ad-hoc run ends with it."""
        if runtime.adhoc is not None:
            runtime.adhoc.end_soon(run, "closed")
        runs.forget_adhoc(session_key(*key), run)

    return ProxyState(
        runtime=runtime,
        recorder=Recorder(
            runtime.tracer,
            settings.recording,
            runtime.fingerprint_key,
            [name for name, upstream in settings.upstreams.items() if not upstream.redact],
            runtime.hooks,
            runtime.tool_links,
        ),
        client=make_proxy_client(),
        upstreams=upstreams,
        session_runs=SessionRuns(on_forget=forget),
    )
