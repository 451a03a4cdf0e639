"""Charts drawn on the server as inline SVG: no chart library, nothing fetched, readable
without JavaScript. Every label and value comes from the store, so every text is escaped."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from markupsafe import Markup, escape

LABEL_W: Final = 170  # px for the row labels
BAR_W: Final = 360  # px for a rate of 100%
BAR_H: Final = 12
GAP: Final = 10  # between groups


@dataclass(frozen=True)
class Series:
    """One side of the chart: its name, its CSS class and one value per row (None: no bar)."""

    name: str
    css: str
    values: Sequence[float | None]


def _percent(value: float) -> str:
    return f"{value * 100:.0f}%"


def rate_bars(title: str, labels: Sequence[str], series: Sequence[Series]) -> Markup:
    """Grouped horizontal bars: per label, one bar per series for a rate in [0, 1], its value
    written after it ("not evaluated" where a series has none). One `<rect class="bar">` per
    drawn bar; the legend names the series."""
    group = len(series) * (BAR_H + 2) + GAP
    height = 24 + group * len(labels)
    width = LABEL_W + BAR_W + 110
    parts = [
        f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" aria-labelledby="chart-title">'
        f'<title id="chart-title">{escape(title)}</title>'
    ]
    for tick in (0, 0.5, 1):  # the axis: 0, 50 and 100%
        x = LABEL_W + tick * BAR_W
        parts.append(
            f'<line class="tick" x1="{x:.0f}" x2="{x:.0f}" y1="14" y2="{height}"/>'
            f'<text class="tick" x="{x:.0f}" y="10" text-anchor="middle">{_percent(tick)}</text>'
        )
    for row, label in enumerate(labels):
        top = 20 + row * group
        parts.append(
            f'<text class="label" x="{LABEL_W - 8}" y="{top + group / 2 - GAP / 2 + 3:.0f}" '
            f'text-anchor="end">{escape(label)}</text>'
        )
        for index, side in enumerate(series):
            y = top + index * (BAR_H + 2)
            value = side.values[row]
            name = escape(side.name)
            if value is None:
                parts.append(
                    f'<text class="value muted" x="{LABEL_W + 4}" y="{y + BAR_H - 2}">'
                    f"{name}: not evaluated</text>"
                )
                continue
            bar = max(value * BAR_W, 1.5)  # a 0% bar stays visible as a sliver
            parts.append(
                f'<rect class="bar {escape(side.css)}" x="{LABEL_W}" y="{y}" width="{bar:.1f}" '
                f'height="{BAR_H}"><title>{escape(label)} · {name}: {_percent(value)}</title>'
                "</rect>"
                f'<text class="value" x="{LABEL_W + bar + 5:.1f}" y="{y + BAR_H - 2}">'
                f"{name} {_percent(value)}</text>"
            )
    parts.append("</svg>")
    legend = "".join(
        f'<span class="legend-item"><span class="swatch {escape(s.css)}"></span>{escape(s.name)}'
        "</span>"
        for s in series
    )
    return Markup(
        f'<figure class="chart">{"".join(parts)}<figcaption>{legend}</figcaption></figure>'
    )
