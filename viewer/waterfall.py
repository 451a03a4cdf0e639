"""The waterfall's rows, rendered in Python: the one loop that runs once per span.

A 5,000-span trace spends most of its Jinja time in per-node overhead for these rows, so they
are written here as one f-string per row, with every value from the store passed through
`html.escape` (autoescaping by hand: span names and error types are hostile input like any
other; the standard library's escape returns plain text, markupsafe's a Markup object per call,
which was a third of this loop's time).

Every row is the same grid (label, duration, start time, bar): the chips live inside the label
cell, so a row with chips has the same bar track as a row without (they used to get a narrower,
shifted track, and bars sat 20-40 px from their time).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape as _escape

from markupsafe import Markup

from tracecard.viewer.rendering import duration
from tracecard.viewer.trace_view import BAR_SCALE, SpanLine

NS_PER_DAY = 86_400 * 10**9


_SPECIAL = re.compile(r"[&<>\"']")


def escape(value: object) -> str:
    """HTML-escaped text (quotes included: values also go into attributes); text with nothing
    to escape (most span names and every hex id) is returned as it is, found by one C search."""
    text = str(value)
    return _escape(text, quote=True) if _SPECIAL.search(text) else text


def clock(ns: int) -> str:
    """The UTC time of day to the millisecond: 22:51:03.120."""
    ms_of_day = (ns % NS_PER_DAY) // 1_000_000
    seconds, ms = divmod(ms_of_day, 1000)
    minutes, second = divmod(seconds, 60)
    return f"{minutes // 60:02d}:{minutes % 60:02d}:{second:02d}.{ms:03d}"


def _chips(line: SpanLine) -> str:
    chips = []
    if line.error:
        chips.append(f'<span class="chip fail" title="error">⚠ {escape(line.error)}</span>')
    if line.source:
        chips.append(
            f'<span class="chip agent" title="the agent\'s own span">{escape(line.source)}</span>'
        )
    if line.reported:
        chips.append(
            '<span class="chip reported" title="reported by the agent, not observed by '
            'tracecard: not used as evidence">agent-reported</span>'
        )
    if line.model_chip is not None:
        chips.append(
            f'<span class="chip model" title="input→output tokens">{escape(line.model_chip)}</span>'
        )
    if line.requested_by is not None:
        target = escape(line.requested_by)
        chips.append(
            f'<a class="chip model" href="#span-{target}" title="the model turn that asked for '
            'this call">asked by the model</a>'
        )
    if line.turn_user is not None:
        user = escape(line.turn_user if len(line.turn_user) <= 120 else line.turn_user[:117] + "…")
        chips.append(f'<span class="chip turn" title="the user message of this turn">{user}</span>')
    if line.version_probe:
        chips.append(
            '<span class="chip probe" title="the client asked server/discover first; the older '
            "server refused it and the client's SDK fell back to initialize: not an error "
            '(MCP 2026-07-28, backward compatibility)">version probe</span>'
        )
    if line.is_notice:
        chips.append(
            '<span class="chip notice" title="tracecard told the upstream that a turn began: '
            'not the agent\'s call, and not a check of the outcome">turn notice</span>'
        )
    elif line.is_probe_traffic:
        chips.append(
            '<span class="chip check" title="the MCP traffic of the check above it (its client\'s '
            'handshake and requests): not the agent\'s, and not a check of its own">'
            "check traffic</span>"
        )
    elif line.role == "verifier":
        chips.append(
            '<span class="chip check" title="an outcome probe tracecard ran, not the agent">'
            "check</span>"
        )
    for component, passed in line.verdicts if line.evidence else ():
        state = "pass" if passed else ("na" if passed is None else "fail")
        name = escape(component)
        chips.append(
            f'<span class="chip {state} ev" title="cited by the {name} evidence">{name}</span>'
        )
    return "".join(chips)


def _label(line: SpanLine) -> str:
    """A row's name: tracecard's checks and turn notices say so, not looking like agent calls."""
    if line.is_notice:
        return f"turn notice: {line.tool}" if line.tool else line.name
    if line.is_probe_traffic:
        return line.name
    if line.role == "verifier":
        return f"check: {line.tool or line.name}"
    return line.name


def _ticks(line: SpanLine, t0: int, scale: float) -> str:
    """A mark on the bar at each event of the span (for the spans read in full)."""
    marks = []
    for at, name in line.events:
        x = (at - t0) * scale
        if not 0 <= x <= BAR_SCALE:
            continue  # after the trace (a score computed later): listed in the detail only
        marks.append(
            f'<line class="evt" x1="{x:.2f}" x2="{x:.2f}" y1="0" y2="10">'
            f"<title>{escape(name)} at {clock(at)}</title></line>"
        )
    return "".join(marks)


def waterfall_rows(run_id: str, lines: Sequence[SpanLine], t0: int = 0, t1: int = 0) -> Markup:
    """One `<li>` per span: a `<details>` whose summary is the row and whose body loads the
    call's detail on first open (htmx; `hx-target`/`hx-swap` are inherited from the list)."""
    base = f"/runs/{escape(run_id)}/spans/"
    scale = BAR_SCALE / (t1 - t0) if t1 > t0 else 0.0
    rows: list[str] = []
    append = rows.append
    for line in lines:
        sid = escape(line.span_id)
        name = escape(line.name)
        label = name if line.role != "verifier" else escape(_label(line))
        # a name the column may cut, or a check's original name: the full name in a title
        title = f' title="{name}"' if len(name) > 40 or label is not name else ""
        has_chips = (
            line.error
            or line.source
            or line.reported
            or line.model_chip is not None
            or line.requested_by is not None
            or line.turn_user is not None
            or line.role == "verifier"
            or line.version_probe
            or line.evidence
        )
        end = line.end_ns
        took = duration(None if end is None else max(0, end - line.start_ns))
        ticks = _ticks(line, t0, scale) if line.events else ""
        append(
            f'<li class="span k-{line.kind}" id="span-{sid}">'
            f'<details hx-get="{base}{sid}" hx-trigger="toggle once">'
            f'<summary><span class="label {line.depth_class}">'
            f'<span class="name"{title}>{label}</span>'
            f'<span class="tags">{_chips(line) if has_chips else ""}</span></span>'
            f'<span class="dur">{took}</span>'
            f'<span class="at">{clock(line.start_ns)}</span>'
            '<svg class="bar" viewBox="0 0 1000 10" preserveAspectRatio="none" aria-hidden="true">'
            f'<rect x="{line.offset:.2f}" y="1" width="{line.width:.2f}" height="8"/>{ticks}'
            "</svg></summary>"
            '<div class="detail">loading…</div></details></li>\n'
        )
    return Markup("".join(rows))
