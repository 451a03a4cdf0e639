"""run_infra_failures: a run's per-run upstream that never started, recorded when it happens so
every process sees it (issue #21, tracecard.traces.infra_failures)

Revision ID: b8d4f2a6c1e3
Revises: a7c3e9d1b2f4
Create Date: 2026-12-03 20:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "b8d4f2a6c1e3"
down_revision: str | None = "a7c3e9d1b2f4"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_infra_failures",
        sa.Column("run_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("upstream", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("reason", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("why", sa.Text(), nullable=False),
        sa.Column("recorded_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "upstream"),
    )


def downgrade() -> None:
    op.drop_table("run_infra_failures")
