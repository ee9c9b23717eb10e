"""Periodic producers' dedupe claims in PostgreSQL, for durable inbox mode: a Redis that
lost its data made every producer send its rows again while the inboxes came back from
PostgreSQL.

Revision ID: 0021
Revises: 0020
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "producer_claims",
        sa.Column("producer", sa.String(100), primary_key=True),
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("producer_claims")
