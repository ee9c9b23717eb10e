"""Reliable deliveries get a tenant: definitions are named per tenant, and deliveries,
their history and their alerts belong to the tenant of their definition.

Every existing row goes to tenant `default`. The column has no server default after
that: every writer names the tenant.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

TABLES = ("delivery_definitions", "deliveries", "delivery_history", "delivery_alerts")


def upgrade() -> None:
    for table in TABLES:
        # Appended last in both deliveries and delivery_history, so their columns stay in
        # the same order (the history move is `INSERT ... SELECT *`).
        op.add_column(
            table, sa.Column("tenant", sa.String(64), nullable=False, server_default="default")
        )
        op.alter_column(table, "tenant", server_default=None)
    op.drop_constraint("pk_delivery_definitions", "delivery_definitions", type_="primary")
    op.create_primary_key("pk_delivery_definitions", "delivery_definitions", ["tenant", "name"])


def downgrade() -> None:
    """Only while every row is in tenant `default`: merging tenants would hand one
    tenant's deliveries to another's definition of the same name."""
    bind = op.get_bind()
    for table in TABLES:
        others = bind.execute(sa.text(f"SELECT count(*) FROM {table} WHERE tenant <> 'default'"))
        if others.scalar_one():
            raise RuntimeError(f"{table} has rows outside tenant 'default': cannot downgrade")
    op.drop_constraint("pk_delivery_definitions", "delivery_definitions", type_="primary")
    op.create_primary_key("pk_delivery_definitions", "delivery_definitions", ["name"])
    for table in TABLES:
        op.drop_column(table, "tenant")
