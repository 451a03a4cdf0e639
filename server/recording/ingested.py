"""What the server does to spans it did not record itself (OTLP ingest, `tracecard wrap`).

Nothing an agent sends may pass for the server's own probe traffic: an ingested span that says
`tracecard.role = verifier` is stored as the agent's, with the claim kept as `role.header`.
"""

from __future__ import annotations

from tracecard.traces import semconv
from tracecard.traces.store import SpanDict

__all__ = ["distrust"]


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
