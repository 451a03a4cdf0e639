"""A run's trace for display: the span tree in order with waterfall geometry, errors, the agent's
own spans, and each scorer's evidence attached to the spans it cites."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson
from markupsafe import Markup

from tracecard.traces import semconv as sc
from tracecard.traces.models import ScoreRow

SPAN_ID_PATTERN: Final = re.compile(r"(?<![0-9A-Fa-f])[0-9A-Fa-f]{16}(?![0-9A-Fa-f])")
BAR_SCALE: Final = 1000  # the waterfall's SVG viewBox width
MIN_BAR: Final = 2.0
MAX_DEPTH_CLASS: Final = 12
OUR_SERVICE: Final = "tracecard"


@dataclass(frozen=True)
class EvidenceItem:
    """One piece of a score's evidence (an entry of a top-level list, or a top-level value)."""

    component: str
    scorer: str
    passed: bool | None
    where: str  # e.g. "expected[0]"
    text: str  # compact JSON of the item
    span_ids: tuple[str, ...]


@dataclass
class SpanLine:
    """One row of the waterfall."""

    span_id: str
    parent_span_id: str | None
    name: str
    depth: int
    start_ns: int
    end_ns: int | None
    offset: float
    width: float
    method: str | None
    tool: str | None
    role: str | None
    error: str | None
    source: str | None  # the agent's service name for its own OTLP spans; None for ours
    evidence: list[EvidenceItem] = field(default_factory=list)
    model_chip: str | None = None  # model spans: "in→out tok" (viewer.conversation)
    requested_by: str | None = None  # tool spans: the model span that asked for the call
    turn_user: str | None = None  # turn spans of a multi-turn run: the user message handed out
    reported: bool = False  # `tracecard.evidence = agent_reported`: shown, never evidence
    events: list[tuple[int, str]] = field(default_factory=list)  # (time, name), marked on the bar
    probe_id: str | None = None  # a verifier span: the task's probe it recorded
    version_probe: bool = False  # a client's server/discover refused by an older server

    @property
    def bar(self) -> Markup:
        """The waterfall bar: an SVG rect placed by attributes (the CSP forbids inline style)."""
        return Markup(f'<rect x="{self.offset:.2f}" y="1" width="{self.width:.2f}" height="8"/>')

    @property
    def duration_ns(self) -> int | None:
        """Wall time, None while the span is open."""
        return None if self.end_ns is None else max(0, self.end_ns - self.start_ns)

    @property
    def depth_class(self) -> str:
        """A CSS class for the indent (no inline style: the CSP forbids it)."""
        return f"d{min(self.depth, MAX_DEPTH_CLASS)}"

    @property
    def is_notice(self) -> bool:
        """A turn notice: tracecard told an upstream that a turn began (not a check of state)."""
        return is_turn_notice(self.name, self.role)

    @property
    def is_probe_traffic(self) -> bool:
        """A verifier span that is neither a probe nor a notice: the MCP traffic of a probe's
        client (its handshake, its call as sent, a tools/list), nested under that probe."""
        return self.role == sc.ROLE_VERIFIER and self.probe_id is None and not self.is_notice

    @property
    def kind(self) -> str:
        """ "agent", "model", "notice", "verifier", "error" or "call": how the bar is drawn."""
        if self.error:
            return "error"
        if self.model_chip is not None:
            return "model"
        if self.source:
            return "agent"
        if self.turn_user is not None:
            return "turn"
        if self.is_notice:
            return "notice"
        return "verifier" if self.role == sc.ROLE_VERIFIER else "call"

    @property
    def verdicts(self) -> list[tuple[str, bool | None]]:
        """(component, passed) of each score citing this span, once per component."""
        seen: dict[str, bool | None] = {}
        for item in self.evidence:
            seen.setdefault(item.component, item.passed)
        return list(seen.items())


@dataclass
class TraceView:
    """Everything the trace page draws."""

    lines: list[SpanLine]
    start_ns: int
    end_ns: int
    errors: int
    evidence: dict[str, list[EvidenceItem]]  # by component
    unknown_citations: list[str]  # span ids cited by evidence that are not in this trace

    @property
    def total_ns(self) -> int:
        """The trace's wall time."""
        return max(0, self.end_ns - self.start_ns)


STATUS_WORDS: Final = {sc.STATUS_UNSET: "unset", sc.STATUS_OK: "ok", sc.STATUS_ERROR: "error"}


