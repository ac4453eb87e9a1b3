"""Same-runner A/B mode: ``perfci check --ab`` on real git repositories, with a real benchmark.

Each test builds a git repository in ``tmp_path``: ``main`` holds a tiny benchmark script and
``factors.json``, the file its per-kernel times are scaled by; the ``feature`` branch (the pull
request) changes ``factors.json``. The script writes a perfci JSON profile per process. Its
values are deterministic so that no test depends on the machine's speed: a "machine" factor
shared by both members of a pair (±10 %, what pairing must cancel) times a small per-process
noise, both seeded by the pair and side in ``$PERFCI_OUTPUT_DIR``'s name.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from perfci.cli.main import main
from perfci.store.db import make_engine
from perfci.store.schema import Commit, Comparison, Run

SCRIPT = """\
import json, os, pathlib, random, sys, time
out = pathlib.Path(os.environ["PERFCI_OUTPUT_DIR"])
factors = json.loads(pathlib.Path("factors.json").read_text())
if factors.get("fail"):
    print("CUDA error: out of memory")
    sys.exit(3)
if factors.get("hang"):
    pathlib.Path(os.environ["HANG_MARKER"]).write_text("started")
    time.sleep(120)
if factors.get("garbage"):
    (out / "profile.json").write_text('{"perfci_version": "0", "profiles": [')
    sys.exit(0)
name = out.parent.name  # work_dir/ab/<side>-<pair>/repeat-0
side, _, pair = name.rpartition("-")
machine = random.Random("machine-" + pair).lognormvariate(0, 0.10)
rng = random.Random(name)
def value(base, factor=1.0):
    return base * factor * machine * rng.lognormvariate(0, 0.004)
gemm = value(6e6, factors.get("gemm", 1.0))
softmax = value(3e6, factors.get("softmax", 1.0))
other = value(1e6)
metrics = [
    {"kind": "step", "name": "step", "samples_ns": [gemm + softmax + other] * 3},
    {"kind": "kernel", "name": "ampere_sgemm_128x64_tn", "calls": 30, "total_ns": 3 * gemm},
    {"kind": "kernel", "name": "softmax_kernel", "calls": 30, "total_ns": 3 * softmax},
    {"kind": "kernel", "name": "elementwise_kernel", "calls": 30, "total_ns": 3 * other},
]
doc = {"perfci_version": "0", "schema_version": 1,
       "profiles": [{"label": "tiny", "format": "perfci", "source": "tiny", "steps": 3,
                     "metrics": metrics}]}
(out / "profile.json").write_text(json.dumps(doc))
"""

_GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True,
                          env={**os.environ, **_GIT_ENV})
    return done.stdout.strip()


def make_repo(root: Path, pr_factors: dict[str, object]) -> Path:
    """``main`` with the benchmark, and ``feature`` (checked out) with ``pr_factors``."""
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "bench.py").write_text(SCRIPT, encoding="utf-8")
    (repo / "factors.json").write_text("{}\n", encoding="utf-8")
    (repo / "pyproject.toml").write_text(
        "[tool.perfci]\nproject = \"acme/tiny\"\n\n"
        "[tool.perfci.benchmarks.tiny]\n"
        f"command = [{json.dumps(sys.executable)}, \"bench.py\"]\n"
        "profiler = \"none\"\nglobs = [\"*.json\"]\nrepeats = 3\n", encoding="utf-8")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "benchmark")
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "factors.json").write_text(json.dumps(pr_factors) + "\n", encoding="utf-8")
    git(repo, "commit", "-q", "--allow-empty", "-am", "the pull request")
    return repo


@pytest.fixture
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No CI variables; temporary directories (the worktree's) under ``tmp_path/tmp``."""
    for name in ("GITHUB_ACTIONS", "GITHUB_TOKEN", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY",
                 "GITHUB_EVENT_PATH", "GITHUB_REPOSITORY", "PERFCI_DATABASE_URL",
                 "PERFCI_GITHUB_TOKEN", "PERFCI_PROJECT", "PERFCI_FAIL_ON_REGRESSION",
                 "PERFCI_HISTORY", "PERFCI_MAX_REPEATS", "PERFCI_AB_PAIRS", "PERFCI_BUDGET"):
        monkeypatch.delenv(name, raising=False)
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    return temp


def check_ab(repo: Path, url: str, *args: str) -> int:
    os.chdir(repo)
    return main(["check", "--ab", "--ab-pairs", "3", "--max-repeats", "3", "--database-url",
                 url, "--base-branch", "main", "--pr", "7", "--ci-run-id", "job-1", *args])


