"""The ``perfci check`` loop without any printing: resolve the benchmark, get its profiles (run it
or read files), store the run, compare it, and write the reports a CI job asks for.

Order matters for users: every profile is parsed before anything is stored, so a failing
benchmark or a bad file writes nothing; the verdict is computed by :func:`submit_run`, the same
sequence the HTTP upload uses, so local checks, CI and the service agree. Adaptive repeats
(:mod:`perfci.usecases.adaptive`) compare intermediate looks in a rolled-back session and store
the final run once; ``--ab`` hands the whole check to :mod:`perfci.usecases.ab`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfci.errors import ConfigError
from perfci.model import Profile, RunComparison, RunContext, Verdict
from perfci.settings import BENCHMARK_THRESHOLDS, Settings, find_project_root, get_settings
from perfci.usecases.history import record_history, sync_history

if TYPE_CHECKING:  # heavy imports stay out of `perfci --help` and of the CLI's import time
    from sqlalchemy.orm import Session

    from perfci.store.db import Tentative
    from perfci.usecases.ab import PairProgress
    from perfci.usecases.adaptive import LookPlan
    from perfci.usecases.ingest import IngestResult
    from perfci.usecases.publish import PublishOutcome
    from perfci.usecases.submit import SubmitResult

#: Runs a benchmark and returns the profile files of each repeat (the CLI adds a progress bar).
Runner = Callable[["BenchmarkSpec", Path], list[list[Path]]]

_SPEC_KEYS = {"command", "repeats", "profiler", "globs", "glob", "format", *BENCHMARK_THRESHOLDS}


@dataclass(frozen=True, slots=True)
class BenchmarkSpec:
    """A benchmark as it will be run: flags over its ``[tool.perfci.benchmarks.NAME]`` table."""

    name: str
    command: list[str]
    repeats: int
    profiler: str
    globs: list[str]
    format: str | None
    #: Variables passed through to the benchmark despite perfci's secret filter.
    pass_env: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CheckRequest:
    """What ``perfci check`` was asked, flags only (``None`` = not given)."""

    benchmark: str | None = None
    profiles: Sequence[Path] = ()
    command: Sequence[str] = ()
    repeats: int | None = None
    profiler: str | None = None
    globs: Sequence[str] = ()
    format: str | None = None
    baseline_branch: str | None = None
    #: RunContext fields from flags (commit, branch, pr_number, environment ...).
    context: Mapping[str, Any] = field(default_factory=dict)
    #: Same-runner A/B mode (``--ab``): base and PR in alternating pairs, compared paired.
    ab: bool = False


@dataclass(slots=True)
class CheckOutcome:
    """A finished check: what was run, where it is stored, and how it compares."""

    spec: BenchmarkSpec
    settings: Settings
    context: RunContext
    submitted: SubmitResult
    database_url: str
    warnings: list[str] = field(default_factory=list)
    #: The base side's stored run in A/B mode (``--ab``).
    ab_base: IngestResult | None = None

    @property
    def comparison(self) -> RunComparison:
        return self.submitted.comparison

    @property
    def exit_code(self) -> int:
        return exit_code(self.comparison, fail_on_regression=self.settings.fail_on_regression)


def exit_code(result: RunComparison, *, fail_on_regression: bool) -> int:
    """1 for a gated regression (the run verdict) when it should fail the job, else 0."""
    return 1 if fail_on_regression and result.verdict is Verdict.REGRESSION else 0


def run_check(request: CheckRequest, *, settings: Settings | None = None,
              overrides: Mapping[str, Any] | None = None, runner: Runner | None = None,
              env: Mapping[str, str] | None = None, cwd: Path | None = None,
              pair_progress: PairProgress | None = None) -> CheckOutcome:
    """Run or read the benchmark's profiles, store them as one run, compare it with its baseline.

    A benchmark that is run (not read from files) gets adaptive repeats: while the verdict is
    inconclusive only for want of data, more batches of repeats run, up to ``max_repeats``
    and ``budget``; each look tests at ``alpha / looks`` (:mod:`perfci.usecases.adaptive`).
    Intermediate looks are compared in a rolled-back session; the final run is stored once.
    With ``request.ab`` the check is a same-runner A/B comparison (:mod:`perfci.usecases.ab`).

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
        from perfci.usecases.ab import run_ab_check

        return run_ab_check(request, spec=spec, settings=settings, env=env, cwd=cwd,
                            progress=pair_progress)
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
        repeats, submitted, url = _adaptive_repeats(
            spec, plan, repeats, seconds=seconds, runner=runner, context=context,
            settings=looked, alpha=settings.alpha, baseline_branch=request.baseline_branch,
            cwd=cwd)
    else:
        submitted, url = _submit(looked, context, spec.name, repeats, request.baseline_branch)
    warnings = [f"{p.source}: {w}" for group in repeats for p in group
                for w in p.warnings] + warnings
    warnings += record_history(settings, context, spec.name, repeats,
                               baseline_branch=request.baseline_branch, cwd=cwd)
    return CheckOutcome(spec=spec, settings=settings, context=context, submitted=submitted,
                        database_url=url, warnings=warnings)


