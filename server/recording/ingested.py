"""What the server does to spans it did not record itself (OTLP ingest, `tracecard wrap`).

Nothing an agent sends may pass for the server's own probe traffic: an ingested span that says
`tracecard.role = verifier` is stored as the agent's, with the claim kept as `role.header`. And
ingested attributes are redacted by the same rules as recorded ones (`redaction.Redactor`).
"""

from __future__ import annotations

from tracecard.server.recording.redaction import Redactor
from tracecard.traces import semconv
from tracecard.traces.store import SpanDict

__all__ = ["distrust", "prepare"]


def distrust(spans: list[SpanDict]) -> None:
    """Demote any ingested verifier claim to agent traffic (in place)."""
    for span in spans:
        attributes = span.get("attributes")
        if not isinstance(attributes, dict):
            continue
        role = attributes.get(semconv.ROLE)
        if role is not None and role != semconv.ROLE_AGENT:
            attributes[semconv.ROLE] = semconv.ROLE_AGENT
            attributes[semconv.ROLE_HEADER] = str(role)[:64]


def prepare(spans: list[SpanDict], redactor: Redactor) -> None:
    """Distrust and redact ingested spans (in place) before they are joined and stored."""
    distrust(spans)
    if not redactor.values:
        return
    for span in spans:
        attributes = span.get("attributes")
        if isinstance(attributes, dict):
            span["attributes"] = redactor.attributes(attributes)
        for event in span.get("events") or []:
            if isinstance(event, dict) and isinstance(event.get("attributes"), dict):
                event["attributes"] = redactor.attributes(event["attributes"])
