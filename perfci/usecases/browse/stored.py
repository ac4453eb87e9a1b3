"""What ``perfci compare`` and ``perfci runs`` ask of the store: a stored run's comparison,
a benchmark's newest runs, and the audited deletion of a run.

Each call opens the configured store, does its one unit of work and closes it, so the shells
map flags to one call and print what it returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfci.core.errors import ConfigError
from perfci.core.settings import Settings, get_settings
from perfci.store.db import open_store
from perfci.store.queries import get_run
from perfci.usecases.browse import pages as browse
from perfci.usecases.browse.runs import delete_run
from perfci.usecases.check.outcome import exit_code
from perfci.usecases.stores import project_or_default

if TYPE_CHECKING:
    from perfci.core.model import RunComparison, RunInfo
    from perfci.store.work import Session
    from perfci.usecases.browse.runs import DeletedRun


@dataclass(frozen=True, slots=True)
class ComparisonAnswer:
    """A run's comparison and the exit status it calls for (1: a gated regression)."""

    comparison: RunComparison
    exit_code: int


def run_comparison(
    database_url: str | None,
    run_id: int,
    *,
    baseline_branch: str | None = None,
    fresh: bool = False,
) -> ComparisonAnswer:
    """The comparison stored when run ``run_id`` was checked, or a new one (stored too).

    A new one is made with ``fresh``, for a run never compared, or for another
    ``baseline_branch`` than the stored comparison's. An unknown id is a ``NotFoundError``.
    """
    settings = get_settings({"database_url": database_url})
    store = open_store(settings, create=False)  # a read: an empty folder gets no store
    try:
        with store.sessions() as session:
            result = _comparison(
                session, run_id, settings=settings, baseline_branch=baseline_branch, fresh=fresh
            )
    finally:
        store.close()
    return ComparisonAnswer(
        result, exit_code(result, fail_on_regression=settings.fail_on_regression)
    )


def _comparison(
    session: Session, run_id: int, *, settings: Settings, baseline_branch: str | None, fresh: bool
) -> RunComparison:
    """The stored comparison when it answers the question asked, else a new one."""
    # lazy: comparing loads the analysis (scipy); `perfci runs` lists and deletes without it
    from perfci.usecases.submit.run import compare_run_now, latest_comparison

    get_run(session, run_id)  # an unknown id is a NotFoundError, not an empty comparison
    stored = None if fresh else latest_comparison(session, run_id)
    if stored is not None and _same_baseline(stored, baseline_branch):
        return stored
    return compare_run_now(session, run_id, settings=settings, baseline_branch=baseline_branch)


def _same_baseline(stored: RunComparison, baseline_branch: str | None) -> bool:
    if baseline_branch is None:
        return True
    return stored.baseline is not None and stored.baseline.branch == baseline_branch


def newest_runs(
    database_url: str | None, project: str | None, benchmark: str, *, limit: int
) -> list[RunInfo]:
    """The newest ``limit`` runs of ``benchmark`` in ``project`` (default: settings, else the
    repository's)."""
    settings = get_settings({"database_url": database_url, "project": project})
    name = project_or_default(settings.project)
    store = open_store(settings)
    try:
        with store.sessions() as session:
            return browse.benchmark_runs(session, name, benchmark, limit=limit)
    finally:
        store.close()


def delete_stored_run(
    database_url: str | None, run_id: int, *, actor: str, confirm: Callable[[RunInfo], bool]
) -> tuple[RunInfo, DeletedRun]:
    """Delete run ``run_id`` (audited as ``actor``) once ``confirm(run)`` says yes.

    Raises
    ------
    NotFoundError
        For an unknown id, before ``confirm`` is asked.
    ConfigError
        When ``confirm`` says no: nothing is deleted.
    """
    store = open_store(get_settings({"database_url": database_url}))
    try:
        with store.sessions() as session:
            run = get_run(session, run_id)
            if not confirm(run):
                raise ConfigError(f"run {run.id} not deleted (pass --yes to skip the question)")
            return run, delete_run(session, run_id=run_id, actor=actor)
    finally:
        store.close()
