"""The fastest profiled step's time beside each sample's mean: ``sample.fastest`` (issue 30).

History mode compares host-side operators and ranges on their fastest step, as same-runner A/B
does, where every run in the window has that value; runs stored before this revision have
none (NULL), and a series falls back to its mean while any of them is in the window. On
PostgreSQL the column is added to the partitioned table and so to every partition, without a
rewrite (a nullable column with no default).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27 23:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("sample", sa.Column("fastest", sa.Double(), nullable=True))


def downgrade() -> None:
    # Lossless for the comparisons of 0006: it compares every series on its mean.
    op.drop_column("sample", "fastest")
