"""series_set: a run's series ids by one digest of its ordered series keys.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23 12:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Starts empty: an ingest whose list of series is not here yet looks its series up one by
    # one, as before, and adds the list.
    op.create_table(
        "series_set",
        sa.Column("benchmark_id", sa.Integer(), nullable=False),
        sa.Column("list_hash", sa.String(32), nullable=False),
        sa.Column("series_ids", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["benchmark_id"],
            ["benchmark.id"],
            ondelete="CASCADE",
            name="fk_series_set_benchmark_id_benchmark",
        ),
        sa.PrimaryKeyConstraint("benchmark_id", "list_hash", name="pk_series_set"),
    )


def downgrade() -> None:
    op.drop_table("series_set")
