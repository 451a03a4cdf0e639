"""job_attempts and job_workers: trials as durable jobs (issue #21, server/jobs)

Each attempt at an (experiment, task, trial) cell is kept (a lost one as `lost`, never scored
as the agent's), and each worker's heartbeat says whether its cells need recovering elsewhere.

Revision ID: f1a2b3c4d5e6
Revises: f3b9d2a6c8e1
Create Date: 2026-12-03 14:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "f1a2b3c4d5e6"
down_revision: str | None = "f3b9d2a6c8e1"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_attempts",
        sa.Column("run_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("experiment_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("task_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("trial", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("executor", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("host", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
        sa.Column("state", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("started_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("ended_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("run_id"),
    )
    op.create_index(
        "ix_job_attempts_cell", "job_attempts", ["experiment_id", "task_id", "trial"]
    )
    op.create_table(
        "job_workers",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("host", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("concurrency", sa.Integer(), nullable=False),
        sa.Column("running", sa.Integer(), nullable=False),
        sa.Column("started_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("heartbeat_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("stopped_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("recovered_by", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_job_workers_heartbeat", "job_workers", ["heartbeat_at"])


def downgrade() -> None:
    op.drop_index("ix_job_workers_heartbeat", table_name="job_workers")
    op.drop_table("job_workers")
    op.drop_index("ix_job_attempts_cell", table_name="job_attempts")
    op.drop_table("job_attempts")
