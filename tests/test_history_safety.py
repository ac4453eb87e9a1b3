"""The history branch cannot be turned against the job (issue 31), with real git and the real
``perfci check`` in a subprocess: a hook committed into the checkout never runs, a branch of
code is never written (nor squashed), a JSON bomb on the branch is skipped and named, and the
token goes only to GitHub.
"""

from __future__ import annotations

import gzip
import os
import shutil
import stat
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from db_fixtures import make_context, make_profile
from deadlines import scaled
from test_history_branch import BENCHMARK, BRANCH, PROFILES, Origin, check, git

from perfci.core.errors import StorageError
from perfci.core.settings import Settings
from perfci.history import GitBranch, cache_root, encode_run, run_path
from perfci.history._files import README
from perfci.history._git import open_cache
from perfci.usecases.history import branch as history_usecase


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "xdg-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    return folder


@pytest.fixture
def origin(tmp_path: Path) -> Origin:
    return Origin(tmp_path)


def _writer(origin: Origin, name: str = "writer") -> GitBranch:
    clone = origin.clone(name)
    return GitBranch(checkout=clone, branch=BRANCH, cache=origin.root / "cache" / name)


def _run_document(commit: str, run_id: str) -> tuple[str, bytes]:
    context = make_context(
        commit=commit, ci_run_id=run_id, ci_provider="test", commit_time="2026-11-01T10:00:00+00:00"
    )
    repeats = [[make_profile({"step": 1e6 * (1 + r / 100)}, label="p")] for r in range(3)]
    created = datetime(2026, 11, 2, tzinfo=UTC)
    document = encode_run(context=context, benchmark=BENCHMARK, repeats=repeats, created_at=created)
    return run_path(
        context=context, benchmark=BENCHMARK, created_at=created, document=document
    ), document


HOOK = '#!/bin/sh\nenv > {folder}/ran-$(basename "$0")\n'
HOOKS = ("reference-transaction", "post-checkout", "pre-push", "post-update", "fsmonitor")


def _plant(repo: Path, folder: Path) -> None:
    """A bare repository's hooks, and config that would run a command, in ``repo``."""
    (repo / "hooks").mkdir(parents=True, exist_ok=True)
    for name in HOOKS:
        hook = repo / "hooks" / name
        hook.write_text(HOOK.format(folder=folder), encoding="utf-8")
        hook.chmod(0o755)
    (repo / "config").write_text(
        "[core]\n\trepositoryformatversion = 0\n\tbare = true\n"
        f"\tfsmonitor = {repo / 'hooks' / 'fsmonitor'}\n"
        f"[include]\n\tpath = {folder / 'included'}\n",
        encoding="utf-8",
    )


@pytest.mark.slow
def test_a_hook_a_pull_request_commits_into_the_checkout_never_runs(
    origin: Origin, tmp_path: Path
) -> None:
    path, document = _run_document("a" * 40, "main-1")
    _writer(origin).append({path: document}, max_bytes=1 << 20, prefix="runs/", message="seed")
    pr = origin.clone("pr")
    git(pr, "checkout", "--quiet", "-b", "evil", env=origin.env)
    # The pull request: perfci's old cache location, a bare repository with hooks in it.
    planted = pr / ".perfci" / "history" / f"{BRANCH}.git"
    git(tmp_path, "init", "--quiet", "--bare", str(planted), env=origin.env)
    ran = tmp_path / "ran"
    ran.mkdir()
    _plant(planted, ran)
    git(pr, "add", "-f", ".perfci", env=origin.env)
    origin.commit(pr, "a hook for perfci", when=5)
    env = {**origin.env, "PERFCI_GITHUB_TOKEN": "ghs_s3cr3t31", "COLUMNS": "1000"}
    code, report, output = check(origin, pr, PROFILES / "main-2", "--pr", "7", env=env)
    assert code == 0, output
    assert "history branch not used" not in output, output
    assert report["verdict"] == "no-baseline", output  # one run on the branch, three needed
    assert list(ran.iterdir()) == [], "a hook of the checkout ran"
    # perfci's own repository lives in its cache folder: no hooks, its own config only.
    # (`check` runs perfci with the runner's HOME: its cache is under HOME/.cache.)
    (repo,) = (Path(origin.env["HOME"]) / ".cache" / "perfci" / "history").glob(f"{BRANCH}-*.git")
    assert not (repo / "hooks").exists()
    assert "fsmonitor" not in (repo / "config").read_text(encoding="utf-8")

    # An earlier job's benchmark (a persistent runner, the same user) plants the same in
    # perfci's cache: the next job finds them gone before git runs there.
    _plant(repo, ran)
    (repo / "commondir").write_text(str(planted) + "\n", encoding="utf-8")
    code, _, output = check(origin, pr, PROFILES / "main-3", "--pr", "8", env=env)
    assert code == 0, output
    assert "history branch not used" not in output, output
    assert list(ran.iterdir()) == [], "a hook planted in perfci's cache ran"
    assert not (repo / "commondir").exists() and not (repo / "hooks").exists()


