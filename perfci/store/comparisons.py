"""Stored comparisons: a run's verdict as it was reported, kept as its JSON document."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from perfci.store.schema_service import Comparison

__all__ = ["add_comparison", "latest_comparison_document"]


def add_comparison(
    session: Session,
    *,
    run_id: int,
    baseline_branch: str,
    verdict: str,
    regressions: int,
    document: dict[str, Any],
) -> int:
    """Add a comparison of run ``run_id`` to the session's unit of work; returns its id."""
    row = Comparison(
        run_id=run_id,
        baseline_branch=baseline_branch,
        verdict=verdict,
        regressions=regressions,
        result=document,
    )
    session.add(row)
    session.flush()  # assigns the id
    return row.id


def latest_comparison_document(session: Session, run_id: int) -> dict[str, Any] | None:
    """The document of the most recent comparison of run ``run_id``, if any."""
    query = (
        select(Comparison.result)
        .where(Comparison.run_id == run_id)
        .order_by(Comparison.id.desc())
        .limit(1)
    )
    found: dict[str, Any] | None = session.execute(query).scalar()
    return found
