"""Inbox views (tabs): the tenant's and each user's named filters, and the version of
each set that users' Redis copies follow.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "inbox_views",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("name", sa.String(32), nullable=False),
        sa.Column("label", sa.String(64), nullable=True),
        sa.Column("filter", JSONB, nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.UniqueConstraint("tenant", "owner", "name"),
    )
    op.create_table(
        "inbox_view_versions",
        sa.Column("tenant", sa.String(64), primary_key=True),
        sa.Column("owner", sa.String(200), primary_key=True),
        sa.Column("version", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("inbox_view_versions")
    op.drop_table("inbox_views")
