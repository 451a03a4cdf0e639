"""`tracecard report --format github`'s Markdown, snapshot-tested: the marker, the gate's checks,
the regressions against the baseline, the statistics and links to the failing runs."""

from __future__ import annotations

from pathlib import Path

from tracecard.scorers import compare_experiments, gate
from tracecard.scorers.report import github_report, report_marker

from .test_gates import CAREFUL, HASTY, _card

SNAPSHOT = Path(__file__).parent / "snapshots" / "github_report.md"


def _report() -> str:
    """The report, with the suite's content hash as `{suite_version}` (it moves with the suite
    format, not with the report)."""
    baseline, candidate = _card(CAREFUL, "careful"), _card(HASTY, "hasty")
    result = gate(
        candidate,
        {"outcome": 0.8, "outcome.mean": 0.8},
        max_flags={"unsafe_success": 0},
        baseline=baseline,
        no_regress=["outcome"],
    )
    comparison = compare_experiments(baseline, candidate)
    text = github_report(candidate, "http://ci.example:7800", result, comparison, "careful")
    return text.replace(candidate.suite.version[:12], "{suite_version}")


def test_the_github_report_matches_its_snapshot() -> None:
    text = _report()
    if not SNAPSHOT.exists():  # pragma: no cover - writing a new snapshot is a reviewed change
        SNAPSHOT.write_text(text, encoding="utf-8")
    assert text == SNAPSHOT.read_text(encoding="utf-8")


def test_the_marker_is_the_same_on_every_rerun() -> None:
    first, again = _report(), _report()
    assert first.splitlines()[0] == again.splitlines()[0] == (
        "<!-- tracecard-report suite=s config=hasty -->"
    )
    # a later experiment of the same configuration updates the same comment
    assert report_marker(_card(CAREFUL, "hasty")) == first.splitlines()[0]
