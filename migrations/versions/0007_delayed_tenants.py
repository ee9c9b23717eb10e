"""Delayed messages belong to a tenant: their queue is (tenant, topic).

Existing rows go to "default", except scheduled notifications (topic
`notifyhub.scheduled`), which go to their notification's tenant. No server default is
kept: a hub older than this revision inserting a row without a tenant fails instead of
filing another tenant's scheduled notification under "default" (run one version at a
time, as the delayed queue's Redis layout already asks).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

SCHEDULED_TOPIC = "notifyhub.scheduled"


def upgrade() -> None:
    op.add_column(
        "delayed_messages",
        sa.Column("tenant", sa.String(64), nullable=False, server_default="default"),
    )
    op.execute(
        sa.text(
            "UPDATE delayed_messages"
            " SET tenant = COALESCE(body -> 'draft' ->> 'tenant', 'default')"
            " WHERE topic = :topic"
        ).bindparams(topic=SCHEDULED_TOPIC)
    )
    op.alter_column("delayed_messages", "tenant", server_default=None)
    op.create_index("ix_delayed_messages_tenant", "delayed_messages", ["tenant"])


def downgrade() -> None:
    op.drop_index("ix_delayed_messages_tenant", table_name="delayed_messages")
    op.drop_column("delayed_messages", "tenant")
