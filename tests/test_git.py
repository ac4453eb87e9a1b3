"""perfci's one git wrapper (perfci.integrations.git) on a real repository."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest

from perfci.integrations import git


def _repo(path: Path) -> Path:
    path.mkdir()
    for args in (
        ("init", "-q", "-b", "main"),
        ("config", "user.email", "t@example.com"),
        ("config", "user.name", "t"),
        ("commit", "-q", "--allow-empty", "-m", "first"),
    ):
        subprocess.run(["git", *args], cwd=path, check=True)
    return path


def test_output_tells_an_empty_answer_from_a_failure(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    assert git.output(repo, "status", "--porcelain") == ""
    assert git.output(repo, "rev-parse", "no-such-ref") is None
    assert git.output(tmp_path, "rev-parse", "HEAD") is None  # not a repository
    sha = git.output(repo, "rev-parse", "HEAD")
    assert sha is not None and len(sha) == 40


def test_changed_paths_lists_tracked_changes_and_untracked_files(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    (repo / " leading space.txt").write_text("x")
    assert git.changed_paths(repo) == ['" leading space.txt"']
    with pytest.raises(OSError):
        git.changed_paths(tmp_path)


def test_a_worktree_runs_no_hook_and_is_removed_on_every_way_out(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    hook = repo / ".git" / "hooks" / "post-checkout"
    marker = tmp_path / "hook-ran"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(hook.stat().st_mode | stat.S_IEXEC)
    sha = git.output(repo, "rev-parse", "HEAD")
    assert sha is not None
    with pytest.raises(RuntimeError), git.worktree(repo, sha) as tree:
        assert (tree / ".git").exists()
        raise RuntimeError("a failing repeat")
    assert not marker.exists()
    assert not tree.exists() and not tree.parent.exists()
    listed = git.output(repo, "worktree", "list", "--porcelain") or ""
    assert str(tree) not in listed
    with (
        pytest.raises(OSError, match=r"invalid reference|not a valid|unknown revision"),
        git.worktree(repo, "0" * 40),
    ):
        pass
