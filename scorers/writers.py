"""Scorecard writers (JSON, CSV, Markdown; JUnit XML in `junit`) and the versioned JSON reader.
Every writer names the statistics as `scorers.statistics` does: pass_rate first, mean labelled."""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Callable
from typing import Any

import orjson
from pydantic import ValidationError

from .infra import later_attempts
from .junit import to_junit
from .scorecard import SCORECARD_SCHEMA_VERSION, Scorecard, Statistic, TaskCard

__all__ = [
    "ScorecardFormatError",
    "read_scorecard_json",
    "to_csv",
    "to_json",
    "to_junit",
    "to_markdown",
    "run_url",
]


class ScorecardFormatError(ValueError):
    """Scorecard JSON that cannot be read (bad JSON, unknown schema version, bad shape)."""


def to_json(scorecard: Scorecard, base_url: str | None = None) -> bytes:
    """Scorecard JSON (schema in docs/scorecards.md), indented for diffs; each run with its
    verdict, first failure and viewer URL."""
    document = scorecard.model_dump(mode="json")
    for optional in ("robustness", "infra"):  # only an experiment that had them has them
        if document.get(optional) is None:
            document.pop(optional, None)
    for run, record in zip(document["runs"], scorecard.runs, strict=True):
        run["verdict"] = record.verdict
        run["first_failure"] = record.first_failure()
        run["viewer_url"] = run_url(record.run_id, base_url)
    return orjson.dumps(document, option=orjson.OPT_INDENT_2)


_DERIVED_RUN_KEYS = ("verdict", "first_failure", "viewer_url")  # written by to_json, not read


def _read_v3(document: dict[str, Any]) -> Scorecard:
    runs = [
        {k: v for k, v in run.items() if k not in _DERIVED_RUN_KEYS}
        if isinstance(run, dict)
        else run
        for run in document.get("runs") or []
    ]
    current = {"schema_version": SCORECARD_SCHEMA_VERSION, "runs": runs}
    return Scorecard.model_validate({**document, **current})


def _read_v2(document: dict[str, Any]) -> Scorecard:
    """Version 2: version 3 without `robustness` (an optional key that a version-2 reader
    refuses, since a scorecard forbids unknown keys); the documents of last session's tracecard
    that carried it without a bump are read too."""
    return _read_v3(document)


def _v1_statistic(value: Any, n_tasks: int, low: Any = None, high: Any = None) -> dict[str, Any]:
    return {
        "value": value,
        "low": low,
        "high": high,
        "n_tasks": n_tasks if value is not None else 0,
    }


def _read_v1(document: dict[str, Any]) -> Scorecard:
    """Version 1: a task's `mean_value`; per component flat `mean`, `low`, `high`, `pass_rate`,
    `flip_rate`. pass@k / pass^k means over tasks are recomputed from the tasks (no interval)."""
    tasks = document.get("tasks") or []
    for task in tasks:
        for stats in task.get("components") or []:
            if "mean_value" in stats:
                stats["mean"] = stats.pop("mean_value")
    summaries = []
    for old in document.get("components") or []:
        name, n_tasks = old.get("component"), old.get("n_tasks", 0)
        judged = [
            s
            for t in tasks
            for s in t.get("components") or []
            if s.get("component") == name and s.get("evaluated")
        ]
        k_max = min((int(s["evaluated"]) for s in judged), default=0)
        by_k: dict[str, dict[int, Any]] = {"pass_at_k": {}, "pass_hat_k": {}}
        for key, table in by_k.items():
            for k in range(1, k_max + 1):
                values = [float(s[key][str(k)]) for s in judged]
                table[k] = _v1_statistic(sum(values) / len(values), len(judged))
        summaries.append(
            {
                "component": name,
                "n_tasks": n_tasks,
                "pass_rate": _v1_statistic(old.get("pass_rate"), len(judged)),
                "mean": _v1_statistic(old.get("mean"), n_tasks, old.get("low"), old.get("high")),
                **by_k,
                "flip": _v1_statistic(old.get("flip_rate"), len(judged)),
            }
        )
    return _read_v2({**document, "components": summaries})


# One reader per schema version; an older reader converts to the current model.
_READERS: dict[int, Callable[[dict[str, Any]], Scorecard]] = {
    1: _read_v1,
    2: _read_v2,
    3: _read_v3,
}


