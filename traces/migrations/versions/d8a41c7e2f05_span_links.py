"""spans.links: OpenTelemetry span links (a tool span's link to the model span that asked for it)

Existing spans get `[]`: they were recorded without links.

Revision ID: d8a41c7e2f05
Revises: e4a1f0c2d7b9
Create Date: 2026-12-01 23:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = 'd8a41c7e2f05'
down_revision: str | None = 'e4a1f0c2d7b9'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # a plain ADD COLUMN on both databases: the spans table is not copied
    op.add_column('spans', sa.Column('links', sa.JSON(), nullable=False, server_default='[]'))


def downgrade() -> None:
    with op.batch_alter_table('spans', schema=None) as batch_op:
        batch_op.drop_column('links')
