"""Answers given on pull requests, and the pull requests' stored comparisons they answer.

The SQL behind :mod:`perfci.usecases.answers` (issue 34): record an answer, find what a pull
request's checks said, and read both back for a later check and the weekly report.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from perfci.core.answers import AnswerKind, PrVerdict, StoredAnswer
from perfci.core.errors import NotFoundError
from perfci.store.schema import Benchmark, Commit, Project, Run, utcnow
from perfci.store.schema_service import Answer, Comparison

__all__ = [
    "PrComparison",
    "add_answer",
    "answers_of",
    "pr_comparisons",
    "pr_verdicts",
    "set_merge_commit",
]


@dataclass(frozen=True, slots=True)
class PrComparison:
    """A stored comparison of one run of a pull request: what its check said."""

    benchmark: str
    run_id: int
    comparison_id: int
    commit: str | None
    ci_run_id: str | None
    verdict: str
    regressions: int
    created_at: datetime
    document: dict[str, Any]


def add_answer(
    session: Session,
    *,
    project: str,
    benchmark: str,
    pr_number: int,
    commit: str | None,
    comparison_id: int | None,
    kind: AnswerKind,
    actor: str,
    reason: str | None,
    keys: Sequence[str] = (),
) -> int:
    """Add one answer to the session's unit of work; returns its id."""
    found = session.execute(
        select(Project.id, Benchmark.id)
        .join(Benchmark, Benchmark.project_id == Project.id)
        .where(Project.name == project, Benchmark.name == benchmark)
    ).first()
    if found is None:
        raise NotFoundError(f"no benchmark {benchmark!r} in project {project!r}")
    row = Answer(
        project_id=found[0],
        benchmark_id=found[1],
        pr_number=pr_number,
        commit_sha=commit,
        comparison_id=comparison_id,
        kind=kind.value,
        actor=actor,
        reason=reason,
        keys=list(keys),
        created_at=utcnow(),
    )
    session.add(row)
    session.flush()
    return row.id


def pr_comparisons(session: Session, project: str, pr_number: int) -> list[PrComparison]:
    """Every stored comparison of the runs of pull request ``pr_number``, newest first."""
    query = (
        select(
            Benchmark.name,
            Run.id,
            Comparison.id,
            Commit.sha,
            Run.ci_run_id,
            Comparison.verdict,
            Comparison.regressions,
            Comparison.created_at,
            Comparison.result,
        )
        .join(Run, Run.id == Comparison.run_id)
        .join(Project, Project.id == Run.project_id)
        .join(Benchmark, Benchmark.id == Run.benchmark_id)
        .outerjoin(Commit, Commit.id == Run.commit_id)
        .where(Project.name == project, Run.pr_number == pr_number)
        .order_by(Comparison.created_at.desc(), Comparison.id.desc())
    )
    return [PrComparison(*row) for row in session.execute(query)]


def pr_verdicts(
    session: Session, project: str, since: datetime, until: datetime
) -> list[PrVerdict]:
    """Whether each comparison of a pull request's run in ``[since, until)`` flagged a
    regression (the document itself is not read: the weekly report needs only this)."""
    query = (
        select(Benchmark.name, Run.pr_number, Comparison.verdict, Comparison.created_at)
        .join(Run, Run.id == Comparison.run_id)
        .join(Project, Project.id == Run.project_id)
        .join(Benchmark, Benchmark.id == Run.benchmark_id)
        .where(
            Project.name == project,
            Run.pr_number.is_not(None),
            Comparison.created_at >= since,
            Comparison.created_at < until,
        )
        .order_by(Comparison.created_at, Comparison.id)
    )
    return [
        PrVerdict(benchmark=name, pr_number=pr, regression=verdict == "regression", at=at)
        for name, pr, verdict, at in session.execute(query)
        if pr is not None
    ]


def answers_of(
    session: Session,
    project: str,
    *,
    pr_number: int | None = None,
    benchmark: str | None = None,
    kind: AnswerKind | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    merge_commits: Collection[str] | None = None,
) -> list[StoredAnswer]:
    """The project's answers matching every filter given, oldest first."""
    conditions: list[Any] = [Project.name == project]
    if pr_number is not None:
        conditions.append(Answer.pr_number == pr_number)
    if benchmark is not None:
        conditions.append(Benchmark.name == benchmark)
    if kind is not None:
        conditions.append(Answer.kind == kind.value)
    if since is not None:
        conditions.append(Answer.created_at >= since)
    if until is not None:
        conditions.append(Answer.created_at < until)
    if merge_commits is not None:
        conditions.append(Answer.merge_commit_sha.in_(list(merge_commits)))
    query = (
        select(Answer, Benchmark.name)
        .join(Project, Project.id == Answer.project_id)
        .join(Benchmark, Benchmark.id == Answer.benchmark_id)
        .where(*conditions)
        .order_by(Answer.created_at, Answer.id)
    )
    return [_stored(answer, name) for answer, name in session.execute(query)]


def set_merge_commit(session: Session, project: str, pr_number: int, sha: str) -> int:
    """Note where pull request ``pr_number``'s accepted changes landed; returns how many
    acceptances were updated."""
    project_id = select(Project.id).where(Project.name == project).scalar_subquery()
    result = session.execute(
        update(Answer)
        .where(
            Answer.project_id == project_id,
            Answer.pr_number == pr_number,
            Answer.kind == AnswerKind.ACCEPTED.value,
        )
        .values(merge_commit_sha=sha)
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def _stored(answer: Answer, benchmark: str) -> StoredAnswer:
    return StoredAnswer(
        id=answer.id,
        benchmark=benchmark,
        pr_number=answer.pr_number,
        commit=answer.commit_sha,
        comparison_id=answer.comparison_id,
        kind=AnswerKind(answer.kind),
        actor=answer.actor,
        reason=answer.reason,
        keys=tuple(answer.keys or ()),
        created_at=answer.created_at,
        merge_commit=answer.merge_commit_sha,
    )
