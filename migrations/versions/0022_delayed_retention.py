"""Finished delayed messages record when they finished, so the retention sweep can remove
them (`delayed.retention_s` later) instead of keeping every row forever.

Rows already finished get the time of their finishing transition when the log has it,
else the upgrade's: none is removed sooner than it would have been had the column always
been there, and those with no logged finish are kept a whole retention from now. The
index covers finished rows only: the sweep reads them oldest first, a page at a time.

Revision ID: 0022
Revises: 0021
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "delayed_messages", sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.execute(
        "UPDATE delayed_messages m SET finished_at = COALESCE(("
        " SELECT max(t.at) FROM delayed_transitions t"
        " WHERE t.message_id = m.id AND t.status = m.status"
        "), now()) WHERE m.status IN ('consumed', 'cancelled')"
    )
    op.create_index(
        "ix_delayed_messages_finished_at",
        "delayed_messages",
        ["finished_at"],
        postgresql_where=sa.text("finished_at IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_delayed_messages_finished_at", table_name="delayed_messages")
    op.drop_column("delayed_messages", "finished_at")
