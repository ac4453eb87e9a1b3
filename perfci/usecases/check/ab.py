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
from pathlib import Path
from typing import TYPE_CHECKING

from perfci.core.errors import ConfigError
from perfci.core.model import BaselineInfo, Profile, RunComparison, RunContext
from perfci.core.settings import Settings
from perfci.integrations.machine import gpu_state
from perfci.integrations.runner import run_benchmark
from perfci.store.db import open_store
from perfci.store.work import unit_of_work
from perfci.usecases.check import looks as adaptive
from perfci.usecases.check.ab_compare import Pairs, compare_pairs
from perfci.usecases.check.ab_git import ABSetup, base_run_context, base_worktree, prepare
from perfci.usecases.check.outcome import CheckOutcome, context_of
from perfci.usecases.check.profiles import work_dir
from perfci.usecases.history.branch import record_history
from perfci.usecases.submit.ingest import IngestResult, ingest_run
from perfci.usecases.submit.repeats import parse_repeats
from perfci.usecases.submit.run import (
    SubmitResult,
    compare_options,
    latest_comparison,
    save_comparison,
)

if TYPE_CHECKING:
    from perfci.usecases.check.spec import BenchmarkSpec, CheckRequest

#: Called after each side of each pair: (side "base" | "pr", pair index, seconds, files).
PairProgress = Callable[[str, int, float, int], None]


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
    settled: Callable[[RunComparison], bool] | None = None,
) -> tuple[Pairs, RunComparison]:
    """Run pairs look by look (the adaptive plan) until the verdict is settled or stops.

    ``setup.root / setup.workdir`` is the candidate side, ``tree / setup.workdir`` the base;
    ``perfci bisect`` runs it with both sides in worktrees of their own, and with ``settled``:
    it follows one metric, so it stops when that metric is settled (or at the plan's end),
    whatever the other lines say.
    """
    options = dataclasses.replace(compare_options(settings), alpha=plan.alpha(settings.alpha))
    pairs = Pairs()
    looks = 0
    while True:
        target = next(size for size in plan.sizes if size > len(pairs))
        run_pairs(spec, setup, tree, pairs, count=target - len(pairs), progress=progress)
        looks += 1
        result = compare_pairs(pairs, benchmark=spec.name, options=options, setup=setup)
        per_pair = pairs.seconds / len(pairs)
        if settled is None:
            reason = adaptive.next_reason(
                result,
                done=len(pairs),
                plan=plan,
                seconds_per_repeat=per_pair,
                spent=pairs.seconds,
                budget=settings.budget,
            )
        elif settled(result):
            reason = adaptive.SETTLED
        else:
            reason = adaptive.room_left(
                done=len(pairs),
                plan=plan,
                seconds_per_repeat=per_pair,
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
    started = time.monotonic()
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
