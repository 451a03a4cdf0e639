"""Reading one scorecard's numbers from the four places a person reads them (the CLI table, the
experiment page, the scorecard JSON, the Markdown export), each into the same shape:
{task or summary row: {component: "0.73" | None}} (#19, one number, one meaning)."""

from __future__ import annotations

import re
from typing import Any

TASKS = {
    "count-urgent",
    "assign-printer",
    "close-vpn",
    "escalate-globex",
    "spam-keep-records",
    "reopen-laptop",
    "sla-meaning",
    "vpn-port",
    "inactive-support",
    "new-ticket-battery",
}
ORDER = ("invocation", "completion", "outcome", "safety", "efficiency", "composite")


def cli_section(out: str, name: str) -> list[str]:
    start = out.index(f"{name} · helpdesk · experiment")
    lines = out[start:].splitlines()
    return lines[: next(i for i, line in enumerate(lines) if line.startswith("pass^"))]


_CELL = re.compile(r"(\d\.\d\d) \d+/\d+|n/e|m \d\.\d\d|–")


def numbers_in_the_cli(out: str, name: str) -> dict[str, dict[str, str | None]]:
    lines = cli_section(out, name)
    found: dict[str, dict[str, str | None]] = {}
    for task in TASKS:
        row = next(line for line in lines if line.startswith(task + " "))
        found[task] = dict(zip(ORDER, (m.group(1) for m in _CELL.finditer(row)), strict=True))
    rate = next(line for line in lines if line.startswith("pass_rate"))
    found["pass_rate"] = dict(
        zip(ORDER, [v if v != "–" else None for v in rate.split()[3:]], strict=True)
    )
    mean = next(line for line in lines if line.startswith("mean"))
    found["mean"] = dict(zip(ORDER, mean.split()[1:], strict=True))
    return found


def numbers_in_the_page(html: str) -> dict[str, dict[str, str | None]]:
    found: dict[str, dict[str, str | None]] = {}
    body = html[html.index("<tbody>") : html.index("</tbody>")]
    for row in body.split("<tr>")[1:]:
        task = re.search(r"task=([\w-]+)", row).group(1)  # type: ignore[union-attr]
        cells = re.findall(r'<td class="[^"]*" data-component="(\w+)">(.*?)</td>', row, re.S)
        found[task] = {c: first(r'data-stat="pass_rate"[^>]*>([\d.]+)<', text) for c, text in cells}
    foot = html[html.index("<tfoot>") : html.index("</tfoot>")]
    for stat in ("pass_rate", "mean"):
        row = foot[foot.index(f'data-summary="{stat}"') :].split("</tr>")[0]
        cells = re.findall(r'<td data-component="(\w+)">(.*?)</td>', row, re.S)
        found[stat] = {c: first(rf'data-stat="{stat}">([\d.]+)<', text) for c, text in cells}
    return found


def first(pattern: str, text: str) -> str | None:
    match = re.search(pattern, text)
    return match.group(1) if match else None


def numbers_in_the_json(card: dict[str, Any]) -> dict[str, dict[str, str | None]]:
    def two(value: float | None) -> str | None:
        return None if value is None else f"{value:.2f}"

    found: dict[str, dict[str, str | None]] = {
        t["task_id"]: {c["component"]: two(c["pass_rate"]) for c in t["components"]}
        for t in card["tasks"]
    }
    for stat in ("pass_rate", "mean"):
        found[stat] = {c["component"]: two(c[stat]["value"]) for c in card["components"]}
    return found


def numbers_in_the_markdown(markdown: str) -> dict[str, dict[str, str | None]]:
    found: dict[str, dict[str, str | None]] = {"pass_rate": {}, "mean": {}}
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] in ORDER and len(cells) == 7:  # the summary: component, pass_rate, mean, ...
            for stat, cell in (("pass_rate", cells[1]), ("mean", cells[2])):
                found[stat][cells[0]] = None if cell == "–" else cell.split()[0]
        elif cells[0] in TASKS:
            found[cells[0]] = {
                c: (m.group(1) if (m := _CELL.match(cell)) else None)
                for c, cell in zip(ORDER, cells[1:], strict=True)
            }
    return found
