"""The delayed queue's recovery log: messages and status transitions.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "delayed_messages",
        sa.Column("id", sa.String(26), primary_key=True),
        sa.Column("topic", sa.String(100), nullable=False),
        sa.Column("body", JSONB, nullable=False),
        sa.Column("priority", sa.SmallInteger, nullable=False),
        sa.Column("ttl_ms", sa.Integer, nullable=False),
        sa.Column("biz_key", sa.String(200)),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("status", sa.String(16), nullable=False),
    )
    op.create_index("ix_delayed_messages_topic", "delayed_messages", ["topic"])
    op.create_index("ix_delayed_messages_status", "delayed_messages", ["status"])
    op.create_table(
        "delayed_transitions",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("message_id", sa.String(26), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("set_index", sa.SmallInteger),
        sa.Column("worker", sa.String(100)),
        sa.Column("host", sa.String(200)),
    )
    op.create_index("ix_delayed_transitions_message_id", "delayed_transitions", ["message_id"])


def downgrade() -> None:
    op.drop_table("delayed_transitions")
    op.drop_table("delayed_messages")
