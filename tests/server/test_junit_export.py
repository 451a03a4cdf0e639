"""#14.16: the JUnit export has `time` and `timestamp`, read back by a real JUnit parser
(junitparser) from an experiment run end to end."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from junitparser import Failure, JUnitXml

from tracecard.server.cli.main import main

SUITE = """schema_version = 1
name = "timed"

[[tasks]]
id = "quick"
instruction = "Say yes."
completion = { checks = [{ exact = "yes" }] }

[[tasks]]
id = "wrong"
instruction = "Say no."
completion = { checks = [{ exact = "no" }] }
"""


def test_junit_times_and_timestamp_parse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "suite.toml").write_text(SUITE)
    agent = f"{sys.executable} -c \"import time; time.sleep(0.3); print('yes')\""
    before = datetime.now(UTC).replace(tzinfo=None, microsecond=0)
    db = ["--db", str(tmp_path / "t.db")]
    argv = ["run", "--suite", str(tmp_path / "suite.toml"), "--name", "sleepy", "--agent", agent,
            "--trials", "2", "--port", "0", "--work-dir", str(tmp_path / "w"), "--json",
            *db]  # fmt: skip
    assert main(argv) == 0
    experiment = json.loads(capsys.readouterr().out)["experiment_id"]
    out = tmp_path / "card.xml"
    assert main(["export", "--experiment", experiment, "--format", "xml", "-o", str(out), *db]) == 0

    xml = JUnitXml.fromfile(str(out))
    (suite,) = list(xml)
    # one testcase per task x component (6 components; 1 failure: wrong's completion)
    assert suite.tests == 12 and suite.failures == 1 and suite.errors == 0
    cases = {(case.classname, case.name): case for case in suite}
    assert {c for c, _ in cases} == {"timed.quick", "timed.wrong"}
    for task in ("quick", "wrong"):
        task_time = sum(c.time for (cls, _), c in cases.items() if cls == f"timed.{task}")
        assert task_time >= 0.6  # two trials of at least 0.3 s each
    failure = next(r for r in cases[("timed.wrong", "completion")].result if isinstance(r, Failure))
    assert failure.message == "completion pass_rate 0.00 (0/2 passed)"
    # each testcase's share is rounded to the millisecond
    assert suite.time == pytest.approx(sum(c.time for c in cases.values()), abs=0.0005 * 12)
    assert xml.time == pytest.approx(suite.time, abs=0.002)
    started = datetime.fromisoformat(suite.timestamp)
    assert started.tzinfo is None  # JUnit's xs:dateTime pattern: no zone (UTC)
    assert before - timedelta(seconds=1) <= started <= before + timedelta(seconds=60)