def read_scorecard_json(text: str | bytes) -> Scorecard:
    """Read scorecard JSON written by any supported schema version."""
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ScorecardFormatError(f"scorecard is not valid JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise ScorecardFormatError("scorecard JSON must be an object")
    version = document.get("schema_version")
    reader = _READERS.get(version) if isinstance(version, int) else None
    if reader is None:
        raise ScorecardFormatError(
            f"scorecard schema_version {version!r} is not supported "
            f"(supported: {sorted(_READERS)}; current {SCORECARD_SCHEMA_VERSION})"
        )
    try:
        return reader(document)
    except (ValidationError, KeyError, TypeError, ValueError) as exc:
        raise ScorecardFormatError(f"scorecard JSON has the wrong shape: {exc}") from exc


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


def run_url(run_id: str, base_url: str | None) -> str:
    """The run's trace page in the viewer (a path when the server's address is not known)."""
    return f"{(base_url or '').rstrip('/')}/runs/{run_id}"


RUN_COLUMNS = [
    "experiment_id",
    "config",
    "suite",
    "suite_version",
    "task_id",
    "run_id",
    "trial",
    "status",
    "verdict",
    "duration_s",
    "calls",
    "input_tokens",
    "output_tokens",
    "first_failure",
    "viewer_url",
]


def to_csv(scorecard: Scorecard, base_url: str | None = None) -> str:
    """One row per run x component: the run (status, verdict, duration, calls, tokens, first
    failure, viewer URL), the score, the scorer version and the task's metadata."""
    metadata_keys = sorted({k for t in scorecard.tasks for k in t.metadata})
    tasks = {t.task_id: t for t in scorecard.tasks}
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        RUN_COLUMNS
        + ["component", "value", "passed", "scorer", "scorer_version", "flags"]
        + [f"meta.{k}" for k in metadata_keys]
    )
    config_name = _cell(scorecard.experiment.config.get("name"))
    for run in scorecard.runs:
        metadata = tasks[run.task_id].metadata if run.task_id in tasks else {}
        facts = [
            scorecard.experiment.id,
            config_name,
            scorecard.suite.name,
            scorecard.suite.version,
            run.task_id,
            run.run_id,
            run.trial,
            run.status,
            run.verdict,
            _cell(None if run.duration_s is None else round(run.duration_s, 3)),
            _cell(run.calls),
            _cell(run.input_tokens),
            _cell(run.output_tokens),
            _cell(run.first_failure()),
            run_url(run.run_id, base_url),
        ]
        for score in run.components:
            writer.writerow(
                facts
                + [
                    score.component,
                    _cell(score.value),
                    _cell(score.passed),
                    score.scorer,
                    score.version,
                    ";".join(run.flags),
                ]
                + [_cell(metadata.get(k)) for k in metadata_keys]
            )
    return out.getvalue()


def md_text(text: Any) -> str:
    """Text for a Markdown table cell in a PR comment: markup, pipes and line breaks escaped."""
    return _md(text)


def _md(text: Any) -> str:
    # PR comments render HTML and tables: escape markup, pipes and line breaks.
    escaped = html.escape(_cell(text), quote=False).replace("|", "\\|")
    return " ".join(escaped.split())


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def task_cell(task: TaskCard, component: str) -> str:
    """A task x component as every table shows it: `pass_rate passes/evaluated`, ⇄ for a flip,
    then the mean; `mean 0.71` for a component without pass/fail; `n/e` not evaluated."""
    stats = task.component(component)
    if stats is None:
        return "–"
    if stats.evaluated == 0:
        # Pass-less components (composite) still have a value; null values are "not evaluated".
        return "n/e" if stats.mean is None else f"mean {stats.mean:.2f}"
    cell = f"{_num(stats.pass_rate)} {stats.passes}/{stats.evaluated}" + (
        " ⇄" if stats.flip else ""
    )
    if stats.mean is not None:
        cell += f" · mean {stats.mean:.2f}"
    return cell


def statistic_cell(stat: Statistic | None) -> str:
    """`0.73 [0.55, 0.90]`; the interval `n/a` below 2 tasks; `–` when not available."""
    if stat is None or stat.value is None:
        return "–"
    if stat.low is None or stat.high is None:
        return f"{stat.value:.2f} (n/a)"
    return f"{stat.value:.2f} [{stat.low:.2f}, {stat.high:.2f}]"


def largest_k(scorecard: Scorecard) -> int:
    """The k the tables report pass@k and pass^k at: the most trials any component has on all
    its tasks (the experiment's trials when every run was evaluated)."""
    return max((max(c.pass_at_k, default=0) for c in scorecard.components), default=0)


