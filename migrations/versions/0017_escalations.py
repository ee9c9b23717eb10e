"""Escalation: a notification's steps that send an e-mail or Web Push later, unless the
user's copy was seen, read or archived by then (one row per user and step), and the
tenants' default steps per category.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "rules",
        sa.Column("escalate", JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
    )
    op.create_table(
        "escalations",
        sa.Column("id", sa.String(26), primary_key=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("user_id", sa.String(200), nullable=False),
        sa.Column("notification_id", sa.String(26), nullable=False),
        sa.Column("step", sa.SmallInteger, nullable=False),
        sa.Column("unless", sa.String(16), nullable=False),
        sa.Column("channel", sa.String(16), nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("notification", JSONB, nullable=False),
        sa.Column("push_ttl_named", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("status", sa.String(16), nullable=False, server_default="pending"),
        sa.Column("outcome", sa.String(200), nullable=True),
        sa.Column("done_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index(
        "ix_escalations_due",
        "escalations",
        ["due_at"],
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_index("ix_escalations_user", "escalations", ["tenant", "user_id"])
    op.create_table(
        "escalation_defaults",
        sa.Column("tenant", sa.String(64), primary_key=True),
        sa.Column("category", sa.String(64), primary_key=True),
        sa.Column("steps", JSONB, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("escalation_defaults")
    op.drop_index("ix_escalations_user", table_name="escalations")
    op.drop_index("ix_escalations_due", table_name="escalations")
    op.drop_table("escalations")
    op.drop_column("rules", "escalate")
