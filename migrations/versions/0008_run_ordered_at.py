"""Each run's time stored and indexed: ``run.ordered_at`` (issue 35).

A run's time is its commit's time when known, else when it was stored. Baselines, series
histories and the weekly report filter and sort on it; as ``coalesce(commit.committed_at,
run.created_at)`` no index could cover it, and each lookup read every run of its benchmark or
project. The column is filled here from the rows stored (every run keeps its time), then kept
by ingest: written with the run, rewritten for a commit's runs when the commit's time arrives
later. Three indexes hold the lookups' keys in the order they return (tie-breakers included,
so that nothing is sorted): ``ix_run_baseline`` (benchmark, branch, environment), and the new
``ix_run_benchmark_ordered`` (benchmark, branch) and ``ix_run_project_ordered`` (project,
branch). The column is nullable in the schema though never NULL once filled: SQLite can only
make it NOT NULL by rebuilding ``run``, and dropping the old table would cascade to every
``profile`` row (foreign keys are on); a nullable column is added in place on both dialects.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28 02:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TZ = sa.DateTime(timezone=True)
ORDER = ["ordered_at", "created_at", "id"]


def upgrade() -> None:
    op.add_column("run", sa.Column("ordered_at", TZ, nullable=True))
    op.execute(
        'UPDATE run SET ordered_at = COALESCE((SELECT "commit".committed_at FROM "commit" '
        'WHERE "commit".id = run.commit_id), run.created_at)'
    )
    op.drop_index("ix_run_baseline", table_name="run")
    op.create_index("ix_run_baseline", "run", ["benchmark_id", "branch", "environment_id", *ORDER])
    op.create_index("ix_run_benchmark_ordered", "run", ["benchmark_id", "branch", *ORDER])
    op.create_index("ix_run_project_ordered", "run", ["project_id", "branch", *ORDER])


def downgrade() -> None:
    # Lossless: the column is derived from the commit's and the run's times.
    op.drop_index("ix_run_project_ordered", table_name="run")
    op.drop_index("ix_run_benchmark_ordered", table_name="run")
    op.drop_index("ix_run_baseline", table_name="run")
    # SQLite drops a column in place (3.35+), without the rebuild that would cascade.
    op.drop_column("run", "ordered_at")
    op.create_index(
        "ix_run_baseline", "run", ["benchmark_id", "branch", "environment_id", "created_at"]
    )
