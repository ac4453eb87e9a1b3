"""The history branch (perfci/history, perfci/usecases/history/branch.py) with real git, no mocks.

A bare repository plays ``origin``; every "CI job" is a fresh ``git clone`` of it running the real
``perfci check`` in a subprocess, so nothing survives between jobs but the branch itself, exactly
as on an ephemeral runner.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import tomllib
from db_fixtures import make_context, make_profile
from deadlines import scaled
from processes import end_group, own_group

from perfci.core.errors import ConfigError, StorageError
from perfci.core.settings import Settings
from perfci.history import (
    GitBranch,
    cache_root,
    decode_run,
    encode_run,
    git_branch,
    parse_history,
    run_path,
)
from perfci.usecases.history.branch import is_base_branch_push, sync_branch

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ROOT / "examples" / "gpt" / "profiles"
PERFCI = Path(sys.executable).parent / "perfci"
BRANCH = "perfci-data"
BENCHMARK = "gpt-tiny"


def _env(home: Path) -> dict[str, str]:
    """A CI-like environment: no GitHub or perfci variables, no user git config."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "PERFCI_", "GIT_", "RUNNER_", "XDG_"))
    }
    return {
        **env,
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "dev",
        "GIT_AUTHOR_EMAIL": "dev@example.com",
        "GIT_COMMITTER_NAME": "dev",
        "GIT_COMMITTER_EMAIL": "dev@example.com",
    }


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """perfci's cache folder (the history's bare repositories) under this test's folder."""
    folder = tmp_path / "xdg-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    return folder


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(60),
        check=False,
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


