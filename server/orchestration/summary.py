"""What `tracecard run` and `tracecard demo` print: a progress bar while runs go, then a table
per task and component, the runs that failed to run, and the comparison verdict."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from tracecard.scorers.registry import component_key, component_names

if TYPE_CHECKING:  # (annotations only: `tracecard compare` prints a table without a client)
    from tracecard.client import RunHandle
    from tracecard.server.orchestration.orchestrator import RunOutcome

__all__ = ["RunProgress", "comparison_table", "failures_table", "scorecard_table", "status_line"]


class RunProgress:
    """A rich progress bar fed by the orchestrator's listener."""

    def __init__(self, console: Console, total: int, label: str, enabled: bool = True) -> None:
        self.statuses: Counter[str] = Counter()
        self.label = label
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[statuses]}"),
            console=console,
            disable=not enabled,
            transient=False,
        )
        self.task: TaskID = self.progress.add_task(label, total=total, statuses="")

    def __enter__(self) -> RunProgress:
        self.progress.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.progress.stop()

    def __call__(self, event: str, run: RunHandle, outcome: RunOutcome | None) -> None:
        """The orchestrator's listener: advance on each ended run."""
        if event != "ended" or outcome is None:
            return
        self.statuses[outcome.status] += 1
        shown = " ".join(f"{name} {count}" for name, count in sorted(self.statuses.items()))
        self.progress.update(self.task, advance=1, statuses=shown)


def _cell(stats: dict[str, Any] | None) -> str:
    """`pass_rate passes/evaluated` (⇄ a flip); `mean 0.71` for a value without pass/fail."""
    if stats is None or stats.get("n", 0) == 0:
        return "–"
    mean = stats.get("mean")
    if not stats.get("evaluated"):  # a value without pass/fail (the composite), or none
        return "n/e" if mean is None else f"m {mean:.2f}"
    flip = "⇄" if stats.get("flip") else ""
    return f"{stats['pass_rate']:.2f} {stats['passes']}/{stats['evaluated']}{flip}"


HEADERS = {
    "invocation": "invoc.",
    "completion": "compl.",
    "efficiency": "effic.",
    "composite": "comp.",
}
LEGEND = "invoc. invocation · compl. completion · effic. efficiency · comp. composite"


def _statistic(stat: dict[str, Any] | None) -> tuple[str, str]:
    """A statistic's value, and its 95% interval on its own line ("n/a" below 2 tasks)."""
    if not stat or stat.get("value") is None:
        return "–", ""
    low, high = stat.get("low"), stat.get("high")
    if low is None or high is None:
        return f"{stat['value']:.2f}", "n/a"
    return f"{stat['value']:.2f}", f"{low:.2f}–{high:.2f}"


def largest_k(card: dict[str, Any]) -> int:
    """The k the tables report pass^k at (as scorers.writers.largest_k)."""
    return max(
        (max((int(k) for k in c.get("pass_hat_k") or {}), default=0) for c in card["components"]),
        default=0,
    )