def to_markdown(scorecard: Scorecard, base_url: str | None = None) -> str:
    """A pull-request comment: per-component statistics, per-task table, flags, agreement."""
    card = scorecard
    config = card.experiment.config.get("name", card.experiment.id)
    k = largest_k(card)
    lines = [
        f"### Scorecard: {_md(card.suite.name)} · {_md(config)}",
        "",
        f"Experiment `{_md(card.experiment.id)}`, suite version `{card.suite.version[:12]}`, "
        f"{len(card.runs)} runs. Each statistic is a mean over tasks with its 95% bootstrap "
        "interval; `pass_rate` = passing / evaluated runs (docs/scorecards.md).",
        *_attempts_markdown(card),
        "",
        f"| component | pass_rate | mean | pass@{k} | pass^{k} | flip | tasks |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in card.components:
        lines.append(
            f"| {_md(s.component)} | {statistic_cell(s.pass_rate)} | {statistic_cell(s.mean)} | "
            f"{statistic_cell(s.pass_at_k.get(k))} | {statistic_cell(s.pass_hat_k.get(k))} | "
            f"{statistic_cell(s.flip)} | {s.n_tasks} |"
        )
    names = [s.component for s in card.components]
    lines += ["", "#### Per task (pass_rate passes/evaluated · mean; ⇄ trials disagree)", ""]
    lines.append("| task | " + " | ".join(_md(n) for n in names) + " |")
    lines.append("|---|" + "---|" * len(names))
    for task in card.tasks:
        cells = " | ".join(task_cell(task, n) for n in names)
        lines.append(f"| {_md(task.task_id)} | {cells} |")
    lines += ["", "#### Flags", ""]
    if card.flags:
        lines += ["| flag | runs |", "|---|---|"]
        lines += [f"| {_md(flag)} | {count} |" for flag, count in card.flags.items()]
    else:
        lines.append("No flags.")
    if card.robustness is not None:
        lines += _robustness_markdown(card)
    if card.agreement:
        lines += [
            "",
            "#### Agreement with people",
            "",
            "| scorer | verdicts | agree |",
            "|---|---|---|",
        ]
        lines += [f"| {_md(a.scorer)} | {a.n} | {a.rate:.0%} |" for a in card.agreement]
    return "\n".join(lines) + "\n"


MAX_LISTED_CELLS = 10  # cells named in the Markdown's attempts lines; the JSON has every one


def _listed(items: list[str]) -> str:
    more = len(items) - MAX_LISTED_CELLS
    return ", ".join(items[:MAX_LISTED_CELLS]) + (f" and {more} more" if more > 0 else "")


def _attempts_markdown(card: Scorecard) -> list[str]:
    """Which attempt of a cell was scored (when the jobs ran one more than once), and what the
    infrastructure lost: counted apart, never as the agent's failures."""
    lines: list[str] = []
    later = [f"{_md(r.task_id)}#{r.trial} (attempt {r.attempt})" for r in later_attempts(card.runs)]
    if later:
        lines.append(
            f"Each cell's latest completed attempt is scored; {len(later)} scored run(s) are a "
            f"later attempt: {_listed(later)}."
        )
    if card.infra is not None:
        lost = ", ".join(f"{n} {_md(reason)}" for reason, n in card.infra.attempts.items())
        line = f"Infrastructure failures (not the agent's, not scored): {lost} attempt(s)"
        if card.infra.cells:
            line += (
                f"; {len(card.infra.cells)} cell(s) with no completed attempt, missing from the "
                f"statistics: {_listed([_md(c) for c in card.infra.cells])}"
            )
        lines.append(line + ".")
    return ["", *lines] if lines else []


def _rate(value: float | None, sign: str = "") -> str:
    return "–" if value is None else f"{value:{sign}.2f}"


def _robustness_markdown(card: Scorecard) -> list[str]:
    """Replay and faults: one line each, then the faulted trials per task (docs/replay.md)."""
    assert card.robustness is not None
    lines = ["", "#### Robustness (replay, faults)", ""]
    lines += [f"- {_md(line)}" for line in card.robustness.lines()]
    faulted = [t for t in card.robustness.tasks if t.faulted_runs]
    if faulted:
        lines += [
            "",
            "| task | trials | faulted | recovered | faulted, outcome passed |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {_md(t.task_id)} | {t.runs} | {t.faulted_runs} | {t.recovered_runs} | "
            f"{t.faulted_outcome_passed} |"
            for t in faulted
        ]
    paired = card.robustness.without_faults
    if paired is not None:  # compare's per-task rows, A without faults, B with them
        lines += [
            "",
            f"| task | {_md(paired.component)} without faults | with faults | with − without "
            "| class |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {_md(t.task_id)} | {_rate(t.a)} | {_rate(t.b)} | {_rate(t.difference, '+')} | "
            f"{t.cls} |"
            for t in paired.tasks
        ]
    return lines
