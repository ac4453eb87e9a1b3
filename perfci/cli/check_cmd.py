"""``perfci check``: run (or read) a benchmark's profiles, store the run, compare it with the base
branch's history, report, and exit 0 (pass), 1 (gated regression) or 2 (usage/input error).

The sequence lives in :mod:`perfci.usecases.check.run`; this module maps flags to it and prints.
Progress and status lines go to stderr, the verdict to stdout. Heavy modules are imported
inside the command so that ``perfci --help`` stays fast.
"""

# lazy: the imports inside functions load a command's work only when it runs, so that
# `perfci --help` and the short commands start fast (tests/test_cold_start.py).
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

import typer

from perfci.cli import _options as opts

if TYPE_CHECKING:
    from perfci.usecases.check.comment_policy import CommentOn
    from perfci.usecases.check.run import BenchmarkSpec, CheckOutcome

_PROFILE_HELP = (
    "Profile file to read instead of running the benchmark (repeatable; one repeat per file)."
)


@opts.with_run_context
def check_command(
    command: list[str] | None = typer.Argument(
        None, help="Benchmark command after `--` (default: the declared one).", show_default=False
    ),
    benchmark: opts.DeclaredBenchmark = None,
    repeats: int | None = typer.Option(
        None,
        "--repeats",
        "-n",
        min=1,
        help="Fresh processes to run (default: config, else settings.repeats). Ignored with "
        "--profile.",
    ),
    profiler: str | None = typer.Option(None, "--profiler", help="torch | nsys | none."),
    glob: list[str] = typer.Option([], "--glob", help="Profile file pattern(s) to collect."),
    profile: list[Path] = typer.Option([], "--profile", help=_PROFILE_HELP),
    format: opts.ProfileFormat = None,
    option: opts.ParserOptions = None,
    project: opts.Project = None,
    context: opts.RunContextFlags = opts.RUN_CONTEXT,
    baseline_branch: str | None = typer.Option(
        None, "--baseline-branch", help="Baseline branch (default: PR base, else settings)."
    ),
    database_url: opts.DatabaseUrl = None,
    history: str | None = typer.Option(
        None,
        "--history",
        help="Run history on a branch of origin, e.g. git:perfci-data "
        "(read before comparing; base-branch runs are appended).",
    ),
    markdown_out: Path | None = typer.Option(
        None, "--markdown-out", help="Write the PR comment (Markdown) here."
    ),
    json_out: Path | None = typer.Option(None, "--json-out", help="Write the JSON report here."),
    report_dir: Path | None = typer.Option(
        None,
        "--report-dir",
        help="Write the Markdown and JSON reports to DIR/<benchmark>/report.md and report.json "
        "(unless --markdown-out / --json-out say otherwise): the folder to upload as an artifact.",
    ),
    github_output: bool = typer.Option(
        False,
        "--github-output",
        help="Append the step outputs to $GITHUB_OUTPUT: verdict, regressions, report, "
        "json-report, step-time-change, comment-url, run-url.",
    ),
    comment: bool | None = typer.Option(
        None,
        "--comment/--no-comment",
        help="Post the PR comment and commit status (default: in GitHub Actions, or when a "
        "token, repository and PR are known).",
    ),
    comment_on: Literal["always", "change", "regression"] = typer.Option(
        "always",
        "--comment-on",
        help="Which verdicts get the comment and status: always, change (a regression or an "
        "improvement) or regression. The job summary always has the report.",
    ),
    cc: list[str] = typer.Option(
        [],
        "--cc",
        help="@user or @org/team to mention in the comment of a regression (repeatable; "
        "several may be given space separated).",
    ),
    fail_on_regression: bool | None = typer.Option(
        None,
        "--fail-on-regression/--no-fail-on-regression",
        help="Exit 1 on a gated regression (default: settings, true).",
    ),
    delta: opts.Delta = None,
    alpha: opts.Alpha = None,
    baseline_runs: int | None = typer.Option(
        None, "--baseline-runs", min=1, help="Baseline runs to compare with."
    ),
    ab: bool = typer.Option(
        False,
        "--ab",
        help="Same-runner A/B: run the merge-base (in a temporary git worktree) and this "
        "checkout alternately, compare pair by pair, store both sides.",
    ),
    ab_pairs: int | None = typer.Option(
        None, "--ab-pairs", min=2, help="A/B pairs to run (default: settings, 5)."
    ),
    max_repeats: int | None = typer.Option(
        None,
        "--max-repeats",
        min=1,
        help="Most repeats (A/B: pairs) adaptive repeats may run while the verdict is "
        "inconclusive for want of data (default: 3x; equal to --repeats: off).",
    ),
    budget: float | None = typer.Option(
        None,
        "--budget",
        min=0.001,
        help="Seconds of benchmark time adaptive repeats may spend in all (default: none).",
    ),
    pass_env: opts.PassEnv = None,
) -> int:
    """Run the benchmark (or read --profile files), store, compare with the baseline, report.

    Exit 0: no gated regression; 1: gated regression; 2: usage or input error; a failing
    benchmark repeat exits with its own code. Nothing is stored unless every profile parsed.
    """
    from perfci.usecases.check import run as usecase
    from perfci.usecases.check.comment_policy import CommentOn

    output_file = usecase.github_output_path() if github_output else None
    request = usecase.CheckRequest(
        benchmark=benchmark,
        profiles=profile,
        command=command or [],
        repeats=repeats,
        profiler=profiler,
        globs=glob,
        format=format,
        options=opts.key_value_pairs(option, option="--option"),
        baseline_branch=baseline_branch,
        ab=ab,
        context=context.fields(),
    )
    overrides = {
        "database_url": database_url,
        "history": history,
        "project": project,
        "delta": delta,
        "alpha": alpha,
        "baseline_runs": baseline_runs,
        "fail_on_regression": fail_on_regression,
        "ab_pairs": ab_pairs,
        "max_repeats": max_repeats,
        "budget": budget,
        "pass_env": pass_env or None,
    }
    outcome = usecase.run_check(
        request, overrides=overrides, runner=_progress_runner, pair_progress=_pair_progress
    )
    _print(outcome)
    if report_dir is not None:
        in_dir = usecase.report_files(report_dir, outcome.spec.name)
        markdown_out, json_out = markdown_out or in_dir[0], json_out or in_dir[1]
    _write_reports(outcome, markdown_out=markdown_out, json_out=json_out)
    comment_url = None
    if usecase.should_publish(outcome, comment=comment):
        policy = CommentOn(comment_on)
        comment_url = _publish(outcome, comment=comment, comment_on=policy, cc=cc)
    if output_file is not None:
        outputs = usecase.github_outputs(
            outcome.comparison,
            report=markdown_out or json_out,
            json_report=json_out,
            comment_url=comment_url,
            server_url=outcome.settings.server_url,
        )
        usecase.append_github_output(output_file, outputs)
    return outcome.exit_code


