"""experiments.environment: the replay source and fault plan an experiment runs under

Stored with the experiment (JSON, null for a live experiment) so that whatever starts its runs
(this process, a later worker) serves them the same recorded answers and the same faults.

Revision ID: e4a1f0c2d7b9
Revises: c5e7a2d94b31
Create Date: 2026-12-01 23:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = "e4a1f0c2d7b9"
down_revision: str | None = "c5e7a2d94b31"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("experiments", schema=None) as batch_op:
        batch_op.add_column(sa.Column("environment", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("experiments", schema=None) as batch_op:
        batch_op.drop_column("environment")