class Origin:
    """A bare ``origin`` with a ``main`` branch, and fresh clones of it as CI runners."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = _env(root / "home")
        (root / "home").mkdir()
        self.bare = root / "origin.git"
        self._clones = 0
        git(
            root, "init", "--quiet", "--bare", "--initial-branch=main", str(self.bare), env=self.env
        )
        seed = self.clone("seed")
        (seed / "README.md").write_text("model\n", encoding="utf-8")
        self.commit(seed, "initial", when=1)
        git(seed, "push", "--quiet", "origin", "HEAD:main", env=self.env)

    def clone(self, name: str | None = None) -> Path:
        self._clones += 1
        target = self.root / (name or f"runner-{self._clones}")
        git(self.root, "clone", "--quiet", str(self.bare), str(target), env=self.env)
        return target

    def commit(self, clone: Path, message: str, *, when: int) -> str:
        # Distinct commit times: baselines are ordered by them.
        stamp = f"2026-11-0{1 + when // 100} {10 + when % 10}:00:00 +0000"
        env = {**self.env, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
        git(clone, "commit", "--quiet", "--allow-empty", "-am", message, env=env)
        return git(clone, "rev-parse", "HEAD", env=self.env)

    def tip(self) -> str | None:
        done = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", f"refs/heads/{BRANCH}"],
            cwd=self.bare,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        return done.stdout.strip() or None

    def run_files(self) -> list[str]:
        tip = self.tip()
        if tip is None:
            return []
        listed = git(self.bare, "ls-tree", "-r", "--name-only", tip, "runs/", env=self.env)
        return [line for line in listed.splitlines() if line]


@pytest.fixture
def origin(tmp_path: Path) -> Origin:
    return Origin(tmp_path)


def check(
    origin: Origin, clone: Path, profiles: Path, *extra: str, env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any], str]:
    """``perfci check`` in ``clone`` on the three repeats in ``profiles``, JSON report back."""
    report = clone.parent / f"{clone.name}-report.json"
    files = [
        arg
        for path in sorted(profiles.glob("*.pt.trace.json.gz"))
        for arg in ("--profile", str(path))
    ]
    done = subprocess.run(
        [
            str(PERFCI),
            "check",
            "--benchmark",
            BENCHMARK,
            "--history",
            f"git:{BRANCH}",
            "--json-out",
            str(report),
            "--no-comment",
            *files,
            *extra,
        ],
        cwd=clone,
        env=env or origin.env,
        capture_output=True,
        text=True,
        timeout=scaled(300),
        check=False,
    )
    output = done.stdout + done.stderr
    data = json.loads(report.read_text(encoding="utf-8")) if report.exists() else {}
    return done.returncode, data, output


def _checkout_state(clone: Path, env: dict[str, str]) -> tuple[str, str, str]:
    """Refs, HEAD and status of the user's checkout (``.perfci/`` is perfci's own folder)."""
    status = "\n".join(
        line
        for line in git(clone, "status", "--porcelain", env=env).splitlines()
        if ".perfci/" not in line
    )
    return (git(clone, "for-each-ref", env=env), git(clone, "rev-parse", "HEAD", env=env), status)


# --- the scenario of issue 16 ----------------------------------------------------------------


@pytest.mark.slow
def test_five_main_jobs_in_fresh_clones_give_a_pull_request_its_baseline(origin: Origin) -> None:
    sources = ["main-1", "main-2", "main-3", "main-4", "main-1"]  # the fifth repeats the first
    for job, source in enumerate(sources, start=1):
        runner = origin.clone()
        origin.commit(runner, f"merge #{job}", when=job)
        git(runner, "push", "--quiet", "origin", "HEAD:main", env=origin.env)
        before = _checkout_state(runner, origin.env)
        code, report, output = check(
            origin, runner, PROFILES / source, "--ci-run-id", f"main-{job}", "--fail-on-regression"
        )
        assert code == 0, output
        assert "warning: history" not in output, output
        # Each job saw every earlier job's run: nothing but the branch carried them over.
        assert report["baseline"]["runs"] == job - 1, output
        assert len(origin.run_files()) == job
        assert _checkout_state(runner, origin.env) == before  # the user's checkout untouched
    tip = origin.tip()
    # A docs-only merge with no perf run, so that the PR's merge base is newer than every run:
    # the baseline query keeps runs strictly older than the merge base's commit time, which
    # leaves out a run AT the merge base (reported to the lead; compare.py is not ours).
    docs = origin.clone()
    origin.commit(docs, "docs", when=6)
    git(docs, "push", "--quiet", "origin", "HEAD:main", env=origin.env)

    pr = origin.clone()
    git(pr, "checkout", "--quiet", "-b", "feature/slow-attention", env=origin.env)
    origin.commit(pr, "unfused attention", when=9)
    code, report, output = check(
        origin,
        pr,
        PROFILES / "slow-attention",
        "--pr",
        "7",
        "--base-branch",
        "main",
        "--branch",
        "feature/slow-attention",
        "--ci-run-id",
        "pr-7",
    )
    assert code == 1, output
    assert report["verdict"] == "regression"
    assert report["baseline"]["branch"] == "main"
    assert report["baseline"]["runs"] == 5, output
    # The attention's operators fail the check; the step moved +38 % too, but its five runs
    # were recorded on a loaded VM, too wide apart to call it on its own numbers: never
    # unchanged or faster (tests/test_baseline_selection.py has the same runs).
    step = next(m for m in report["metrics"] if m["series"]["kind"] == "step")
    assert step["change"] > 0.2 and step["verdict"] in ("regression", "inconclusive")
    assert origin.tip() == tip, "a pull request must never write the history branch"


def test_a_pull_request_run_is_never_recorded() -> None:
    assert is_base_branch_push(make_context(branch="main"), "main")
    assert not is_base_branch_push(make_context(branch="main", pr_number=3), "main")
    assert not is_base_branch_push(make_context(branch="feature"), "main")
    assert not is_base_branch_push(make_context(branch=None), "main")


# --- concurrency -----------------------------------------------------------------------------


def _branch(origin: Origin, clone: Path) -> GitBranch:
    return GitBranch(checkout=clone, branch=BRANCH, cache=origin.root / "cache" / clone.name)


def test_concurrent_pushers_all_land(origin: Origin) -> None:
    clones = [origin.clone() for _ in range(4)]
    branches = [_branch(origin, clone) for clone in clones]
    errors: list[BaseException] = []
    start = threading.Barrier(len(branches))

    def push(index: int, history: GitBranch) -> None:
        try:
            start.wait()
            for n in range(4):
                history.append(
                    {
                        f"runs/b/2026110{index}T00000{n}Z-{index}{n}.json.gz": (
                            f"run {index}.{n}".encode()
                        )
                    },
                    max_bytes=1 << 20,
                    prefix="runs/",
                    message=f"run {index}.{n}",
                )
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=push, args=(i, b)) for i, b in enumerate(branches)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=scaled(120))
    assert not errors, errors
    assert len(origin.run_files()) == 16  # every append landed, none overwrote another


def test_a_pusher_that_loses_to_every_other_job_still_lands(
    origin: Origin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twelve jobs land between each fetch and push of a thirteenth: it loses twelve races,
    more than any fixed count of attempts allowed (8 did), and lands, since each lost race
    was progress for another job."""
    monkeypatch.setattr(git_branch, "time", _NoSleep)
    late, others = _branch(origin, origin.clone()), _branch(origin, origin.clone())
    real_push = late._push
    landed = []

    def push_after_another_job_lands(commit: str, *, expected: str | None) -> bool:
        if len(landed) < 12:
            name = f"runs/b/other-{len(landed)}.json.gz"
            others.append({name: b"other"}, max_bytes=1 << 20, message=name)
            landed.append(name)
        return real_push(commit, expected=expected)

    monkeypatch.setattr(late, "_push", push_after_another_job_lands)
    done = late.append({"runs/b/late.json.gz": b"late"}, max_bytes=1 << 20, message="late")
    assert done.attempts == 13 and not done.already_there
    assert len(origin.run_files()) == 13


