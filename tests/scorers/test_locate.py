"""Suite errors point at the line of the task they are about, with the path as given (#14.11)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracecard.scorers import SuiteError, load_suite

TYPO = """schema_version = 1
name = "typo"

[[tasks]]
id = "first"
upstreams = ["tools"]

[tasks.invocation]
order = "any"

[[tasks]]
id = "second"
instruction = "do the second thing"

[[tasks]]
id = "third"
instruction = "do the third thing"
instructon = "typo"
"""


def test_a_missing_field_points_at_its_own_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "typo.toml").write_text(TYPO)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SuiteError) as caught:
        load_suite("suites/typo.toml")
    lines = str(caught.value).splitlines()
    # tasks[0] has no instruction: its table starts on line 4 (not tasks[1]'s instruction, 13)
    assert "suites/typo.toml:4: tasks[0].instruction: required field is missing" in lines
    assert "suites/typo.toml:18: tasks[2].instructon: unknown field" in lines


def test_invalid_toml_has_a_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('schema_version = 1\nname = "x\n')
    with pytest.raises(SuiteError, match=r"bad\.toml:2: not valid TOML"):
        load_suite(path)
