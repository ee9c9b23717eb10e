"""Rules may thread their notifications: a thread key template per relationship.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("rule_recipients", sa.Column("thread_key", sa.String(1000), nullable=True))


def downgrade() -> None:
    op.drop_column("rule_recipients", "thread_key")