def test_a_cache_inside_the_checkout_is_refused(origin: Origin) -> None:
    clone = origin.clone()
    with pytest.raises(StorageError, match="inside the checkout"):
        GitBranch(checkout=clone, branch=BRANCH, cache=clone / ".perfci" / "history")


def test_jobs_making_the_same_cache_at_once_all_get_it(tmp_path: Path) -> None:
    # Two check jobs on one runner share the cache folder: one must never see the other's
    # half-made repository, take it for a planted one and remove it under its feet.
    repo = tmp_path / "cache" / "perfci-data-0.git"
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    errors: list[BaseException] = []

    def make() -> None:
        try:
            open_cache(repo, checkout=checkout)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            errors.append(exc)

    for _ in range(3):
        shutil.rmtree(repo, ignore_errors=True)
        threads = [threading.Thread(target=make) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=scaled(120))
        assert not errors, errors
        assert {"HEAD", "objects", "refs", "config"} <= {p.name for p in repo.iterdir()}
    assert [p.name for p in repo.parent.iterdir()] == [repo.name]  # no staging left behind


def _commits(origin: Origin, branch: str) -> list[str]:
    return git(origin.bare, "log", "--format=%H", branch, env=origin.env).splitlines()


@pytest.mark.slow  # end to end through `perfci`: 15-30 s on a busy 2-core VM
def test_history_on_the_main_branch_is_refused_and_main_untouched(origin: Origin) -> None:
    """``history = git:main`` once appended to main, and over the size cap squashed it."""
    before = _commits(origin, "main")
    job = origin.clone()
    origin.commit(job, "a change", when=3)
    git(job, "push", "--quiet", "origin", "HEAD:main", env=origin.env)
    before = _commits(origin, "main")
    env = {**origin.env, "PERFCI_HISTORY_MAX_BYTES": "1024", "COLUMNS": "1000"}
    code, _, output = check(origin, job, PROFILES / "main-1", "--history", "git:main", env=env)
    assert code == 0, output
    assert "names a branch of the code (base branch 'main')" in output, output
    assert _commits(origin, "main") == before
    required = {**env, "PERFCI_HISTORY_REQUIRED": "1"}
    code, _, output = check(origin, job, PROFILES / "main-1", "--history", "git:main", env=required)
    assert code == 2 and "branch of the code" in output
    assert _commits(origin, "main") == before


def test_the_default_branch_and_branches_of_code_are_never_written(origin: Origin) -> None:
    clone = origin.clone()
    # The default branch under a name no base-branch pattern knows.
    git(clone, "push", "--quiet", "origin", "HEAD:trunk", env=origin.env)
    git(origin.bare, "symbolic-ref", "HEAD", "refs/heads/trunk", env=origin.env)
    trunk = GitBranch(checkout=clone, branch="trunk", cache=origin.root / "c1")
    with pytest.raises(StorageError, match="default branch"):
        trunk.append({"runs/b/1.json.gz": b"x"}, max_bytes=1 << 20, message="x")
    # A feature branch of code: an executable, a link and a source file.
    git(clone, "checkout", "--quiet", "-b", "feature", env=origin.env)
    (clone / "run.sh").write_text("#!/bin/sh\n", encoding="utf-8")
    (clone / "run.sh").chmod(0o755)
    (clone / "latest").symlink_to("run.sh")
    git(clone, "add", "run.sh", "latest", env=origin.env)
    for n in range(8):
        origin.commit(clone, f"work {n}", when=10 + n)
    git(clone, "push", "--quiet", "origin", "HEAD:feature", env=origin.env)
    before = _commits(origin, "feature")
    feature = GitBranch(checkout=clone, branch="feature", cache=origin.root / "c2")
    with pytest.raises(StorageError, match="holds files perfci did not write") as caught:
        feature.append({"runs/b/1.json.gz": os.urandom(2000)}, max_bytes=1024, message="x")
    assert "'README.md'" in str(caught.value) or "'run.sh'" in str(caught.value)
    with pytest.raises(StorageError, match="holds files perfci did not write"):
        feature.fetch()  # reading it is refused too
    assert _commits(origin, "feature") == before  # 8 commits, never squashed
    tree = git(origin.bare, "ls-tree", "feature", env=origin.env)
    assert "100755" in tree and "120000" in tree  # exec bit and link as they were


