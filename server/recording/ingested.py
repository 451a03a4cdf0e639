"""What the server does to spans it did not record itself (OTLP ingest, `tracecard wrap`).

Nothing an agent sends may pass for the server's own observations:
- a span that looks like tracecard's recording (an MCP method, a tool execution, any
  `tracecard.*` attribute but the run it names) is evidence only with `tracecard wrap`'s valid
  MAC for the run it joined (`wrap_credential`); any other such span is stored and shown as the
  agent's own span: no `tracecard.role` (only tracecard gives one; a claimed role is kept as
  `role.header`) and `tracecard.evidence = agent_reported`, and the scorers never read it;
- a signed span that says `tracecard.role = verifier` is stored as the agent's, the claim kept
  as `role.header`;
- ingested attributes are redacted by the same rules as recorded ones (`redaction.Redactor`).
"""

from __future__ import annotations

from typing import Any

from tracecard.server.recording.redaction import Redactor
from tracecard.server.recording.wrap_credential import WRAP_MAC, verify
from tracecard.traces import semconv
from tracecard.traces.store import SpanDict

__all__ = ["claims_observation", "distrust", "redact", "take_macs"]

# What an agent may say about its own span: which run it belongs to (attribute or baggage).
_AGENT_MAY_SET = frozenset({semconv.RUN_ID, "tracecard.run"})


def claims_observation(attributes: dict[str, Any]) -> bool:
    """The span looks like something tracecard recorded (an MCP message, any `tracecard.*`
    attribute but the run it names: a role, upstream, probe, turn, block...) or an agent's
    own tool execution."""
    if semconv.MCP_METHOD_NAME in attributes:
        return True
    if attributes.get(semconv.GEN_AI_OPERATION_NAME) == semconv.OP_EXECUTE_TOOL:
        return True
    for key in attributes:  # a plain loop: this runs for every ingested span
        if key.startswith("tracecard.") and key not in _AGENT_MAY_SET:
            return True
    return False


def take_macs(spans: list[SpanDict]) -> list[Any]:
    """Remove each span's wrap MAC (it is never stored); the MACs, by position."""
    macs: list[Any] = []
    for span in spans:
        attributes = span.get("attributes")
        macs.append(attributes.pop(WRAP_MAC, None) if isinstance(attributes, dict) else None)
    return macs


def distrust(spans: list[SpanDict], macs: list[Any], wrap_key: bytes) -> None:
    """Demote verifier claims; mark what tracecard did not observe (in place, after joining)."""
    credentials: dict[str, str] = {}
    for span, mac in zip(spans, macs, strict=True):
        attributes = span.get("attributes")
        if not isinstance(attributes, dict):
            continue
        attributes.pop(semconv.EVIDENCE, None)  # only the server says what is evidence
        if not claims_observation(attributes):
            continue
        observed = verify(wrap_key, span, str(span.get("run_id") or ""), mac, credentials)
        role = attributes.get(semconv.ROLE) if observed else attributes.pop(semconv.ROLE, None)
        if role is not None and (not observed or role != semconv.ROLE_AGENT):
            attributes[semconv.ROLE_HEADER] = str(role)[:64]  # the claim, kept as such
            if observed:
                attributes[semconv.ROLE] = semconv.ROLE_AGENT
        if not observed:
            attributes[semconv.EVIDENCE] = semconv.EVIDENCE_AGENT_REPORTED


def redact(spans: list[SpanDict], redactor: Redactor) -> None:
    """Redact ingested spans' attributes and event attributes (in place)."""
    if not redactor.values:
        return
    for span in spans:
        attributes = span.get("attributes")
        if isinstance(attributes, dict):
            span["attributes"] = redactor.attributes(attributes)
        for event in span.get("events") or []:
            if isinstance(event, dict) and isinstance(event.get("attributes"), dict):
                event["attributes"] = redactor.attributes(event["attributes"])
