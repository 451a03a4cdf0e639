"""Unit tests of the proxy's pure parts: path routing, the SSE reader, header handling."""

from __future__ import annotations

import random

import pytest

from tracecard.server.asgi import baggage_run
from tracecard.server.proxy.forward import _scan_each, response_headers, scan_request_headers
from tracecard.server.proxy.routing import match
from tracecard.server.proxy.sse import SseEventTooLarge, SseParser


@pytest.mark.parametrize(
    ("path", "route"),
    [
        ("/mcp/tools", ("mcp", None, "tools", "")),
        ("/mcp/tools/", ("mcp", None, "tools", "")),
        ("/runs/r1/mcp/tools", ("mcp", "r1", "tools", "")),
        ("/runs/r1/http/api/a/b", ("http", "r1", "api", "a/b")),
        ("/http/api/v1/items", ("http", None, "api", "v1/items")),
        ("/http/api", ("http", None, "api", "")),
        ("/runs/r1", None),  # the viewer's page
        ("/runs/r1/spans", None),
        ("/mcp/", None),
        ("/mcp/tools/extra", None),
        ("/api/runs", None),
    ],
)
def test_routing(path: str, route: tuple[str, str | None, str, str] | None) -> None:
    assert match(path) == route


def test_sse_parser_handles_crlf_split_across_chunks_and_priming_events() -> None:
    stream = (
        b'id: 0\r\ndata: \r\n\r\n: comment\r\n\r\nevent: message\r\ndata: {"a":\r\n'
        b"data: 1}\r\n\r\nevent: other\ndata: x\n\ndata: last\r\r"
    )
    for size in (1, 2, 3, 7, len(stream)):
        parser = SseParser()
        events = []
        for start in range(0, len(stream), size):
            events.extend(parser.feed(stream[start : start + size]))
        events.extend(parser.close())
        assert [(e.event, e.data, e.id) for e in events] == [
            ("message", "", "0"),
            ("message", '{"a":\n1}', None),
            ("other", "x", None),
            ("message", "last", None),
        ], size
        assert not parser.incomplete


def test_sse_parser_knows_a_half_event() -> None:
    parser = SseParser()
    assert parser.feed(b'data: {"half') == []
    assert parser.incomplete


def test_sse_parser_bounds_one_event_however_it_is_chunked() -> None:
    small = b"id: 1\ndata: ok\n\n"
    exact = b"data: " + b"x" * 94  # 100 bytes: at the limit, allowed
    for size in (1, 7, 64, 10_000):
        parser = SseParser(max_event_bytes=100)
        stream = small + exact + b"\n\n" + b"data: " + b"y" * 10_000  # then one without end
        events = []
        with pytest.raises(SseEventTooLarge) as raised:
            for start in range(0, len(stream), size):
                events.extend(parser.feed(stream[start : start + size]))
        events.extend(raised.value.events)
        assert [e.data for e in events] == ["ok", "x" * 94], size
        assert raised.value.head == (b"data: " + b"y" * 10_000)[:100]
        assert not parser.incomplete  # nothing is held after the overflow


def test_sse_parser_bounds_an_event_that_arrives_whole() -> None:
    parser = SseParser(max_event_bytes=10)
    with pytest.raises(SseEventTooLarge) as raised:
        parser.feed(b"data: a\n\ndata: " + b"z" * 20 + b"\n\n")
    assert [e.data for e in raised.value.events] == ["a"]
    assert raised.value.head == b"data: zzzz"


def test_request_headers_drop_hop_by_hop_and_keep_the_rest() -> None:
    found = scan_request_headers(
        [
            (b"host", b"tracecard:7800"),
            (b"connection", b"keep-alive, x-private"),
            (b"x-private", b"1"),
            (b"transfer-encoding", b"chunked"),
            (b"proxy-authorization", b"Basic x"),
            (b"tracecard-token", b"t"),
            (b"content-length", b"12"),
            (b"authorization", b"Bearer agent"),
            (b"mcp-session-id", b"s1"),
            (b"tracecard-run", b"r1"),
            (b"cookie", b"a=1"),
            (b"cookie", b"b=2"),
        ]
    )
    assert found.forward == [
        ("authorization", "Bearer agent"),
        ("mcp-session-id", "s1"),
        ("tracecard-run", "r1"),
        ("cookie", "a=1"),
        ("cookie", "b=2"),
    ]
    assert found.session_id == "s1" and found.run_id == "r1" and found.content_length == 12


