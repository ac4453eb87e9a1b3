"""Stored comparisons: a run's verdict as it was reported, kept as its JSON document."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Text, cast, insert, select, type_coerce
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
    document: str,
) -> int:
    """Add a comparison of run ``run_id`` to the session's unit of work; returns its id.

    ``document`` is the comparison's JSON document as text, stored as it is: an upload's
    comparison of hundreds of lines is encoded once, not to dicts and back to text again.
    """
    text = type_coerce(document, Text)
    on_postgres = session.get_bind().dialect.name == "postgresql"
    result = cast(text, JSON) if on_postgres else text
    statement = (
        insert(Comparison)
        .values(
            run_id=run_id,
            baseline_branch=baseline_branch,
            verdict=verdict,
            regressions=regressions,
            result=result,
        )
        .returning(Comparison.id)
    )
    found: int = session.execute(statement).scalar_one()
    return found


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
