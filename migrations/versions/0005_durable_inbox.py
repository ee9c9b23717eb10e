"""Durable inbox mode: notifications, their recipients, and users' state changes.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "inbox_notifications",
        sa.Column("id", sa.String(26), primary_key=True),
        sa.Column("content", sa.LargeBinary, nullable=False),
        sa.Column("pull", sa.Boolean, nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_inbox_notifications_expires_at", "inbox_notifications", ["expires_at"])
    op.create_table(
        "inbox_recipients",
        sa.Column("notification_id", sa.String(26), primary_key=True),
        sa.Column("tenant", sa.String(64), primary_key=True),
        sa.Column("user_id", sa.String(200), primary_key=True),
    )
    op.create_table(
        "inbox_changes",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("user_id", sa.String(200), nullable=False),
        sa.Column("op", JSONB, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("inbox_changes")
    op.drop_table("inbox_recipients")
    op.drop_table("inbox_notifications")
