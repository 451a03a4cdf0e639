"""component names up to 128 characters in scores and verdicts (were 32)

A third-party `@scorer(component=...)` may have a longer name than the built-ins; PostgreSQL
refused its scores at 33 characters. SQLite never enforced the length (batch mode recreates the
tables with their constraints and indexes, rows kept).

Revision ID: c5e7a2d94b31
Revises: b3f1c0de9a17
Create Date: 2026-12-01 17:00:00
"""

from collections.abc import Sequence

import sqlmodel
from alembic import op


revision: str = 'c5e7a2d94b31'
down_revision: str | None = 'b3f1c0de9a17'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ('scores', 'verdicts')


def _component(old: int, new: int) -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.alter_column(
                'component',
                existing_type=sqlmodel.sql.sqltypes.AutoString(length=old),
                type_=sqlmodel.sql.sqltypes.AutoString(length=new),
                existing_nullable=False,
            )


def upgrade() -> None:
    _component(32, 128)


def downgrade() -> None:
    # Fails on PostgreSQL while a stored component name is longer than 32 characters.
    _component(128, 32)
