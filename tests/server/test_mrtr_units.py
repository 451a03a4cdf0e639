"""How rounds find their call (server/mrtr/calls.py), on the recorder with an in-memory exporter:
the cases the wire leaves open, and bad input, each a few messages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracecard.server.hooks import Hooks
from tracecard.server.mrtr import LogicalCalls
from tracecard.server.recording.recorder import Exchange, Recorder
from tracecard.server.runs.registry import RunInfo
from tracecard.server.settings import RecordingSettings
from tracecard.traces import semconv


@pytest.fixture
def recorded() -> Iterator[tuple[Recorder, LogicalCalls, InMemorySpanExporter, Exchange]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    calls = LogicalCalls()
    recorder = Recorder(provider.get_tracer("test"), RecordingSettings(), hooks=Hooks(mrtr=calls))
    run = RunInfo(id="run1", trace_id="0" * 31 + "1", root_span_id="0" * 15 + "1")
    yield recorder, calls, exporter, Exchange(run=run, upstream="ops")
    provider.shutdown()


def _call(id: int, arguments: dict[str, Any], **retry: Any) -> dict[str, Any]:
    params = {"name": "deploy", "arguments": arguments, **retry}
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}


def _asks(id: int, state: str | None) -> dict[str, Any]:
    result: dict[str, Any] = {
        "resultType": "input_required",
        "inputRequests": {"env": {"method": "elicitation/create", "params": {"message": "?"}}},
    }
    if state is not None:
        result["requestState"] = state
    return {"jsonrpc": "2.0", "id": id, "result": result}


def _done(id: int, text: str) -> dict[str, Any]:
    content = [{"type": "text", "text": text}]
    return {"jsonrpc": "2.0", "id": id, "result": {"content": content, "isError": False}}


def _with_result(exporter: InMemorySpanExporter, text: str) -> dict[str, Any]:
    """The attributes of the one finished span a reader takes for a call (it names a tool)
    whose result holds `text`."""
    found = [
        dict(span.attributes or {})
        for span in exporter.get_finished_spans()
        if semconv.GEN_AI_TOOL_NAME in (span.attributes or {})
        and text in str((span.attributes or {}).get(semconv.GEN_AI_TOOL_CALL_RESULT))
    ]
    assert len(found) == 1, found
    return found[0]


def test_without_request_state_the_latest_open_call_takes_the_retry(recorded: Any) -> None:
    recorder, calls, exporter, exchange = recorded
    same = {"service": "api"}
    first = recorder.start(_call(1, same), exchange)
    second = recorder.start(_call(2, same), exchange)
    recorder.finish(first, _asks(1, None))
    recorder.finish(second, _asks(2, None))
    assert calls.waiting == 2
    retry = recorder.start(_call(3, same, inputResponses={"env": {"action": "accept"}}), exchange)
    recorder.finish(retry, _done(3, "second done"))
    assert calls.waiting == 1
    # the wire cannot tell them apart: the later call got it (docs/proxy.md says so)
    [done] = [s for s in exporter.get_finished_spans() if s.name == "tools/call deploy"]
    assert (done.attributes or {})[semconv.MRTR_ROUNDS] == 2
    assert (done.attributes or {})[semconv.JSONRPC_REQUEST_ID] == "2"  # the call that began as id 2
    calls.close()  # shutdown: the one never retried ends, incomplete, never lost
    ended = [s for s in exporter.get_finished_spans() if s.name == "tools/call deploy"]
    assert sorted(str((s.attributes or {}).get(semconv.ERROR_TYPE)) for s in ended) == [
        "None",
        "mrtr_incomplete",
    ]


def test_a_state_names_its_call_and_a_changed_retry_is_its_own_call(recorded: Any) -> None:
    recorder, calls, exporter, exchange = recorded
    one = recorder.start(_call(1, {"service": "api"}), exchange)
    two = recorder.start(_call(2, {"service": "api"}), exchange)
    recorder.finish(one, _asks(1, "state-one"))
    recorder.finish(two, _asks(2, "state-two"))
    back = recorder.start(_call(3, {"service": "api"}, requestState="state-one"), exchange)
    recorder.finish(back, _done(3, "one finished"))
    # the same state with other arguments: not a round of that call
    changed = recorder.start(_call(4, {"service": "db"}, requestState="state-two"), exchange)
    recorder.finish(changed, _done(4, "db deployed"))
    assert _with_result(exporter, "one finished")[semconv.MRTR_ROUNDS] == 2
    unmatched = _with_result(exporter, "db deployed")
    assert unmatched[semconv.ERROR_TYPE] == semconv.ERR_MRTR_UNMATCHED
    assert semconv.MRTR_ROUNDS not in unmatched
    assert calls.waiting == 1  # call two still waits for its own retry
    assert calls.end_run("run1") == 1 and calls.waiting == 0


def test_a_round_that_fails_in_transport_ends_its_call(recorded: Any) -> None:
    recorder, calls, exporter, exchange = recorded
    first = recorder.start(_call(1, {}), exchange)
    recorder.finish(first, _asks(1, "s"))
    retry = recorder.start(_call(2, {}, requestState="s"), exchange)
    recorder.fail(retry, semconv.ERR_TIMEOUT, "no answer")
    [call] = [s for s in exporter.get_finished_spans() if s.name == "tools/call deploy"]
    assert (call.attributes or {})[semconv.ERROR_TYPE] == semconv.ERR_TIMEOUT
    assert (call.attributes or {})[semconv.MRTR_ROUNDS] == 2
    assert calls.waiting == 0
