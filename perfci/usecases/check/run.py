"""The ``perfci check`` loop without any printing: resolve the benchmark, get its profiles (run it
or read files), store the run, compare it, and write the reports a CI job asks for.

Order matters for users: every profile is parsed before anything is stored, so a failing
benchmark or a bad file writes nothing; the verdict is computed by :func:`submit_run`, the same
sequence the HTTP upload uses, so local checks, CI and the service agree. Adaptive repeats
(:mod:`perfci.usecases.check.looks`) compare intermediate looks in a rolled-back session and store
the final run once; ``--ab`` hands the whole check to :mod:`perfci.usecases.check.ab`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfci.core.model import Profile, RunContext
from perfci.core.settings import Settings, get_settings
from perfci.store.db import open_store
from perfci.usecases.answers.accepted import check_acceptances
from perfci.usecases.check.ab import PairProgress, run_ab_check
from perfci.usecases.check.adaptive import adaptive_repeats, look_plan
from perfci.usecases.check.outcome import CheckOutcome, context_of
from perfci.usecases.check.outputs import (
    append_github_output,
    github_output_path,
    github_outputs,
    publish_outcome,
    report_files,
    should_publish,
    write_json,
    write_markdown,
)
from perfci.usecases.check.profiles import collect_repeats, run_repeats
from perfci.usecases.check.spec import BenchmarkSpec, CheckRequest, Runner, resolve_benchmark
from perfci.usecases.history.branch import record_history, sync_history
from perfci.usecases.submit.run import SubmitResult, submit_remote, submit_run

# The check's parts live in check_spec, check_profiles, check_adaptive and check_outputs; their
# public names are re-exported here, where the CLI and the A/B check import them.
__all__ = [
    "BenchmarkSpec",
    "CheckOutcome",
    "CheckRequest",
    "Runner",
    "append_github_output",
    "collect_repeats",
    "github_output_path",
    "github_outputs",
    "look_plan",
    "publish_outcome",
    "report_files",
    "resolve_benchmark",
    "run_check",
    "run_repeats",
    "should_publish",
    "write_json",
    "write_markdown",
]


def run_check(
    request: CheckRequest,
    *,
    settings: Settings | None = None,
    overrides: Mapping[str, Any] | None = None,
    runner: Runner | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    pair_progress: PairProgress | None = None,
) -> CheckOutcome:
    """Run or read the benchmark's profiles, store them as one run, compare it with its baseline.

    A benchmark that is run (not read from files) gets adaptive repeats: while the verdict is
    inconclusive only for want of data, more batches of repeats run, up to ``max_repeats``
    and ``budget``; each look tests at ``alpha / looks`` (:mod:`perfci.usecases.check.looks`).
    Intermediate looks are compared in a rolled-back session; the final run is stored once.
    With ``request.ab`` the check is a same-runner A/B comparison (:mod:`perfci.usecases.check.ab`).

    Parameters
    ----------
    request
        The flags of the check.
    settings
        Ready settings; built with :func:`get_settings` from ``overrides`` when ``None``.
    overrides
        Settings from flags (``database_url``, ``delta``, ``fail_on_regression`` ...).
    runner
        Runs the benchmark (``request.profiles`` empty); :func:`run_repeats` when ``None``.
    env, cwd
        The process environment and checkout, for the run context (tests pass their own).
    pair_progress
        Called after each side of each A/B pair (``--ab``), for a progress display.

    Raises
    ------
    ConfigError
        The benchmark is ambiguous or unknown, or there is nothing to run or read.
    ParseError, UnknownFormatError
        A profile is bad; nothing was stored.
    BenchmarkFailed
        A repeat exited non-zero; nothing was stored. Its ``exit_code`` is the command's.
    """
    settings = settings or get_settings(overrides, start=cwd)
    spec = resolve_benchmark(settings, request)
    settings = settings.for_benchmark(spec.name, overrides)  # its own delta/alpha, under flags
    if request.ab:
        return _with_acceptances(
            run_ab_check(
                request, spec=spec, settings=settings, env=env, cwd=cwd, progress=pair_progress
            )
        )
    plan = look_plan(spec, request, settings)
    runner = runner or run_repeats
    started = time.monotonic()
    repeats = collect_repeats(spec, request.profiles, runner=runner, cwd=cwd)
    seconds = time.monotonic() - started
    context = context_of(settings, request, env=env, cwd=cwd)
    warnings = sync_history(settings, cwd=cwd)  # the history branch, before the baseline query
    # Every look, the final one included, tests at alpha / looks (Bonferroni spending).
    looked = settings.model_copy(update={"alpha": plan.alpha(settings.alpha)})
    if plan.looks > 1:
        repeats, submitted, url = adaptive_repeats(
            spec,
            plan,
            repeats,
            seconds=seconds,
            runner=runner,
            context=context,
            settings=looked,
            alpha=settings.alpha,
            baseline_branch=request.baseline_branch,
            cwd=cwd,
        )
    else:
        submitted, url = _submit(looked, context, spec.name, repeats, request.baseline_branch)
    warnings = [
        f"{p.source}: {w}" for group in repeats for p in group for w in p.warnings
    ] + warnings
    warnings += record_history(
        settings, context, spec.name, repeats, baseline_branch=request.baseline_branch, cwd=cwd
    )
    return _with_acceptances(
        CheckOutcome(
            spec=spec,
            settings=settings,
            context=context,
            submitted=submitted,
            database_url=url,
            warnings=warnings,
        )
    )


def _with_acceptances(outcome: CheckOutcome) -> CheckOutcome:
    """``outcome`` with the regressions accepted on its pull request (issue 34)."""
    outcome.acceptances = check_acceptances(outcome.settings, outcome.context, outcome.spec.name)
    return outcome


# --- the store ------------------------------------------------------------------------------


def _submit(
    settings: Settings,
    context: RunContext,
    benchmark: str,
    repeats: list[list[Profile]],
    baseline_branch: str | None,
) -> tuple[SubmitResult, str]:
    if settings.server_url:
        remote = submit_remote(settings, context=context, benchmark=benchmark, repeats=repeats)
        return remote, settings.server_url
    store = open_store(settings)
    try:
        with store.sessions() as session:
            submitted = submit_run(
                session,
                context=context,
                benchmark=benchmark,
                repeats=repeats,
                settings=settings,
                baseline_branch=baseline_branch,
            )
    finally:
        store.close()
    return submitted, store.url
