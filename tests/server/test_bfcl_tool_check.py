"""The tool check of a suite whose upstream takes task params: a real BFCL import, its per-run
server started with `{task.entry}` filled from the tasks (`suite check --config`, and at
experiment creation with the server's cache, keyed by the params too)."""

from __future__ import annotations

import asyncio
import tomllib
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.proxy import tracecard_for
from tracecard.server.cli.main import main
from tracecard.server.evaluation.tool_lists import MAX_PARAM_SETS, ToolListCache
from tracecard.server.settings import UpstreamSettings

TASKS = MAX_PARAM_SETS + 1  # one task (one BFCL entry) more than a check starts the server for


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("bfcl-check")
    out = folder / "bfcl.toml"
    args = ["import", "bfcl", "--category", "multi_turn_base", "--limit", str(TASKS)]
    assert main([*args, "-o", str(out)]) == 0
    return out, folder / "bfcl.upstreams.toml"


def test_suite_check_lists_a_per_task_upstreams_tools(
    imported: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    suite, upstreams = imported
    capsys.readouterr()
    assert main(["suite", "check", "--config", str(upstreams), str(suite)]) == 0
    err = capsys.readouterr().err
    assert "ConfigError" not in err and "no param 'entry'" not in err
    (info,) = [line for line in err.splitlines() if line.startswith("info:")]
    assert "upstream 'bfcl' takes task params ({task.entry})" in info
    for n in range(MAX_PARAM_SETS):  # each started with its own entry
        assert f"task 'multi_turn_base_{n}' (entry = 'multi_turn_base_{n}')" in info
    assert f"multi_turn_base_{MAX_PARAM_SETS}" not in info
    (warning,) = [line for line in err.splitlines() if line.startswith("warning:")]
    assert f"at most {MAX_PARAM_SETS} distinct parameter sets" in warning
    assert f"1 other task(s): 'multi_turn_base_{MAX_PARAM_SETS}'" in warning


def test_an_expectation_naming_a_tool_the_entry_lacks_is_an_error(
    imported: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite, upstreams = imported
    text = suite.read_text()
    assert text.count('tool = "mkdir"') >= 1
    typo = tmp_path / "typo.toml"
    typo.write_text(text.replace('tool = "mkdir"', 'tool = "mkdri"', 1))
    capsys.readouterr()
    assert main(["suite", "check", "--config", str(upstreams), str(typo)]) == 1
    err = capsys.readouterr().err
    assert "unknown tool 'mkdri' on 'bfcl' (did you mean 'mkdir'?)" in err
    assert "task 'multi_turn_base_0': turns[0].invocation.calls[1].tool" in err
    assert ": ok" not in capsys.readouterr().out


def _counted(upstream: dict[str, Any], log: Path) -> dict[str, Any]:
    """The imported BFCL upstream, appending the entry it was started for to `log`."""
    python, *module, entry = upstream["command"]
    assert entry == "{task.entry}" and module == ["-m", "tracecard.server.bfcl.relay"]
    script = 'echo "$1" >> "$0"; exec "$2" -m tracecard.server.bfcl.relay "$1"'
    return {**upstream, "command": ["sh", "-c", script, str(log), "{task.entry}", python]}


def test_experiment_creation_checks_each_entry_once_and_keeps_it(
    imported: tuple[Path, Path], tmp_path: Path
) -> None:
    suite, upstreams = imported
    log = tmp_path / "starts.log"
    upstream = tomllib.loads(upstreams.read_text())["upstreams"]["bfcl"]
    text = suite.read_text()
    toml = {"content-type": "application/toml"}
    with tracecard_for({"bfcl": _counted(upstream, log)}, tmp_path) as server:
        with httpx.Client(base_url=server.url, timeout=120) as http:
            assert http.post("/api/suites", content=text, headers=toml).status_code == 201
            name = tomllib.loads(text)["name"]
            body = {"suite": name, "config": {"name": "a"}, "trials": 1}
            created = http.post("/api/experiments", json=body)
            assert created.status_code == 201, created.text
            started = sorted(log.read_text().split())
            assert started == [f"multi_turn_base_{n}" for n in range(MAX_PARAM_SETS)]
            assert http.post("/api/experiments", json=body).status_code == 201
            assert sorted(log.read_text().split()) == started  # kept per entry: not restarted
            typo = text.replace('tool = "mkdir"', 'tool = "mkdri"', 1)
            typo = typo.replace(f'name = "{name}"', 'name = "typo"', 1)
            assert http.post("/api/suites", content=typo, headers=toml).status_code == 201
            refused = http.post("/api/experiments", json={**body, "suite": "typo"})
            assert refused.status_code == 422, refused.text
            assert "did you mean 'mkdir'" in refused.text


def test_the_cache_keeps_one_list_per_parameter_set() -> None:
    upstream = UpstreamSettings(command=["server", "{task.entry}"], per_run=True)
    cache = ToolListCache(ttl_s=300)
    asked: list[str] = []

    def fetch(entry: str) -> Any:
        async def answer() -> dict[str, dict[str, Any]]:
            asked.append(entry)
            return {f"tool_of_{entry}": {"name": f"tool_of_{entry}"}}

        return answer

    async def tools(entry: str) -> list[str]:
        return sorted(await cache.get(upstream, fetch(entry), {"entry": entry}))

    async def scenario() -> None:
        assert await tools("a") == ["tool_of_a"]
        assert await tools("b") == ["tool_of_b"]  # another entry: its own list
        assert await tools("a") == ["tool_of_a"]  # kept
        assert cache.fresh(upstream) is None  # no params: not the same key

    asyncio.run(scenario())
    assert asked == ["a", "b"]


def test_a_task_without_the_param_is_named_and_the_others_are_still_checked(
    imported: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite, upstreams = imported
    text = suite.read_text()
    lacking = text.replace('[tasks.params]\nentry = "multi_turn_base_1"\n', "", 1)
    assert lacking != text
    broken = tmp_path / "lacking.toml"
    broken.write_text(lacking.replace('tool = "mkdir"', 'tool = "mkdri"', 1))
    capsys.readouterr()
    assert main(["suite", "check", "--config", str(upstreams), str(broken)]) == 1
    err = capsys.readouterr().err
    assert "task 'multi_turn_base_1' (none)" in err  # started without it: the info says so
    assert "uses {task.entry} but the run's task has no param 'entry'" in err
    assert "unknown tool 'mkdri' on 'bfcl' (did you mean 'mkdir'?)" in err  # task 0 still
