"""The JSON-RPC answers of an MCP POST whose upstream never answered (or broke its answer off):
every request gets an error with its own id, and every span ends with the reason."""

from __future__ import annotations

import aiohttp

from tracecard.server.asgi import CODE_UPSTREAM, Send, jsonrpc_error, send_jsonrpc
from tracecard.server.proxy.calls import Calls, end_unparsable, fail_open
from tracecard.server.proxy.relay import TIMEOUT_ERRORS
from tracecard.server.proxy.state import ProxyState, Upstream
from tracecard.traces import semconv

__all__ = ["answer_failure", "answer_unanswered"]


async def answer_unanswered(
    state: ProxyState, calls: Calls, send: Send, upstream: Upstream, failure: BaseException | None
) -> None:
    """No answer's head came: every request gets a JSON-RPC error saying why."""
    if isinstance(failure, TIMEOUT_ERRORS):
        await answer_failure(state, calls, send, semconv.ERR_TIMEOUT, upstream, 504)
    elif isinstance(failure, aiohttp.ClientResponseError):  # it answered, with broken HTTP
        text = f"tracecard: upstream {upstream.name!r} broke off its answer ({failure.message})"
        await answer_failure(state, calls, send, semconv.ERR_PROTOCOL, upstream, 502, text=text)
    else:
        await answer_failure(state, calls, send, semconv.ERR_UNAVAILABLE, upstream, 502, failure)


async def answer_failure(
    state: ProxyState,
    calls: Calls,
    send: Send,
    error: str,
    upstream: Upstream,
    status: int,
    exc: BaseException | None = None,
    text: str | None = None,
) -> None:
    """The upstream never answered: every request gets a JSON-RPC error with its own id."""
    if error == semconv.ERR_TIMEOUT:
        text = f"tracecard: upstream {upstream.name!r} did not answer within {upstream.timeout_s}s"
    elif text is None:
        text = f"tracecard: upstream {upstream.name!r} is unavailable ({type(exc).__name__}: {exc})"
    replies = [
        jsonrpc_error(p.request_id, CODE_UPSTREAM, text, reason=error)
        for p in calls.requests.values()
    ]
    fail_open(state, calls, error, text)
    if calls.unparsable is not None:
        calls.unparsable.set_attribute(semconv.ERROR_TYPE, error)
        end_unparsable(calls, status)
    # a request is owed a JSON-RPC answer (HTTP 200); a lone notification gets the HTTP status
    if replies:
        await send_jsonrpc(send, replies, len(replies) > 1, as_sse=False)
    else:
        await send_jsonrpc(send, [jsonrpc_error(None, CODE_UPSTREAM, text)], False, False, status)