# --- the benchmark --------------------------------------------------------------------------


def resolve_benchmark(settings: Settings, request: CheckRequest) -> BenchmarkSpec:
    """The benchmark to check: flags over its declaration in the config file.

    Without ``--benchmark`` the only declared benchmark is used; none or several is an error
    that lists the declared names. A name that is not declared is fine when the command (after
    ``--``) or the profiles come from flags.
    """
    declared = settings.benchmarks
    name = request.benchmark or _only_declared(declared)
    table = declared.get(name, {})
    if not isinstance(table, Mapping):
        raise ConfigError(f"[tool.perfci.benchmarks.{name}] must be a table")
    unknown = set(table) - _SPEC_KEYS
    if unknown:
        raise ConfigError(f"[tool.perfci.benchmarks.{name}]: unknown key(s) "
                          f"{', '.join(sorted(unknown))}; expected {', '.join(sorted(_SPEC_KEYS))}")
    return BenchmarkSpec(
        name=name,
        command=list(request.command) or _command(name, table.get("command")),
        repeats=_positive(request.repeats or table.get("repeats") or settings.repeats,
                          f"repeats of {name!r}"),
        profiler=str(request.profiler or table.get("profiler") or "torch"),
        globs=list(request.globs) or _strings(table.get("globs", table.get("glob")), name),
        format=request.format or table.get("format"),
        pass_env=tuple(settings.pass_env),
    )


def _only_declared(declared: Mapping[str, Any]) -> str:
    if len(declared) == 1:
        return next(iter(declared))
    if not declared:
        raise ConfigError("no benchmark given: pass --benchmark NAME, or declare one in "
                          "[tool.perfci.benchmarks.NAME] (pyproject.toml) or perfci.toml")
    raise ConfigError(f"several benchmarks are declared ({', '.join(sorted(declared))}); "
                      "choose one with --benchmark NAME")


def _command(name: str, raw: object) -> list[str]:
    if raw is None:
        return []
    if isinstance(raw, str):
        return shlex.split(raw)
    if isinstance(raw, list) and all(isinstance(part, str) for part in raw):
        return list(raw)
    raise ConfigError(f"[tool.perfci.benchmarks.{name}] command must be a string or a list of "
                      "strings")


def _strings(raw: object, name: str) -> list[str]:
    if raw is None:
        return []
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list) and all(isinstance(part, str) for part in raw):
        return list(raw)
    raise ConfigError(f"[tool.perfci.benchmarks.{name}] globs must be a string or a list of "
                      "strings")


