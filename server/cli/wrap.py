"""`tracecard wrap [--server URL] [--run ID] -- CMD ARGS`: a recording stdio-to-stdio shim.

The agent spawns the shim instead of the server. Two threads copy bytes between the agent and
CMD unchanged and as soon as they arrive; complete lines are handed (never blocking) to a
recorder thread that turns them into spans, which a shipper thread sends to tracecard over
OTLP, spooling them to disk while tracecard is unreachable.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Any

log = logging.getLogger(__name__)

AGENT_TO_SERVER = "agent_to_server"
SERVER_TO_AGENT = "server_to_agent"
Line = tuple[str, bytes, int]  # direction, raw line, time seen (ns)


def _pump(source: int, sink: int, direction: str, lines: queue.Queue[Line | None]) -> None:
    """Copy bytes from `source` to `sink` as they come; queue each complete line first."""
    pending = b""
    while True:
        try:
            chunk = os.read(source, 65536)
        except OSError:
            chunk = b""
        if not chunk:
            break
        # Lines are queued before their bytes are passed on: the answer to a request cannot
        # then be queued (by the other direction's thread) ahead of the request itself, which
        # would leave the call unanswered in the recording.
        pending += chunk
        if b"\n" in pending:
            *complete, pending = pending.split(b"\n")
            now = time.time_ns()
            for line in complete:
                if line.strip():
                    with contextlib.suppress(queue.Full):
                        lines.put_nowait((direction, line, now))
        view = memoryview(chunk)
        while view:
            try:
                written = os.write(sink, view)
            except (BrokenPipeError, OSError):
                return
            view = view[written:]


class WrapRecorder:
    """Pairs requests with responses (by direction and id) and records them as spans."""

    def __init__(self, args: argparse.Namespace, shipper: Any) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

        from tracecard.server.recording.recorder import Exchange, Recorder
        from tracecard.server.recording.wrap_credential import WRAP_MAC, sign
        from tracecard.server.runs.registry import RunInfo, new_span_id, new_trace_id
        from tracecard.server.settings import RecordingSettings
        from tracecard.traces.exporter import readable_to_dict

        ids = self._run_ids(args)
        run_credential = ids[2] if ids else None
        run_id = args.run or ""

        class _ToShipper(SpanExporter):
            def export(self, spans: Any) -> Any:
                from opentelemetry.sdk.trace.export import SpanExportResult

                for span in spans:
                    shipped = readable_to_dict(span)
                    if run_credential is not None:  # the MAC proves tracecard observed it
                        shipped["attributes"][WRAP_MAC] = sign(run_credential, shipped, run_id)
                    shipper.put(shipped)
                return SpanExportResult.SUCCESS

        provider = TracerProvider(
            resource=Resource.create({"service.name": "tracecard-wrap"}), shutdown_on_exit=False
        )
        provider.add_span_processor(SimpleSpanProcessor(_ToShipper()))
        self.provider = provider
        # values are redacted by the server when the spans arrive, under the database's key
        tracer = provider.get_tracer("tracecard.wrap")
        self.recorder = Recorder(tracer, RecordingSettings(), key=None)
        trace_id, root = ids[:2] if ids else (new_trace_id(), new_span_id())
        run = RunInfo(id=args.run or "", trace_id=trace_id, root_span_id=root)
        self.exchange = Exchange(run=run, upstream=args.upstream, transport="pipe")
        self.open: dict[tuple[str, str], Any] = {}

    @staticmethod
    def _run_ids(args: argparse.Namespace) -> tuple[str, str, str] | None:
        """The run's trace and root span (the shim's spans hang under the run's root) and its
        wrap credential (kept in this process only: never in the command's environment)."""
        if not (args.run and args.server):
            return None
        import httpx

        base = f"{args.server.rstrip('/')}/api/runs/{args.run}"
        try:
            with httpx.Client(timeout=2.0, trust_env=False, headers=_auth(args)) as client:
                run = client.get(base).json()
                issued = client.post(f"{base}/wrap-credential").json()
            return str(run["trace_id"]), str(run["root_span_id"]), str(issued["credential"])
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            log.warning(
                "tracecard wrap: no credential for run %s (%s): its spans are stored as "
                "agent-reported and not scored",
                args.run,
                exc,
            )
            return None

    def line(self, direction: str, raw: bytes, seen_ns: int) -> None:
        import orjson

        from tracecard.traces import semconv

        try:
            message = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            span = self.recorder.unparsable(raw, f"not JSON: {exc}", self.exchange, "unparsable")
            span.set_attribute("tracecard.mcp.direction", direction)
            if direction == SERVER_TO_AGENT:
                span.set_attribute(semconv.ERROR_TYPE, semconv.ERR_PROTOCOL)
            span.end()
            return
        for item in message if isinstance(message, list) else [message]:
            if isinstance(item, dict):
                self._message(direction, item, seen_ns)

    def _message(self, direction: str, message: dict[str, Any], seen_ns: int) -> None:
        key_id = str(message.get("id"))
        if "method" in message:
            pending = self.recorder.start(message, self.exchange, start_ns=seen_ns)
            pending.span.set_attribute("tracecard.mcp.direction", direction)
            if "id" in message:
                self.open[(direction, key_id)] = pending
            else:
                self.recorder.finish(pending, None)
            return
        asker = SERVER_TO_AGENT if direction == AGENT_TO_SERVER else AGENT_TO_SERVER
        pending = self.open.pop((asker, key_id), None)
        if pending is not None:
            self.recorder.finish(pending, message)

    def close(self) -> None:
        from tracecard.traces import semconv

        for pending in self.open.values():
            self.recorder.fail(pending, semconv.ERR_UNAVAILABLE, "no answer before the exit")
        self.open.clear()
        self.provider.shutdown()


def _auth(args: argparse.Namespace) -> dict[str, str]:
    """The server's API token as a header, when it needs one."""
    return {"Tracecard-Token": args.token} if args.token else {}


def _record(args: argparse.Namespace, lines: queue.Queue[Line | None]) -> None:
    """The recorder thread: everything heavy is imported here, off the agent's path."""
    from pathlib import Path

    from tracecard.server.stdio.shipping import Shipper, default_spool
    from tracecard.traces.spool import Spool

    spool = Spool(Path(args.spool) if args.spool else default_spool())
    shipper = Shipper(args.server, spool, {"service.name": "tracecard-wrap"}, _auth(args))
    shipper.start()
    recorder = WrapRecorder(args, shipper)
    try:
        while (item := lines.get()) is not None:
            try:
                recorder.line(*item)
            except Exception:  # a recording bug must never stop the shim
                log.exception("could not record a message")
    finally:
        recorder.close()
        shipper.close()


def _wrap(args: argparse.Namespace) -> int:
    command: list[str] = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print("tracecard wrap: give the server command after --", file=sys.stderr)
        return 2
    try:
        child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    except OSError as exc:
        print(f"tracecard wrap: cannot start {command[0]!r}: {exc.strerror}", file=sys.stderr)
        return 127
    assert child.stdin is not None and child.stdout is not None
    lines: queue.Queue[Line | None] = queue.Queue(maxsize=100_000)
    recorder = threading.Thread(target=_record, args=(args, lines), name="tracecard-record")
    recorder.start()
    to_server = threading.Thread(
        target=_to_server, args=(child, lines), name="tracecard-in", daemon=True
    )
    to_agent = threading.Thread(
        target=_pump,
        args=(child.stdout.fileno(), sys.stdout.fileno(), SERVER_TO_AGENT, lines),
        name="tracecard-out",
        daemon=True,
    )
    to_server.start()
    to_agent.start()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: child.send_signal(signum))
    code = child.wait()
    to_agent.join(5)
    lines.put(None)
    recorder.join(args.flush_timeout)
    return code


