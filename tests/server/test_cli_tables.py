"""Summary tables readable at 80 columns (#14.7) and intervals of fewer than 2 tasks (#9.6)."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from tracecard.scorers.registry import component_names
from tracecard.server.orchestration.summary import scorecard_table

COMPONENTS = component_names()


def _card(tasks: int) -> dict[str, Any]:
    def stats(component: str, i: int) -> dict[str, Any]:
        if component == "composite":
            return {"component": component, "n": 5, "mean": 0.71, "evaluated": 0}
        return {
            "component": component,
            "n": 5,
            "mean": 0.9,  # partial credit: never the cell's headline
            "pass_rate": 0.8,
            "passes": 4,
            "evaluated": 5,
            "flip": i % 2 == 0,
        }

    return {
        "experiment": {"id": "0123456789abcdef0123456789abcdef", "config": {"name": "careful"}},
        "suite": {"name": "helpdesk"},
        "tasks": [
            {
                "task_id": f"escalate-globex-{i}",
                "runs": 5,
                "components": [stats(c, i) for c in COMPONENTS],
            }
            for i in range(tasks)
        ],
        "components": [
            {
                "component": c,
                "pass_rate": {
                    "value": 0.8,
                    "low": 0.6 if tasks >= 2 else None,
                    "high": 0.95 if tasks >= 2 else None,
                },
                "mean": {"value": 0.9, "low": 0.85 if tasks >= 2 else None, "high": 0.97},
                "pass_hat_k": {"5": {"value": 0.4}},
            }
            for c in COMPONENTS
        ],
        "runs": [{"status": "finished"}] * (5 * tasks),
    }


def _render(card: dict[str, Any]) -> str:
    console = Console(width=80, record=True, color_system=None)
    console.print(scorecard_table(card))
    return console.export_text()


def test_the_scorecard_fits_80_columns_without_cutting_anything() -> None:
    text = _render(_card(10))
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text
    header = next(line for line in text.splitlines() if line.startswith("task"))
    for short in ("invoc.", "compl.", "outcome", "safety", "effic.", "comp."):
        assert short in header
    assert "invoc. invocation" in text  # the legend says what the short headers are
    ci = next(line for line in text.splitlines() if line.startswith("95% CI"))
    assert ci.count("0.60–0.95") == 6  # the first interval row is pass_rate's
    rate = next(line for line in text.splitlines() if line.startswith("pass_rate"))
    assert rate.split()[3:] == ["0.80"] * 6
    mean = next(line for line in text.splitlines() if line.startswith("mean"))
    assert mean.split()[1:] == ["0.90"] * 6
    assert next(line for line in text.splitlines() if line.startswith("pass^5")).count("0.40") == 6
    assert "0.80 4/5⇄" in text and "escalate-globex-9" in text and "0.90 4/5" not in text


def test_an_interval_of_one_task_is_not_available() -> None:
    text = _render(_card(1))
    ci = next(line for line in text.splitlines() if line.startswith("95% CI"))
    assert ci.split()[2:] == ["n/a"] * 6
    assert "0.80–0.80" not in text
