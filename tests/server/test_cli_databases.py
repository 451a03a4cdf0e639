"""The first hour of a new user (#14, items 5 and 10): a command names the database it looked
in, a read-only one never creates one, and a database that cannot be opened is one line."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tracecard.server.cli.main import main


def test_5_read_only_commands_never_create_a_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for argv in (
        ["export", "--experiment", "x"],
        ["gate", "--experiment", "x", "--min", "outcome=0.8"],
        ["score", "--experiment", "x"],
        ["compare", "a", "b"],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("tracecard: no database at .tracecard/tracecard.db: pass --db"), err
        assert len(err.splitlines()) == 1
    assert not (tmp_path / ".tracecard").exists()


def test_5_serve_on_a_taken_port_creates_no_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err and "--port 0" in err
    assert not (tmp_path / ".tracecard").exists()  # the port is checked before the database


def test_5_no_experiment_names_the_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tracecard.traces.store import Store

    db = tmp_path / "real.db"
    store = Store(f"sqlite:///{db}")
    store.create_schema()
    store.dispose()
    assert main(["export", "--experiment", "nope", "--db", str(db)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"tracecard: no experiment with id 'nope' in database {db}"


@pytest.mark.postgres
def test_10_a_missing_postgres_database_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.conftest import PG_URL, pg_available

    if pg_available() is not None:
        pytest.skip("PostgreSQL not reachable")
    missing = PG_URL.rsplit("/", 1)[0] + "/no_such_db_c14"
    for argv in (["serve", "--port", "0", "--db", missing], ["export", "--experiment", "x"]):
        if argv[0] == "export":
            argv += ["--db", missing]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("tracecard: cannot open database postgresql://"), err
        assert err.rstrip().endswith("(the database must exist: createdb no_such_db_c14)"), err
        assert len(err.splitlines()) == 1
    # a server that is not there is not a database to create
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    assert main(["export", "--experiment", "x", "--db", f"postgresql://127.0.0.1:{port}/t"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tracecard: cannot open database postgresql://127.0.0.1:{port}/t: ")
    assert "refused" in err and "createdb" not in err and len(err.splitlines()) == 1
