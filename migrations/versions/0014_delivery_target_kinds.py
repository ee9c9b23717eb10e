"""Delivery definitions name a target kind (`webhook`, the default, `email` or `rabbitmq`).

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "delivery_definitions",
        sa.Column("kind", sa.String(16), nullable=False, server_default="webhook"),
    )
    op.add_column("delivery_definitions", sa.Column("email", JSONB, nullable=True))
    op.add_column("delivery_definitions", sa.Column("rabbitmq", JSONB, nullable=True))


def downgrade() -> None:
    op.drop_column("delivery_definitions", "rabbitmq")
    op.drop_column("delivery_definitions", "email")
    op.drop_column("delivery_definitions", "kind")
