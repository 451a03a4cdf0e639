"""What OTLP decoding yields: spans ready for the store, what was rejected, and the errors."""

from __future__ import annotations

from dataclasses import dataclass, field

from tracecard.traces.store import SpanDict

KIND_NAMES = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}


class OtlpDecodeError(ValueError):
    """The body is not an `ExportTraceServiceRequest` in the declared encoding."""


class OtlpTooManySpans(ValueError):
    """The request carries more spans than one request may (answered 413)."""

    def __init__(self, count: int, limit: int) -> None:
        super().__init__(
            f"the request carries {count} spans, over the limit of {limit} per request: send "
            "smaller batches (the OTel SDK's BatchSpanProcessor max_export_batch_size) or raise "
            "`otlp_max_spans` (TRACECARD_OTLP_MAX_SPANS)"
        )
        self.count = count
        self.limit = limit


@dataclass
class DecodedBatch:
    """Spans ready for the store, plus what was rejected and why."""

    spans: list[SpanDict] = field(default_factory=list)
    rejected: int = 0
    reasons: list[str] = field(default_factory=list)

    def reject(self, reason: str) -> None:
        self.rejected += 1
        if len(self.reasons) < 5 and reason not in self.reasons:
            self.reasons.append(reason)

    @property
    def error_message(self) -> str:
        return "; ".join(self.reasons)
