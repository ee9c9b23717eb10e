"""Delayed messages are looked up by the object their body names: a snooze's wake-ups by
the copy's id (`body ->> 'id'`), when a re-snooze, an unsnooze or a recall removes the
ones made moot (services/snooze.py `forget`). Without an index each lookup read every
wake-up of the tenant's queue.

Revision ID: 0023
Revises: 0022
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_delayed_messages_body_id",
        "delayed_messages",
        ["tenant", "topic", sa.text("(body ->> 'id')")],
    )


def downgrade() -> None:
    op.drop_index("ix_delayed_messages_body_id", table_name="delayed_messages")
