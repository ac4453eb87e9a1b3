"""Initial schema: project, environment, commit, benchmark, run, profile, series, sample.

Revision ID: 0001
Revises:
Create Date: 2025-01-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "project",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("public", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_project"),
        sa.UniqueConstraint("name", name="uq_project_name"),
    )
    op.create_table(
        "environment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("values", sa.JSON(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_environment"),
        sa.UniqueConstraint("fingerprint", name="uq_environment_fingerprint"),
    )
    op.create_table(
        "commit",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("sha", sa.String(64), nullable=False),
        sa.Column("committed_at", TZ, nullable=True),
        sa.ForeignKeyConstraint(
            ["project_id"], ["project.id"], ondelete="CASCADE", name="fk_commit_project_id_project"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_commit"),
        sa.UniqueConstraint("project_id", "sha", name="uq_commit_project_id_sha"),
    )
    op.create_table(
        "benchmark",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["project.id"],
            ondelete="CASCADE",
            name="fk_benchmark_project_id_project",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_benchmark"),
        sa.UniqueConstraint("project_id", "name", name="uq_benchmark_project_id_name"),
    )
    _create_run()
    op.create_table(
        "profile",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("repeat", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(255), nullable=False),
        sa.Column("format", sa.String(50), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("steps", sa.Integer(), nullable=True),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["run.id"], ondelete="CASCADE", name="fk_profile_run_id_run"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_profile"),
    )
    op.create_index("ix_profile_run_id", "profile", ["run_id"])
    op.create_table(
        "series",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("benchmark_id", sa.Integer(), nullable=False),
        sa.Column("key_hash", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("device", sa.String(8), nullable=False),
        sa.Column("scope", sa.Text(), server_default="", nullable=False),
        sa.Column("section", sa.Text(), server_default="", nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["benchmark_id"],
            ["benchmark.id"],
            ondelete="CASCADE",
            name="fk_series_benchmark_id_benchmark",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_series"),
        sa.UniqueConstraint("benchmark_id", "key_hash", name="uq_series_benchmark_id_key_hash"),
    )
    # No foreign keys on sample: see perfci/store/schema.py (Sample) for the measured reason.
    op.create_table(
        "sample",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("series_id", sa.Integer(), nullable=False),
        sa.Column("repeat", sa.SmallInteger(), nullable=False),
        sa.Column("value", sa.Double(), nullable=True),
        sa.Column("calls", sa.BigInteger(), nullable=True),
        *(
            sa.Column(name, sa.Double(), nullable=True)
            for name in (
                "total_ns",
                "self_ns",
                "avg_ns",
                "min_ns",
                "max_ns",
                "std_ns",
                "median_ns",
                "bytes",
            )
        ),
        sa.PrimaryKeyConstraint("run_id", "series_id", "repeat", name="pk_sample"),
    )


def _create_run() -> None:
    op.create_table(
        "run",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("benchmark_id", sa.Integer(), nullable=False),
        sa.Column("environment_id", sa.Integer(), nullable=False),
        sa.Column("commit_id", sa.Integer(), nullable=True),
        sa.Column("branch", sa.String(255), nullable=True),
        sa.Column("base_branch", sa.String(255), nullable=True),
        sa.Column("merge_base", sa.String(64), nullable=True),
        sa.Column("pr_number", sa.Integer(), nullable=True),
        sa.Column("ci_provider", sa.String(50), nullable=True),
        sa.Column("ci_run_id", sa.String(100), nullable=True),
        sa.Column("ci_run_attempt", sa.Integer(), nullable=True),
        sa.Column("ci_url", sa.Text(), nullable=True),
        sa.Column("repeats", sa.Integer(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("idempotency_key", sa.String(255), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"], ["project.id"], ondelete="CASCADE", name="fk_run_project_id_project"
        ),
        sa.ForeignKeyConstraint(
            ["benchmark_id"],
            ["benchmark.id"],
            ondelete="CASCADE",
            name="fk_run_benchmark_id_benchmark",
        ),
        sa.ForeignKeyConstraint(
            ["environment_id"], ["environment.id"], name="fk_run_environment_id_environment"
        ),
        sa.ForeignKeyConstraint(["commit_id"], ["commit.id"], name="fk_run_commit_id_commit"),
        sa.PrimaryKeyConstraint("id", name="pk_run"),
        sa.UniqueConstraint(
            "project_id",
            "benchmark_id",
            "idempotency_key",
            name="uq_run_project_id_benchmark_id_idempotency_key",
        ),
    )
    op.create_index(
        "ix_run_baseline", "run", ["benchmark_id", "branch", "environment_id", "created_at"]
    )
    op.create_index("ix_run_project_created", "run", ["project_id", "created_at"])
    op.create_index("ix_run_commit_id", "run", ["commit_id"])


def downgrade() -> None:
    for index, table in (
        ("ix_run_commit_id", "run"),
        ("ix_run_project_created", "run"),
        ("ix_run_baseline", "run"),
        ("ix_profile_run_id", "profile"),
    ):
        op.drop_index(index, table_name=table)
    for table in (
        "sample",
        "series",
        "profile",
        "run",
        "benchmark",
        "commit",
        "environment",
        "project",
    ):
        op.drop_table(table)
