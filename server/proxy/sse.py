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


class SseParser:
    """Feed it chunks as they arrive; it returns the events that became complete."""

    __slots__ = ("_buffer", "_carry_cr")

    def __init__(self) -> None:
        self._buffer = b""
        self._carry_cr = False

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
        data = self._buffer + chunk
        if b"\n\n" not in data:
            self._buffer = data
            return []
        *complete, self._buffer = data.split(b"\n\n")
        events: list[SseEvent] = []
        for block in complete:
            event = _parse_block(block)
            if event is not None:
                events.append(event)
        return events


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