def _to_server(child: subprocess.Popen[bytes], lines: queue.Queue[Line | None]) -> None:
    assert child.stdin is not None
    _pump(sys.stdin.fileno(), child.stdin.fileno(), AGENT_TO_SERVER, lines)
    with contextlib.suppress(OSError):
        child.stdin.close()  # the agent closed its end: the server sees EOF


def register(sub: Any) -> None:
    """Add `tracecard wrap`."""
    wrap = sub.add_parser(
        "wrap",
        help="run a stdio MCP server command, recording every message",
        description="Stdio-to-stdio shim: put `tracecard wrap --` in front of a server command "
        "in an agent's MCP config. Bytes pass through unchanged; each message becomes a span "
        "shipped to the tracecard server over OTLP (spooled while it is unreachable).",
    )
    wrap.add_argument(
        "--server",
        default=os.environ.get("TRACECARD_SERVER", "http://127.0.0.1:7800"),
        help="tracecard URL (default $TRACECARD_SERVER or http://127.0.0.1:7800)",
    )
    wrap.add_argument("--run", default=os.environ.get("TRACECARD_RUN"), help="run id to join")
    wrap.add_argument("--upstream", default="wrapped", help="upstream name on the spans")
    wrap.add_argument(
        "--token",
        default=os.environ.get("TRACECARD_API_TOKEN"),
        help="the server's API token, when it has one (default $TRACECARD_API_TOKEN)",
    )
    wrap.add_argument("--spool", default=None, help="spool file (default ~/.cache/tracecard/...)")
    wrap.add_argument(
        "--flush-timeout", type=float, default=5.0, help="seconds to ship spans at exit"
    )
    wrap.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS")
    wrap.set_defaults(handler=_wrap)
