"""An incremental Server-Sent Events parser used only to *read* what passes through.

The proxy forwards the upstream's bytes untouched; this parser works on a copy, so CRLF line
ends, empty priming events and comments reach the agent exactly as the upstream wrote them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class SseEvent:
    """One dispatched event: its type (default `message`), its id and its joined data lines."""

    event: str
    data: str
    id: str | None = None


class SseEventTooLarge(Exception):
    """One event grew past the parser's limit (an upstream that never ends its event)."""

    def __init__(self, limit: int, head: bytes, events: list[SseEvent]) -> None:
        super().__init__(f"an SSE event over {limit} bytes")
        self.limit = limit
        self.head = head  # the event's first bytes (at most `limit`), for the span
        self.events = events  # the events completed before it, in the same chunk


class SseParser:
    """Feed it chunks as they arrive; it returns the events that became complete.

    One event may hold at most `max_event_bytes` (None: no limit); past that `feed` raises
    `SseEventTooLarge`, so an event without an end cannot grow the buffer without bound.
    """

    __slots__ = ("_buffer", "_carry_cr", "_limit")

    def __init__(self, max_event_bytes: int | None = None) -> None:
        self._buffer = bytearray()
        self._carry_cr = False
        self._limit = max_event_bytes

    @property
    def incomplete(self) -> bool:
        """True when a partial event is buffered (the stream stopped mid-event)."""
        return bool(self._buffer.strip(b"\r\n")) or self._carry_cr

    def close(self) -> list[SseEvent]:
        """At the end of the stream: a held-back CR was a line end after all."""
        if not self._carry_cr:
            return []
        self._carry_cr = False
        return self.feed(b"\n")

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """The events completed by `chunk` (line ends CRLF, LF or CR, as the spec allows)."""
        if self._carry_cr:
            chunk = b"\r" + chunk
            self._carry_cr = False
        if chunk.endswith(b"\r"):  # may be the first half of a CRLF split across chunks
            chunk = chunk[:-1]
            self._carry_cr = True
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buffer = self._buffer
        search = max(len(buffer) - 1, 0)  # a blank line may straddle the old end
        buffer += chunk  # in place: a long event is not copied again on every chunk
        events: list[SseEvent] = []
        begin = 0
        while (end := buffer.find(b"\n\n", search)) >= 0:
            self._check(end - begin, buffer, begin, events)
            event = _parse_block(bytes(buffer[begin:end]))
            if event is not None:
                events.append(event)
            begin = search = end + 2
        rest = len(buffer) - begin - buffer.endswith(b"\n")  # its end may be half here
        self._check(rest, buffer, begin, events)
        del buffer[:begin]
        return events

    def _check(self, size: int, buffer: bytearray, begin: int, events: list[SseEvent]) -> None:
        limit = self._limit
        if limit is not None and size > limit:
            head = bytes(buffer[begin : begin + limit])
            buffer.clear()  # the parser is done: nothing more is held
            raise SseEventTooLarge(limit, head, events)


def _parse_block(block: bytes) -> SseEvent | None:
    """One event from its lines; None for comment-only or empty blocks."""
    if not block:
        return None
    event_type = "message"
    event_id: str | None = None
    data_lines: list[str] = []
    for raw_line in block.split(b"\n"):
        if not raw_line or raw_line.startswith(b":"):
            continue
        name, _, value = raw_line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            data_lines.append(value.decode("utf-8", errors="replace"))
        elif name == b"event":
            event_type = value.decode("utf-8", errors="replace")
        elif name == b"id":
            event_id = value.decode("utf-8", errors="replace")
    if not data_lines and event_id is None:
        return None
    return SseEvent(event=event_type, data="\n".join(data_lines), id=event_id)
