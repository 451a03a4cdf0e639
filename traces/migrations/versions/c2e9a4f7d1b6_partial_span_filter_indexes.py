"""spans: ix_spans_tool and ix_spans_error hold only the spans that name a tool or an error

Most spans (model calls, agent steps) have neither; every insert still wrote a (NULL, run_id)
entry into both indexes. The viewer's queries that read them (`tool_name IS NOT NULL`, a prefix
of a tool or error name) select non-NULL values only, which a partial index answers.

Revision ID: c2e9a4f7d1b6
Revises: b8d4f2a6c1e3
Create Date: 2026-12-03 23:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "c2e9a4f7d1b6"
down_revision: str | None = "b8d4f2a6c1e3"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_INDEXES = (("ix_spans_tool", "tool_name"), ("ix_spans_error", "error_type"))


def upgrade() -> None:
    for name, column in _INDEXES:
        op.drop_index(name, table_name="spans")
        where = sa.text(f"{column} IS NOT NULL")
        op.create_index(
            name, "spans", [column, "run_id"], sqlite_where=where, postgresql_where=where
        )


def downgrade() -> None:
    for name, column in _INDEXES:
        op.drop_index(name, table_name="spans")
        op.create_index(name, "spans", [column, "run_id"])
