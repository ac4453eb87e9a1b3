"""The service's tables as SQLAlchemy models: tokens, audit events, alerts, saved comparisons
and people's answers.

They reference the run data's tables (:mod:`perfci.store.schema`) by id and share its
``Base``: importing this module adds them to ``Base.metadata``, which Alembic's autogenerate
compares with the migrations (``migrations/env.py``, ``tests/test_store_migrations.py``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Double, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from perfci.store.schema import Base, UTCDateTime, utcnow


class ApiToken(Base):
    """A project token for the HTTP API. Only its SHA-256 is stored; ``prefix`` identifies it
    in listings without revealing it. ``scopes`` is a comma-separated subset of
    ``upload,read,admin``."""

    __tablename__ = "api_token"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(
        ForeignKey("project.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(200))
    prefix: Mapped[str] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    scopes: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class AuditEvent(Base):
    """An operator action kept for the record: who deleted which run, created which token.

    ``project`` and ``target`` are names, not foreign keys, so the record outlives what it names.
    """

    __tablename__ = "audit_event"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    actor: Mapped[str] = mapped_column(String(200))
    action: Mapped[str] = mapped_column(String(64))
    project: Mapped[str | None] = mapped_column(String(200))
    target: Mapped[str | None] = mapped_column(String(200))
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class Alert(Base):
    """A change point on a branch's history, to be acknowledged or dismissed by a person.

    Unique per series, environment, branch and first run of the new level, so re-running a
    report never duplicates an alert and a dismissed one stays dismissed.
    """

    __tablename__ = "alert"
    __table_args__ = (
        UniqueConstraint("series_id", "environment_id", "branch", "run_id"),
        Index("ix_alert_project_status", "project_id", "status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("project.id", ondelete="CASCADE"))
    benchmark_id: Mapped[int] = mapped_column(ForeignKey("benchmark.id", ondelete="CASCADE"))
    series_id: Mapped[int] = mapped_column(ForeignKey("series.id", ondelete="CASCADE"))
    environment_id: Mapped[int] = mapped_column(ForeignKey("environment.id"))
    branch: Mapped[str] = mapped_column(String(255))
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    commit_sha: Mapped[str | None] = mapped_column(String(64))
    previous_commit_sha: Mapped[str | None] = mapped_column(String(64))
    before: Mapped[float] = mapped_column(Double)
    after: Mapped[float] = mapped_column(Double)
    change: Mapped[float] = mapped_column(Double)
    p_value: Mapped[float] = mapped_column(Double)
    status: Mapped[str] = mapped_column(String(16), default="open", server_default="open")
    note: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)


class Comparison(Base):
    """A comparison as it was reported (the JSON of perfci.report.json_report), so that the
    API and dashboard show what the pull request was told even after the baseline moved on."""

    __tablename__ = "comparison"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"), index=True)
    baseline_branch: Mapped[str] = mapped_column(String(255))
    verdict: Mapped[str] = mapped_column(String(16))
    regressions: Mapped[int] = mapped_column(Integer)
    result: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Answer(Base):
    """What a person answered on a pull request about its check (issue 34): ``accepted`` (the
    regression is intended), ``false-alarm`` or ``rerun``, by whom, why, and which comparison
    it answered. ``keys`` are the regressed lines an acceptance covers (series keys);
    ``merge_commit_sha`` is where the accepted change landed on the base branch, once known.
    """

    __tablename__ = "answer"
    __table_args__ = (
        Index("ix_answer_project_pr", "project_id", "pr_number"),
        Index("ix_answer_project_created", "project_id", "created_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("project.id", ondelete="CASCADE"))
    benchmark_id: Mapped[int] = mapped_column(ForeignKey("benchmark.id", ondelete="CASCADE"))
    pr_number: Mapped[int] = mapped_column(Integer)
    commit_sha: Mapped[str | None] = mapped_column(String(64))
    # The answer outlives a deleted run: it still counts in the precision.
    comparison_id: Mapped[int | None] = mapped_column(
        ForeignKey("comparison.id", ondelete="SET NULL")
    )
    kind: Mapped[str] = mapped_column(String(16))
    actor: Mapped[str] = mapped_column(String(200))
    reason: Mapped[str | None] = mapped_column(Text)
    keys: Mapped[list[str]] = mapped_column(JSON, default=list)
    merge_commit_sha: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
