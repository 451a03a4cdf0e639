"""runs: `score_verdict`, what a run's scores say (passed, failed, not_evaluated), written with
its scores, and the index `ix_runs_verdict_created` that serves the runs list's `status=failed`

Existing runs get it from their stored scores, as `tracecard.scorers.verdict.scores_verdict`
defines it: failed when any score failed, else passed when one passed, else not_evaluated.

Revision ID: f3b9d2a6c8e1
Revises: d8a41c7e5f20
Create Date: 2026-12-03 14:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = 'f3b9d2a6c8e1'
down_revision: str | None = 'd8a41c7e5f20'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                'score_verdict',
                sqlmodel.sql.sqltypes.AutoString(length=16),
                nullable=False,
                server_default='not_evaluated',
            )
        )
    # `NOT passed` / `passed`: true on SQLite's 0/1 and PostgreSQL's booleans alike; NULL is
    # "not evaluated" and matches neither
    op.execute(
        "UPDATE runs SET score_verdict = 'failed' WHERE EXISTS "
        "(SELECT 1 FROM scores WHERE scores.run_id = runs.id AND NOT scores.passed)"
    )
    op.execute(
        "UPDATE runs SET score_verdict = 'passed' WHERE score_verdict = 'not_evaluated' "
        "AND EXISTS (SELECT 1 FROM scores WHERE scores.run_id = runs.id AND scores.passed)"
    )
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.create_index(
            'ix_runs_verdict_created', ['score_verdict', 'created_at', 'status'], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_index('ix_runs_verdict_created')
        batch_op.drop_column('score_verdict')
