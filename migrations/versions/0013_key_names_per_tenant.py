"""API key names unique per tenant; users' token revocations ("not before").

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_constraint("uq_api_keys_name", "api_keys", type_="unique")
    # A hub-wide key (tenant NULL) counts as tenant '': unique among hub-wide keys too
    # (no tenant may be named '').
    op.create_index(
        "uq_api_keys_tenant_name",
        "api_keys",
        [sa.text("coalesce(tenant, '')"), "name"],
        unique=True,
    )
    op.create_table(
        "token_revocations",
        sa.Column("tenant", sa.String(64), primary_key=True),
        sa.Column("user_id", sa.String(200), primary_key=True),
        sa.Column("not_before", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("token_revocations")
    op.drop_index("uq_api_keys_tenant_name", table_name="api_keys")
    op.create_unique_constraint("uq_api_keys_name", "api_keys", ["name"])