def test_a_branch_perfci_did_not_create_is_refused_even_if_it_looks_like_one(
    origin: Origin,
) -> None:
    """Only perfci's files, but a first commit without the marker: someone else's branch."""
    clone = origin.clone()
    git(clone, "checkout", "--quiet", "--orphan", BRANCH, env=origin.env)
    git(clone, "rm", "-rf", "--quiet", "--ignore-unmatch", ".", env=origin.env)
    (clone / "README.md").write_text("my notes\n", encoding="utf-8")
    path, document = _run_document("b" * 40, "r1")
    (clone / path).parent.mkdir(parents=True)
    (clone / path).write_bytes(document)
    git(clone, "add", ".", env=origin.env)
    origin.commit(clone, "not perfci", when=2)
    git(clone, "push", "--quiet", "origin", f"HEAD:{BRANCH}", env=origin.env)
    history = GitBranch(checkout=clone, branch=BRANCH, cache=origin.root / "c")
    with pytest.raises(StorageError, match="was not made by perfci"):
        history.append({"runs/b/2.json.gz": b"x"}, max_bytes=1 << 20, message="x")


def test_a_branch_made_by_perfci_before_the_marker_is_still_perfci_s(origin: Origin) -> None:
    """Its first commit holds perfci's README (what perfci wrote before the marker)."""
    clone = origin.clone()
    git(clone, "checkout", "--quiet", "--orphan", BRANCH, env=origin.env)
    git(clone, "rm", "-rf", "--quiet", "--ignore-unmatch", ".", env=origin.env)
    (clone / "README.md").write_text(README, encoding="utf-8")
    git(clone, "add", ".", env=origin.env)
    origin.commit(clone, "perfci: first run", when=2)
    git(clone, "push", "--quiet", "origin", f"HEAD:{BRANCH}", env=origin.env)
    history = GitBranch(checkout=clone, branch=BRANCH, cache=origin.root / "c")
    done = history.append({"runs/b/2.json.gz": b"x"}, max_bytes=1 << 20, message="x")
    assert not done.already_there and origin.run_files() == ["runs/b/2.json.gz"]


def test_a_new_branch_carries_the_marker_in_its_root_commit(origin: Origin) -> None:
    writer = _writer(origin)
    for n in range(3):
        writer.append({f"runs/b/{n}.json.gz": b"x"}, max_bytes=1 << 20, message=str(n))
    root = git(origin.bare, "rev-list", "--max-parents=0", BRANCH, env=origin.env)
    listed = git(origin.bare, "ls-tree", "--name-only", root, env=origin.env).splitlines()
    assert listed == [".perfci-history", "README.md", "runs"]


def _nested_bomb(depth: int = 200_000) -> bytes:
    return gzip.compress(b"[" * depth + b"]" * depth, mtime=0)


@pytest.mark.slow
def test_a_json_bomb_on_the_branch_is_skipped_and_named_and_every_check_goes_on(
    origin: Origin,
) -> None:
    writer = _writer(origin)
    good_path, good = _run_document("c" * 40, "main-1")
    bomb = "runs/gpt-tiny/20261101T000000Z-bomb.json.gz"
    writer.append(
        {good_path: good, bomb: _nested_bomb()}, max_bytes=1 << 20, prefix="runs/", message="x"
    )
    for attempt in (1, 2):  # the bomb once broke every later check
        clone = origin.clone(f"job-{attempt}")
        env = {**origin.env, "COLUMNS": "1000"}
        code, report, output = check(
            origin, clone, PROFILES / "main-2", "--pr", str(attempt), env=env
        )
        assert code == 0, output
        assert "Traceback" not in output
        assert f"skipped {bomb}" in output and "nested too deeply" in output, output
        assert report["verdict"] == "no-baseline"  # one good run of three needed; read


def test_the_token_goes_to_the_github_server_only(
    origin: Origin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``origin`` is the checkout's config to say (a benchmark can write ``.git/config``)."""
    clone = origin.clone()
    git(clone, "remote", "set-url", "origin", "https://collector.example/octo/gpt.git")
    settings = Settings(github_token="ghs_s3cr3t31", history=f"git:{BRANCH}")
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    elsewhere = history_usecase._branch(settings, BRANCH, clone)
    assert not [k for k in elsewhere._env if k.startswith("GIT_CONFIG_KEY_")]
    git(clone, "remote", "set-url", "origin", "https://github.com/octo/gpt.git")
    github = history_usecase._branch(settings, BRANCH, clone)
    keys = [v for k, v in github._env.items() if k.startswith("GIT_CONFIG_KEY_")]
    assert keys == ["http.https://github.com/.extraheader"]
    # And the repository's config is never git's: no global or system file is read.
    assert github._env["GIT_CONFIG_GLOBAL"] == os.devnull
    assert github._env["GIT_CONFIG_NOSYSTEM"] == "1"
    assert cache_root() in github.repo.parents
    assert stat.S_IMODE(github.repo.parent.stat().st_mode) & 0o077 == 0