def _progress_runner(spec: BenchmarkSpec, directory: Path) -> list[list[Path]]:
    from perfci.cli.run_cmd import repeat_progress
    from perfci.usecases.check.benchmark import run_benchmark_repeats

    with repeat_progress(spec.name, spec.repeats) as advance:
        return run_benchmark_repeats(
            spec.command,
            benchmark=spec.name,
            repeats=spec.repeats,
            profiler=spec.profiler,
            work_dir=directory,
            globs=spec.globs or None,
            pass_env=spec.pass_env,
            on_repeat=advance,
        )


def _pair_progress(side: str, index: int, seconds: float, profiles: int) -> None:
    from perfci.cli._console import err_console

    name = "base" if side == "base" else "pull request"
    err_console.print(
        f"  pair {index + 1}: {name} {seconds:.1f} s, {profiles} profile(s)", markup=False
    )


def _print(outcome: CheckOutcome) -> None:
    from perfci.cli._console import console, err_console
    from perfci.core.settings import redact_url
    from perfci.report.console import print_comparison

    for warning in outcome.warnings:
        err_console.print(f"warning: {warning}", markup=False)
    ingest = outcome.submitted.ingest
    stored = (
        f"stored run {ingest.run_id}"
        if ingest.created
        else f"run {ingest.run_id} was already stored; its first comparison follows"
    )
    err_console.print(
        f"{stored} of {outcome.context.project}/{outcome.spec.name} in "
        f"{redact_url(outcome.database_url)}",
        markup=False,
    )
    base = outcome.ab_base
    if base is not None and outcome.comparison.baseline is not None:
        info = outcome.comparison.baseline
        what = "stored" if base.created else "already had"
        err_console.print(
            f"{what} the base side as run {base.run_id} (commit "
            f"{(info.first_commit or '')[:12]} on {info.branch})",
            markup=False,
        )
    print_comparison(outcome.comparison, console)


def _write_reports(
    outcome: CheckOutcome, *, markdown_out: Path | None, json_out: Path | None
) -> None:
    """Write the requested report files."""
    from perfci.cli._console import err_console
    from perfci.usecases.check.repro import repro_of
    from perfci.usecases.check.run import write_json, write_markdown

    if markdown_out is not None:
        write_markdown(
            outcome.comparison,
            markdown_out,
            benchmark=outcome.spec.name,
            run_url=outcome.context.ci_url,
            repro=repro_of(outcome),
        )
        err_console.print(f"wrote {markdown_out}", markup=False)
    if json_out is not None:
        write_json(outcome.comparison, json_out)
        err_console.print(f"wrote {json_out}", markup=False)


def _publish(
    outcome: CheckOutcome, *, comment: bool | None, comment_on: CommentOn, cc: list[str]
) -> str | None:
    """Post the comment and status, write the job summary; returns the comment's URL."""
    from perfci.cli._console import err_console
    from perfci.usecases.check.run import publish_outcome

    published = publish_outcome(outcome, comment=comment, comment_on=comment_on, cc=cc)
    if published.comment_url:
        err_console.print(f"pull-request comment: {published.comment_url}", markup=False)
    if published.skipped_reason:
        err_console.print(f"note: {published.skipped_reason}", markup=False)
    for warning in published.warnings:
        err_console.print(f"warning: {warning}", markup=False)
    return published.comment_url


def register(app: typer.Typer) -> None:
    app.command("check", context_settings={"allow_interspersed_args": False})(check_command)