def status_word(code: Any) -> str:
    """An OTel status code in words (`unset`, `ok`, `error`), not "status 0"."""
    return STATUS_WORDS.get(code, f"code {code}") if isinstance(code, int) else "unset"


def _event_marks(events: Any) -> list[tuple[int, str]]:
    """(time, name) of a span's events, for the ticks on its bar."""
    if not events:
        return []
    return [
        (int(e.get("time_unix_nano") or 0), str(e.get("name") or "event"))
        for e in events
        if isinstance(e, dict)
    ]


def is_turn_notice(name: Any, role: Any) -> bool:
    """Whether a span (by name and `tracecard.role`) is a turn notice (traces/semconv)."""
    return bool(role == sc.ROLE_VERIFIER and name == sc.TURN_NOTICE_SPAN)


def span_error(span: dict[str, Any]) -> str | None:
    """Why a span failed (error.type, else an ERROR status message), or None."""
    attributes = span.get("attributes") or {}
    error = attributes.get(sc.ERROR_TYPE)
    if error:
        return str(error)
    status = span.get("status") or {}
    if status.get("code") == sc.STATUS_ERROR:
        return str(status.get("message") or "error")
    return None


def span_source(span: dict[str, Any]) -> str | None:
    """The emitting service of an agent's own OTLP span; None for tracecard's spans."""
    service = (span.get("resource") or {}).get("service.name")
    return str(service) if service and service != OUR_SERVICE else None


def cited_span_ids(value: Any) -> tuple[str, ...]:
    """Every 16-hex span id mentioned anywhere in `value` (keys, values, nested text)."""
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return tuple(dict.fromkeys(m.lower() for m in SPAN_ID_PATTERN.findall(text)))


def evidence_items(score: ScoreRow) -> list[EvidenceItem]:
    """A score's evidence cut into items: each entry of a top-level list, each other value."""
    items: list[EvidenceItem] = []
    pieces: list[tuple[str, Any]] = []
    for key, value in (score.evidence or {}).items():
        if isinstance(value, list) and value:
            pieces.extend((f"{key}[{i}]", entry) for i, entry in enumerate(value))
        else:
            pieces.append((str(key), value))
    for where, value in pieces:
        text = orjson.dumps(value, default=str).decode()
        items.append(
            EvidenceItem(
                component=score.component,
                scorer=score.scorer,
                passed=score.passed,
                where=where,
                text=text,
                span_ids=cited_span_ids(text),
            )
        )
    return items


def _tree_order(spans: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], int]]:
    """Depth-first order, children by start time; spans whose parent is absent are roots."""
    known = {s["span_id"] for s in spans}
    children: dict[str | None, list[dict[str, Any]]] = defaultdict(list)
    checks: dict[str | None, list[dict[str, Any]]] = defaultdict(list)
    for span in spans:
        parent = span.get("parent_span_id")
        key = parent if parent in known and parent != span["span_id"] else None
        # tracecard's own checks (verifier spans) follow the agent's calls under each parent; a
        # turn notice opens its turn, so it stays in time order
        role = (span.get("attributes") or {}).get(sc.ROLE)
        is_check = role == sc.ROLE_VERIFIER and not is_turn_notice(span.get("name"), role)
        (checks if is_check else children)[key].append(span)
    for key, found in checks.items():
        children[key].extend(_nest_probe_traffic(found, children))
    ordered: list[tuple[dict[str, Any], int]] = []
    visited: set[str] = set()
    stack = [(s, 0) for s in reversed(children[None])]
    while stack:
        span, depth = stack.pop()
        if span["span_id"] in visited:
            continue
        visited.add(span["span_id"])
        ordered.append((span, depth))
        kids = children.get(span["span_id"])
        if kids:
            stack.extend([(c, depth + 1) for c in reversed(kids)])
    # A parent cycle leaves spans unreachable from any root: show them at the top level.
    ordered.extend((s, 0) for s in spans if s["span_id"] not in visited)
    return ordered


def is_probe_traffic(span: dict[str, Any]) -> bool:
    """A verifier span that is the MCP traffic of a probe's client, not a probe or a notice."""
    attributes = span.get("attributes") or {}
    role = attributes.get(sc.ROLE)
    return (
        role == sc.ROLE_VERIFIER
        and sc.PROBE_ID not in attributes
        and not is_turn_notice(span.get("name"), role)
    )


