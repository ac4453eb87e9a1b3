"""A run's compared values as arrays: what comparisons read of a baseline run (issue 35).

One row per run: its samples' series ids (int32), values and fastest-step values (float64),
derived from its ``sample`` rows. A new table only: nothing stored changes, and runs stored
before it are read from their ``sample`` rows as before.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-29 06:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_arrays",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("series_ids", sa.LargeBinary(), nullable=False),
        sa.Column("value", sa.LargeBinary(), nullable=False),
        sa.Column("fastest", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint("run_id", name="pk_run_arrays"),
    )


def downgrade() -> None:
    op.drop_table("run_arrays")
