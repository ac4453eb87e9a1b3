"""Compare a stored run with its baseline: the base branch's recent runs in the same environment.

Baseline selection (DESIGN.md, "Statistics"): same project, benchmark and environment
fingerprint; the base branch (the PR's base, else the configured one, else ``main``); the last
``baseline_runs`` runs up to and including the merge base commit (or the run's own commit when
the merge base is not in the store), so the merge base's own runs and repeated runs of one
commit count; never the run itself, and never the PR's own runs (they live on its branch).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from perfci.analysis.compare import CompareOptions, compare_run
from perfci.model import BaselineInfo, RunComparison, SeriesKey
from perfci.store import queries
from perfci.store.queries import RunInfo


@dataclass(frozen=True, slots=True)
class BaselineChoice:
    """Which history a run is compared with."""

    branch: str
    run_ids: list[int] = field(default_factory=list)
    before: datetime | None = None


def choose_baseline(session: Session, run: RunInfo, *, branch: str | None = None,
                    default_branch: str = "main", limit: int = 30,
                    merge_base: str | None = None) -> BaselineChoice:
    """The baseline runs of ``run``: most recent first, at most ``limit``.

    ``branch`` (a flag) wins over the run's base branch, which wins over ``default_branch``.
    A push to the base branch itself is compared with the runs before it.
    """
    chosen = branch or run.base_branch or default_branch
    before = _cutoff(session, run, merge_base)
    run_ids = queries.baseline_run_ids(
        session, project=run.project, benchmark=run.benchmark,
        environment_id=run.environment_id, branch=chosen, before=before, limit=limit,
        exclude_run_ids=(run.id,))
    return BaselineChoice(branch=chosen, run_ids=run_ids, before=before)


def _cutoff(session: Session, run: RunInfo, merge_base: str | None) -> datetime | None:
    """Baseline runs must not be newer than the merge base (or the run's own commit); runs of
    that commit itself count (:func:`~perfci.store.queries.baseline_run_ids`)."""
    if merge_base:
        found = queries.commit_time(session, project=run.project, sha=merge_base)
        if found is not None:
            return found
    return run.commit_time or run.created_at


def compare_stored_run(session: Session, run_id: int, *, options: CompareOptions | None = None,
                       branch: str | None = None, default_branch: str = "main",
                       baseline_runs: int = 30, merge_base: str | None = None) -> RunComparison:
    """Compare run ``run_id`` with its baseline (see the module docstring).

    Too few baseline runs give ``no-baseline`` lines (``options.min_baseline``), never a guess.
    """
    run = queries.get_run(session, run_id)
    choice = choose_baseline(session, run, branch=branch, default_branch=default_branch,
                             limit=baseline_runs, merge_base=merge_base)
    samples = queries.run_samples(session, [*choice.run_ids, run.id])
    oldest_first = list(reversed(choice.run_ids))
    baseline = {key: [by_run[r] for r in oldest_first if r in by_run]
                for key, by_run in samples.items()}
    candidate = {key: by_run[run.id] for key, by_run in samples.items() if run.id in by_run}
    baseline = {key: runs for key, runs in baseline.items() if runs}
    result = compare_run(baseline, candidate, benchmark=run.benchmark, options=options)
    result.baseline = _baseline_info(session, choice)
    result.environment = dict(run.environment)
    result.run_id, result.commit, result.branch = run.id, run.commit, run.branch
    result.pr_number, result.ci_url = run.pr_number, run.ci_url
    return result


def _baseline_info(session: Session, choice: BaselineChoice) -> BaselineInfo:
    commits = _commits(session, choice.run_ids)
    return BaselineInfo(branch=choice.branch, runs=len(choice.run_ids),
                        first_commit=commits[-1] if commits else None,
                        last_commit=commits[0] if commits else None,
                        run_ids=list(choice.run_ids))


def _commits(session: Session, run_ids: Sequence[int]) -> list[str]:
    """Commit shas of ``run_ids`` in the same (most recent first) order."""
    found = queries.commit_shas(session, run_ids) if run_ids else {}
    return [sha for sha in (found.get(r) for r in run_ids) if sha]


def series_keys(result: RunComparison) -> list[SeriesKey]:
    """The series a comparison covered, in its order (for reports that link to histories)."""
    return [m.series for m in result.metrics if m.series is not None]
