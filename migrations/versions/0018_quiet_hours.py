"""Quiet hours: a user's weekly schedule, and a tenant's default schedule and zone.

Revision ID: 0018
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "quiet_hours",
        sa.Column("tenant", sa.String(64), primary_key=True),
        sa.Column("user_id", sa.String(200), primary_key=True),
        sa.Column("schedule", JSONB, nullable=False),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )
    op.create_table(
        "quiet_defaults",
        sa.Column("tenant", sa.String(64), primary_key=True),
        sa.Column("schedule", JSONB, nullable=False),
        sa.Column("time_zone", sa.String(64), nullable=True),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )


def downgrade() -> None:
    op.drop_table("quiet_defaults")
    op.drop_table("quiet_hours")
