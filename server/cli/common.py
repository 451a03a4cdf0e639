"""What every command shares: the common flags, quiet logging, finding and loading the
settings, opening an existing database, binding the real port, JSON output and usage errors."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracecard.server.errors import ConfigError, RunError

if TYPE_CHECKING:  # (imported when used: parsing a command's arguments loads none of them)
    import socket

    from tracecard.server.settings import Settings

__all__ = [
    "EXIT_FAILED",
    "EXIT_INFRA",
    "EXIT_USAGE",
    "UsageError",
    "add_common_flags",
    "bind_socket",
    "configure_logging",
    "describe_db",
    "existing_store",
    "print_json",
    "read_settings",
    "settings_from_args",
    "warn",
]

EXIT_FAILED = 1  # the command ran and the answer is "no" (gate failed, a run errored, ...)
EXIT_USAGE = 2  # the command could not do what was asked (bad flag, missing file, ...)
# the infrastructure failed, not the agent (a worker lost, a sandbox or a per-run upstream that
# never started): not an answer; resume or rerun the experiment (docs/workers.md)
EXIT_INFRA = 3
LOG_LEVELS = ("debug", "info", "warning", "error")
# Libraries that narrate at INFO (Alembic's plugin set-up, httpx's request lines): kept at
# WARNING unless --log-level debug asks for everything.
CHATTY_LOGGERS = ("alembic", "httpx", "httpcore", "mcp", "uvicorn.error", "uvicorn.access")


class UsageError(RunError):
    """A flag or an argument that cannot be used as given (exit code 2)."""


def add_common_flags(parser: argparse.ArgumentParser, top: bool = False) -> None:
    """`--log-level` and `--debug`, accepted before or after the subcommand."""
    default: Any = "warning" if top else argparse.SUPPRESS
    parser.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default=default,
        help="log level (default warning: quiet)",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="show the traceback of an unexpected error",
    )


def configure_logging(level: str) -> None:
    """Root at `level`; the chatty libraries at WARNING unless `level` is debug."""
    import logging

    number = getattr(logging, level.upper())
    logging.basicConfig(level=number, format="%(levelname)s %(name)s: %(message)s", force=True)
    for name in CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(number if number <= logging.DEBUG else logging.WARNING)


def warn(message: str) -> None:
    """A one-line warning on stderr (never mixed into --json output)."""
    print(f"tracecard: warning: {message}", file=sys.stderr, flush=True)


def config_path(args: argparse.Namespace) -> str | None:
    """`--config`, else `tracecard.toml` in the current folder or a parent."""
    given = getattr(args, "config", None)
    if given:
        return str(given)
    from tracecard.server.settings import find_config

    found = find_config()
    return None if found is None else str(found)


def settings_from_args(args: argparse.Namespace, **overrides: Any) -> Settings:
    """The settings of this command; the config file used is named on stderr."""
    from tracecard.server.settings import load_settings

    path = config_path(args)
    if path is not None:
        print(f"config: {path}", file=sys.stderr, flush=True)
    return load_settings(path, **overrides)


def _candidates(folder: Path = Path(".tracecard")) -> list[Path]:
    """SQLite databases a tracecard command left under `.tracecard/` (`demo/` included)."""
    found = [*folder.glob("*.db"), *folder.glob("*/tracecard.db")]
    return sorted(p for p in found if p.is_file())


def read_settings(args: argparse.Namespace) -> Settings:
    """The settings of a command that reads an existing database. With neither `--db` nor a
    configured `db`, and no `.tracecard/tracecard.db`: the one database under `.tracecard/`
    (the demo's is `.tracecard/demo/tracecard.db`), named on stderr; several: a usage error
    listing them."""
    from tracecard.traces.urls import default_db_url, normalise_url

    given = getattr(args, "db", None)
    settings = settings_from_args(args, db=given)
    if given or normalise_url(settings.db) != normalise_url(default_db_url()):
        return settings
    default = describe_db(settings.db)
    if Path(default).is_file():
        return settings
    candidates = _candidates(Path(default).parent)
    if len(candidates) == 1:
        print(
            f"database: {candidates[0]} (there is no {default}; --db {candidates[0]} says so)",
            file=sys.stderr,
            flush=True,
        )
        return settings.model_copy(update={"db": f"sqlite:///{candidates[0].as_posix()}"})
    if candidates:
        listed = ", ".join(str(c) for c in candidates)
        raise UsageError(f"no database at {default}; pass --db with one of: {listed}")
    return settings


def describe_db(url: str) -> str:
    """The database as a person would name it: the SQLite file, or the URL without password."""
    from tracecard.traces.urls import is_sqlite, normalise_url

    url = normalise_url(url)
    if is_sqlite(url):
        return url.split("///", 1)[1] if "///" in url else url
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True).replace("+psycopg", "")


def database_problem(url: str, exc: BaseException) -> str:
    """One line about a database that cannot be opened, with what to do."""
    first = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    reason = first[0] if first else type(exc).__name__
    from tracecard.traces.engine import is_sqlite

    hint = ""
    if not is_sqlite(url) and re.search(r'database ".*" does not exist', reason):
        from sqlalchemy.engine import make_url  # (not for a server that is down, a bad role)

        hint = f" (the database must exist: createdb {make_url(url).database or 'NAME'})"
    return f"cannot open database {describe_db(url)}: {reason}{hint}"


def check_database(url: str) -> None:
    """Connect once, so that a wrong URL is one line before anything starts."""
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    from tracecard.traces.engine import make_engine

    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            connection.execute(text("select 1"))
    except SQLAlchemyError as exc:
        raise ConfigError(database_problem(url, exc)) from exc
    finally:
        engine.dispose()


@contextmanager
def existing_store(settings: Settings) -> Iterator[Any]:
    """The store of a database that already exists (read-only commands never create one);
    "no experiment" errors name the database they looked in."""
    from sqlalchemy.exc import SQLAlchemyError

    from tracecard.server.cli.schema import at_head
    from tracecard.traces.engine import is_sqlite, normalise_url
    from tracecard.traces.store import Store

    url = normalise_url(settings.db)
    where = describe_db(url)
    if is_sqlite(url) and where != ":memory:" and not Path(where).is_file():
        raise UsageError(
            f"no database at {where}: pass --db URL (or --config with a `db`), or record "
            "something first with `tracecard run` or `tracecard serve`",
            404,
        )
    check_database(url)
    store = Store(url)
    try:
        if not at_head(store):  # (checked without Alembic: 0.5 s of every command's start)
            store.create_schema()  # an existing database is brought to the current schema
        yield store
    except RunError as exc:
        if exc.status_code == 404:
            raise RunError(f"{exc} in database {where}", 404) from exc
        raise
    except SQLAlchemyError as exc:
        raise ConfigError(database_problem(url, exc)) from exc
    finally:
        store.dispose()


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0: any free one), so that the printed and
    handed-out URLs carry the port really bound."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(
            f"cannot listen on {host}:{port} ({exc.strerror}): a tracecard already running? "
            "pass --port PORT, or --port 0 for a free one"
        ) from exc
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def print_json(document: Any) -> None:
    """One JSON document on stdout, for scripts (`--json`)."""
    import orjson

    sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
    sys.stdout.flush()
