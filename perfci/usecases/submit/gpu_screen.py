"""Which baseline runs and candidate repeats a comparison leaves out for the machine's state.

A baseline run that ran throttled or on a busy host in at least half its repeats is left out, a
candidate repeat that did is named and, when other repeats remain, left out
(:mod:`perfci.usecases.submit.compare` applies it; see its docstring for why).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from perfci.analysis.steps import primary_step_in
from perfci.core.model import SeriesKey
from perfci.integrations.machine.gpu_state import RepeatJudgement, StateJudge
from perfci.integrations.machine.judge import step_moved, step_tolerance
from perfci.store.queries import RunInfo


@dataclass(frozen=True, slots=True)
class GpuScreen:
    """What the GPU state of the runs leaves out of a comparison, and the notes saying so."""

    kept_run_ids: list[int]
    left_out_repeats: frozenset[int] = frozenset()
    notes: list[str] = field(default_factory=list)
    #: When every candidate repeat ran on a busy host (the GPU, if any, unthrottled) and its
    #: step moved: the busiest repeat's words ("other processes took 68% of the host's CPU,
    #: usually 1%"). Its timings cannot tell a code change from the load.
    candidate_busy: str | None = None


def screen_gpu_state(
    baseline_run_ids: Sequence[int],
    run: RunInfo,
    states: Mapping[int, Mapping[int, Mapping[str, Any]]],
    steps: Mapping[int, Sequence[float]] | None = None,
) -> GpuScreen:
    """Leave out baseline runs and candidate repeats that ran on a throttled GPU or a busy host.

    ``states`` maps run id → repeat → ``gpu_state``
    (:func:`perfci.store.queries.repeat_gpu_states`). A baseline
    run is left out when at least half of its sampled repeats were suspect; a candidate repeat is
    left out when it was suspect and an unsuspect repeat remains. What is usual for this runner (its
    usual SM clock, a power cap it always runs at) is learnt from the baseline, so only what is
    unusual counts (:class:`~perfci.integrations.machine.gpu_state.StateJudge`).

    ``steps`` maps run id → the primary step's value per repeat. A busy host alone (the GPU
    unthrottled) counts only where the step moved with it
    (:func:`~perfci.integrations.machine.judge.step_moved`: a run's median step against the other
    baseline runs', a repeat's against its run's unsuspect repeats); a throttled GPU always counts.
    """
    if not states:
        return GpuScreen(kept_run_ids=list(baseline_run_ids))
    steps = steps or {}
    own = states.get(run.id, {})
    judge = StateJudge.from_history(
        [list(states.get(r, {}).values()) for r in baseline_run_ids], list(own.values())
    )
    tolerance = step_tolerance([steps[r] for r in [*baseline_run_ids, run.id] if r in steps])
    levels = {r: statistics.median(steps[r]) for r in baseline_run_ids if steps.get(r)}
    kept, suspects = [], []
    for run_id in baseline_run_ids:
        judged = [judge.judge(state) for state in states.get(run_id, {}).values()]
        bad = [j for j in judged if j.suspect]
        others = [v for r, v in levels.items() if r != run_id]
        harmless = all(j.host_only for j in bad) and not step_moved(
            levels.get(run_id), others, tolerance
        )
        if bad and 2 * len(bad) >= len(judged) and not harmless:
            suspects.append((run_id, bad, len(judged)))
        else:
            kept.append(run_id)
    notes = [_baseline_note(suspects, len(baseline_run_ids))] if suspects else []
    left_out, candidate_notes, busy = _screen_candidate(
        judge, own, run.repeats, steps.get(run.id), tolerance
    )
    return GpuScreen(
        kept_run_ids=kept,
        left_out_repeats=left_out,
        notes=notes + candidate_notes,
        candidate_busy=busy,
    )


def step_values(
    samples: Mapping[SeriesKey, Mapping[int, Sequence[float]]],
) -> dict[int, Sequence[float]]:
    """Run id → the primary step's per-repeat values (none when there is no step series)."""
    step = primary_step_in(
        {key: chain.from_iterable(runs.values()) for key, runs in samples.items() if key.is_time}
    )
    return dict(samples[step]) if step is not None else {}


def _baseline_note(suspects: Sequence[tuple[int, list[RepeatJudgement], int]], total: int) -> str:
    """``"1 of 30 baseline runs left out: GPU throttled (sw_thermal_slowdown) in 3 of 5
    repeats (run 17)"``."""
    parts = [
        f"{_what(bad)} in {len(bad)} of {repeats} repeats (run {run_id})"
        for run_id, bad, repeats in suspects
    ]
    return f"{len(suspects)} of {total} baseline runs left out: " + "; ".join(parts)


def _what(judged: Sequence[RepeatJudgement]) -> str:
    """``"GPU throttled (hw_slowdown)"``, ``"a busy host (other processes took …)"``, or both."""
    found = []
    gpu = [j for j in judged if j.gpu_suspect]
    if gpu:
        reasons = list(dict.fromkeys(r for j in gpu for r in j.reasons))
        slowest = min(gpu, key=lambda j: j.sm_clock_mhz or 0.0)
        found.append(f"GPU throttled ({', '.join(reasons) if reasons else slowest.describe()})")
    busiest = max(judged, key=lambda j: j.others_cpu_share or -1.0)
    if (words := busiest.host_words()) is not None:
        found.append(f"a busy host ({words})")
    return " and ".join(found)


def _screen_candidate(
    judge: StateJudge,
    states: Mapping[int, Mapping[str, Any]],
    repeats: int,
    steps: Sequence[float] | None,
    tolerance: float,
) -> tuple[frozenset[int], list[str], str | None]:
    """The candidate repeats to leave out, the notes naming them, and the busiest repeat's
    words when every repeat ran on a busy host alone (see :attr:`GpuScreen.candidate_busy`)."""
    judged = {index: judge.judge(state) for index, state in sorted(states.items())}
    suspect = [index for index, j in judged.items() if j.suspect]
    if steps is not None and len(steps) == repeats:
        # A busy host whose repeat's step stayed with the unsuspect repeats' did no harm.
        clean = [steps[i] for i in range(repeats) if i not in suspect]
        suspect = [
            i for i in suspect if not judged[i].host_only or step_moved(steps[i], clean, tolerance)
        ]
    # Leave a repeat out only when an unsuspect one remains: some data beats none.
    keep_all = len(suspect) >= repeats
    notes = []
    for index in suspect:
        j = judged[index]
        fate = f"kept: no repeat ran {_unsuspect_words(j)}" if keep_all else "left out"
        notes.append(f"repeat {index + 1} of this run {j.what_happened()}; {fate}")
    busy = None
    if keep_all and suspect and all(judged[i].host_only for i in suspect):
        busiest = max((judged[i] for i in suspect), key=lambda j: j.others_cpu_share or 0.0)
        busy = busiest.host_words()
    return (frozenset() if keep_all else frozenset(suspect)), notes, busy


def _unsuspect_words(judged: RepeatJudgement) -> str:
    """What a repeat that is not suspect for ``judged``'s reasons would have run like."""
    host = judged.host_words() is not None
    if judged.gpu_suspect and host:
        return "unthrottled on a quiet host"
    return "on a quiet host" if host else "unthrottled"
