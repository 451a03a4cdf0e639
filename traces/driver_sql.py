"""Core statements compiled once per dialect and run on the driver's cursor.

SQLAlchemy's execution of a cached statement costs ~60-100 µs here (the cache lookup, the
parameters processed, a result's metadata built), where SQLite runs a small query in ~15 µs. A
run's end runs a handful of such queries with every MCP session (`traces/run_summary.py`), so
those go through here: the statement is compiled once for the engine's dialect, its fixed
parameters (JSON paths, literals) processed once by their types, and each execution hands the
SQL and the variables to the DBAPI cursor of the SQLAlchemy connection, in its transaction.

For statements whose variable parameters are plain strings and numbers and whose result columns
are read as the driver returns them (ints, strings): no type processing happens per execution.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from typing import Any, cast

from sqlalchemy import Connection, Dialect
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

__all__ = ["DriverStatement"]

_FETCH = 64  # rows fetched at a time by `iterate`


class DriverStatement:
    """One statement, compiled for one dialect; `rows(connection, **variables)` runs it. The
    parameters named in `variables` are given at each execution, the others are fixed."""

    __slots__ = ("_fixed", "_names", "_positional", "sql")

    def __init__(self, statement: ClauseElement, dialect: Dialect, variables: set[str]) -> None:
        compiled = cast(SQLCompiler, statement.compile(dialect=dialect))
        self.sql = str(compiled)
        if "POSTCOMPILE" in self.sql:  # an IN: SQLAlchemy renders its SQL at each execution
            raise ValueError("a statement with an IN cannot be compiled once: use OR or =")
        positions = compiled.positiontup
        self._positional = positions is not None
        if positions is None:  # named (psycopg's %(name)s): the names the SQL holds, once each
            positions = list(dict.fromkeys(re.findall(r"%\(([^)]+)\)s", self.sql)))
        self._names: tuple[str, ...] = tuple(positions)
        self._fixed: dict[str, Any] = {}
        for name in set(self._names):
            bind = compiled.binds[name]
            if name in variables:
                continue
            value = bind.effective_value
            process = bind.type.dialect_impl(dialect).bind_processor(dialect)
            self._fixed[name] = process(value) if process is not None else value

    def rows(self, connection: Connection, **variables: Any) -> list[tuple[Any, ...]]:
        """Every row, as the driver returns it, on `connection` (in its transaction); variables
        the statement does not hold are ignored."""
        return list(self.iterate(connection, **variables))

    def iterate(
        self, connection: Connection, **variables: Any
    ) -> Generator[tuple[Any, ...], None, None]:
        """The rows as they are fetched, a few at a time (a caller that stops early has not
        held them all in memory); the cursor closes when the iteration ends or is dropped."""
        values = {**self._fixed, **variables}
        params: Any = (
            tuple(values[name] for name in self._names)
            if self._positional
            else {name: values[name] for name in self._names}
        )
        cursor = connection.connection.cursor()
        try:
            cursor.execute(self.sql, params)
            if cursor.description is None:  # (a write: no rows)
                return
            while batch := cursor.fetchmany(_FETCH):
                yield from batch
        finally:
            cursor.close()
