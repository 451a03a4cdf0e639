"""Alembic environment: run with the connection `tracecard.traces.migrate` hands over."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

import tracecard.traces.models  # noqa: F401  (registers the tables on SQLModel.metadata)

connection = context.config.attributes.get("connection")
target_metadata = SQLModel.metadata

if connection is None:
    url = context.config.get_main_option("sqlalchemy.url")
    context.configure(url=url, target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    context.configure(
        connection=connection, target_metadata=target_metadata, render_as_batch=True
    )
    with context.begin_transaction():
        context.run_migrations()
