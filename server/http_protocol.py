"""uvicorn's httptools protocol, with a whole answer's head and body in one socket write.

uvicorn writes an answer's head as soon as the app sends `http.response.start` and its body with
the next message, and uvloop writes each at once: two writes (two syscalls, two segments) for
every answer. On the proxy's hot path that is a write per recorded call that a bare aiohttp hop
does not make (#24 item 2). Here the head of an answer of known length is held until its first
body bytes, and both go out in one `writelines` (uvloop: one writev). A streamed answer (no
Content-Length: SSE, chunked), a HEAD request or a declared empty body keep uvicorn's order and
timing: the head goes at once. Nothing else of uvicorn changes.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["OneWriteHttpTools"]


class _OneWrite:
    """The connection's transport as one request's cycle sees it: it holds that cycle's head
    until its first body write (or a close, which sends it as uvicorn would have)."""

    __slots__ = ("_cycle", "_head_seen", "_held", "_transport")

    def __init__(self, transport: Any, cycle: Any) -> None:
        self._transport = transport
        self._cycle = cycle
        self._held: bytes | None = None
        self._head_seen = False

    def write(self, data: bytes) -> None:
        held = self._held
        if held is not None:  # the first body bytes: head and body in one write
            self._held = None
            self._transport.writelines((held, data))
            return
        cycle = self._cycle
        if not self._head_seen and cycle.response_started:  # this is the head (uvicorn set
            self._head_seen = True  # the response's state just before writing it)
            if (
                cycle.chunked_encoding is False
                and cycle.expected_content_length > 0
                and cycle.scope["method"] != "HEAD"
            ):
                self._held = data
                return
        self._transport.write(data)

    def close(self) -> None:
        held = self._held
        if held is not None:  # the app failed before its body: the head goes, as before
            self._held = None
            self._transport.write(held)
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class OneWriteHttpTools(HttpToolsProtocol):
    """`http="httptools"`, with each request's cycle writing through `_OneWrite`."""

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and not isinstance(cycle.transport, _OneWrite):
            # (it stands in for the transport: what the cycle calls, it has or passes on)
            cycle.transport = cast("asyncio.Transport", _OneWrite(self.transport, cycle))
