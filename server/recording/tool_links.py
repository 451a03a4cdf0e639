"""Which model request asked for a tool call: the tool span carries `gen_ai.tool.call.id` and an
OpenTelemetry link to the `chat` span whose answer requested the call (docs/llm.md#links).

Made in memory, when the tool span ends: each model span recorded by `/llm/` leaves the calls
its answer requested here (`requested`), and a `tools/call` span of the same run takes the
matching one (`executed`). Nothing waits on the database, and the link is on the span the SDK
exports, so the store, the spans API, `trace.otlp.json` and a configured OTLP collector all get
it. The match: the id the framework forwarded in `params._meta["gen_ai.tool.call.id"]` when
there is one, else the earliest requested call of the same tool with the same arguments
(normalised JSON) from a model answer that ended before the tool call started, each requested
call taken once (`tracecard.scorers.model.link_calls` reads a stored trace the same way).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from opentelemetry.trace import SpanContext

from tracecard.scorers._json import canonical_json

__all__ = ["FORWARDED", "MATCHED", "META_KEY", "Requested", "ToolCallLinks"]

META_KEY: Final = "gen_ai.tool.call.id"  # in a tools/call's params._meta: the framework's id
FORWARDED: Final = "forwarded"  # tracecard.tool.call.id_source: the agent sent the id
MATCHED: Final = "matched"  # tracecard matched tool name and arguments
_MAX_RUNS: Final = 1024  # runs whose requested calls are remembered (oldest forgotten first)
_MAX_PER_RUN: Final = 512  # requested calls remembered per run (oldest forgotten first)


@dataclass(frozen=True, slots=True)
class Requested:
    """A call a model answer asked for, not yet executed."""

    context: SpanContext  # the model span
    call_id: str | None
    tool: str
    identity: str  # canonical JSON of the arguments
    end_ns: int  # when the model's answer ended


def _identity(arguments: Any) -> str:
    return canonical_json(arguments if arguments is not None else {})


class ToolCallLinks:
    """Requested calls per run, waiting for the tool span that executes them."""

    def __init__(self) -> None:
        self._runs: OrderedDict[str, list[Requested]] = OrderedDict()
        self._lock = threading.Lock()  # the stdio bridge records from worker threads too

    def requested(
        self, run_id: str, context: SpanContext, calls: Iterable[Mapping[str, Any]], end_ns: int
    ) -> None:
        """The complete calls of one model answer (`tracecard.llm.tool_calls` entries)."""
        found = [
            Requested(
                context=context,
                call_id=str(call["id"]) if call.get("id") is not None else None,
                tool=str(call["name"]),
                identity=_identity(call.get("arguments")),
                end_ns=end_ns,
            )
            for call in calls
            if isinstance(call.get("name"), str) and call.get("complete", True) is not False
        ]
        if not found or not run_id:
            return
        with self._lock:
            pending = self._runs.setdefault(run_id, [])
            self._runs.move_to_end(run_id)
            pending.extend(found)
            del pending[:-_MAX_PER_RUN]
            while len(self._runs) > _MAX_RUNS:
                self._runs.popitem(last=False)

    def executed(
        self, run_id: str, tool: str, arguments: Any, start_ns: int, forwarded: str | None
    ) -> tuple[Requested | None, str | None, str | None]:
        """(the requested call it executed or None, the call id, how the id was found).

        A forwarded id is kept whether or not a requested call has it."""
        if run_id not in self._runs:  # no model answer of this run asked for a call: no lock
            return None, forwarded, None if forwarded is None else FORWARDED
        with self._lock:
            pending = self._runs.get(run_id)
            if forwarded is not None:
                for index, request in enumerate(pending or ()):
                    if request.call_id == forwarded:
                        del pending[index]  # type: ignore[union-attr]
                        return request, forwarded, FORWARDED
                return None, forwarded, FORWARDED
            if not pending:
                return None, None, None
            identity: str | None = None
            for index, request in enumerate(pending):
                if request.tool != tool or request.end_ns > start_ns:
                    continue
                if identity is None:
                    identity = _identity(arguments)
                if request.identity == identity:
                    del pending[index]
                    return request, request.call_id, MATCHED
        return None, None, None
