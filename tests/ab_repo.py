"""A git repository with a tiny deterministic benchmark, for the A/B and adaptive-repeat tests.

``main`` holds ``bench.py`` and ``factors.json``, the file its per-kernel times are scaled by;
the ``feature`` branch (the pull request, checked out) changes ``factors.json``. The script
writes a perfci JSON profile per process. Its values are deterministic so that no test depends
on the machine's speed: a "machine" factor shared by both members of an A/B pair (±10 %, what
pairing must cancel) times a small per-process noise, both seeded by the pair and side in
``$PERFCI_OUTPUT_DIR``'s name; ``noise.json`` (``{"pr": [...], "base": [...]}``, one multiplier
of the GEMM kernel per pair) or ``sequence.json`` (one multiplier per process, in run order,
kept in a counter file) make chosen processes noisy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from deadlines import Deadline
from sqlalchemy import select

from perfci.cli.main import main
from perfci.store.engines import make_engine
from perfci.store.schema import Run

SCRIPT = """\
import json, os, pathlib, random, sys, time
out = pathlib.Path(os.environ["PERFCI_OUTPUT_DIR"])
here = pathlib.Path.cwd()
factors = json.loads((here / "factors.json").read_text())
if factors.get("fail"):
    print("CUDA error: out of memory")
    sys.exit(3)
if factors.get("hang"):
    import subprocess
    # A child of its own, as a data loader's workers: it must go with the benchmark.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    pathlib.Path(os.environ["HANG_MARKER"]).write_text(f"{os.getpid()} {child.pid}")
    time.sleep(120)
if factors.get("garbage"):
    (out / "profile.json").write_text('{"perfci_version": "0", "profiles": [')
    sys.exit(0)
name = out.parent.name  # A/B: work_dir/ab/<side>-<pair>/repeat-0
side, _, pair = name.rpartition("-")
ab = side in ("base", "pr")
machine = random.Random("machine-" + pair).lognormvariate(0, 0.10) if ab else 1.0
rng = random.Random(name + "/" + out.name + "/" + os.environ.get("RUN_SEED", ""))
noisy = 1.0
if (here / "noise.json").exists() and ab:
    listed = json.loads((here / "noise.json").read_text()).get(side, [])
    noisy = listed[int(pair)] if int(pair) < len(listed) else 1.0
if (here / "sequence.json").exists():
    counter = here / ".perfci" / "counter"
    done = int(counter.read_text()) if counter.exists() else 0
    counter.parent.mkdir(exist_ok=True)
    counter.write_text(str(done + 1))
    listed = json.loads((here / "sequence.json").read_text())
    noisy = listed[done] if done < len(listed) else 1.0
def value(base, factor=1.0):
    return base * factor * machine * rng.lognormvariate(0, 0.004)
gemm = value(6e6, factors.get("gemm", 1.0)) * noisy
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

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def git(repo: Path, *args: str, date: str | None = None) -> str:
    dates = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date} if date else {}
    done = subprocess.run(
        ["git", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **_GIT_ENV, **dates},
    )
    return done.stdout.strip()


def make_repo(
    root: Path, pr_factors: dict[str, object], files: dict[str, object] | None = None
) -> Path:
    """``main`` with the benchmark, and ``feature`` (checked out) with ``pr_factors``.

    ``files`` (name → JSON value) are committed on ``main`` too (``noise.json`` …). ``main``
    has two commits a day apart, the benchmark's (``main~1``, where history-mode tests store
    their baseline runs) and an empty one (the merge-base); the pull request's is a day later.
    """
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "bench.py").write_text(SCRIPT, encoding="utf-8")
    (repo / "factors.json").write_text("{}\n", encoding="utf-8")
    for name, content in (files or {}).items():
        (repo / name).write_text(json.dumps(content) + "\n", encoding="utf-8")
    (repo / "pyproject.toml").write_text(
        '[tool.perfci]\nproject = "acme/tiny"\n\n'
        "[tool.perfci.benchmarks.tiny]\n"
        f'command = [{json.dumps(sys.executable)}, "bench.py"]\n'
        'profiler = "none"\nglobs = ["*.json"]\nrepeats = 3\n',
        encoding="utf-8",
    )
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "benchmark", date="2026-01-01T12:00:00Z")
    git(repo, "commit", "-q", "--allow-empty", "-m", "docs", date="2026-01-02T12:00:00Z")
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "factors.json").write_text(json.dumps(pr_factors) + "\n", encoding="utf-8")
    git(
        repo,
        "commit",
        "-q",
        "--allow-empty",
        "-am",
        "the pull request",
        date="2026-01-03T12:00:00Z",
    )
    return repo


@pytest.fixture
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No CI variables; temporary directories (the worktree's) under ``tmp_path/tmp``."""
    for name in (
        "GITHUB_ACTIONS",
        "GITHUB_TOKEN",
        "GITHUB_OUTPUT",
        "GITHUB_STEP_SUMMARY",
        "GITHUB_EVENT_PATH",
        "GITHUB_REPOSITORY",
        "PERFCI_DATABASE_URL",
        "PERFCI_GITHUB_TOKEN",
        "PERFCI_PROJECT",
        "PERFCI_FAIL_ON_REGRESSION",
        "PERFCI_HISTORY",
        "PERFCI_MAX_REPEATS",
        "PERFCI_AB_PAIRS",
        "PERFCI_BUDGET",
    ):
        monkeypatch.delenv(name, raising=False)
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    return temp


def check_ab(repo: Path, url: str, *args: str) -> int:
    os.chdir(repo)
    return main(
        [
            "check",
            "--ab",
            "--ab-pairs",
            "3",
            "--max-repeats",
            "3",
            "--database-url",
            url,
            "--base-branch",
            "main",
            "--pr",
            "7",
            "--ci-run-id",
            "job-1",
            *args,
        ]
    )


def assert_cleaned(repo: Path, temp: Path) -> None:
    """Only the checkout itself is a worktree, and the temporary directory is empty."""
    listed = git(repo, "worktree", "list", "--porcelain")
    assert [line for line in listed.splitlines() if line.startswith("worktree ")] == [
        f"worktree {repo.resolve()}"
    ]
    assert list(temp.iterdir()) == []


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, waiting for its parent, is not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def ended(pid: int, within_s: float = 10.0) -> bool:
    """Whether ``pid`` has ended, or does within a moment (a SIGKILL takes effect when the
    process is next scheduled: no more of its code runs, but its state changes a bit later)."""
    deadline = Deadline(within_s)
    while running(pid):
        if deadline.expired():
            return False
        time.sleep(0.02)
    return True


def stored_runs(url: str) -> list[int]:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return list(connection.execute(select(Run.id).order_by(Run.id)).scalars().all())
    finally:
        engine.dispose()
