"""Cassettes: an experiment's recordings as one file, to replay on another machine.

Format `tracecard-cassette`, version 1, JSON Lines (docs/replay.md#cassettes):

    {"format": "tracecard-cassette", "version": 1, "experiment": {...}, "suite": {...},
     "runs": N, "spans": M}
    {"run": {...}}                   one line per run (the run row)
    {"span": {...}}                  one line per span of those runs (the JSON API's span shape)
    {"score": {...}}                 one line per stored score

Spans and scores are as the store kept them: redacted values stay fingerprints.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import orjson

from tracecard.scorers.verdict import scores_verdict
from tracecard.server.runs.service import RunError
from tracecard.traces import queries
from tracecard.traces.models import ExperimentRow, RunRow, ScoreRow, SuiteRow
from tracecard.traces.store import Store

CASSETTE_FORMAT = "tracecard-cassette"
CASSETTE_VERSION = 1
_BATCH = 2000  # spans inserted per transaction on import


@dataclass(frozen=True)
class CassetteCounts:
    experiment_id: str
    runs: int
    spans: int
    scores: int


def _row(row: Any) -> dict[str, Any]:
    return {
        key: value.isoformat() if isinstance(value, datetime) else value
        for key, value in row.model_dump().items()
    }


def _dates(model: type[Any], fields: dict[str, Any]) -> Any:
    found = dict(fields)
    for key, value in fields.items():
        if isinstance(value, str) and key.endswith("_at"):
            found[key] = datetime.fromisoformat(value)
    return model(**found)


def export_cassette(store: Store, experiment_id: str, output: IO[bytes]) -> CassetteCounts:
    """Write the experiment, its suite, runs, spans and scores to `output`."""
    experiment = queries.get_experiment(store, experiment_id)
    if experiment is None:
        raise RunError(f"no experiment {experiment_id!r}", 404)
    suite = queries.get_suite(store, experiment.suite_version)
    runs = queries.experiment_runs(store, experiment_id)
    spans = {run.id: store.spans_for_run(run.id) for run in runs}
    scores = store.scores_for_runs([r.id for r in runs])
    span_count = sum(len(s) for s in spans.values())
    header = {
        "format": CASSETTE_FORMAT,
        "version": CASSETTE_VERSION,
        "experiment": _row(experiment),
        "suite": None if suite is None else _row(suite),
        "runs": len(runs),
        "spans": span_count,
    }
    lines = [orjson.dumps(header)]
    for run in runs:
        lines.append(orjson.dumps({"run": _row(run)}))
        lines.extend(orjson.dumps({"span": span}) for span in spans[run.id])
    counted = 0
    for rows in scores.values():
        for score in rows:
            fields = _row(score)
            fields.pop("id", None)
            lines.append(orjson.dumps({"score": fields}))
            counted += 1
    output.write(b"\n".join(lines) + b"\n")
    return CassetteCounts(experiment_id, len(runs), span_count, counted)


def _lines(source: IO[bytes], path: str) -> Iterator[dict[str, Any]]:
    for number, line in enumerate(source, 1):
        if not line.strip():
            continue
        try:
            found = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise RunError(f"{path}:{number}: not a cassette line ({exc})") from None
        if not isinstance(found, dict):
            raise RunError(f"{path}:{number}: not a cassette line (a JSON object expected)")
        yield found


def read_header(lines: Iterator[dict[str, Any]], path: str) -> dict[str, Any]:
    """The cassette's first line, checked: its format and a version this tracecard reads."""
    header = next(lines, None)
    if header is None or header.get("format") != CASSETTE_FORMAT:
        raise RunError(f"{path}: not a tracecard cassette (no '{CASSETTE_FORMAT}' header line)")
    if header.get("version") != CASSETTE_VERSION:
        raise RunError(
            f"{path}: cassette version {header.get('version')!r}; this tracecard reads version "
            f"{CASSETTE_VERSION} (export it again with this version, or upgrade tracecard)"
        )
    return header


def _score_verdicts(rows: list[Any]) -> None:
    """Each run's `score_verdict` from its imported scores (older cassettes carry none)."""
    scores: dict[str, list[ScoreRow]] = {}
    for row in rows:
        if isinstance(row, ScoreRow):
            scores.setdefault(row.run_id, []).append(row)
    for row in rows:
        if isinstance(row, RunRow):
            row.score_verdict = scores_verdict(scores.get(row.id, [])).word


def import_cassette(store: Store, path: Path) -> CassetteCounts:
    """Load a cassette into `store`; its experiment keeps its id (an error when present)."""
    with path.open("rb") as source:
        lines = _lines(source, str(path))
        header = read_header(lines, str(path))
        experiment = _dates(ExperimentRow, header["experiment"])
        if queries.get_experiment(store, experiment.id) is not None:
            raise RunError(f"{path}: experiment {experiment.id} is already in this database", 409)
        rows: list[Any] = []
        suite = header.get("suite")
        if suite is not None and queries.get_suite(store, suite["version"]) is None:
            rows.append(_dates(SuiteRow, suite))
        rows.append(experiment)
        spans: list[dict[str, Any]] = []
        counts = {"run": 0, "span": 0, "score": 0}
        for line in lines:
            if "run" in line:
                rows.append(_dates(RunRow, line["run"]))
                counts["run"] += 1
            elif "span" in line:
                spans.append(line["span"])
                counts["span"] += 1
                if len(spans) >= _BATCH:
                    store.insert_spans(spans)
                    spans = []
            elif "score" in line:
                rows.append(_dates(ScoreRow, line["score"]))
                counts["score"] += 1
        store.insert_spans(spans)
        _score_verdicts(rows)
        store.add_all(rows)
    return CassetteCounts(experiment.id, counts["run"], counts["span"], counts["score"])
