"""API tokens, change-point alerts and stored comparisons.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "api_token",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("scopes", sa.String(100), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("last_used_at", TZ, nullable=True),
        sa.Column("revoked_at", TZ, nullable=True),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["project.id"],
            ondelete="CASCADE",
            name="fk_api_token_project_id_project",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_api_token"),
        sa.UniqueConstraint("token_hash", name="uq_api_token_token_hash"),
    )
    op.create_index("ix_api_token_project_id", "api_token", ["project_id"])
    op.create_table(
        "alert",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("benchmark_id", sa.Integer(), nullable=False),
        sa.Column("series_id", sa.Integer(), nullable=False),
        sa.Column("environment_id", sa.Integer(), nullable=False),
        sa.Column("branch", sa.String(255), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("commit_sha", sa.String(64), nullable=True),
        sa.Column("previous_commit_sha", sa.String(64), nullable=True),
        sa.Column("before", sa.Double(), nullable=False),
        sa.Column("after", sa.Double(), nullable=False),
        sa.Column("change", sa.Double(), nullable=False),
        sa.Column("p_value", sa.Double(), nullable=False),
        sa.Column("status", sa.String(16), server_default="open", nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"], ["project.id"], ondelete="CASCADE", name="fk_alert_project_id_project"
        ),
        sa.ForeignKeyConstraint(
            ["benchmark_id"],
            ["benchmark.id"],
            ondelete="CASCADE",
            name="fk_alert_benchmark_id_benchmark",
        ),
        sa.ForeignKeyConstraint(
            ["series_id"], ["series.id"], ondelete="CASCADE", name="fk_alert_series_id_series"
        ),
        sa.ForeignKeyConstraint(
            ["environment_id"], ["environment.id"], name="fk_alert_environment_id_environment"
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["run.id"], ondelete="CASCADE", name="fk_alert_run_id_run"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_alert"),
        sa.UniqueConstraint(
            "series_id",
            "environment_id",
            "branch",
            "run_id",
            name="uq_alert_series_id_environment_id_branch_run_id",
        ),
    )
    op.create_index("ix_alert_project_status", "alert", ["project_id", "status"])
    op.create_table(
        "comparison",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("baseline_branch", sa.String(255), nullable=False),
        sa.Column("verdict", sa.String(16), nullable=False),
        sa.Column("regressions", sa.Integer(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["run.id"], ondelete="CASCADE", name="fk_comparison_run_id_run"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_comparison"),
    )
    op.create_index("ix_comparison_run_id", "comparison", ["run_id"])


def downgrade() -> None:
    op.drop_index("ix_comparison_run_id", table_name="comparison")
    op.drop_table("comparison")
    op.drop_index("ix_alert_project_status", table_name="alert")
    op.drop_table("alert")
    op.drop_index("ix_api_token_project_id", table_name="api_token")
    op.drop_table("api_token")