def _positive(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{what} must be a positive integer, got {value!r}")
    return value


# --- the profiles ---------------------------------------------------------------------------


def collect_repeats(spec: BenchmarkSpec, profiles: Sequence[Path], *, runner: Runner,
                    cwd: Path | None = None) -> list[list[Profile]]:
    """The parsed profiles of each repeat: one repeat per given file, else by running ``spec``.

    Everything is parsed here, before any store is opened, so bad input writes nothing.
    """
    from perfci.usecases.ingest import parse_repeats

    if profiles:
        return parse_repeats(list(profiles), format=spec.format)
    if not spec.command:
        raise ConfigError(f"benchmark {spec.name!r} has no command: give one after `--`, "
                          f"declare `command` in [tool.perfci.benchmarks.{spec.name}], or "
                          "pass --profile FILE")
    from perfci import gpu_state

    files = runner(spec, work_dir(spec.name, cwd))
    repeats = [parse_repeats(group, format=spec.format, repeat=1)[0] for group in files]
    gpu_state.attach(repeats, files)  # each repeat's GPU clocks and throttling, if sampled
    return repeats


def work_dir(benchmark: str, cwd: Path | None = None) -> Path:
    """Where the repeats of ``benchmark`` write: ``.perfci/runs/NAME`` in the project root."""
    return find_project_root(cwd) / ".perfci" / "runs" / benchmark


def run_repeats(spec: BenchmarkSpec, directory: Path) -> list[list[Path]]:
    """The plain runner: each repeat a fresh process, no progress display."""
    from perfci.runner import run_benchmark

    return run_benchmark(spec.command, benchmark=spec.name, repeats=spec.repeats,
                         work_dir=directory, profiler=spec.profiler,
                         globs=spec.globs or None, pass_env=spec.pass_env).files_per_repeat


# --- context and store ----------------------------------------------------------------------


def context_of(settings: Settings, request: CheckRequest, *, env: Mapping[str, str] | None,
               cwd: Path | None) -> RunContext:
    """The run context: detected from CI and git, flags applied, merge-base filled in."""
    from perfci.context import detect_run_context, merge_base

    context = detect_run_context(settings.project, request.context, env=env, cwd=cwd)
    if context.merge_base is None and context.base_branch:
        # A local PR check: history newer than the fork point is not this PR's baseline.
        context.merge_base = merge_base(cwd, context.base_branch, context.commit or "HEAD")
    return context


def _submit(settings: Settings, context: RunContext, benchmark: str,
            repeats: list[list[Profile]],
            baseline_branch: str | None) -> tuple[SubmitResult, str]:
    from perfci.store.db import open_store
    from perfci.usecases.submit import submit_remote, submit_run

    if settings.server_url:
        remote = submit_remote(settings, context=context, benchmark=benchmark, repeats=repeats)
        return remote, settings.server_url
    store = open_store(settings)
    try:
        with store.sessions() as session:
            submitted = submit_run(session, context=context, benchmark=benchmark,
                                   repeats=repeats, settings=settings,
                                   baseline_branch=baseline_branch)
    finally:
        store.close()
    return submitted, store.url


# --- adaptive repeats -------------------------------------------------------------------------


def look_plan(spec: BenchmarkSpec, request: CheckRequest, settings: Settings) -> LookPlan:
    """The fixed plan of looks: one when the profiles are read or go to a server."""
    from perfci.usecases import adaptive

    if request.profiles or settings.server_url:
        return adaptive.single_look(spec.repeats)
    return adaptive.plan_looks(spec.repeats, settings.max_repeats)


def _adaptive_repeats(spec: BenchmarkSpec, plan: LookPlan, repeats: list[list[Profile]], *,
                      seconds: float, runner: Runner, context: RunContext, settings: Settings,
                      alpha: float, baseline_branch: str | None,
                      cwd: Path | None) -> tuple[list[list[Profile]], SubmitResult, str]:
    """Look, and run the next batch of repeats while that can settle the verdict.

    Each look stores the run and compares it inside a tentative transaction: rolled back when
    another batch follows, kept, with the note on how many repeats ran and why the loop
    stopped, when it is the last. ``settings`` carries the per-look level already; ``alpha``
    is the check's own, for the note. Returns all repeats, the stored run and the store's URL.
    """
    from perfci.store.db import open_store
    from perfci.usecases import adaptive
    from perfci.usecases.submit import SubmitResult

    store = open_store(settings)
    looks = 0
    try:
        while True:
            looks += 1
            with store.tentative() as work:
                look = _look(work.session, settings, context, spec.name, repeats,
                             baseline_branch)
                reason = adaptive.ALREADY_STORED if look.stored_before else adaptive.next_reason(
                    look.comparison, done=len(repeats), plan=plan,
                    seconds_per_repeat=seconds / len(repeats), spent=seconds,
                    budget=settings.budget)
                if reason is not None:
                    _keep(work, look, adaptive.note(done=len(repeats), plan=plan, looks=looks,
                                                    alpha=alpha, reason=reason))
                    return repeats, SubmitResult(look.ingest, look.comparison), store.url
            target = next(size for size in plan.sizes if size > len(repeats))
            batch = dataclasses.replace(spec, repeats=target - len(repeats))
            started = time.monotonic()
            repeats = [*repeats, *collect_repeats(batch, (), runner=_in_folder(
                runner, f"more-{looks}"), cwd=cwd)]
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


def _look(session: Session, settings: Settings, context: RunContext, benchmark: str,
          repeats: list[list[Profile]], baseline_branch: str | None) -> _Look:
    """The run stored (not committed) and compared as :func:`submit_run` would, unsaved.

    A run stored before (a retried CI job) gets the comparison it got the first time.
    """
    from perfci.usecases.compare import compare_stored_run
    from perfci.usecases.ingest import ingest_run
    from perfci.usecases.submit import compare_options, latest_comparison

    ingest = ingest_run(session, context=context, benchmark=benchmark, repeats=repeats,
                        commit=False)
    stored = None if ingest.created else latest_comparison(session, ingest.run_id)
    if stored is not None:
        return _Look(ingest, stored, stored_before=True)
    result = compare_stored_run(session, ingest.run_id, options=compare_options(settings),
                                branch=baseline_branch, default_branch=settings.baseline_branch,
                                baseline_runs=settings.baseline_runs,
                                merge_base=context.merge_base)
    return _Look(ingest, result, stored_before=False)


def _keep(work: Tentative, look: _Look, note: str) -> None:
    """Keep the final look: the run and its comparison, with the adaptive note, committed."""
    from perfci.usecases.submit import save_comparison

    if not look.stored_before:
        look.comparison.notes.append(note)
        save_comparison(work.session, look.comparison, commit=False)
        work.session.commit()  # releases the look's SAVEPOINT; keep commits the transaction
        work.keep = True


# --- what the CI job reads ------------------------------------------------------------------


def write_markdown(result: RunComparison, path: Path, *, benchmark: str,
                   run_url: str | None = None) -> Path:
    """The pull-request comment (with its hidden marker) as a file."""
    from perfci.report.markdown import comment_marker, render_comment

    text = render_comment(result, marker=comment_marker(benchmark), run_url=run_url)
    _write(path, text)
    return path


def write_json(result: RunComparison, path: Path) -> Path:
    """The comparison as JSON (``perfci compare --json``'s document)."""
    from perfci.report.json_report import comparison_to_dict

    _write(path, json.dumps(comparison_to_dict(result), indent=1) + "\n")
    return path


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror}") from None


