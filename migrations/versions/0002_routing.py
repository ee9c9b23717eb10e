"""Topics, rules, relationships, subscription opt-outs and preferences.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def _created() -> sa.Column[sa.DateTime]:
    return sa.Column(
        "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
    )


def upgrade() -> None:
    op.execute("CREATE SEQUENCE topic_version_seq")
    op.create_table(
        "topics",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column(
            "version",
            sa.BigInteger,
            server_default=sa.text("nextval('topic_version_seq')"),
            nullable=False,
        ),
        _created(),
        sa.UniqueConstraint("tenant", "name", name="uq_topics_tenant_name"),
    )
    op.create_table(
        "topic_members",
        sa.Column(
            "topic_id",
            sa.BigInteger,
            sa.ForeignKey("topics.id", ondelete="CASCADE", name="fk_topic_members_topic_id_topics"),
            primary_key=True,
        ),
        sa.Column("kind", sa.String(8), primary_key=True),
        sa.Column("member", sa.String(200), primary_key=True),
    )
    op.create_table(
        "rules",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("target_type", sa.String(64), nullable=False),
        _created(),
        sa.UniqueConstraint("tenant", "name", name="uq_rules_tenant_name"),
    )
    op.create_table(
        "rule_recipients",
        sa.Column(
            "rule_id",
            sa.BigInteger,
            sa.ForeignKey("rules.id", ondelete="CASCADE", name="fk_rule_recipients_rule_id_rules"),
            primary_key=True,
        ),
        sa.Column("relationship", sa.String(64), primary_key=True),
        sa.Column("obtain", sa.String(8), nullable=False),
        sa.Column("title", sa.String(1000), nullable=False),
        sa.Column("body", sa.String(8000), nullable=False),
    )
    op.create_table(
        "relationships",
        sa.Column("tenant", sa.String(64), primary_key=True),
        sa.Column("target_type", sa.String(64), primary_key=True),
        sa.Column("target_id", sa.String(200), primary_key=True),
        sa.Column("relationship", sa.String(64), primary_key=True),
        sa.Column("user_id", sa.String(200), primary_key=True),
        _created(),
    )
    op.create_index("ix_relationships_user", "relationships", ["tenant", "user_id"])
    op.create_table(
        "subscription_opt_outs",
        sa.Column("tenant", sa.String(64), primary_key=True),
        sa.Column("user_id", sa.String(200), primary_key=True),
        sa.Column(
            "rule_id",
            sa.BigInteger,
            sa.ForeignKey(
                "rules.id", ondelete="CASCADE", name="fk_subscription_opt_outs_rule_id_rules"
            ),
            primary_key=True,
        ),
        sa.Column("target_id", sa.String(200), primary_key=True),
    )
    op.create_table(
        "preferences",
        sa.Column("tenant", sa.String(64), primary_key=True),
        sa.Column("user_id", sa.String(200), primary_key=True),
        sa.Column("category", sa.String(64), primary_key=True),
        sa.Column("inbox", sa.Boolean, nullable=False),
        sa.Column("push", sa.Boolean, nullable=False),
    )


def downgrade() -> None:
    for table in (
        "preferences",
        "subscription_opt_outs",
        "relationships",
        "rule_recipients",
        "rules",
        "topic_members",
        "topics",
    ):
        op.drop_table(table)
    op.execute("DROP SEQUENCE topic_version_seq")
