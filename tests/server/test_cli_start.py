"""`tracecard` answers at once (#24 item 1): `--help`, `--version` and `gate --help` parse their
arguments without loading the database layer, the HTTP stack or the app; the command table that
makes this possible says what every command's module says. (Speed itself: bench/cli_start.py.)"""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
import sys
from pathlib import Path

import pytest

from tracecard.server.cli.main import COMMANDS, build_parser, command_of, main, parser_for

HEAVY = ("sqlalchemy", "aiohttp", "litestar", "opentelemetry")
PROBE = f"""
import contextlib, io, sys
from tracecard.server.cli.main import main
for argv in (["--help"], ["--version"], ["gate", "--help"]):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            main(argv)
        except SystemExit as exc:
            assert exc.code == 0, (argv, exc.code)
    loaded = [m for m in sys.modules if m.split(".")[0] in {HEAVY!r}]
    print(" ".join(argv), "|", out.getvalue().count("\\n"), "|", ",".join(sorted(loaded)))
"""


def test_help_version_and_gate_help_load_no_heavy_module() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    rows = [line.split(" | ") for line in done.stdout.splitlines()]
    assert [r[0] for r in rows] == ["--help", "--version", "gate --help"]
    assert all(int(lines) > 0 for _, lines, _ in rows)  # each printed its answer
    assert [loaded for _, _, loaded in rows] == ["", "", ""]


def _commands(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {c.dest: c.help for c in action._choices_actions}


def _child(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    child: argparse.ArgumentParser = action.choices[name]
    return child


def _help(parser: argparse.ArgumentParser) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    return out.getvalue()


def test_the_command_table_is_what_the_modules_register() -> None:
    full = build_parser()
    assert _commands(full) == {name: help_text for name, (_, help_text) in COMMANDS.items()}
    assert _help(parser_for(stubs=True)) == _help(full)
    for name in COMMANDS:  # each command's own modules add it, with the same flags
        alone = parser_for(name)
        assert name in _commands(alone)
        assert _child(alone, name).format_help() == _child(full, name).format_help()


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        ([], None),
        (["--help"], None),
        (["--version"], None),
        (["gate", "--help"], "gate"),
        (["--log-level", "debug", "export", "--experiment", "x"], "export"),
        (["--log-level=info", "--debug", "run", "--", "serve"], "run"),
        (["--log", "error", "compare", "a", "b"], "compare"),
        (["gat", "--experiment", "run"], "gat"),  # a typo: the full parser says which exist
    ],
)
def test_command_of(argv: list[str], command: str | None) -> None:
    assert command_of(argv) == command


def test_an_unknown_command_is_parsed_by_the_full_parser(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["gat", "--experiment", "x"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'gat'" in err and "'gate'" in err and "'audit'" in err


GATE_PROBE = """
import contextlib, io, sys
from tracecard.server.cli.main import main
err = io.StringIO()
with contextlib.redirect_stderr(err):
    code = main(["gate", "--experiment", "nope", "--min", "completion=0.8", "--db", sys.argv[1]])
unused = ("jsonpath", "rich", "tracecard.scorers.writers", "tracecard.server.evaluation.service",
          "sqlalchemy", "sqlmodel", "tracecard.traces.models")
print(code, "|", err.getvalue().strip(), "|", ",".join(m for m in unused if m in sys.modules))
"""


def test_the_schema_check_without_alembic_agrees_with_alembic(tmp_path: Path) -> None:
    """The head found without Alembic is Alembic's; and `gate` on that database (SQLite, at the
    head) imports the scorecard, not SQLAlchemy and the table models (it reads with `sqlite3`),
    the writers, the JSONPath engine, the progress bars or the scoring service (#24: gate <
    0.8 s)."""
    from alembic.script import ScriptDirectory

    from tracecard.server.cli.schema import at_head, head_revision
    from tracecard.traces.migrate import alembic_config, upgrade
    from tracecard.traces.store import Store

    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    assert [head_revision()] == heads
    url = f"sqlite:///{tmp_path / 'old.db'}"
    store = Store(url)
    try:
        assert not at_head(store)  # no schema at all: the command migrates
        upgrade(store, "7653a93eeb68")  # the first revision: an old database
        assert not at_head(store)
        store.create_schema()
        assert at_head(store)
    finally:
        store.dispose()
    done = subprocess.run(
        [sys.executable, "-c", GATE_PROBE, url],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    code, message, loaded = (part.strip() for part in done.stdout.split("|"))
    assert (code, loaded) == ("2", "")
    assert "no experiment with id 'nope'" in message


def test_exports_robustness_section_loads_no_server_stack() -> None:
    """`tracecard export --format json|md` reads the robustness section through
    `server.faults.robustness`: that must not load the runtime (aiohttp, OpenTelemetry), the
    app (Litestar) or the MCP client, as the fault package's eager `check` import once did
    (1,199 modules for an export instead of 536)."""
    probe = (
        "import sys, tracecard.server.faults.robustness\n"
        f"print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} + ('mcp',)"
        " and m.split('.')[0] != 'sqlalchemy')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == ""


def test_a_server_or_worker_start_loads_no_mcp_sdk() -> None:
    """`tracecard serve` and `tracecard worker` build the whole app; the MCP SDK (client,
    inbound checks, every wire model: ~0.5-0.8 s of CPU per process, #21's journey starts ten)
    loads with the first probe or stateless MCP request, not at start."""
    probe = (
        "import sys\n"
        "import tracecard.server.app, tracecard.server.jobs.worker\n"
        "import tracecard.server.orchestration.embedded, tracecard.server.jobs.cell\n"
        "print(','.join(sorted({m.split('.')[0] for m in sys.modules} & {'mcp', 'mcp_types'})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == ""


def test_the_deferred_protocol_constants_are_the_sdks() -> None:
    from mcp_types import INVALID_PARAMS
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    from tracecard.server import mcp_versions

    assert mcp_versions.modern_versions() == tuple(MODERN_PROTOCOL_VERSIONS)
    assert mcp_versions.INVALID_PARAMS == INVALID_PARAMS