def test_refusals_while_no_job_lands_give_up_after_the_patience(
    origin: Origin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A push refused as if it lost a race while the tip never moves (a stuck lock): that is no
    progress, and the append stops after ``patience`` refusals, saying so."""
    monkeypatch.setattr(git_branch, "time", _NoSleep)
    history = _branch(origin, origin.clone())
    history.append({"runs/b/1.json.gz": b"one"}, max_bytes=1 << 20, message="one")
    tries = []

    def refused(commit: str, *, expected: str | None) -> bool:
        tries.append(expected)
        return False

    monkeypatch.setattr(history, "_push", refused)
    with pytest.raises(StorageError, match=r"refused 3 times in a row.*no other job landed"):
        history.append({"runs/b/2.json.gz": b"two"}, max_bytes=1 << 20, message="two", patience=3)
    assert len(tries) == 3  # each one followed by a fetch that found the tip where it was
    assert origin.run_files() == ["runs/b/1.json.gz"]


class _NoSleep:
    """``time`` for the history branch's back-off: the retry logic, not its pauses, is tested."""

    @staticmethod
    def sleep(seconds: float) -> None:
        assert seconds <= 2.0  # the back-off stays short however many races were lost


@pytest.mark.slow  # end to end through `perfci`: 15-30 s on a busy 2-core VM
def test_two_check_jobs_pushing_at_once_both_land(origin: Origin) -> None:
    runners = [origin.clone(), origin.clone()]
    for number, runner in enumerate(runners, start=1):
        origin.commit(runner, f"merge #{number}", when=number)
    processes = []
    for number, runner in enumerate(runners, start=1):
        files = [
            arg
            for p in sorted((PROFILES / f"main-{number}").glob("*.gz"))[:1]
            for arg in ("--profile", str(p))
        ]
        processes.append(
            subprocess.Popen(
                [
                    str(PERFCI),
                    "check",
                    "-b",
                    BENCHMARK,
                    "--history",
                    f"git:{BRANCH}",
                    "--no-comment",
                    "--branch",
                    "main",
                    "--ci-run-id",
                    f"job-{number}",
                    *files,
                ],
                cwd=runner,
                env=origin.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                **own_group(),
            )
        )
    try:
        outputs = [p.communicate(timeout=scaled(300))[0] for p in processes]
    finally:
        for process in processes:  # a job past its deadline takes its git children along
            end_group(process)
    assert [p.returncode for p in processes] == [0, 0], outputs
    assert all("warning: history" not in out for out in outputs), outputs
    assert len(origin.run_files()) == 2
    # Each job says, in one line each, that it read the branch and pushed its run (issue 36).
    for out in outputs:
        assert re.search(r"^history: (read \d+ runs? from|git:perfci-data holds no)", out, re.M)
        assert re.search(rf"^history: pushed run of {BENCHMARK} at \w+ to git:{BRANCH}$", out, re.M)


def test_a_push_built_on_a_stale_tip_is_refused_not_forced(origin: Origin) -> None:
    first, second = _branch(origin, origin.clone()), _branch(origin, origin.clone())
    first.append({"runs/b/1.json.gz": b"one"}, max_bytes=1 << 20, message="one")
    stale = first.fetch()
    assert stale is not None
    second.append({"runs/b/2.json.gz": b"two"}, max_bytes=1 << 20, message="two")
    # The commit `first` would push, built on the tip it last saw: the lease refuses it.
    orphan = first._commit([], parent=stale, message="late")
    assert first._push(orphan, expected=stale) is False
    assert origin.run_files() == ["runs/b/1.json.gz", "runs/b/2.json.gz"]


# --- retention -------------------------------------------------------------------------------


def test_retention_drops_the_oldest_runs_and_squashes_the_branch(origin: Origin) -> None:
    history = _branch(origin, origin.clone())
    payload = os.urandom(600)  # incompressible: the stored size is the size
    dropped: list[str] = []
    for n in range(8):
        done = history.append(
            {f"runs/b/2026110{n}T000000Z-{n}.json.gz": payload + bytes([n])},
            max_bytes=2500,
            prefix="runs/",
            message=f"run {n}",
        )
        dropped += done.dropped
    files = origin.run_files()
    # Never more than the cap, the newest always kept, the oldest gone.
    assert sum(len(payload) + 1 for _ in files) <= 2500
    assert files[-1] == "runs/b/20261107T000000Z-7.json.gz"
    assert "runs/b/20261100T000000Z-0.json.gz" in dropped
    assert set(dropped).isdisjoint(files)
    assert "README.md" in git(origin.bare, "ls-tree", "--name-only", BRANCH, env=origin.env)
    # A squash leaves the dropped runs out of the branch's history too.
    log = git(origin.bare, "log", "--format=%H", BRANCH, env=origin.env).splitlines()
    assert len(log) <= 3
    reachable = git(origin.bare, "rev-list", "--objects", BRANCH, env=origin.env)
    assert "20261100T000000Z-0" not in reachable


# --- sync ------------------------------------------------------------------------------------


def _append_run(history: GitBranch, *, commit: str, run_id: str, step_ns: float) -> str:
    context = make_context(
        commit=commit, ci_run_id=run_id, ci_provider="test", commit_time="2026-11-01T10:00:00+00:00"
    )
    repeats = [[make_profile({"step": step_ns * (1 + r / 100)}, label="p")] for r in range(3)]
    created = datetime(2026, 11, 2, tzinfo=UTC)
    document = encode_run(context=context, benchmark=BENCHMARK, repeats=repeats, created_at=created)
    path = run_path(context=context, benchmark=BENCHMARK, created_at=created, document=document)
    history.append({path: document}, max_bytes=1 << 20, prefix="runs/", message=run_id)
    return path


def test_sync_is_incremental_and_idempotent(origin: Origin, migrated_url: str) -> None:
    writer = _branch(origin, origin.clone())
    for n in range(3):
        _append_run(writer, commit=f"{n:040x}", run_id=f"r{n}", step_ns=1e6)
    reader = origin.clone()
    settings = Settings(database_url=migrated_url, history=f"git:{BRANCH}")

    first = sync_branch(settings, BRANCH, cwd=reader)
    assert (first.files, first.stored, first.warnings) == (3, 3, [])
    again = sync_branch(settings, BRANCH, cwd=reader)
    assert (again.files, again.stored) == (0, 0)  # the marker says nothing is new

    _append_run(writer, commit=f"{9:040x}", run_id="r9", step_ns=1e6)
    later = sync_branch(settings, BRANCH, cwd=reader)
    assert (later.files, later.stored) == (1, 1)  # only the new file was read
    # A lost marker means reading everything again: stored once all the same.
    (cache_root() / next(cache_root().glob(f"{BRANCH}-*.imported")).name).unlink()
    full = sync_branch(settings, BRANCH, cwd=reader)
    assert (full.files, full.stored) == (4, 0)


def test_a_bad_file_on_the_branch_is_skipped_with_a_warning(origin: Origin, tmp_path: Path) -> None:
    writer = _branch(origin, origin.clone())
    good = _append_run(writer, commit="a" * 40, run_id="good", step_ns=1e6)
    writer.append(
        {"runs/gpt-tiny/20261101T000000Z-bad.json.gz": b"not gzip"},
        max_bytes=1 << 20,
        message="bad",
    )
    reader = origin.clone()
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'store.db'}", history=f"git:{BRANCH}")
    result = sync_branch(settings, BRANCH, cwd=reader)
    assert result.stored == 1, good
    assert len(result.warnings) == 1 and "bad.json.gz: " in result.warnings[0]
    assert "not a gzip file" in result.warnings[0]


