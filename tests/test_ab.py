"""Same-runner A/B mode: the paired statistics, and ``perfci check --ab`` on real git
repositories with a real (deterministic) benchmark process per side and pair (``ab_repo``).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from ab_repo import (
    assert_cleaned,
    check_ab,
    clean_env,
    ended,
    git,
    make_repo,
    running,
    stored_runs,
)
from deadlines import Deadline, scaled
from sqlalchemy import select

from perfci.analysis.paired import compare_paired
from perfci.analysis.paired_stats import paired_stats
from perfci.analysis.stats import SampleError
from perfci.core.model import MetricKind, SeriesKey, Verdict
from perfci.store.engines import make_engine
from perfci.store.schema import Commit, Run
from perfci.store.schema_service import Comparison

__all__ = ["clean_env"]  # a fixture, imported for its name

STEP = SeriesKey(kind=MetricKind.STEP, name="step")
KERNELS = [SeriesKey(kind=MetricKind.KERNEL, name=f"kernel_{i}") for i in range(12)]


def paired_run(
    changes: dict[int, float],
    *,
    pairs: int = 5,
    machine_sd: float = 0.10,
    noise_sd: float = 0.01,
    seed: int = 0,
) -> tuple[dict[SeriesKey, list[float]], dict[SeriesKey, list[float]]]:
    """Base and PR values per pair: a machine factor shared by both sides of a pair (and by
    every metric), independent per-process noise; kernel ``i`` of the PR × ``changes[i]``."""
    rng = np.random.default_rng(seed)
    machine = np.exp(rng.normal(0, machine_sd, pairs))
    base, pr = {}, {}
    levels = [1e6 * (i + 1) for i in range(len(KERNELS))]
    for i, (key, level) in enumerate(zip(KERNELS, levels, strict=True)):
        base[key] = list(level * machine * np.exp(rng.normal(0, noise_sd, pairs)))
        pr[key] = list(
            level * changes.get(i, 1.0) * machine * np.exp(rng.normal(0, noise_sd, pairs))
        )
    base[STEP] = [sum(base[k][j] for k in KERNELS) for j in range(pairs)]
    pr[STEP] = [sum(pr[k][j] for k in KERNELS) for j in range(pairs)]
    return base, pr


def test_paired_stats_are_the_mean_and_variance_of_log_differences() -> None:
    found = paired_stats([100.0, 200.0, None, 400.0], [110.0, 180.0, 300.0, float("nan")])
    assert found is not None and found.n == 2  # pairs 2 and 3 lack a side
    diffs = [math.log(1.1), math.log(0.9)]
    assert found.mean == pytest.approx(sum(diffs) / 2)
    assert found.var == pytest.approx(np.var(diffs, ddof=1))
    assert found.log_base == pytest.approx((math.log(100) + math.log(200)) / 2)
    assert paired_stats([1.0, None], [None, 2.0]) is None
    with pytest.raises(SampleError, match="-5"):
        paired_stats([1.0, -5.0], [1.0, 1.0], key="kernel_x")


def test_machine_noise_cancels_in_the_pairs() -> None:
    # ±10 % machine noise, 1 % process noise: history mode could tell nothing apart here.
    base, pr = paired_run({}, machine_sd=0.10)
    result = compare_paired(base, pr, benchmark="b")
    assert result.verdict is Verdict.UNCHANGED
    assert not [m for m in result.metrics if m.verdict in {Verdict.REGRESSION, Verdict.IMPROVEMENT}]
    # Unpaired, the same values are 10 % apart run to run: the pairing is what decides.
    step = next(m for m in result.metrics if m.key == STEP.key)
    assert step.ci_high is not None and step.ci_high - (step.ci_low or 0.0) < 0.04


def test_a_changed_kernel_is_found_and_the_printed_values_agree() -> None:
    base, pr = paired_run({5: 1.10}, machine_sd=0.10)
    result = compare_paired(base, pr, benchmark="b")
    lines = {m.key: m for m in result.metrics}
    changed = lines[KERNELS[5].key]
    assert result.verdict is Verdict.REGRESSION and changed.verdict is Verdict.REGRESSION
    assert changed.change == pytest.approx(0.10, abs=0.02)
    for line in result.metrics:
        assert line.candidate_median is not None and line.baseline_median is not None
        assert line.candidate_median / line.baseline_median - 1 == pytest.approx(line.change)
        assert line.ci_low is not None and line.ci_high is not None
        assert line.ci_low <= line.change <= line.ci_high
    # Unchanged kernels are never "improvements" because another one got slower.
    assert not [m for m in result.metrics if m.verdict is Verdict.IMPROVEMENT]
    assert result.contributions[0].series == KERNELS[5]


def test_new_missing_and_too_few_pairs_are_decided_without_a_test() -> None:
    base, pr = paired_run({}, pairs=3)
    only_base, only_pr = (
        SeriesKey(kind=MetricKind.KERNEL, name="gone"),
        SeriesKey(kind=MetricKind.KERNEL, name="added"),
    )
    sparse = SeriesKey(kind=MetricKind.KERNEL, name="sparse")
    base[only_base], pr[only_pr] = [5e5] * 3, [5e5] * 3
    base[sparse], pr[sparse] = [5e5, None, 5e5], [None, 5e5, 5e5]
    result = compare_paired(base, pr, benchmark="b")
    lines = {m.key: m for m in result.metrics}
    assert lines[only_base.key].verdict is Verdict.MISSING
    assert lines[only_pr.key].verdict is Verdict.NEW
    assert lines[sparse.key].verdict is Verdict.INCONCLUSIVE
    assert lines[sparse.key].n_candidate == 1 and lines[sparse.key].repeats_needed == 2


def test_an_inconclusive_metric_says_how_many_pairs_would_settle_it() -> None:
    base, pr = paired_run({}, pairs=3, noise_sd=0.02, machine_sd=0.0, seed=3)
    result = compare_paired(base, pr, benchmark="b", notes=["first"])
    assert result.notes[0] == "first"
    open_lines = [m for m in result.metrics if m.verdict is Verdict.INCONCLUSIVE]
    assert open_lines
    assert all(m.repeats_needed is not None and m.repeats_needed > 3 for m in open_lines)


def test_unchanged_pr_passes_and_both_sides_are_stored(
    tmp_path: Path,
    clean_env: Path,
    migrated_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    repo = make_repo(tmp_path, {})
    monkeypatch.chdir(repo)
    base_sha, head_sha = git(repo, "rev-parse", "main"), git(repo, "rev-parse", "HEAD")
    # A hook an earlier job's benchmark left in the checkout (a persistent runner) never runs.
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {tmp_path / 'hook-ran'}\n", encoding="utf-8")
    hook.chmod(0o755)

    code = check_ab(repo, migrated_url, "--json-out", str(tmp_path / "report.json"))
    assert not (tmp_path / "hook-ran").exists()

    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    # The ±10 % machine factor cancels in the pairs: nothing moved.
    assert report["verdict"] in {"unchanged", "inconclusive"}
    assert not [m for m in report["metrics"] if m["verdict"] in {"regression", "improvement"}]
    assert any("Same-runner A/B comparison: 3 pairs" in note for note in report["notes"])
    assert {m["n_candidate"] for m in report["metrics"]} == {3}
    assert "pair 1: base" in captured.err and "pair 3: pull request" in captured.err
    engine = make_engine(migrated_url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                select(Run.id, Run.branch, Run.pr_number, Run.ci_run_id, Commit.sha)
                .join(Commit, Commit.id == Run.commit_id)
                .order_by(Run.id)
            ).all()
            compared = connection.execute(select(Comparison.run_id)).scalars().all()
    finally:
        engine.dispose()
    (base_id, base_branch, base_pr, base_ci, base_commit), pr_row = rows
    assert (base_branch, base_pr, base_ci, base_commit) == ("main", None, "job-1-ab-base", base_sha)
    assert tuple(pr_row[1:]) == ("feature", 7, "job-1", head_sha)
    assert compared == [pr_row[0]] and report["run_id"] == pr_row[0]
    assert report["baseline"]["run_ids"] == [base_id]
    assert_cleaned(repo, clean_env)

    # The same CI job again (a retry): nothing new is stored, the first verdict is reported.
    assert check_ab(repo, migrated_url, "--json-out", str(tmp_path / "again.json")) == 0
    again = json.loads((tmp_path / "again.json").read_text(encoding="utf-8"))
    assert again["run_id"] == report["run_id"] and again["metrics"] == report["metrics"]
    assert stored_runs(migrated_url) == [base_id, pr_row[0]]
    assert_cleaned(repo, clean_env)


def test_a_three_times_slower_kernel_is_a_regression(
    tmp_path: Path, clean_env: Path, migrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path, {"gemm": 3.0})
    monkeypatch.chdir(repo)

    code = check_ab(repo, migrated_url, "--json-out", str(tmp_path / "report.json"))

    assert code == 1
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    lines = {m["series"]["name"]: m for m in report["metrics"]}
    gemm = lines["ampere_sgemm_128x64_tn"]
    assert report["verdict"] == "regression" and gemm["verdict"] == "regression"
    assert gemm["change"] == pytest.approx(2.0, abs=0.05)
    # The printed values agree with the change.
    assert gemm["candidate_median"] / gemm["baseline_median"] - 1 == pytest.approx(gemm["change"])
    assert lines["softmax_kernel"]["verdict"] != "improvement"
    assert report["contributions"][0]["series"]["name"] == "ampere_sgemm_128x64_tn"
    assert_cleaned(repo, clean_env)


@pytest.mark.parametrize(("factors", "expected"), [({"fail": True}, 3), ({"garbage": True}, 2)])
def test_a_failing_or_unparsable_side_stores_nothing_and_removes_the_worktree(
    tmp_path: Path,
    clean_env: Path,
    migrated_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    factors: dict[str, object],
    expected: int,
) -> None:
    repo = make_repo(tmp_path, factors)
    monkeypatch.chdir(repo)

    assert check_ab(repo, migrated_url) == expected

    err = capsys.readouterr().err
    assert ("out of memory" in err) if expected == 3 else ("profile.json" in err)
    assert stored_runs(migrated_url) == []
    assert_cleaned(repo, clean_env)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize(
    ("signum", "to_group", "code"),
    [
        (signal.SIGINT, True, 130),  # Ctrl-C in a terminal: the whole foreground group
        (signal.SIGTERM, False, 143),  # a cancelled CI job, `kill`, a container stopped
        (signal.SIGHUP, False, 129),  # the terminal closed
    ],
    ids=["SIGINT", "SIGTERM", "SIGHUP"],
)
def test_a_stopped_check_removes_the_worktree_and_ends_the_benchmark(
    tmp_path: Path,
    clean_env: Path,
    migrated_url: str,
    signum: signal.Signals,
    to_group: bool,
    code: int,
) -> None:
    """Issue 31: SIGTERM used to leave the worktree, the temporary folder and the benchmark
    (with its own child) behind; every way of stopping perfci cleans up as Ctrl-C does."""
    repo = make_repo(tmp_path, {"hang": True})
    marker = tmp_path / "started"
    env = {**os.environ, "HANG_MARKER": str(marker), "TMPDIR": str(clean_env)}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "perfci.cli.main",
            "check",
            "--ab",
            "--ab-pairs",
            "3",
            "--database-url",
            migrated_url,
            "--base-branch",
            "main",
        ],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # A suite run as a background job (`scripts/test &` in a script) inherits SIGINT
        # ignored, and so would perfci: Ctrl-C is what is tested, so it gets its default back.
        preexec_fn=_default_sigint,
    )
    try:
        deadline = Deadline(120)
        while not marker.exists() or len(marker.read_text().split()) < 2:
            assert process.poll() is None, process.communicate()
            assert not deadline.expired(), f"the benchmark never started: {deadline.describe()}"
            time.sleep(0.05)
        benchmark = [int(pid) for pid in marker.read_text().split()]
        assert all(running(pid) for pid in benchmark)
        if to_group:
            os.killpg(process.pid, signum)
        else:
            os.kill(process.pid, signum)
        _, err = process.communicate(timeout=scaled(60))
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == code, err
    assert "Traceback" not in err
    assert stored_runs(migrated_url) == []
    assert_cleaned(repo, clean_env)
    assert all(ended(pid) for pid in benchmark), "the benchmark outlived perfci"


def test_a_dirty_working_tree_is_a_usage_error(
    tmp_path: Path,
    clean_env: Path,
    migrated_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    repo = make_repo(tmp_path, {})
    monkeypatch.chdir(repo)
    (repo / "factors.json").write_text('{"gemm": 2}\n', encoding="utf-8")
    (repo / ".perfci").mkdir()  # perfci's own folder is not a change

    assert check_ab(repo, migrated_url) == 2

    err = capsys.readouterr().err
    assert "clean working tree" in err and "factors.json" in err
    assert ".perfci" not in err
    assert stored_runs(migrated_url) == []
    assert_cleaned(repo, clean_env)


def test_a_missing_base_branch_is_a_usage_error(
    tmp_path: Path,
    clean_env: Path,
    migrated_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    repo = make_repo(tmp_path, {})
    monkeypatch.chdir(repo)

    assert check_ab(repo, migrated_url, "--baseline-branch", "release") == 2

    assert "'release'" in capsys.readouterr().err
    assert stored_runs(migrated_url) == []
    assert_cleaned(repo, clean_env)


def test_profiles_cannot_be_read_in_ab_mode(
    tmp_path: Path,
    clean_env: Path,
    migrated_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    repo = make_repo(tmp_path, {})
    monkeypatch.chdir(repo)
    assert check_ab(repo, migrated_url, "--profile", "bench.py") == 2
    assert "--profile" in capsys.readouterr().err


def test_three_pairs_keep_their_own_variance_four_are_moderated() -> None:
    from scipy import stats as scipy_stats

    for pairs, moderated in ((3, False), (4, True)):
        base, pr = paired_run({}, pairs=pairs, machine_sd=0.0, noise_sd=0.02, seed=pairs)
        line = next(
            m for m in compare_paired(base, pr, benchmark="b").metrics if m.key == KERNELS[0].key
        )
        diffs = np.log(pr[KERNELS[0]]) - np.log(base[KERNELS[0]])
        half = scipy_stats.t.ppf(0.975, pairs - 1) * diffs.std(ddof=1) / math.sqrt(pairs)
        plain = (math.expm1(diffs.mean() - half), math.expm1(diffs.mean() + half))
        assert line.change == pytest.approx(math.expm1(diffs.mean()))
        if moderated:
            assert (line.ci_low, line.ci_high) != pytest.approx(plain)
        else:
            assert (line.ci_low, line.ci_high) == pytest.approx(plain)
