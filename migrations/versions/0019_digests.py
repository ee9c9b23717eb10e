"""Digests: a burst of notifications under one key, per user, sent as one e-mail or push
when its window closes (issue 41 item 3): open digests and their items, the digest spec a
channel send and a rule carry.

Revision ID: 0019
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("channel_sends", sa.Column("digest", JSONB, nullable=True))
    op.add_column("rules", sa.Column("digest", JSONB, nullable=True))
    op.create_table(
        "digests",
        sa.Column("id", sa.String(26), primary_key=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("user_id", sa.String(200), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("spec", JSONB, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("item_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("first_sent", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("closed_by", sa.String(200), nullable=True),
    )
    op.create_index(
        "ux_digests_open",
        "digests",
        ["tenant", "user_id", "key"],
        unique=True,
        postgresql_where=sa.text("state = 'open'"),
    )
    op.create_index(
        "ix_digests_due",
        "digests",
        ["due_at"],
        postgresql_where=sa.text("state IN ('open', 'full')"),
    )
    op.create_index("ix_digests_user", "digests", ["tenant", "user_id"])
    op.create_table(
        "digest_items",
        sa.Column(
            "digest_id",
            sa.String(26),
            sa.ForeignKey("digests.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("notification_id", sa.String(26), primary_key=True),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("channels", JSONB, nullable=False),
        sa.Column("item", JSONB, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("digest_items")
    op.drop_index("ix_digests_user", table_name="digests")
    op.drop_index("ix_digests_due", table_name="digests")
    op.drop_index("ux_digests_open", table_name="digests")
    op.drop_table("digests")
    op.drop_column("rules", "digest")
    op.drop_column("channel_sends", "digest")
