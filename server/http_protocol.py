"""uvicorn's httptools protocol, with what one answer writes in one loop turn sent in one write.

uvicorn writes an answer's head as soon as the app sends `http.response.start` and each body part
with its own message, and uvloop writes each at once: a whole answer was two writes (two syscalls,
two segments), and a proxied SSE answer three (the head, the event, the end of the stream) where a
bare aiohttp hop makes one or two (#24 item 2). Here the writes of one answer are gathered while
the loop turn that made them runs, and go out in one `writelines` (uvloop: one writev) when it
ends, or at once with the answer's last bytes. Nothing waits past the current loop turn: a head
whose body is not there yet still leaves before the loop waits on anything, so a streamed
answer's head reaches the agent when it did before. Nothing else of uvicorn changes.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["OneWriteHttpTools"]

_CHUNKED_END = b"0\r\n\r\n"  # the last chunk alone (an empty final body)
_CHUNKED_TAIL = b"\r\n" + _CHUNKED_END  # the last chunk after a final body's bytes


class _OneWrite:
    """The connection's transport as one request's cycle sees it: its writes are gathered until
    the end of the loop turn, or until the answer's last bytes (or a close), then sent as one.

    It refers to its cycle weakly: the cycle holds it as its transport, and a strong reference
    back made each request a reference cycle (the cycle, its scope, headers, event and writer:
    ~17 objects) that only the garbage collector freed, ~19 us of CPU a call in collections."""

    __slots__ = ("_cycle", "_head_seen", "_held", "_loop", "_transport")

    def __init__(self, transport: Any, cycle: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._cycle = weakref.ref(cycle)
        self._loop = loop
        self._held: list[bytes] | None = None
        self._head_seen = False

    def write(self, data: bytes) -> None:
        if self._last(data):  # the answer is complete: everything goes now
            held = self._held
            if held is None:
                self._transport.write(data)
                return
            self._held = None
            held.append(data)
            self._transport.writelines(held)
            return
        held = self._held
        if held is None:
            self._held = [data]
            self._loop.call_soon(self._flush)
        else:
            held.append(data)

    def _last(self, data: bytes) -> bool:
        """Whether `data` ends the answer (uvicorn sets the cycle's state before it writes)."""
        if not self._head_seen:
            self._head_seen = True  # the first write is the head (or a 400/500 of uvicorn's)
            return False
        cycle = self._cycle()
        if cycle is None:  # (only the cycle writes here: it cannot be gone while it writes)
            return True
        if cycle.chunked_encoding:
            return data == _CHUNKED_END or data.endswith(_CHUNKED_TAIL)
        return bool(cycle.expected_content_length == 0)

    def _flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if not self._transport.is_closing():
                self._transport.writelines(held)

    def close(self) -> None:
        self._flush()  # what was written goes before the close, as it would have
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
            cycle.transport = cast("asyncio.Transport", _OneWrite(self.transport, cycle, self.loop))
