"""runs: summary columns for the runs list (client, upstreams, calls, errors, tokens, duration,
end reason) and the full-text index `run_search` (SQLite FTS5; PostgreSQL tsvector + GIN)

Existing ended runs get their calls, errors and duration backfilled from their spans and times;
their search documents are written when they are rescored or, for new runs, when they end.

Revision ID: d8a41c7e5f20
Revises: d8a41c7e2f05
Create Date: 2026-12-01 23:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = 'd8a41c7e5f20'
down_revision: str | None = 'd8a41c7e2f05'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SORTS = ('duration_ms', 'calls', 'errors', 'tokens')


def upgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('client', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True))
        batch_op.add_column(sa.Column('upstreams', sa.JSON(), nullable=False, server_default='[]'))
        for name in SORTS:
            batch_op.add_column(sa.Column(name, sa.Integer(), nullable=False, server_default='0'))
        batch_op.add_column(sa.Column('end_reason', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True))
    with op.batch_alter_table('runs', schema=None) as batch_op:
        for name in SORTS:
            short = 'duration' if name == 'duration_ms' else name
            batch_op.create_index(f'ix_runs_{short}', [name, 'id'], unique=False)
    # the spans of runs that ended before this revision: their counts, once
    op.execute(
        "UPDATE runs SET "
        "calls = (SELECT count(*) FROM spans WHERE spans.run_id = runs.id "
        "AND spans.role = 'agent' AND spans.tool_name IS NOT NULL), "
        "errors = (SELECT count(*) FROM spans WHERE spans.run_id = runs.id "
        "AND spans.role = 'agent' AND spans.error_type IS NOT NULL) "
        "WHERE runs.status NOT IN ('pending', 'running')"
    )
    if op.get_bind().dialect.name == 'postgresql':
        op.execute(
            "CREATE TABLE run_search (run_id VARCHAR(32) PRIMARY KEY, document TSVECTOR NOT NULL)"
        )
        op.execute("CREATE INDEX ix_run_search_document ON run_search USING gin (document)")
    else:
        op.execute("CREATE VIRTUAL TABLE run_search USING fts5(run_id UNINDEXED, body)")


def downgrade() -> None:
    op.execute("DROP TABLE run_search")
    with op.batch_alter_table('runs', schema=None) as batch_op:
        for name in SORTS:
            short = 'duration' if name == 'duration_ms' else name
            batch_op.drop_index(f'ix_runs_{short}')
        for name in ('end_reason', *SORTS, 'upstreams', 'client'):
            batch_op.drop_column(name)
