"""Answers given on pull requests: ``/perfci accept``, ``false-alarm``, ``rerun`` (issue 34).

One row per benchmark answered: who, why, the pull request and its head commit, the
comparison answered, the regressed lines an acceptance covers, and later the commit where the
accepted change landed on the base branch. A new table only: nothing stored changes.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28 05:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "answer",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("benchmark_id", sa.Integer(), nullable=False),
        sa.Column("pr_number", sa.Integer(), nullable=False),
        sa.Column("commit_sha", sa.String(64), nullable=True),
        sa.Column("comparison_id", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("keys", sa.JSON(), nullable=False),
        sa.Column("merge_commit_sha", sa.String(64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"], ["project.id"], ondelete="CASCADE", name="fk_answer_project_id_project"
        ),
        sa.ForeignKeyConstraint(
            ["benchmark_id"],
            ["benchmark.id"],
            ondelete="CASCADE",
            name="fk_answer_benchmark_id_benchmark",
        ),
        sa.ForeignKeyConstraint(
            ["comparison_id"],
            ["comparison.id"],
            ondelete="SET NULL",
            name="fk_answer_comparison_id_comparison",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_answer"),
    )
    op.create_index("ix_answer_project_pr", "answer", ["project_id", "pr_number"])
    op.create_index("ix_answer_project_created", "answer", ["project_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_answer_project_created", table_name="answer")
    op.drop_index("ix_answer_project_pr", table_name="answer")
    op.drop_table("answer")
