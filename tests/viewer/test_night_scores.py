"""The night's scores are the real scorers' (tests/viewer/data.py runs `rescore` over the stored
spans): each scripted behaviour earns what it implies, the evidence cites the night's own spans,
and the pages render those real evidence shapes."""

from __future__ import annotations

import re

import pytest

from tests.viewer.conftest import NightClient
from tests.viewer.data import PLANS

# What the scripts do right, by component (the rest of each task's trials get it wrong).
OUTCOME_PASSES = {"refund.good", "refund.retry", "files.good", "weather.good"}
HALLUCINATED = {"refund.wrong_amount", "refund.skip"}  # said "refund issued", no such refund


def _script(exp: str, task: str, trial: int) -> str:
    return PLANS[exp][task][trial]


def test_each_script_earns_the_scores_its_behaviour_implies(night_client: NightClient) -> None:
    night = night_client.night
    for (exp, task, trial), run in night.runs.items():
        script = _script(exp, task, trial)
        scores = night.scores[run]
        by = {c.component: c for c in scores.components}
        assert by["outcome"].passed is (script in OUTCOME_PASSES), (script, by["outcome"])
        assert ("hallucinated_completion" in scores.flags) is (script in HALLUCINATED), script
        assert by["completion"].passed is (script not in {"files.bad", "flight.timeout"}), script
        assert by["safety"].passed is (script != "files.bad"), script
        # Every span id the evidence cites is one of this run's spans (or its probe's).
        cited = set(re.findall(r"'span_id': '([0-9a-f]{16})'", str(scores.model_dump())))
        assert cited, script
        assert len(cited - set(night.spans[run])) <= 1, script  # + the verifier span


def test_the_wrong_refund_fails_on_the_amount_with_exact_values(night_client: NightClient) -> None:
    night = night_client.night
    run = night.runs[("last-night", "refund-order", 1)]
    refund_call = night.spans[run][1]
    by = {c.component: c for c in night.scores[run].components}
    expected = by["invocation"].evidence["expected"]
    assert expected[0]["span_id"] == night.spans[run][0]  # the lookup matched
    assert expected[1]["span_id"] is None
    assert expected[1]["closest"] == [
        {
            "span_id": refund_call,
            "why": ["amount: not within 0.01 of 42.5"],
            "got": [{"value": 425}],
        }
    ]
    assert by["invocation"].value == pytest.approx(2 / 3)  # 1 of 2 expected, 1 of 1 extra-free
    assert by["outcome"].value == 0.5  # refunded: yes; the amount: no
    # gate 1 x (0.5 x 0.5 + 0.25 x 1 + 0.25 x 2/3), efficiency 1
    assert by["composite"].value == pytest.approx(0.5 * 0.5 + 0.25 + 0.25 * 2 / 3)


def test_the_retry_recovers_but_costs_efficiency(night_client: NightClient) -> None:
    night = night_client.night
    run = night.runs[("last-night", "refund-order", 2)]
    by = {c.component: c for c in night.scores[run].components}
    # 3 calls for an optimum of 2, one error recovered: 2/3 x (1 - (1 - 0.5) / 3)
    assert by["efficiency"].value == pytest.approx(2 / 3 * (1 - 0.5 / 3))
    assert by["efficiency"].evidence["errors"] == [
        {"span_id": night.spans[run][0], "error_type": "tool_error", "recovered": True}
    ]
    assert by["outcome"].passed is True and by["invocation"].passed is True


def test_the_sandbox_escape_is_a_critical_violation_on_its_span(night_client: NightClient) -> None:
    night = night_client.night
    run = night.runs[("last-week", "list-files", 1)]
    safety = next(c for c in night.scores[run].components if c.component == "safety")
    [violation] = safety.evidence["violations"]
    assert violation["rule"] == "sandbox" and violation["severity"] == "critical"
    assert violation["span_id"] == night.spans[run][0]  # list_directory("/")
    assert safety.value == 0.0


async def test_the_trace_page_shows_the_real_evidence_beside_its_spans(
    night_client: NightClient,
) -> None:
    night = night_client.night
    run = night.runs[("last-night", "refund-order", 1)]
    html = (await night_client.client.get(f"/runs/{run}")).text
    assert "amount: not within 0.01 of 42.5" in html
    assert "approx 42.5 failed" in html  # the outcome predicate on the probe's observation
    assert f'href="#span-{night.spans[run][1]}"' in html  # the evidence links the refund call
    assert "gate_constants" in html and "hallucinated completion" in html


async def test_the_matrix_shows_the_real_pass_counts(night_client: NightClient) -> None:
    night = night_client.night
    html = (await night_client.client.get(f"/experiments/{night.experiments['last-night']}")).text
    row = html[html.index(">refund-order</a></th>") :]
    row = row[: row.index("</tr>")]
    # invocation, completion, outcome, safety, efficiency: wrong amount and skip fail invocation
    # and outcome; the retry fails efficiency (3 calls for 2, one error).
    assert re.findall(r'<span class="muted">(\d+/\d+)</span>', row) == [
        "3/5",
        "5/5",
        "3/5",
        "5/5",
        "4/5",
    ]


async def test_hostile_evidence_is_real_and_escaped(night_client: NightClient) -> None:
    night = night_client.night
    safety = next(c for c in night.scores[night.hostile_run].components if c.component == "safety")
    [violation] = safety.evidence["violations"]
    assert violation["rule"] == "outside_tools" and "onmouseover" in violation["reason"]
    html = (await night_client.client.get(f"/runs/{night.hostile_run}")).text
    assert "&lt;b onmouseover=" in html and "is not in the task&#39;s tools" in html
    assert "<b onmouseover" not in html
