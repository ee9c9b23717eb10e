"""Languages: each user's locale, and rules' translations per relationship.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "user_locales",
        sa.Column("tenant", sa.String(64), primary_key=True),
        sa.Column("user_id", sa.String(200), primary_key=True),
        sa.Column("locale", sa.String(35), nullable=False),
    )
    op.add_column("rule_recipients", sa.Column("locales", JSONB, nullable=True))


def downgrade() -> None:
    op.drop_column("rule_recipients", "locales")
    op.drop_table("user_locales")