def assert_cleaned(repo: Path, temp: Path) -> None:
    """Only the checkout itself is a worktree, and the temporary directory is empty."""
    listed = git(repo, "worktree", "list", "--porcelain")
    assert [line for line in listed.splitlines() if line.startswith("worktree ")] == [
        f"worktree {repo.resolve()}"]
    assert list(temp.iterdir()) == []


def stored_runs(url: str) -> list[int]:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return list(connection.execute(select(Run.id).order_by(Run.id)).scalars().all())
    finally:
        engine.dispose()


def test_unchanged_pr_passes_and_both_sides_are_stored(
        tmp_path: Path, clean_env: Path, migrated_url: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path, {})
    monkeypatch.chdir(repo)
    base_sha, head_sha = git(repo, "rev-parse", "main"), git(repo, "rev-parse", "HEAD")

    code = check_ab(repo, migrated_url, "--json-out", str(tmp_path / "report.json"))

    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    # The ±10 % machine factor cancels in the pairs: nothing moved.
    assert report["verdict"] in {"unchanged", "inconclusive"}
    assert not [m for m in report["metrics"] if m["verdict"] in {"regression", "improvement"}]
    assert any("Same-runner A/B comparison: 3 pairs" in note for note in report["notes"])
    assert {m["n_candidate"] for m in report["metrics"]} == {3}
    assert "pair 0: base" in captured.err and "pair 2: pull request" in captured.err
    engine = make_engine(migrated_url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                select(Run.id, Run.branch, Run.pr_number, Run.ci_run_id, Commit.sha)
                .join(Commit, Commit.id == Run.commit_id).order_by(Run.id)).all()
            compared = connection.execute(select(Comparison.run_id)).scalars().all()
    finally:
        engine.dispose()
    (base_id, base_branch, base_pr, base_ci, base_commit), pr_row = rows
    assert (base_branch, base_pr, base_ci, base_commit) == ("main", None, "job-1-ab-base",
                                                            base_sha)
    assert tuple(pr_row[1:]) == ("feature", 7, "job-1", head_sha)
    assert compared == [pr_row[0]] and report["run_id"] == pr_row[0]
    assert report["baseline"]["run_ids"] == [base_id]
    assert_cleaned(repo, clean_env)


def test_a_three_times_slower_kernel_is_a_regression(
        tmp_path: Path, clean_env: Path, migrated_url: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
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
        tmp_path: Path, clean_env: Path, migrated_url: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], factors: dict[str, object], expected: int) -> None:
    repo = make_repo(tmp_path, factors)
    monkeypatch.chdir(repo)

    assert check_ab(repo, migrated_url) == expected

    err = capsys.readouterr().err
    assert ("out of memory" in err) if expected == 3 else ("profile.json" in err)
    assert stored_runs(migrated_url) == []
    assert_cleaned(repo, clean_env)


def test_ctrl_c_removes_the_worktree(tmp_path: Path, clean_env: Path, migrated_url: str) -> None:
    repo = make_repo(tmp_path, {"hang": True})
    marker = tmp_path / "started"
    env = {**os.environ, "HANG_MARKER": str(marker), "TMPDIR": str(clean_env)}
    process = subprocess.Popen(
        [sys.executable, "-m", "perfci.cli.main", "check", "--ab", "--ab-pairs", "3",
         "--database-url", migrated_url, "--base-branch", "main"],
        cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the benchmark never started"
            time.sleep(0.05)
        # Ctrl-C in a terminal: SIGINT to the whole foreground process group.
        os.killpg(process.pid, signal.SIGINT)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 130, err
    assert stored_runs(migrated_url) == []
    assert_cleaned(repo, clean_env)


def test_a_dirty_working_tree_is_a_usage_error(
        tmp_path: Path, clean_env: Path, migrated_url: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
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
        tmp_path: Path, clean_env: Path, migrated_url: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path, {})
    monkeypatch.chdir(repo)

    assert check_ab(repo, migrated_url, "--baseline-branch", "release") == 2

    assert "'release'" in capsys.readouterr().err
    assert stored_runs(migrated_url) == []
    assert_cleaned(repo, clean_env)


def test_profiles_cannot_be_read_in_ab_mode(
        tmp_path: Path, clean_env: Path, migrated_url: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path, {})
    monkeypatch.chdir(repo)
    assert check_ab(repo, migrated_url, "--profile", "bench.py") == 2
    assert "--profile" in capsys.readouterr().err
