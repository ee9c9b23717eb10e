"""Alerts that cannot be sent are given up after `deliveries.alert_tries` tries, with
doubling waits between them (before: claimed again after every lease, with no end).

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "delivery_alerts", sa.Column("given_up_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.drop_index("ix_delivery_alerts_due", table_name="delivery_alerts")
    op.create_index(
        "ix_delivery_alerts_due",
        "delivery_alerts",
        ["due_at"],
        postgresql_where=sa.text("sent_at IS NULL AND given_up_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_delivery_alerts_due", table_name="delivery_alerts")
    op.create_index(
        "ix_delivery_alerts_due",
        "delivery_alerts",
        ["due_at"],
        postgresql_where=sa.text("sent_at IS NULL"),
    )
    op.drop_column("delivery_alerts", "given_up_at")
