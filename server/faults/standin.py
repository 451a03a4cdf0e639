"""The frame both stand-ins for a run's stdio process share (replay's and the fault plan's).

The stdio bridge calls `process.call(message, exchange, timeout, sink, pending)`; a stand-in
opens the call's span when the bridge has not, then gives its own answer (`answer`), handing the
call on to a real process with `StdioCall.to` when it must.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from tracecard.server.recording.recorder import Exchange, PendingCall, Recorder


@dataclass(frozen=True, slots=True)
class StdioCall:
    """One request the bridge hands a stand-in, its span already open (`pending`)."""

    message: dict[str, Any]
    exchange: Exchange
    timeout: float
    sink: Any
    pending: PendingCall

    async def to(self, process: Any, pending: PendingCall | None = None) -> dict[str, Any]:
        """The call handed on to `process` (recorded on `pending`, by default its own span)."""
        call = self if pending is None else replace(self, pending=pending)
        reply = await process.call(
            call.message, call.exchange, call.timeout, call.sink, call.pending
        )
        return dict(reply)


class StdioStandIn:
    """Quacks like `StdioProcess.call` for the bridge; subclasses write `answer`."""

    def __init__(self, upstream: str, recorder: Recorder) -> None:
        self.upstream = upstream
        self.recorder = recorder

    async def call(
        self,
        message: dict[str, Any],
        exchange: Exchange,
        timeout: float,
        sink: Any = None,
        pending: PendingCall | None = None,
    ) -> dict[str, Any]:
        pending = pending or self.recorder.start(message, exchange)
        return await self.answer(StdioCall(message, exchange, timeout, sink, pending))

    async def answer(self, call: StdioCall) -> dict[str, Any]:
        raise NotImplementedError
