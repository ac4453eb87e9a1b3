"""Units and direction of a series: ``unit`` (ns, bytes, 1/s, %, ...) and ``better``.

Every series stored before this revision is a time, lower is better: the server defaults
say so, so a populated store upgrades in place and its runs keep serving as baselines.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 16:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("series") as batch:
        batch.add_column(sa.Column("unit", sa.String(32), nullable=False, server_default="ns"))
        batch.add_column(sa.Column("better", sa.String(8), nullable=False, server_default="lower"))


def downgrade() -> None:
    # Refused rather than lossy: a store holding other units than ns would lose their meaning.
    bind = op.get_bind()
    other = bind.execute(sa.text("SELECT count(*) FROM series WHERE unit <> 'ns'")).scalar()
    if other:
        raise RuntimeError(
            f"cannot downgrade below 0005: {other} series hold values that are not times "
            "(throughput, memory, ...); revision 0004 cannot store their units"
        )
    with op.batch_alter_table("series") as batch:
        batch.drop_column("better")
        batch.drop_column("unit")