def scorecard_table(card: dict[str, Any], title: str | None = None) -> Table:
    """Rows: tasks, then each statistic's mean over tasks; columns: components. A task's cell
    is its `pass_rate passes/evaluated` (the headline, as in the viewer and every export);
    ⇄ marks a task whose trials both passed and failed (a flip); n/e: not evaluated; `m 0.71`
    the mean of a component without pass/fail. Narrow enough for 80 columns (a CI log): short
    headers with a legend, no vertical rules, each interval on a row of its own."""
    experiment = card["experiment"]
    name = experiment["config"].get("name", experiment["id"])
    trials = max((t["runs"] for t in card["tasks"]), default=0)
    table = Table(
        title=title
        or f"{name} · {card['suite']['name']} · experiment {experiment['id']} · {trials} trials",
        caption="pass_rate passes/evaluated per task · ⇄ trials disagree\n"
        "n/e not evaluated · m mean (no pass/fail)\n" + LEGEND,
        box=box.SIMPLE_HEAD,
        padding=(0, 0),
        pad_edge=False,
        show_edge=False,
    )
    # Every registered component (a third-party one too), plus any the card scored that is not.
    components = sorted(
        set(component_names()) | {c["component"] for c in card["components"]}, key=component_key
    )
    table.add_column("task", overflow="fold")
    for component in components:
        table.add_column(HEADERS.get(component, component), justify="right", no_wrap=True)
    for task in card["tasks"]:
        by_component = {c["component"]: c for c in task["components"]}
        table.add_row(task["task_id"], *(_cell(by_component.get(c)) for c in components))
    summaries = {c["component"]: c for c in card["components"]}
    k = largest_k(card)
    table.add_section()
    for label, key in (("pass_rate", "pass_rate"), ("mean", "mean")):
        rows = [_statistic((summaries.get(c) or {}).get(key)) for c in components]
        title_row = f"{label} ({len(card['runs'])} runs)" if key == "pass_rate" else label
        table.add_row(title_row, *(r[0] for r in rows), style="bold" if key == "pass_rate" else "")
        table.add_row("95% CI", *(r[1] for r in rows))
    if k > 1:
        rows = [
            _statistic(((summaries.get(c) or {}).get("pass_hat_k") or {}).get(str(k)))
            for c in components
        ]
        table.add_row(f"pass^{k}", *(r[0] for r in rows))
    return table


def status_line(card: dict[str, Any]) -> str:
    """Run statuses and flags in one line."""
    statuses = Counter(r["status"] for r in card["runs"])
    parts = [f"{count} {status}" for status, count in sorted(statuses.items())]
    flags = {k: v for k, v in card.get("flags", {}).items() if v}
    flag_text = ", ".join(f"{k} ×{v}" for k, v in sorted(flags.items())) or "none"
    return f"runs: {', '.join(parts)} · flags: {flag_text}"


def failures_table(outcomes: Sequence[RunOutcome], limit: int = 20) -> Table | None:
    """Runs that did not end on their own (errored, timed out, aborted), with the reason."""
    failed = [o for o in outcomes if o.status != "finished" or o.finish_error]
    if not failed:
        return None
    table = Table(title="runs that did not finish on their own")
    for column in ("run", "task", "trial", "status", "reason"):
        table.add_column(column, overflow="fold")
    for outcome in failed[:limit]:
        lines = (outcome.finish_error or outcome.error or "").splitlines()
        shown = lines if len(lines) <= 4 else [*lines[:1], "…", *lines[-2:]]
        first_lines = "\n".join(shown)
        table.add_row(
            outcome.run.id,
            outcome.run.task_id,
            str(outcome.run.trial),
            outcome.status,
            first_lines,
        )
    if len(failed) > limit:
        table.caption = f"… and {len(failed) - limit} more"
    return table


def comparison_table(result: dict[str, Any], name_a: str, name_b: str) -> Table:
    """Per-task paired classes of B against A, in the comparison's order (regressions first)."""
    table = Table(title=f"{result['component']}: {name_b} (B) against {name_a} (A)")
    for column in ("task", "A", "B", "B − A", "class"):
        table.add_column(column, justify="left" if column in ("task", "class") else "right")

    def num(value: float | None, signed: bool = False) -> str:
        return "–" if value is None else (f"{value:+.2f}" if signed else f"{value:.2f}")

    for task in result["tasks"]:
        table.add_row(
            task["task_id"],
            num(task["a"]),
            num(task["b"]),
            num(task["difference"], signed=True),
            task["class"],
        )
    return table


def verdict_line(result: dict[str, Any], name_a: str, name_b: str) -> str:
    """The comparison's verdict in words, with the interval of the mean difference."""
    verdict = result["verdict"]
    words = {"A better": f"{name_a} is better", "B better": f"{name_b} is better"}
    interval = result.get("interval")
    detail = ""
    if interval:
        detail = (
            f" (mean difference {name_b} − {name_a} {interval['mean']:+.3f}, "
            f"95% CI [{interval['low']:+.3f}, {interval['high']:+.3f}] over {interval['n']} tasks)"
        )
    said = words.get(verdict, "undecided: the data cannot separate them")
    return f"verdict on {result['component']}: {said}{detail} — {result.get('reason', '')}"