def test_a_run_document_round_trips() -> None:
    context = make_context(
        commit="b" * 40, pr_number=None, ci_run_id="9", environment={"gpu": "H100"}
    )
    repeats = [[make_profile({"k": 5.0}, label="x", steps=2)]]
    created = datetime(2026, 11, 23, 12, tzinfo=UTC)
    data = encode_run(context=context, benchmark="b/../x", repeats=repeats, created_at=created)
    assert data == encode_run(
        context=context, benchmark="b/../x", repeats=repeats, created_at=created
    )  # deterministic bytes: one blob per run
    run = decode_run(data, source="t")
    assert run.context == context and run.benchmark == "b/../x" and run.created_at == created
    assert run.repeats[0][0].metrics[0].total_ns == 5.0
    path = run_path(context=context, benchmark="b/../x", created_at=created, document=data)
    assert path.startswith("runs/b___x/20261123T120000Z-") and path.count("/") == 2


# --- settings and failures -------------------------------------------------------------------


def test_history_settings_are_parsed() -> None:
    assert parse_history("git:perfci-data") == "perfci-data"
    assert parse_history("git") == "perfci-data"
    assert parse_history(None) is None and parse_history("none") is None
    for bad in ("s3:bucket", "git:-x", "git:a..b", "git:a b"):
        with pytest.raises(ConfigError):
            parse_history(bad)
    chosen = Settings(database_url="git:perf-history")
    assert (chosen.history, chosen.database_url) == ("git:perf-history", None)


