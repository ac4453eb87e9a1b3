"""Token expiry and an audit log of operator actions (run deletion, token changes).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23 14:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Existing tokens keep working: no expiry unless one is set.
    with op.batch_alter_table("api_token") as batch:
        batch.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "audit_event",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("project", sa.String(200), nullable=True),
        sa.Column("target", sa.String(200), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audit_event"),
    )
    op.create_index("ix_audit_event_at", "audit_event", ["at"])


def downgrade() -> None:
    op.drop_index("ix_audit_event_at", table_name="audit_event")
    op.drop_table("audit_event")
    with op.batch_alter_table("api_token") as batch:
        batch.drop_column("expires_at")
