"""The scorecard as JUnit XML for CI: one testcase per task x component, a failure naming the
failing runs with their first failure reason and their viewer URLs."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from typing import Any

import orjson

from .scorecard import RunRecord, Scorecard
from .verdict import failure_reason

__all__ = ["to_junit"]

_XML_INVALID = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _xml(text: Any) -> str:
    # ElementTree escapes markup but not characters XML 1.0 forbids (e.g. NUL from payloads).
    return _XML_INVALID.sub("\ufffd", _text(text))


def _junit_timestamp(moment: datetime) -> str:
    """JUnit's timestamp: ISO 8601 without a zone, in UTC (the schema's xs:dateTime pattern)."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.isoformat(timespec="seconds")


def _reason(run: RunRecord, component: str) -> str:
    score = next((s for s in run.components if s.component == component), None)
    if score is None:
        return ""
    return failure_reason(component, score.evidence)  # the runs list's words


def to_junit(scorecard: Scorecard, base_url: str | None = None) -> str:
    """JUnit XML: one testcase per task x component (classname `{suite}.{task}`, name the
    component). A failure's message is `pass_rate 0.60 (3/5 passed)`; its text lists each
    failing run: id, trial, status, the first failure reason and the viewer URL. A task x
    component without an evaluated run is `<skipped>`. `time` is the seconds the task's trials
    ran; the testsuite's `timestamp` is when its first run started (UTC)."""
    base = (base_url or "").rstrip("/")
    suite_name = _xml(f"{scorecard.suite.name}[{scorecard.experiment.id}]")
    root = ET.Element("testsuites", name=_xml(scorecard.suite.name))
    element = ET.SubElement(root, "testsuite", name=suite_name)
    seconds: dict[str, float] = {}
    runs_of: dict[str, list[RunRecord]] = {}
    for run in scorecard.runs:
        seconds[run.task_id] = seconds.get(run.task_id, 0.0) + (run.duration_s or 0.0)
        runs_of.setdefault(run.task_id, []).append(run)
    starts = [run.started_at for run in scorecard.runs if run.started_at is not None]
    if starts:
        element.set("timestamp", _junit_timestamp(min(starts)))
    tests = failures = skipped = 0
    names = [c.component for c in scorecard.components]
    # a task's run time split over its testcases, so that they add up to the testsuite's time
    share = {task: total / max(1, len(names)) for task, total in seconds.items()}
    for task in scorecard.tasks:
        for component in names:
            stats = task.component(component)
            tests += 1
            case = ET.SubElement(
                element,
                "testcase",
                classname=_xml(f"{scorecard.suite.name}.{task.task_id}"),
                name=_xml(component),
                time=f"{share.get(task.task_id, 0.0):.3f}",
            )
            if stats is None or stats.evaluated == 0:
                skipped += 1
                why = "no runs" if stats is None else "not evaluated (no pass/fail)"
                if stats is not None and stats.mean is not None:
                    why = f"mean {stats.mean:.2f}, no pass/fail"
                ET.SubElement(case, "skipped", message=_xml(why))
                continue
            if stats.passes == stats.evaluated:
                continue
            failures += 1
            failing = [
                r
                for r in runs_of.get(task.task_id, [])
                if any(s.component == component and s.passed is False for s in r.components)
            ]
            message = (
                f"{component} pass_rate {stats.pass_rate or 0.0:.2f} "
                f"({stats.passes}/{stats.evaluated} passed)"
            )
            lines = [f"{task.task_id} · {message}", "failing runs:"]
            for run in failing:
                lines.append(
                    f"- run {run.run_id} (trial {run.trial}, {run.status}): "
                    f"{_reason(run, component) or 'failed'}\n  {base}/runs/{run.run_id}"
                )
            failure = ET.SubElement(case, "failure", message=_xml(message), type="scorecard")
            failure.text = _xml("\n".join(lines))
    element.set("tests", str(tests))
    element.set("failures", str(failures))
    element.set("skipped", str(skipped))
    element.set("errors", "0")
    total = f"{sum(seconds.values()):.3f}"
    element.set("time", total)
    root.set("time", total)
    root.set("tests", str(tests))
    root.set("failures", str(failures))
    root.set("skipped", str(skipped))
    root.set("errors", "0")
    return ET.tostring(root, encoding="unicode", xml_declaration=True)
