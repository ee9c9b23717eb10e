"""Reliable deliveries: definitions, the outbox, its history, attempts, alerts.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

OPEN = "status IN ('pending', 'failed', 'awaiting_confirm')"


def _delivery_columns() -> list[sa.Column[object]]:
    return [
        sa.Column("id", sa.String(26), primary_key=True),
        sa.Column("definition", sa.String(100), nullable=False),
        sa.Column("payload", JSONB, nullable=False),
        sa.Column("description", sa.String(1000)),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("failures", sa.Integer, nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_attempt_at", sa.DateTime(timezone=True)),
        sa.Column("last_error", sa.String(1000)),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
    ]


def upgrade() -> None:
    op.create_table(
        "delivery_definitions",
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("url", sa.String(2000), nullable=False),
        sa.Column("timeout_s", sa.Float, nullable=False),
        sa.Column("retry_intervals", sa.String(500), nullable=False),
        sa.Column("max_retries", sa.Integer, nullable=False),
        sa.Column("alert_trigger", sa.String(16), nullable=False),
        sa.Column("alert_after_n", sa.Integer),
        sa.Column("alert_emails", JSONB, nullable=False),
        sa.Column("alert_webhook_url", sa.String(2000)),
        sa.Column("need_confirm", sa.Boolean, nullable=False),
        sa.Column("max_confirm_delay_s", sa.Integer, nullable=False),
        sa.Column("secret", sa.String(200), nullable=False),
        sa.Column("previous_secret", sa.String(200)),
        sa.Column("disabled_at", sa.DateTime(timezone=True)),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
    )
    op.create_table("deliveries", *_delivery_columns())
    op.create_index(
        "ix_deliveries_due", "deliveries", ["next_attempt_at"], postgresql_where=sa.text(OPEN)
    )
    op.create_index(
        "ix_deliveries_finished",
        "deliveries",
        ["finished_at"],
        postgresql_where=sa.text("finished_at IS NOT NULL"),
    )
    op.create_table("delivery_history", *_delivery_columns())
    op.create_table(
        "delivery_attempts",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("delivery_id", sa.String(26), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("status_code", sa.Integer),
        sa.Column("error", sa.String(1000)),
        sa.Column("duration_ms", sa.Float, nullable=False),
        sa.UniqueConstraint("delivery_id", "attempt", name="uq_delivery_attempts"),
    )
    op.create_table(
        "delivery_alerts",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("delivery_id", sa.String(26), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("channel", sa.String(8), nullable=False),
        sa.Column("definition", sa.String(100), nullable=False),
        sa.Column("failures", sa.Integer, nullable=False),
        sa.Column("final", sa.Boolean, nullable=False),
        sa.Column("error", sa.String(1000)),
        sa.Column("claims", sa.Integer, nullable=False),
        sa.Column(
            "due_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("sent_at", sa.DateTime(timezone=True)),
        sa.UniqueConstraint("delivery_id", "attempt", "channel", name="uq_delivery_alerts"),
    )
    op.create_index(
        "ix_delivery_alerts_due",
        "delivery_alerts",
        ["due_at"],
        postgresql_where=sa.text("sent_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_table("delivery_alerts")
    op.drop_table("delivery_attempts")
    op.drop_table("delivery_history")
    op.drop_table("deliveries")
    op.drop_table("delivery_definitions")