@pytest.mark.slow  # end to end through `perfci`: 15-30 s on a busy 2-core VM
def test_no_origin_is_a_warning_unless_the_history_is_required(tmp_path: Path) -> None:
    env = _env(tmp_path)
    checkout = tmp_path / "alone"
    git(tmp_path, "init", "--quiet", "--initial-branch=main", str(checkout), env=env)
    git(checkout, "commit", "--quiet", "--allow-empty", "-m", "x", env=env)
    profile = sorted((PROFILES / "main-1").glob("*.gz"))[0]
    command = [
        str(PERFCI),
        "check",
        "-b",
        BENCHMARK,
        "--history",
        "git:perfci-data",
        "--no-comment",
        "--profile",
        str(profile),
    ]
    done = subprocess.run(
        command,
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(120),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "history branch not used" in done.stderr and "no `origin` remote" in done.stderr
    assert "stored run 1" in done.stderr  # the check itself went on
    required = subprocess.run(
        command,
        cwd=checkout,
        env={**env, "PERFCI_HISTORY_REQUIRED": "1"},
        capture_output=True,
        text=True,
        timeout=scaled(120),
        check=False,
    )
    assert required.returncode == 2
    assert "no `origin` remote" in required.stderr


def test_a_refused_push_says_what_permission_is_missing(origin: Origin) -> None:
    hook = origin.bare / "hooks" / "pre-receive"
    hook.write_text(
        "#!/bin/sh\necho 'Permission to octo/gpt.git denied' >&2\nexit 1\n", encoding="utf-8"
    )
    hook.chmod(0o755)
    history = _branch(origin, origin.clone())
    with pytest.raises(StorageError, match="contents: write"):
        history.append({"runs/b/1.json.gz": b"x"}, max_bytes=1 << 20, message="x")
    assert origin.tip() is None


def test_the_token_goes_to_git_as_a_header_and_never_into_a_message(tmp_path: Path) -> None:
    env = _env(tmp_path)
    checkout = tmp_path / "checkout"
    git(tmp_path, "init", "--quiet", str(checkout), env=env)
    # Nothing listens on port 9 of loopback: git fails at once, as with a wrong host.
    git(checkout, "remote", "add", "origin", "https://user:pw@127.0.0.1:9/octo/gpt.git", env=env)
    history = GitBranch(
        checkout=checkout, branch=BRANCH, cache=tmp_path / "cache", token="ghs_secret-token"
    )
    with pytest.raises(StorageError) as caught:
        history.fetch()
    message = str(caught.value)
    assert "ghs_secret-token" not in message and ":pw@" not in message
    assert "https://***@127.0.0.1:9/octo/gpt.git" in message
    # The header is in git's environment, scoped to the origin's host (never on a command line).
    keys = {v for k, v in history._env.items() if k.startswith("GIT_CONFIG_KEY_")}
    assert keys == {"http.https://127.0.0.1:9/.extraheader"}
    # A header the checkout already persisted (actions/checkout) wins over the token.
    git(
        checkout,
        "config",
        "http.https://127.0.0.1/.extraheader",
        "AUTHORIZATION: basic eA==",
        env=env,
    )
    persisted = GitBranch(
        checkout=checkout, branch=BRANCH, cache=tmp_path / "cache", token="ghs_secret-token"
    )
    values = [v for k, v in persisted._env.items() if k.startswith("GIT_CONFIG_VALUE_")]
    assert values == ["AUTHORIZATION: basic eA=="]


def test_the_history_package_ships_in_the_wheel() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "perfci.history" in config["tool"]["setuptools"]["packages"]


# --- the weekly report from the branch (issue 36) ----------------------------------------------


def _push_week(history: GitBranch, job: int, runs: int) -> None:
    """``runs`` base-branch runs of one CI job, on the days of ISO week 2026-W45."""
    for n in range(runs):
        day = 2 + (job + n) % 5  # Monday 2 to Friday 6 November
        context = make_context(
            commit=f"{job:02d}{n:038x}",
            ci_run_id=f"job{job}-{n}",
            ci_provider="test",
            commit_time=f"2026-11-0{day}T1{n}:00:00+00:00",
        )
        repeats = [[make_profile({"step": 1e6 * (1 + r / 100)}, label="p")] for r in range(3)]
        created = datetime(2026, 11, day, 12, n, job, tzinfo=UTC)
        document = encode_run(
            context=context, benchmark=BENCHMARK, repeats=repeats, created_at=created
        )
        path = run_path(context=context, benchmark=BENCHMARK, created_at=created, document=document)
        history.append({path: document}, max_bytes=1 << 20, prefix="runs/", message=path)


def _report(origin: Origin, clone: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(PERFCI),
            "report",
            "--history",
            f"git:{BRANCH}",
            "--week",
            "2026-W45",
            "--project",
            "acme/model",
            "--format",
            "json",
            "--format",
            "md",
            "--out",
            str(out),
        ],
        cwd=clone,
        env=origin.env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_weekly_report_reads_the_history_branch_that_several_jobs_pushed(
    origin: Origin, tmp_path: Path
) -> None:
    writers = [_branch(origin, origin.clone()) for _ in range(3)]
    start = threading.Barrier(len(writers))
    errors: list[BaseException] = []

    def job(index: int, history: GitBranch) -> None:
        try:
            start.wait()
            _push_week(history, index, runs=3)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=job, args=(i, b)) for i, b in enumerate(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert len(origin.run_files()) == 9

    weekly = origin.clone("weekly")  # the weekly job: a fresh runner, no store of its own
    done = _report(origin, weekly, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert f"history: read 9 runs from git:{BRANCH}" in done.stderr
    assert ", 9 new to the store" in done.stderr
    paths = done.stdout.split()
    report = json.loads(Path(next(p for p in paths if p.endswith(".json"))).read_text("utf-8"))
    assert report["week"] == "2026-W45"
    assert report["coverage"]["runs"] == 9
    (trend,) = report["benchmarks"]
    assert (trend["benchmark"], trend["runs_in_period"]) == (BENCHMARK, 9)
    markdown = Path(next(p for p in paths if p.endswith(".md"))).read_text("utf-8")
    assert BENCHMARK in markdown

    # A later run pushed by one more job is read next week on the same runner: only it.
    _push_week(writers[0], 7, runs=1)
    again = _report(origin, weekly, tmp_path / "again")
    assert again.returncode == 0, again.stderr
    assert f"history: read 1 run from git:{BRANCH}" in again.stderr
    report = json.loads(next((tmp_path / "again").glob("*.json")).read_text("utf-8"))
    assert report["coverage"]["runs"] == 10


def test_the_weekly_report_of_a_missing_history_branch_says_so(
    origin: Origin, tmp_path: Path
) -> None:
    done = _report(origin, origin.clone(), tmp_path / "out")
    assert done.returncode == 2, done.stderr
    assert f"git:{BRANCH} does not exist on origin yet" in done.stderr
    assert not (tmp_path / "out").exists()