def test_request_headers_each_named_once_are_read_and_forwarded_in_order() -> None:
    found = scan_request_headers(
        [
            (b"host", b"tracecard:7800"),
            (b"accept", b"application/json, text/event-stream"),
            (b"content-length", b"180"),
            (b"tracecard-token", b"t"),
            (b"mcp-protocol-version", b"2026-07-28"),
            (b"tracecard-run", b" r1 "),
            (b"traceparent", b"00-" + b"ab" * 16 + b"-" + b"cd" * 8 + b"-01"),
            (b"tracecard-role", b"v" * 80),
            (b"x-caf\xe9", b"cr\xe8me"),
        ]
    )
    assert found.forward == [
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("tracecard-run", " r1 "),
        ("traceparent", "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"),
        ("tracecard-role", "v" * 80),
        ("x-caf\xe9", "cr\xe8me"),
    ]
    assert found.content_length == 180 and found.run_id == "r1"
    assert found.protocol_version == "2026-07-28" and found.role_header == "v" * 64
    assert found.accept.startswith("application/json") and found.session_id is None


def test_request_headers_read_at_once_or_one_by_one_agree() -> None:
    """The usual request (each name once) is read by lookups; any request, one header at a
    time: both give the same answer, on random header lists."""
    names = [
        *(b"host accept user-agent content-length content-type mcp-session-id baggage".split()),
        *(b"mcp-protocol-version tracecard-run traceparent tracestate tracecard-role".split()),
        *(b"connection tracecard-verifier tracecard-token keep-alive te x-custom".split()),
    ]
    values = [b"1", b"abc", b" r ", b"12x", b"007", b"close, x-custom", b"k" * 32, b"", b"\xe9"]
    rng = random.Random(7)
    for case in range(4000):
        if case % 2:
            raw = [(name, rng.choice(values)) for name in rng.sample(names, rng.randint(0, 12))]
        else:
            raw = [(rng.choice(names), rng.choice(values)) for _ in range(rng.randint(0, 12))]
        assert scan_request_headers(raw, "k" * 32) == _scan_each(raw, "k" * 32), raw


def test_response_headers_drop_hop_by_hop() -> None:
    raw = ((b"Content-Type", b"text/event-stream"), (b"Transfer-Encoding", b"chunked"))
    assert response_headers(raw) == [(b"Content-Type", b"text/event-stream")]


@pytest.mark.parametrize(
    ("baggage", "run"),
    [
        ("tracecard.run=abc", "abc"),
        ("user=1, tracecard.run = abc ;prop=2", "abc"),
        ("user=1", None),
        (None, None),
    ],
)
def test_baggage(baggage: str | None, run: str | None) -> None:
    assert baggage_run(baggage) == run


def test_recorded_spans_reach_the_processors_like_sdk_spans() -> None:
    """The recorder's hand-built spans: on_start, then one ReadableSpan with what was set."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind, StatusCode

    from tracecard.server.recording.recorder import Exchange, Recorder
    from tracecard.server.runs.registry import RunInfo
    from tracecard.server.settings import RecordingSettings

    started: list[str] = []

    class Starts(SimpleSpanProcessor):
        def on_start(self, span, parent_context=None):  # type: ignore[no-untyped-def]
            started.append(span.attributes["tracecard.run.id"])

    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(Starts(exporter))
    recorder = Recorder(provider.get_tracer("t"), RecordingSettings())
    run = RunInfo(id="r1", trace_id="ab" * 16, root_span_id="cd" * 8)
    exchange = Exchange(run=run, upstream="tools")
    message = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"token": "s3cret", "text": "hi"}},
    }
    pending = recorder.start(message, exchange)
    recorder.note(pending, {"method": "notifications/progress", "params": {"progress": 1}})
    recorder.finish(pending, {"jsonrpc": "2.0", "id": 7, "result": {"isError": True}})
    pending.span.set_attribute("late", "ignored")  # after the end: like the SDK, no effect
    [span] = exporter.get_finished_spans()
    assert started == ["r1"]
    assert span.name == "tools/call echo" and span.kind == SpanKind.CLIENT
    assert span.parent is not None and span.parent.span_id == int("cd" * 8, 16)
    assert span.context.trace_id == int("ab" * 16, 16)
    assert span.attributes["jsonrpc.request.id"] == "7"
    assert "s3cret" not in span.attributes["gen_ai.tool.call.arguments"]
    assert span.attributes["error.type"] == "tool_error" and "late" not in span.attributes
    assert span.status.status_code == StatusCode.ERROR
    assert [e.name for e in span.events] == ["notifications/progress"]
    assert span.end_time is not None and span.end_time >= (span.start_time or 0)
