"""The adaptive loop of ``perfci check``: look, and run more repeats while that can settle it.

Each look stores the run and compares it inside a tentative transaction
(:meth:`perfci.store.db.Store.tentative`): rolled back when another batch follows, kept when it
is the last. How many repeats a look holds and why the loop stops is
:mod:`perfci.usecases.check.looks`'s.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from perfci.core.model import Profile, RunComparison, RunContext
from perfci.core.settings import Settings
from perfci.store.db import open_store
from perfci.usecases.check import looks as adaptive
from perfci.usecases.check.profiles import collect_repeats
from perfci.usecases.check.spec import BenchmarkSpec, CheckRequest, Runner
from perfci.usecases.submit.compare import compare_stored_run
from perfci.usecases.submit.ingest import ingest_run
from perfci.usecases.submit.run import (
    SubmitResult,
    compare_options,
    latest_comparison,
    save_comparison,
)

if TYPE_CHECKING:
    from perfci.store.db import Tentative
    from perfci.store.work import Session
    from perfci.usecases.check.looks import LookPlan
    from perfci.usecases.submit.ingest import IngestResult

__all__ = ["adaptive_repeats", "look_plan"]


def look_plan(spec: BenchmarkSpec, request: CheckRequest, settings: Settings) -> LookPlan:
    """The fixed plan of looks: one when the profiles are read or go to a server."""
    if request.profiles or settings.server_url:
        return adaptive.single_look(spec.repeats)
    return adaptive.plan_looks(spec.repeats, settings.max_repeats)


def adaptive_repeats(
    spec: BenchmarkSpec,
    plan: LookPlan,
    repeats: list[list[Profile]],
    *,
    seconds: float,
    runner: Runner,
    context: RunContext,
    settings: Settings,
    alpha: float,
    baseline_branch: str | None,
    cwd: Path | None,
) -> tuple[list[list[Profile]], SubmitResult, str]:
    """Look, and run the next batch of repeats while that can settle the verdict.

    Each look stores the run and compares it inside a tentative transaction: rolled back when
    another batch follows, kept, with the note on how many repeats ran and why the loop
    stopped, when it is the last. ``settings`` carries the per-look level already; ``alpha``
    is the check's own, for the note. Returns all repeats, the stored run and the store's URL.
    """
    store = open_store(settings)
    looks = 0
    try:
        while True:
            looks += 1
            with store.tentative() as work:
                look = _look(work.session, settings, context, spec.name, repeats, baseline_branch)
                reason = (
                    adaptive.ALREADY_STORED
                    if look.stored_before
                    else adaptive.next_reason(
                        look.comparison,
                        done=len(repeats),
                        plan=plan,
                        seconds_per_repeat=seconds / len(repeats),
                        spent=seconds,
                        budget=settings.budget,
                    )
                )
                if reason is not None:
                    _keep(
                        work,
                        look,
                        adaptive.note(
                            done=len(repeats), plan=plan, looks=looks, alpha=alpha, reason=reason
                        ),
                    )
                    return repeats, SubmitResult(look.ingest, look.comparison), store.url
            target = next(size for size in plan.sizes if size > len(repeats))
            batch = dataclasses.replace(spec, repeats=target - len(repeats))
            started = time.monotonic()
            repeats = [
                *repeats,
                *collect_repeats(batch, (), runner=_in_folder(runner, f"more-{looks}"), cwd=cwd),
            ]
            seconds += time.monotonic() - started
    finally:
        store.close()


def _in_folder(runner: Runner, name: str) -> Runner:
    """``runner`` writing into a subfolder: a later batch keeps the first batch's files."""
    return lambda spec, directory: runner(spec, directory / name)


@dataclass(frozen=True, slots=True)
class _Look:
    """One look's stored run and comparison; ``stored_before``: a retried job's run."""

    ingest: IngestResult
    comparison: RunComparison
    stored_before: bool


def _look(
    session: Session,
    settings: Settings,
    context: RunContext,
    benchmark: str,
    repeats: list[list[Profile]],
    baseline_branch: str | None,
) -> _Look:
    """The run stored (in the look's SAVEPOINT, kept only by :func:`_keep`) and compared as
    :func:`submit_run` would, the comparison unsaved.

    A run stored before (a retried CI job) gets the comparison it got the first time.
    """
    ingest = ingest_run(session, context=context, benchmark=benchmark, repeats=repeats)
    stored = None if ingest.created else latest_comparison(session, ingest.run_id)
    if stored is not None:
        return _Look(ingest, stored, stored_before=True)
    result = compare_stored_run(
        session,
        ingest.run_id,
        options=compare_options(settings),
        branch=baseline_branch,
        default_branch=settings.baseline_branch,
        baseline_runs=settings.baseline_runs,
        merge_base=context.merge_base,
        keep_arrays=ingest.created,  # in the look's SAVEPOINT, with the run
    )
    return _Look(ingest, result, stored_before=False)


def _keep(work: Tentative, look: _Look, note: str) -> None:
    """Keep the final look: the run and its comparison, with the adaptive note, committed."""
    if not look.stored_before:
        look.comparison.notes.append(note)
        save_comparison(work.session, look.comparison)  # releases the look's SAVEPOINT
        work.keep = True
