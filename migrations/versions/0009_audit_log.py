"""The audit log: every mutating admin request, who made it, on which tenant, and how it
ended.

Revision ID: 0009
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("key_name", sa.String(100), nullable=False),
        sa.Column("key_tenant", sa.String(64), nullable=True),
        sa.Column("method", sa.String(8), nullable=False),
        sa.Column("route", sa.String(300), nullable=False),
        sa.Column("target", sa.String(500), nullable=True),
        sa.Column("status", sa.SmallInteger, nullable=False),
    )
    op.create_index("ix_audit_log_tenant_id", "audit_log", ["tenant", "id"])


def downgrade() -> None:
    op.drop_index("ix_audit_log_tenant_id", table_name="audit_log")
    op.drop_table("audit_log")