def _nest_probe_traffic(
    found: list[dict[str, Any]], children: dict[str | None, list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """The checks of one parent, with each probe client's traffic (the proxy records it as the
    parent's children) moved under the probe whose time it falls in."""
    probes = [s for s in found if not is_probe_traffic(s)]
    kept = []
    for span in found:
        holder = _holder(span, probes) if is_probe_traffic(span) else None
        if holder is None:
            kept.append(span)
        else:
            children[holder["span_id"]].append(span)
    return kept


def _holder(span: dict[str, Any], probes: list[dict[str, Any]]) -> dict[str, Any] | None:
    start = int(span.get("start_time_unix_nano") or 0)
    for probe in probes:
        end = probe.get("end_time_unix_nano")
        if int(probe.get("start_time_unix_nano") or 0) <= start and (
            end is None or start <= int(end)
        ):
            return probe
    return None


def _turn_user(span: dict[str, Any], attributes: dict[str, Any]) -> str | None:
    # a turn span the server wrote (no role, no probe): its calls are its children
    if sc.TURN_INDEX not in attributes or sc.ROLE in attributes or sc.PROBE_ID in attributes:
        return None
    user = attributes.get(sc.TURN_USER)
    return (
        str(user)
        if isinstance(user, str) and str(span.get("name", "")).startswith("turn ")
        else None
    )


def build_trace(spans: Sequence[dict[str, Any]], scores: Iterable[ScoreRow]) -> TraceView:
    """The waterfall of `spans` (in start-time order) with `scores`' evidence attached."""
    starts = [int(s.get("start_time_unix_nano") or 0) for s in spans]
    ends = [int(s.get("end_time_unix_nano") or s.get("start_time_unix_nano") or 0) for s in spans]
    t0 = min(starts, default=0)
    t1 = max(ends, default=0)
    scale = BAR_SCALE / (t1 - t0) if t1 > t0 else 0.0
    lines: list[SpanLine] = []
    by_id: dict[str, SpanLine] = {}
    last = BAR_SCALE - MIN_BAR
    for span, depth in _tree_order(spans):
        attributes = span.get("attributes") or {}
        start = int(span.get("start_time_unix_nano") or 0)
        end_raw = span.get("end_time_unix_nano")
        end = int(end_raw) if end_raw is not None else None
        # the bar, clamped to the axis: at least MIN_BAR wide, never past its end
        offset = (start - t0) * scale
        if offset > last:
            offset = last
        width = ((end if end is not None else t1) - start) * scale
        if width < MIN_BAR:
            width = MIN_BAR
        if width > BAR_SCALE - offset:
            width = BAR_SCALE - offset
        tool = attributes.get(sc.GEN_AI_TOOL_NAME)
        method = attributes.get(sc.MCP_METHOD_NAME)
        role = attributes.get(sc.ROLE)
        line = SpanLine(
            span_id=span["span_id"],
            parent_span_id=span.get("parent_span_id"),
            name=str(span.get("name") or ""),
            depth=depth,
            start_ns=start,
            end_ns=end,
            offset=offset,
            width=width,
            method=str(method) if method is not None else None,
            tool=str(tool) if tool is not None else None,
            role=str(role) if role is not None else None,
            error=span_error(span),
            source=span_source(span) if span.get("resource") else None,
            turn_user=_turn_user(span, attributes) if sc.TURN_INDEX in attributes else None,
            reported=attributes.get(sc.EVIDENCE) == sc.EVIDENCE_AGENT_REPORTED,
            events=_event_marks(span.get("events")),
            probe_id=str(probe) if (probe := attributes.get(sc.PROBE_ID)) is not None else None,
            version_probe=attributes.get(sc.PROBE) == sc.PROBE_VERSION,
        )
        lines.append(line)
        by_id[line.span_id] = line
    evidence: dict[str, list[EvidenceItem]] = defaultdict(list)
    unknown: list[str] = []
    for score in scores:
        for item in evidence_items(score):
            evidence[score.component].append(item)
            for span_id in item.span_ids:
                target = by_id.get(span_id)
                if target is not None:
                    target.evidence.append(item)
                elif span_id not in unknown:
                    unknown.append(span_id)
    return TraceView(
        lines=lines,
        start_ns=t0,
        end_ns=t1,
        errors=sum(1 for line in lines if line.error),
        evidence=dict(evidence),
        unknown_citations=unknown,
    )


def span_evidence(span_id: str, scores: Iterable[ScoreRow]) -> list[EvidenceItem]:
    """The evidence items, of any score, that cite `span_id`."""
    return [item for score in scores for item in evidence_items(score) if span_id in item.span_ids]