def github_output_path(env: Mapping[str, str] | None = None) -> Path:
    """``$GITHUB_OUTPUT``; checked before the run so a misconfigured job stores nothing."""
    value = (os.environ if env is None else env).get("GITHUB_OUTPUT")
    if not value:
        raise ConfigError("--github-output needs $GITHUB_OUTPUT (set by GitHub Actions)")
    return Path(value)


def github_outputs(result: RunComparison, report: Path | None) -> dict[str, str]:
    """The step outputs: ``verdict``, ``regressions`` (regressed metrics) and ``report``."""
    return {"verdict": result.verdict.value, "regressions": str(len(result.regressions)),
            "report": str(report) if report else ""}


def append_github_output(path: Path, values: Mapping[str, str]) -> None:
    """Append ``key=value`` lines; a value with a newline uses the heredoc form GitHub reads."""
    lines = []
    for key, value in values.items():
        if "\n" in value:
            lines.append(f"{key}<<PERFCI_EOF\n{value}\nPERFCI_EOF\n")
        else:
            lines.append(f"{key}={value}\n")
    try:
        with path.open("a", encoding="utf-8") as handle:
            handle.write("".join(lines))
    except OSError as exc:
        raise ConfigError(f"cannot append to $GITHUB_OUTPUT {path}: {exc.strerror}") from None


def should_publish(outcome: CheckOutcome, *, comment: bool | None,
                   env: Mapping[str, str] | None = None) -> bool:
    """Publish inside GitHub Actions, on ``--comment``, or when a token, repository and PR are
    all known (a developer checking a PR locally with ``GITHUB_TOKEN`` set)."""
    env = os.environ if env is None else env
    if env.get("GITHUB_ACTIONS") == "true" or comment is True:
        return True
    if comment is False:
        return False
    token = outcome.settings.github_token
    return bool(token and token.get_secret_value() and outcome.context.repository
                and outcome.context.pr_number is not None)


def publish_outcome(outcome: CheckOutcome, *, comment: bool | None,
                    env: Mapping[str, str] | None = None,
                    out_dir: Path | None = None) -> PublishOutcome:
    """Publish the check's comparison (comment, status, job summary, annotations, files)."""
    from perfci.usecases.publish import publish

    return publish(outcome.comparison, context=outcome.context, settings=outcome.settings,
                   benchmark=outcome.spec.name, comment=comment is not False, env=env,
                   out_dir=out_dir)
