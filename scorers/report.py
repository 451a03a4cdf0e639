"""A CI report in GitHub-flavoured Markdown: for `$GITHUB_STEP_SUMMARY` and a pull-request
comment (the scorecard's statistics, the gate's checks, regressions against a baseline, links
to the runs). It starts with a marker a bot can find to update its comment instead of adding one.
"""

from __future__ import annotations

from .compare import Comparison
from .gates import GateResult
from .scorecard import Scorecard
from .writers import largest_k, run_url, statistic_cell
from .writers import md_text as _md

__all__ = ["MARKER_PREFIX", "github_report", "report_marker"]

MARKER_PREFIX = "<!-- tracecard-report"
MAX_FAILING_RUNS = 3  # per task x component in the report; the viewer has the rest


def report_marker(card: Scorecard) -> str:
    """The comment's marker: one per suite and configuration, the same on every rerun."""
    config = str(card.experiment.config.get("name") or card.experiment.id)
    return f"{MARKER_PREFIX} suite={card.suite.name} config={config} -->"


def _gate_lines(result: GateResult) -> list[str]:
    verdict = "passed" if result.passed else "**failed**"
    lines = [f"#### Gate {verdict}", "", "| | check | measured |", "|---|---|---|"]
    for check in result.checks:
        mark = "✅" if check.passed else "❌"
        if check.measured is None:
            measured = "–"
        elif check.kind in ("flag", "required"):  # counts
            measured = str(int(check.measured))
        else:
            measured = (
                f"{check.measured:+.2f}" if check.kind == "no_regress" else f"{check.measured:.2f}"
            )
        lines.append(f"| {mark} | {_md(check.message)} | {measured} |")
    return lines


def _regression_lines(comparison: Comparison, baseline: str, base: str) -> list[str]:
    interval = comparison.interval
    said = {"A better": f"{baseline} is better", "B better": "better than the baseline"}
    verdict = said.get(comparison.verdict, "undecided")
    lines = [f"#### Against {_md(baseline)} ({comparison.component}): {verdict}", ""]
    if interval is not None:
        lines.append(
            f"Mean per-task difference {interval.mean:+.2f}, 95% interval "
            f"[{interval.low:+.2f}, {interval.high:+.2f}] over {interval.n} tasks. "
            f"[Side by side]({base}/compare/experiments?a={comparison.a_id}&b={comparison.b_id})"
        )
        lines.append("")
    regressed = [t for t in comparison.tasks if t.cls == "regressed"]
    if not regressed:
        return [*lines, "No task regressed."]
    lines += [f"| task | {_md(baseline)} | this | change |", "|---|---|---|---|"]
    for task in regressed:
        lines.append(
            f"| {_md(task.task_id)} | {task.a or 0.0:.2f} | {task.b or 0.0:.2f} | "
            f"{task.difference or 0.0:+.2f} |"
        )
    return lines


def _failing_lines(card: Scorecard, base: str) -> list[str]:
    rows = []
    for task in card.tasks:
        for stats in task.components:
            if not stats.evaluated or stats.passes == stats.evaluated:
                continue
            failing = [
                r
                for r in card.runs
                if r.task_id == task.task_id
                and any(s.component == stats.component and s.passed is False for s in r.components)
            ]
            links = ", ".join(
                f"[{r.run_id[:8]}]({run_url(r.run_id, base)})" for r in failing[:MAX_FAILING_RUNS]
            )
            more = f" +{len(failing) - MAX_FAILING_RUNS}" if len(failing) > MAX_FAILING_RUNS else ""
            rows.append(
                f"| {_md(task.task_id)} | {_md(stats.component)} | "
                f"{stats.pass_rate or 0.0:.2f} {stats.passes}/{stats.evaluated} | {links}{more} |"
            )
    if not rows:
        return ["Every evaluated run passed."]
    return ["| task | component | pass_rate | failing runs |", "|---|---|---|---|", *rows]


def github_report(
    card: Scorecard,
    base_url: str,
    gate_result: GateResult | None = None,
    comparison: Comparison | None = None,
    baseline_name: str | None = None,
) -> str:
    """The report: marker, headline, gate checks, regressions, statistics, failing runs, flags."""
    base = base_url.rstrip("/")
    config = str(card.experiment.config.get("name") or card.experiment.id)
    experiment = f"{base}/experiments/{card.experiment.id}"
    k = largest_k(card)
    lines = [
        report_marker(card),
        f"### tracecard: {_md(card.suite.name)} · {_md(config)}",
        "",
        f"[Experiment `{card.experiment.id}`]({experiment}) · suite version "
        f"`{card.suite.version[:12]}` · {len(card.runs)} runs · "
        f"[scorecard.json]({base}/api/experiments/{card.experiment.id}/scorecard.json)",
        "",
    ]
    if gate_result is not None:
        lines += [*_gate_lines(gate_result), ""]
    if comparison is not None:
        lines += [*_regression_lines(comparison, baseline_name or comparison.a_id, base), ""]
    lines += [
        "#### Statistics (mean over tasks, 95% interval)",
        "",
        f"| component | pass_rate | mean | pass^{k} | flip |",
        "|---|---|---|---|---|",
    ]
    for s in card.components:
        lines.append(
            f"| {_md(s.component)} | {statistic_cell(s.pass_rate)} | {statistic_cell(s.mean)} | "
            f"{statistic_cell(s.pass_hat_k.get(k))} | {statistic_cell(s.flip)} |"
        )
    lines += ["", "#### Failing runs", "", *_failing_lines(card, base), ""]
    flags = ", ".join(f"{_md(f)} ×{n}" for f, n in card.flags.items() if n) or "none"
    lines += [f"Flags: {flags}."]
    return "\n".join(lines) + "\n"
