"""Channels beyond the inbox: e-mail and Web Push per notification and rule, a per-channel
preference matrix with tenant defaults, and the channel-send jobs the worker expands.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "rules",
        sa.Column("channels", JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
    )
    op.add_column(
        "preferences",
        sa.Column("email", sa.Boolean, nullable=False, server_default=sa.true()),
    )
    op.create_table(
        "preference_defaults",
        sa.Column("tenant", sa.String(64), primary_key=True),
        sa.Column("category", sa.String(64), primary_key=True),
        sa.Column("inbox", sa.Boolean, nullable=False),
        sa.Column("email", sa.Boolean, nullable=False),
        sa.Column("push", sa.Boolean, nullable=False),
    )
    op.create_table(
        "channel_sends",
        sa.Column("id", sa.String(26), primary_key=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("notification", JSONB, nullable=False),
        sa.Column("channels", JSONB, nullable=False),
        sa.Column("users", JSONB, nullable=False),
        sa.Column("push_ttl_named", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("expanded", sa.Integer, nullable=False, server_default="0"),
        sa.Column("failures", sa.Integer, nullable=False, server_default="0"),
        sa.Column("retry_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.String(1000), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("done_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index(
        "ix_channel_sends_open",
        "channel_sends",
        ["created_at"],
        postgresql_where=sa.text("done_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_channel_sends_open", table_name="channel_sends")
    op.drop_table("channel_sends")
    op.drop_table("preference_defaults")
    op.drop_column("preferences", "email")
    op.drop_column("rules", "channels")
