"""Scorecard writers (JSON, CSV, Markdown, JUnit XML) and the versioned JSON reader."""

from __future__ import annotations

import csv
import html
import io
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson
from pydantic import ValidationError

from .scorecard import SCORECARD_SCHEMA_VERSION, Scorecard, TaskCard

__all__ = [
    "ScorecardFormatError",
    "read_scorecard_json",
    "to_csv",
    "to_json",
    "to_junit",
    "to_markdown",
]

_XML_INVALID = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


class ScorecardFormatError(ValueError):
    """Scorecard JSON that cannot be read (bad JSON, unknown schema version, bad shape)."""


def to_json(scorecard: Scorecard) -> bytes:
    """Scorecard JSON (schema in docs/scorecards.md), indented for diffs."""
    return orjson.dumps(scorecard.model_dump(mode="json"), option=orjson.OPT_INDENT_2)


def _read_v1(document: dict[str, Any]) -> Scorecard:
    return Scorecard.model_validate(document)


# One reader per schema version; an older reader converts to the current model.
_READERS: dict[int, Callable[[dict[str, Any]], Scorecard]] = {1: _read_v1}


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
    except ValidationError as exc:
        raise ScorecardFormatError(f"scorecard JSON has the wrong shape: {exc}") from exc


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


def to_csv(scorecard: Scorecard) -> str:
    """One row per run x component, with the task's metadata and the scorer version."""
    metadata_keys = sorted({k for t in scorecard.tasks for k in t.metadata})
    tasks = {t.task_id: t for t in scorecard.tasks}
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [
            "experiment_id",
            "config",
            "suite",
            "suite_version",
            "task_id",
            "run_id",
            "trial",
            "status",
            "component",
            "value",
            "passed",
            "scorer",
            "scorer_version",
            "flags",
        ]
        + [f"meta.{k}" for k in metadata_keys]
    )
    config_name = _cell(scorecard.experiment.config.get("name"))
    for run in scorecard.runs:
        metadata = tasks[run.task_id].metadata if run.task_id in tasks else {}
        for score in run.components:
            writer.writerow(
                [
                    scorecard.experiment.id,
                    config_name,
                    scorecard.suite.name,
                    scorecard.suite.version,
                    run.task_id,
                    run.run_id,
                    run.trial,
                    run.status,
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


def _md(text: Any) -> str:
    # PR comments render HTML and tables: escape markup, pipes and line breaks.
    escaped = html.escape(_cell(text), quote=False).replace("|", "\\|")
    return " ".join(escaped.split())


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _task_cell(task: TaskCard, component: str) -> str:
    stats = task.component(component)
    if stats is None:
        return "–"
    if stats.evaluated == 0:
        # Pass-less components (composite) still have a value; null values are "not evaluated".
        return "not evaluated" if stats.mean_value is None else f"{stats.mean_value:.2f}"
    cell = f"{stats.passes}/{stats.evaluated}"
    if stats.mean_value is not None:
        cell += f" ({stats.mean_value:.2f})"
    return cell + (" ⚠ flip" if stats.flip else "")


def to_markdown(scorecard: Scorecard) -> str:
    """A pull-request comment: per-component summary, per-task table, flags."""
    card = scorecard
    config = card.experiment.config.get("name", card.experiment.id)
    lines = [
        f"### Scorecard: {_md(card.suite.name)} · {_md(config)}",
        "",
        f"Experiment `{_md(card.experiment.id)}`, suite version `{card.suite.version[:12]}`, "
        f"{len(card.runs)} runs. Means are over tasks with 95% bootstrap intervals.",
        "",
        "| component | mean | 95% interval | pass rate | flip rate | tasks |",
        "|---|---|---|---|---|---|",
    ]
    for s in card.components:
        interval = "–" if s.low is None else f"[{_num(s.low)}, {_num(s.high)}]"
        lines.append(
            f"| {_md(s.component)} | {_num(s.mean)} | {interval} | {_num(s.pass_rate)} | "
            f"{_num(s.flip_rate)} | {s.n_tasks} |"
        )
    names = [s.component for s in card.components]
    lines += ["", "#### Per task (passes/trials, mean value)", ""]
    lines.append("| task | " + " | ".join(_md(n) for n in names) + " |")
    lines.append("|---|" + "---|" * len(names))
    for task in card.tasks:
        cells = " | ".join(_task_cell(task, n) for n in names)
        lines.append(f"| {_md(task.task_id)} | {cells} |")
    lines += ["", "#### Flags", ""]
    if card.flags:
        lines += ["| flag | runs |", "|---|---|"]
        lines += [f"| {_md(flag)} | {count} |" for flag, count in card.flags.items()]
    else:
        lines.append("No flags.")
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


def _xml(text: Any) -> str:
    # ElementTree escapes markup but not characters XML 1.0 forbids (e.g. NUL from payloads).
    return _XML_INVALID.sub("\ufffd", _cell(text))


def _junit_timestamp(moment: datetime) -> str:
    """JUnit's timestamp: ISO 8601 without a zone, in UTC (the schema's xs:dateTime pattern)."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.isoformat(timespec="seconds")


def to_junit(scorecard: Scorecard) -> str:
    """JUnit XML: one testcase per task; a failure names the components that failed. A
    testcase's `time` is the seconds its trials ran, the testsuite's the sum; `timestamp` is
    when the first run started (UTC)."""
    suite_name = _xml(f"{scorecard.suite.name}[{scorecard.experiment.id}]")
    root = ET.Element("testsuites", name=_xml(scorecard.suite.name))
    element = ET.SubElement(root, "testsuite", name=suite_name)
    seconds: dict[str, float] = {}
    for run in scorecard.runs:
        seconds[run.task_id] = seconds.get(run.task_id, 0.0) + (run.duration_s or 0.0)
    starts = [run.started_at for run in scorecard.runs if run.started_at is not None]
    if starts:
        element.set("timestamp", _junit_timestamp(min(starts)))
    failures = skipped = 0
    for task in scorecard.tasks:
        case = ET.SubElement(
            element,
            "testcase",
            classname=_xml(scorecard.suite.name),
            name=_xml(task.task_id),
            time=f"{seconds.get(task.task_id, 0.0):.3f}",
        )
        failed = [
            f"{c.component} ({c.passes}/{c.evaluated} passed)"
            for c in task.components
            if c.evaluated and c.passes < c.evaluated
        ]
        unevaluated = [
            c.component for c in task.components if not c.evaluated and c.mean_value is None
        ]
        if failed:
            failures += 1
            failure = ET.SubElement(
                case, "failure", message=_xml("failed: " + ", ".join(failed)), type="scorecard"
            )
            failure.text = _xml("\n".join(failed))
        elif not any(c.evaluated for c in task.components):
            skipped += 1
            ET.SubElement(case, "skipped", message="no evaluated runs")
        if unevaluated:
            out = ET.SubElement(case, "system-out")
            out.text = _xml("not evaluated: " + ", ".join(unevaluated))
    element.set("tests", str(len(scorecard.tasks)))
    element.set("failures", str(failures))
    element.set("skipped", str(skipped))
    element.set("errors", "0")
    total = f"{sum(seconds.values()):.3f}"
    element.set("time", total)
    root.set("time", total)
    root.set("tests", str(len(scorecard.tasks)))
    root.set("failures", str(failures))
    root.set("skipped", str(skipped))
    root.set("errors", "0")
    return ET.tostring(root, encoding="unicode", xml_declaration=True)
