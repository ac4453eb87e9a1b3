"""Same-runner A/B mode (``perfci check --ab``): base and pull request in alternating pairs.

Where runners differ from each other (another card of the same model, a neighbour's load),
comparing one pull-request run with the base branch's history cannot tell a code change from a
machine change. A/B mode measures both on the same runner in one job:

1. The merge-base of ``HEAD`` with the base branch is checked out with ``git worktree add
   --detach`` into a temporary directory (the working tree must be clean, ``.perfci/`` aside).
2. Pairs are run: pair ``k`` runs the base in the worktree and the pull request in the checkout,
   each a fresh process (:func:`perfci.integrations.runner.run_benchmark` with ``repeats=1``). Even
   pairs run the base first, odd pairs the pull request first (ABBA…), so that a drift over the job
   (a GPU warming up, a neighbour starting) does not favour either side.
3. The pairs are compared paired (:func:`perfci.analysis.paired.compare_paired`): what the
   machine does to both members of a pair cancels in their difference. With adaptive repeats
   more pairs are run while the verdict is inconclusive only for want of data
   (:mod:`perfci.usecases.check.looks`).
4. Both sides are stored: the base side as a run of the merge-base commit on the base branch
   (no pull request, CI run id suffixed ``-ab-base``), so that it also feeds the history; the
   pull-request side as the pull request's run, with the paired comparison as its comparison.

The worktree is removed (``git worktree remove --force``, then ``git worktree prune``) on every
way out: success, a failing repeat, a bad profile, Ctrl-C.

Limits: the base side runs the same command as the pull request, in the worktree. A relative
interpreter path (``.venv/bin/python``) that only the checkout has is taken from the checkout;
a package installed in editable mode from the checkout is imported from the checkout on both
sides, so a benchmark should import the code under test from its working directory.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from perfci.analysis.values import PerStep, compared_value
from perfci.core.errors import ConfigError
from perfci.core.model import BaselineInfo, Profile, RunComparison, RunContext, SeriesKey
from perfci.core.settings import Settings
from perfci.usecases.check import looks as adaptive
from perfci.usecases.check.ab_git import (
    BASE_RUN_SUFFIX,
    ABSetup,
    base_run_context,
    base_worktree,
    merge_base_sha,
    prepare,
)

if TYPE_CHECKING:
    from perfci.analysis.engine import CompareOptions
    from perfci.usecases.check.run import BenchmarkSpec, CheckOutcome, CheckRequest
    from perfci.usecases.submit.ingest import IngestResult
    from perfci.usecases.submit.run import SubmitResult

# The git side (merge-base, worktree) lives in ab_git; its names are re-exported here.
__all__ = [
    "BASE_RUN_SUFFIX",
    "ABSetup",
    "PairProgress",
    "Pairs",
    "base_run_context",
    "base_worktree",
    "command_for",
    "compare_pairs",
    "merge_base_sha",
    "prepare",
    "run_ab_check",
    "run_looks",
    "run_pairs",
    "screen_pairs",
    "series_values",
]

#: Called after each side of each pair: (side "base" | "pr", pair index, seconds, files).
PairProgress = Callable[[str, int, float, int], None]


@dataclass(slots=True)
class Pairs:
    """The parsed profiles of the pairs run so far, and the benchmark time they took."""

    base: list[list[Profile]] = dataclasses.field(default_factory=list)
    pr: list[list[Profile]] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def __len__(self) -> int:
        return len(self.pr)


def run_ab_check(
    request: CheckRequest,
    *,
    spec: BenchmarkSpec,
    settings: Settings,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    progress: PairProgress | None = None,
) -> CheckOutcome:
    """Run ``spec`` in alternating base/PR pairs, compare them paired, store both sides.

    Raises
    ------
    ConfigError
        Profiles were given instead of a command, remote mode is configured, the working tree
        is dirty, or the base branch or its merge-base cannot be found. Nothing is run.
    BenchmarkFailed, ParseError
        A repeat failed or wrote a bad profile; nothing is stored, the worktree is removed.
    """
    from perfci.usecases.check.run import CheckOutcome, context_of

    _refuse_unsupported(request, settings)
    context = context_of(settings, request, env=env, cwd=cwd)
    setup = prepare(settings, request, context, cwd=cwd)
    plan = adaptive.plan_looks(_at_least_two(settings.ab_pairs), settings.max_repeats)
    with base_worktree(setup.root, setup.base_sha) as tree:
        pairs, result = run_looks(spec, setup, tree, plan, settings, progress=progress)
    base_context = base_run_context(context, setup)
    base_ingest, submitted, url = _store(
        settings, context, base_context, spec.name, pairs, result, setup
    )
    warnings = [
        f"{p.source}: {w}"
        for side in (pairs.base, pairs.pr)
        for group in side
        for p in group
        for w in p.warnings
    ]
    from perfci.usecases.history.branch import record_history

    warnings += record_history(
        settings, base_context, spec.name, pairs.base, baseline_branch=setup.base_branch, cwd=cwd
    )
    return CheckOutcome(
        spec=spec,
        settings=settings,
        context=context,
        submitted=submitted,
        database_url=url,
        warnings=warnings,
        ab_base=base_ingest,
    )


def _refuse_unsupported(request: CheckRequest, settings: Settings) -> None:
    if request.profiles:
        raise ConfigError(
            "--ab runs the benchmark itself, on both sides; it cannot read "
            "--profile files (leave out --ab to check stored profiles)"
        )
    if settings.server_url:
        raise ConfigError(
            "--ab stores both sides in the database itself; it does not work in "
            "remote mode (PERFCI_SERVER_URL) yet"
        )


def _at_least_two(pairs: int) -> int:
    if pairs < 2:
        raise ConfigError(
            f"--ab-pairs must be at least 2 (a paired comparison needs two pairs), got {pairs}"
        )
    return pairs


# --- running the pairs ------------------------------------------------------------------------


def run_looks(
    spec: BenchmarkSpec,
    setup: ABSetup,
    tree: Path,
    plan: adaptive.LookPlan,
    settings: Settings,
    *,
    progress: PairProgress | None,
) -> tuple[Pairs, RunComparison]:
    """Run pairs look by look (the adaptive plan) until the verdict is settled or stops.

    ``setup.root / setup.workdir`` is the candidate side, ``tree / setup.workdir`` the base;
    ``perfci bisect`` runs it with both sides in worktrees of their own.
    """
    from perfci.usecases.submit.run import compare_options

    options = dataclasses.replace(compare_options(settings), alpha=plan.alpha(settings.alpha))
    pairs = Pairs()
    looks = 0
    while True:
        target = next(size for size in plan.sizes if size > len(pairs))
        run_pairs(spec, setup, tree, pairs, count=target - len(pairs), progress=progress)
        looks += 1
        result = compare_pairs(pairs, benchmark=spec.name, options=options, setup=setup)
        reason = adaptive.next_reason(
            result,
            done=len(pairs),
            plan=plan,
            seconds_per_repeat=pairs.seconds / len(pairs),
            spent=pairs.seconds,
            budget=settings.budget,
        )
        if reason is not None:
            result.notes.append(
                adaptive.note(
                    done=len(pairs),
                    plan=plan,
                    looks=looks,
                    alpha=settings.alpha,
                    reason=reason,
                    unit="pairs",
                )
            )
            return pairs, result


def run_pairs(
    spec: BenchmarkSpec,
    setup: ABSetup,
    tree: Path,
    pairs: Pairs,
    *,
    count: int,
    progress: PairProgress | None = None,
) -> None:
    """Run ``count`` more pairs into ``pairs``; even pairs base first, odd pairs PR first."""
    from perfci.usecases.check.run import work_dir

    pr_cwd = setup.root / setup.workdir
    base_cwd = tree / setup.workdir
    out = work_dir(spec.name, pr_cwd) / "ab"
    base_command = command_for(spec.command, checkout=pr_cwd, tree=base_cwd)
    for index in range(len(pairs), len(pairs) + count):
        sides = [("base", base_command, base_cwd), ("pr", spec.command, pr_cwd)]
        if index % 2:
            sides.reverse()
        for side, command, where in sides:
            profiles, seconds = _run_side(spec, command, where, out / f"{side}-{index}")
            getattr(pairs, side).append(profiles)
            pairs.seconds += seconds
            if progress is not None:
                progress(side, index, seconds, len(profiles))


def _run_side(
    spec: BenchmarkSpec, command: Sequence[str], cwd: Path, directory: Path
) -> tuple[list[Profile], float]:
    """One fresh process of one side; its profiles, parsed at once (a bad one stops here)."""
    from perfci.integrations.runner import run_benchmark
    from perfci.usecases.submit.ingest import parse_repeats

    started = time.monotonic()
    from perfci.integrations.machine import gpu_state

    run = run_benchmark(
        command,
        benchmark=spec.name,
        repeats=1,
        work_dir=directory,
        profiler=spec.profiler,
        globs=spec.globs or None,
        cwd=cwd,
        pass_env=spec.pass_env,
    )
    seconds = time.monotonic() - started
    profiles = parse_repeats(
        run.files_per_repeat[0], format=spec.format, repeat=1, options=spec.options
    )[0]
    gpu_state.attach([profiles], run.files_per_repeat)
    return profiles, seconds


def command_for(command: Sequence[str], *, checkout: Path, tree: Path) -> list[str]:
    """The base side's command: the same, except a relative program only the checkout has.

    ``.venv/bin/python bench.py``: the virtual environment is not in git, so the worktree
    lacks it; the checkout's interpreter runs the base's ``bench.py``.
    """
    if not command:
        return []
    program = Path(command[0])
    if (
        not program.is_absolute()
        and len(program.parts) > 1
        and not (tree / program).exists()
        and (checkout / program).exists()
    ):
        return [str((checkout / program).resolve()), *command[1:]]
    return list(command)


# --- comparing and storing --------------------------------------------------------------------


def series_values(
    repeats: Sequence[Sequence[Profile]], per_step: PerStep = PerStep.MEAN
) -> dict[SeriesKey, list[float | None]]:
    """Per series, its per-step value in each repeat (``None`` where the repeat lacks it).

    With ``per_step`` left at the mean, the values the store keeps
    (:mod:`perfci.usecases.submit.ingest`): a repeat with several profiles keys its series by
    section = profile label, and a series appearing twice in one repeat is summed.
    """
    out: dict[SeriesKey, list[float | None]] = {}
    for index, repeat in enumerate(repeats):
        for profile in repeat:
            section = profile.label if len(repeat) > 1 else ""
            for metric in profile.metrics:
                value = compared_value(metric, profile.steps, per_step)
                if value is None:
                    continue
                row = out.setdefault(SeriesKey.of(metric, section), [None] * len(repeats))
                previous = row[index]
                row[index] = value if previous is None else previous + value
    return out


def compare_pairs(
    pairs: Pairs, *, benchmark: str, options: CompareOptions, setup: ABSetup
) -> RunComparison:
    """The paired comparison of the pairs so far, with the A/B note first."""
    from perfci.analysis.paired import compare_paired

    note = (
        f"Same-runner A/B comparison: {len(pairs)} pairs of the merge-base "
        f"{setup.base_sha[:12]} ({setup.base_branch}) and this pull request, run "
        "alternately on one runner (base first in even pairs, pull request first in odd "
        "ones) and compared pair by pair, so machine-level noise cancels."
    )
    kept, screened = screen_pairs(pairs.base, pairs.pr)
    base, pr = [pairs.base[k] for k in kept], [pairs.pr[k] for k in kept]
    fastest = _fastest_step_note(base + pr)
    return compare_paired(
        series_values(base, PerStep.FASTEST),
        series_values(pr, PerStep.FASTEST),
        benchmark=benchmark,
        options=options,
        notes=[note, *fastest, *screened],
    )


def _fastest_step_note(repeats: Sequence[Sequence[Profile]]) -> list[str]:
    """One line when some series are compared on their fastest step, saying which and why."""
    steps = [
        len(metric.step_totals_ns)
        for repeat in repeats
        for profile in repeat
        for metric in profile.metrics
        if metric.step_totals_ns
    ]
    if not steps:
        return []
    counts = f"{min(steps)}" if min(steps) == max(steps) else f"{min(steps)}–{max(steps)}"
    return [
        "Host-side operators and ranges that run in every profiled step are compared on "
        f"their fastest of the {counts} steps: another process on the runner only adds "
        "time, to some steps more than others. The step time is compared on its mean."
    ]


#: Fewest pairs kept when some are left out for their machine state.
MIN_SCREENED_PAIRS = 3


def screen_pairs(
    base: Sequence[Sequence[Profile]], pr: Sequence[Sequence[Profile]]
) -> tuple[list[int], list[str]]:
    """The pairs to compare, leaving out those whose two processes ran on different machines.

    A pair cancels what the machine did to both of its processes; when only one of them ran
    throttled or on a busy host (a neighbour's job started between the two), the pair's difference
    is the machine's, not the code's. Such a pair is left out and named, as long as
    :data:`MIN_SCREENED_PAIRS` remain. What is usual (the SM clock, the host's load) is learnt from
    every process of the comparison (:class:`perfci.integrations.machine.gpu_state.StateJudge`); a
    pair where both processes were suspect is kept: they shared the machine's state.
    """
    from perfci.integrations.machine.gpu_state import StateJudge
    from perfci.integrations.machine.judge import step_moved, step_tolerance

    every = list(range(min(len(base), len(pr))))
    states = [(_state_of(base[k]), _state_of(pr[k])) for k in every]
    if not any(b or p for b, p in states):
        return every, []
    judge = StateJudge.from_history([[s for pair in states for s in pair if s]])
    busy = _busy_throughout([s for pair in states for s in pair if s])
    ratios = _step_ratios(base, pr)
    tolerance = step_tolerance([[r for r in ratios if r is not None]])
    kept, notes = [], []
    for k, (b, p) in enumerate(states):
        on_base, on_pr = judge.judge(b), judge.judge(p)
        side, judged = ("base", on_base) if on_base.suspect else ("pull request", on_pr)
        others = [r for i, r in enumerate(ratios) if i != k and r is not None]
        # A busy host alone counts only when the pair's step ratio moved with it.
        harmless = judged.host_only and not step_moved(ratios[k], others, tolerance)
        if on_base.suspect == on_pr.suspect or harmless:
            kept.append(k)
            continue
        notes.append(f"pair {k + 1} left out: only its {side} process {judged.what_happened()}")
    if len(kept) < MIN_SCREENED_PAIRS:
        return every, busy
    return kept, [*busy, *notes]


def _step_ratios(
    base: Sequence[Sequence[Profile]], pr: Sequence[Sequence[Profile]]
) -> list[float | None]:
    """Per pair, the primary step of the pull request's process over the base's."""
    from perfci.analysis.steps import primary_step_in

    pairs = min(len(base), len(pr))
    sides = series_values(base[:pairs]), series_values(pr[:pairs])
    step = primary_step_in(sides[0])
    if step is None or step not in sides[1]:
        return [None] * pairs
    return [p / b if b and p else None for b, p in zip(sides[0][step], sides[1][step], strict=True)]


def _busy_throughout(states: Sequence[Mapping[str, object]]) -> list[str]:
    """A note when the host was busy for the whole comparison: no pair stands out then, yet the
    intervals are wider (on an H200 with every CPU taken, one kernel's 95 % interval was ±13 %
    at 5 pairs, against ±1 % on the quiet host: ``benchmarks/RESULTS.md``)."""
    from perfci.integrations.machine.host_load import BUSY_EXCESS
    from perfci.integrations.machine.judge import others_cpu

    shares = [v for v in (others_cpu(s) for s in states) if v is not None]
    if len(shares) < len(states) or not shares or min(shares) < BUSY_EXCESS:
        return []
    low, high = f"{min(shares):.0%}", f"{max(shares):.0%}"
    took = low if low == high else f"{low} to {high}"
    return [
        f"Every process ran on a busy host (other processes took {took} of its CPU): pairing "
        "cancels what both processes of a pair shared, but the timings spread more than on a "
        "quiet runner."
    ]


def _state_of(profiles: Sequence[Profile]) -> dict[str, object] | None:
    state = profiles[0].metadata.get("gpu_state") if profiles else None
    return state if isinstance(state, dict) else None


def _store(
    settings: Settings,
    context: RunContext,
    base_context: RunContext,
    benchmark: str,
    pairs: Pairs,
    result: RunComparison,
    setup: ABSetup,
) -> tuple[IngestResult, SubmitResult, str]:
    """Store the base run, the PR run and the paired comparison: one transaction.

    A retried job (the PR run already stored) gets the comparison stored the first time.
    """
    from perfci.store.db import open_store
    from perfci.store.work import unit_of_work
    from perfci.usecases.submit.ingest import ingest_run
    from perfci.usecases.submit.run import SubmitResult, latest_comparison, save_comparison

    store = open_store(settings)
    try:
        with store.sessions() as session:
            with unit_of_work(session):
                base = ingest_run(
                    session, context=base_context, benchmark=benchmark, repeats=pairs.base
                )
                pr = ingest_run(session, context=context, benchmark=benchmark, repeats=pairs.pr)
                stored = None if pr.created else latest_comparison(session, pr.run_id)
                if stored is None:
                    _describe(result, context, pr.run_id, base.run_id, setup, len(pairs))
                    save_comparison(session, result)
            submitted = SubmitResult(pr, stored or result)
    finally:
        store.close()
    return base, submitted, store.url


def _describe(
    result: RunComparison,
    context: RunContext,
    run_id: int,
    base_run_id: int,
    setup: ABSetup,
    pairs: int,
) -> None:
    result.run_id, result.commit, result.branch = run_id, context.commit, context.branch
    result.pr_number, result.ci_url = context.pr_number, context.ci_url
    result.environment = dict(context.environment)
    result.baseline = BaselineInfo(
        branch=setup.base_branch,
        runs=1,
        first_commit=setup.base_sha,
        last_commit=setup.base_sha,
        run_ids=[base_run_id],
        pairs=pairs,
    )
