"""The trials comparison's aligned rows, rendered in Python: the loop that runs once per call.

10 trials x 100 aligned calls are 1,000 cells; as a Jinja loop their per-node overhead was the
largest part of the page, so (as for the trace page's waterfall) each cell is one f-string with
every value from the store passed through `escape` (tool names, arguments and results are
hostile input like any other).
"""

from __future__ import annotations

from markupsafe import Markup, escape

from tracecard.viewer.compare_runs import Call, RunsComparison
from tracecard.viewer.rendering import duration

GAP_CELL = '<td class="gap" title="no such call in this trial">—</td>'


def _arguments(call: Call) -> str:
    items = []
    for argument in call.shown:
        text = f"{escape(argument.name)}: {escape(argument.text)}"
        marked = f'<mark class="differs">{text}</mark>' if argument.differs else text
        items.append(f"<li>{marked}</li>")
    return "".join(items)


def _last_result(last: Call | None, trace: str) -> str:
    """A step of repeats: its last call's result, when it reads otherwise than the first's."""
    if last is None:
        return ""
    return (
        f'<div class="result small muted"><a href="{trace}#span-{escape(last.span_id)}">last</a>'
        f": {escape(last.result_preview)}</div>"
    )


def _cell(call: Call, trace: str, times: int = 1, last: Call | None = None) -> str:
    turn = (
        ""
        if call.turn is None
        else f' <span class="chip turn" title="made during this user turn">turn {call.turn}</span>'
    )
    repeat = (
        f' <span class="chip repeat" title="the same call {times} times in a row">×{times}</span>'
        if times > 1
        else ""
    )
    error = f'<span class="chip fail">⚠ {escape(call.error)}</span>' if call.error else ""
    result = (
        f'<div class="result small muted">{escape(call.result_preview)}</div>'
        if call.result_preview
        else ""
    )
    return (
        f'<td class="call{" err" if call.error else ""}">'
        f'<a class="tool{" differs" if call.tool_differs else ""}" '
        f'href="{trace}#span-{escape(call.span_id)}">{escape(call.tool)}</a>{repeat}{turn} '
        f'<span class="muted small">{escape(duration(call.duration_ns))}</span>'
        f'<ul class="args">{_arguments(call)}</ul>{error}{result}{_last_result(last, trace)}</td>'
    )


def aligned_rows(view: RunsComparison) -> Markup:
    """One `<tr>` per aligned step: its number (and the first-divergence marker), then each
    trial's call, or a gap cell where the trial made no such call."""
    traces = [f"/runs/{escape(column.run.id)}" for column in view.columns]
    rows = []
    for index, row in enumerate(view.rows):
        first = index == view.first_divergence
        classes = ("diverges" if row.diverges else "same") + (" first-divergence" if first else "")
        marker = (
            '<span class="marker" title="first divergence">◆ first divergence</span>'
            if first
            else ""
        )
        cells = "".join(
            GAP_CELL if call is None else _cell(call, traces[t], row.repeats[t], row.last[t])
            for t, call in enumerate(row.cells)
        )
        anchor = ' id="divergence"' if first else ""
        rows.append(
            f'<tr class="{classes}"{anchor}><th scope="row">{index + 1}{marker}</th>{cells}</tr>\n'
        )
    return Markup("".join(rows))
