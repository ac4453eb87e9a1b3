"""Compare a stored run with its baseline: the base branch's recent runs in the same environment.

Baseline selection (DESIGN.md, "Statistics"): same project, benchmark and environment
fingerprint; the base branch (the PR's base, else the configured one, else ``main``); the last
``baseline_runs`` runs up to and including the merge base commit (or the run's own commit when
the merge base is not in the store), so the merge base's own runs and repeated runs of one
commit count; never the run itself, and never the PR's own runs (they live on its branch).

The machine's state is evidence (issue 12): a baseline run that ran throttled (thermal, power or
hardware slowdown), at a low SM clock, or on a busy host (other processes took a good part of the
CPU, :mod:`perfci.integrations.machine.host_load`) in at least half its repeats is left out like a
wrecked run, and a candidate repeat that did is named and, when other repeats remain, left out; each
with a note in the comparison (:mod:`perfci.integrations.machine.gpu_state` judges the repeats).
When *every* candidate repeat ran on a busy host and its step moved, nothing is left to tell the
code from the neighbour's load: the lines that moved are inconclusive, not regressions or
improvements (a loaded 2-core runner made the example's large operators 40–140 % slower, and a
docs-only pull request failed on them), and the note says to rerun or use ``--ab``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from perfci.analysis.compare import CompareOptions, compare_run
from perfci.analysis.values import on_fastest_step
from perfci.core.allocation import no_cycle_collection
from perfci.core.model import BaselineInfo, RunComparison, SeriesKey
from perfci.integrations.machine.judge import load_shift
from perfci.store import queries
from perfci.store.queries import RunInfo
from perfci.store.samples import keep_run_arrays, run_samples_checked
from perfci.store.work import Session
from perfci.usecases.submit.gpu_screen import screen_gpu_state, step_values
from perfci.usecases.submit.load_guard import undecided_on_a_busy_host, undecided_on_a_load_change


@dataclass(frozen=True, slots=True)
class BaselineChoice:
    """Which history a run is compared with."""

    branch: str
    run_ids: list[int] = field(default_factory=list)
    before: datetime | None = None


def choose_baseline(
    session: Session,
    run: RunInfo,
    *,
    branch: str | None = None,
    default_branch: str = "main",
    limit: int = 30,
    merge_base: str | None = None,
) -> BaselineChoice:
    """The baseline runs of ``run``: most recent first, at most ``limit``.

    ``branch`` (a flag) wins over the run's base branch, which wins over ``default_branch``.
    A push to the base branch itself is compared with the runs before it.
    """
    chosen = branch or run.base_branch or default_branch
    before = _cutoff(session, run, merge_base)
    run_ids = queries.baseline_run_ids(
        session,
        project=run.project,
        benchmark=run.benchmark,
        environment_id=run.environment_id,
        branch=chosen,
        before=before,
        limit=limit,
        exclude_run_ids=(run.id,),
    )
    return BaselineChoice(branch=chosen, run_ids=run_ids, before=before)


def _cutoff(session: Session, run: RunInfo, merge_base: str | None) -> datetime | None:
    """Baseline runs must not be newer than the merge base (or the run's own commit); runs of
    that commit itself count (:func:`~perfci.store.queries.baseline_run_ids`)."""
    if merge_base:
        found = queries.commit_time(session, project=run.project, sha=merge_base)
        if found is not None:
            return found
    return run.commit_time or run.created_at


# A 10,000-series baseline is 300,000 lists in memory: a full collection in the middle of the
# comparison walked them all for a tenth of its time (benchmarks/compare_speed.py).
@no_cycle_collection()
def compare_stored_run(
    session: Session,
    run_id: int,
    *,
    options: CompareOptions | None = None,
    branch: str | None = None,
    default_branch: str = "main",
    baseline_runs: int = 30,
    merge_base: str | None = None,
    keep_arrays: bool = False,
) -> RunComparison:
    """Compare run ``run_id`` with its baseline (see the module docstring).

    Too few baseline runs give ``no-baseline`` lines (``options.min_baseline``), never a guess.
    ``keep_arrays``: the run was stored in this transaction; its values, read back for the
    comparison, are kept as the arrays later comparisons read of it as a baseline run
    (:func:`perfci.store.samples.keep_run_arrays`).
    """
    run = queries.get_run(session, run_id)
    choice = choose_baseline(
        session,
        run,
        branch=branch,
        default_branch=default_branch,
        limit=baseline_runs,
        merge_base=merge_base,
    )
    states = queries.repeat_gpu_states(session, [*choice.run_ids, run.id])
    checked = run_samples_checked(
        session, [*choice.run_ids, run.id], arrays_of=run.id if keep_arrays else None
    )
    if checked.arrays is not None:
        keep_run_arrays(session, run.id, checked.arrays)
    samples = checked.samples
    screen = screen_gpu_state(choice.run_ids, run, states, steps=step_values(samples))
    choice = replace(choice, run_ids=screen.kept_run_ids)
    skipped = [r for r in choice.run_ids if r in set(checked.skipped)]
    choice = replace(choice, run_ids=[r for r in choice.run_ids if r not in set(skipped)])
    oldest_first = list(reversed(choice.run_ids))
    compared, on_fastest, fell_back = on_fastest_step(
        samples, checked.fastest, [*oldest_first, run.id]
    )
    # One list per baseline run, empty where a run lacks the series, so runs stay aligned.
    # The lists are shared with ``compared``, not copied (10,000 series × 30 runs): the
    # analysis reads what it is given.
    none: tuple[float, ...] = ()
    baseline = {
        key: [by_run.get(r, none) for r in oldest_first]
        for key, by_run in compared.items()
        if not by_run.keys().isdisjoint(oldest_first)
    }
    candidate = {
        key: _without(by_run[run.id], screen.left_out_repeats, run.repeats)
        for key, by_run in compared.items()
        if run.id in by_run
    }
    result = compare_run(baseline, candidate, benchmark=run.benchmark, options=options)
    result.notes.extend(screen.notes)
    result.notes.extend(_fastest_notes(on_fastest, fell_back))
    if screen.candidate_busy is not None:
        undecided_on_a_busy_host(result, screen.candidate_busy)
    used = [oldest_first[i] for i in result.baseline_runs_used if i < len(oldest_first)]
    # Every repeat of the candidate counts, those left out for a busy host too: they say how
    # busy its runner was, and the repeats kept shared that runner (a real run kept one repeat
    # at 75 % beside two at 89-91 %, and its unchanged code read +87 %).
    shift = load_shift(
        [list(states.get(r, {}).values()) for r in used], list(states.get(run.id, {}).values())
    )
    if shift is not None:
        undecided_on_a_load_change(result, shift)
    result.notes.extend(_skipped_notes(skipped, run.id in checked.skipped))
    result.notes.extend(_summarised_notes(used, checked.summarised))
    result.baseline = _baseline_info(session, replace(choice, run_ids=used[::-1]))
    if result.baseline_level_start is not None:
        start = oldest_first[result.baseline_level_start]
        sha = _commits(session, [start])
        if sha:
            result.notes.append(
                f"The base branch's current level started at commit {sha[0][:7]} (run {start})."
            )
    result.environment = _with_cards(run.environment, states.get(run.id, {}))
    result.run_id, result.commit, result.branch = run.id, run.commit, run.branch
    result.pr_number, result.ci_url = run.pr_number, run.ci_url
    return result


def _fastest_notes(used: int, fell_back: int) -> list[str]:
    """One line when some series were compared on their fastest profiled step."""
    if not used and not fell_back:
        return []
    back = (
        f"; {fell_back} on their mean, while runs stored without that value are in the baseline"
        if fell_back
        else ""
    )
    return [
        f"{used} operators, ranges and API calls are compared on their fastest profiled step "
        "(another process on the runner only adds time, to some steps more than others)"
        f"{back}. The step stays a mean."
    ]


def _without(values: Sequence[float], left_out: frozenset[int], repeats: int) -> list[float]:
    """``values`` (one per repeat) without the ``left_out`` repeats.

    A series missing from some repeat has fewer values than repeats, so its indices are not
    repeat numbers: it is kept whole rather than cut at the wrong places.
    """
    if not left_out or len(values) != repeats:
        return list(values)
    return [v for index, v in enumerate(values) if index not in left_out]


def _with_cards(
    environment: Mapping[str, str], states: Mapping[int, Mapping[str, Any]]
) -> dict[str, str]:
    """The run's environment with the UUIDs of the cards its repeats actually ran on.

    The stored environment is shared by every run that matches it (UUIDs are not matched,
    :data:`perfci.core.fingerprint.IDENTITY_KEYS`), so its ``gpu_uuid`` is the first such run's
    card; the GPU state sampled during this run's repeats names this run's own.
    """
    uuids = [
        str(gpu["uuid"])
        for state in states.values()
        for gpu in state.get("gpus", [])
        if isinstance(gpu, Mapping) and gpu.get("uuid")
    ]
    found = dict(environment)
    if uuids:
        found["gpu_uuid"] = ",".join(dict.fromkeys(uuids))
    return found


def _skipped_notes(skipped: Sequence[int], candidate: bool) -> list[str]:
    """Runs stored (by an older perfci) with a value that is not a finite, non-negative number."""
    notes = []
    if skipped:
        ids = ", ".join(str(r) for r in skipped)
        notes.append(
            f"{len(skipped)} baseline run{'s' if len(skipped) != 1 else ''} left out: "
            f"a stored value is not a finite, non-negative number (run {ids}); "
            "`perfci runs delete` removes such runs."
        )
    if candidate:
        notes.append(
            "This run holds a stored value that is not a finite, non-negative number, "
            "so none of its metrics could be compared."
        )
    return notes


def _summarised_notes(baseline: Sequence[int], summarised: Sequence[int]) -> list[str]:
    """Baseline runs whose raw repeats were pruned (issue 17): one value each, their median."""
    pruned = set(summarised)
    count = sum(r in pruned for r in baseline)
    if not count:
        return []
    return [
        f"{count} of the {len(baseline)} baseline runs are older than the raw-sample "
        "retention (`perfci db prune`): each counts as one repeat, the median of its repeats."
    ]


def _baseline_info(session: Session, choice: BaselineChoice) -> BaselineInfo:
    commits = _commits(session, choice.run_ids)
    return BaselineInfo(
        branch=choice.branch,
        runs=len(choice.run_ids),
        first_commit=commits[-1] if commits else None,
        last_commit=commits[0] if commits else None,
        run_ids=list(choice.run_ids),
    )


def _commits(session: Session, run_ids: Sequence[int]) -> list[str]:
    """Commit shas of ``run_ids`` in the same (most recent first) order."""
    found = queries.commit_shas(session, run_ids) if run_ids else {}
    return [sha for sha in (found.get(r) for r in run_ids) if sha]


def series_keys(result: RunComparison) -> list[SeriesKey]:
    """The series a comparison covered, in its order (for reports that link to histories)."""
    return [m.series for m in result.metrics if m.series is not None]
