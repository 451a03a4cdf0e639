"""The waterfall's rows, rendered in Python: the one loop that runs once per span.

A 5,000-span trace spends most of its Jinja time in per-node overhead for these rows, so they
are written here as one f-string per row, with every value from the store passed through
`escape` (autoescaping by hand: span names and error types are hostile input like any other).
"""

from __future__ import annotations

from markupsafe import Markup, escape

from tracecard.viewer.rendering import duration
from tracecard.viewer.trace_view import SpanLine


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
    if line.role == "verifier":
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
    """A row's name: tracecard's checks say so instead of looking like the agent's calls."""
    if line.role == "verifier":
        return f"check: {line.tool or line.name}"
    return line.name


def waterfall_rows(run_id: str, lines: list[SpanLine]) -> Markup:
    """One `<li>` per span: a `<details>` whose summary is the row and whose body loads the
    call's detail on first open (htmx; `hx-target`/`hx-swap` are inherited from the list)."""
    base = f"/runs/{escape(run_id)}/spans/"
    rows = []
    for line in lines:
        sid = escape(line.span_id)
        rows.append(
            f'<li class="span k-{line.kind}" id="span-{sid}">'
            f'<details hx-get="{base}{sid}" hx-trigger="toggle once">'
            f'<summary><span class="name {line.depth_class}" title="{escape(line.name)}">'
            f"{escape(_label(line))}</span>"
            f'<span class="tags">{_chips(line)}</span>'
            f'<span class="dur">{escape(duration(line.duration_ns))}</span>'
            '<svg class="bar" viewBox="0 0 1000 10" preserveAspectRatio="none" '
            f'aria-hidden="true">{line.bar}</svg></summary>'
            '<div class="detail">loading…</div></details></li>\n'
        )
    return Markup("".join(rows))
