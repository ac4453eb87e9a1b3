"""The base side of an A/B check in git: the merge-base, a clean tree, a detached worktree.

The merge-base of ``HEAD`` with the base branch is checked out with ``git worktree add
--detach`` into a temporary directory (the working tree must be clean, ``.perfci/`` aside),
and removed (``git worktree remove --force``, then ``git worktree prune``) on every way out.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from perfci.core.errors import ConfigError
from perfci.core.model import RunContext
from perfci.core.settings import Settings

if TYPE_CHECKING:
    from perfci.usecases.check.spec import CheckRequest

__all__ = [
    "BASE_RUN_SUFFIX",
    "ABSetup",
    "base_run_context",
    "base_worktree",
    "merge_base_sha",
    "prepare",
    "remove_worktree",
]

#: ``ci_run_id`` suffix of the base side's run, so that both runs of one job are stored apart.
BASE_RUN_SUFFIX = "-ab-base"
_GIT_TIMEOUT_S = 600  # a worktree of a large repository takes a while to check out


@dataclass(frozen=True, slots=True)
class ABSetup:
    """Where the two sides come from: the checkout, the base branch and its merge-base."""

    root: Path
    workdir: Path
    base_branch: str
    base_sha: str


def prepare(
    settings: Settings, request: CheckRequest, context: RunContext, *, cwd: Path | None = None
) -> ABSetup:
    """The checkout's root, the base branch and the merge-base to compare with.

    Raises
    ------
    ConfigError
        Not a git checkout, a dirty working tree, or no merge-base with the base branch.
    """
    here = (cwd or Path.cwd()).resolve()
    top = _git(here, "rev-parse", "--show-toplevel")
    if top is None:
        raise ConfigError(f"--ab needs a git checkout; {here} is not inside one")
    root = Path(top).resolve()
    dirty = [line for line in _status(root) if not _ignored(line[3:])]
    if dirty:
        listed = ", ".join(line[3:] for line in dirty[:5]) + (" …" if len(dirty) > 5 else "")
        raise ConfigError(
            f"--ab needs a clean working tree, so that the pull-request side is "
            f"exactly its commit; uncommitted changes: {listed} (commit or stash "
            "them)"
        )
    branch = request.baseline_branch or context.base_branch or settings.baseline_branch
    sha = merge_base_sha(root, branch, context)
    return ABSetup(
        root=root,
        workdir=here.relative_to(root) if here != root else Path(),
        base_branch=branch,
        base_sha=sha,
    )


def _status(root: Path) -> list[str]:
    """``git status --porcelain`` lines (``XY path``; not stripped: X may be a space)."""
    done = subprocess.run(
        ["git", "status", "--porcelain"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=_GIT_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise ConfigError(f"--ab could not read the working tree's status: {done.stderr.strip()}")
    return [line for line in done.stdout.splitlines() if line.strip()]


def _ignored(path: str) -> bool:
    # perfci's own folder (the store, the profiles of the run in progress) is not a change.
    return path.strip('"').startswith(".perfci/") or path.strip('"') == ".perfci"


def merge_base_sha(root: Path, branch: str, context: RunContext) -> str:
    """The merge-base of ``HEAD`` with ``branch`` (``origin/BRANCH`` first), as a full sha.

    ``HEAD``, not the run's commit: the pull-request side runs what is checked out, which in a
    GitHub ``pull_request`` job is the merge of the pull request into its base, whose
    merge-base with the base branch is the base's tip, exactly what it would be merged onto.
    In a shallow CI checkout ``git merge-base`` may not find it; the event's base commit
    (``context.merge_base``) is used then, when ``branch`` is the run's own base branch and
    git has that commit.
    """
    from perfci.integrations.context import merge_base

    found = merge_base(root, branch, "HEAD")
    if (
        found is None
        and branch == context.base_branch
        and context.merge_base
        and _git(root, "cat-file", "-e", f"{context.merge_base}^{{commit}}") is not None
    ):
        found = context.merge_base
    if found is None:
        raise ConfigError(
            f"--ab compares with the merge-base of HEAD and the base branch {branch!r}, but git "
            f"finds no such branch or no common commit (neither origin/{branch} nor {branch}); "
            "pass --baseline-branch, or fetch the base branch with its history (in GitHub "
            "Actions: actions/checkout with fetch-depth: 0)"
        )
    return _git(root, "rev-parse", found) or found


def _git(cwd: Path, *args: str) -> str | None:
    """``git ARGS`` in ``cwd``: its stripped output, or ``None`` when it fails."""
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


@contextmanager
def base_worktree(root: Path, sha: str) -> Iterator[Path]:
    """A detached worktree of ``sha`` in a temporary directory, removed on every exit.

    ``git worktree remove --force`` and ``git worktree prune`` run in a ``finally``, so a
    failing repeat, a bad profile and Ctrl-C (``KeyboardInterrupt``) all leave the
    repository's worktree list and the temporary directory as they were.
    """
    folder = Path(tempfile.mkdtemp(prefix="perfci-ab-"))
    tree = folder / "base"
    try:
        done = subprocess.run(
            # No hook: an earlier job's benchmark may have left one in .git/hooks (issue 31).
            [
                "git",
                "-c",
                "core.hooksPath=/dev/null",
                "worktree",
                "add",
                "--detach",
                str(tree),
                sha,
            ],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            raise ConfigError(
                f"could not check out the merge-base {sha[:12]} into a git "
                f"worktree: {done.stderr.strip() or done.stdout.strip()}"
            )
        yield tree
    finally:
        remove_worktree(root, tree)
        shutil.rmtree(folder, ignore_errors=True)


def remove_worktree(root: Path, tree: Path) -> None:
    """Remove ``tree`` from the repository's worktrees (forced: it may hold benchmark output)."""
    for args in (("worktree", "remove", "--force", str(tree)), ("worktree", "prune")):
        subprocess.run(
            ["git", *args], cwd=root, capture_output=True, timeout=_GIT_TIMEOUT_S, check=False
        )


def base_run_context(context: RunContext, setup: ABSetup) -> RunContext:
    """The base side's run: the merge-base commit on the base branch, no pull request."""
    run_id = f"{context.ci_run_id}{BASE_RUN_SUFFIX}" if context.ci_run_id else None
    return dataclasses.replace(
        context,
        commit=setup.base_sha,
        branch=setup.base_branch,
        base_branch=None,
        merge_base=None,
        pr_number=None,
        ci_run_id=run_id,
        commit_time=_git(setup.root, "log", "-1", "--format=%cI", setup.base_sha),
        environment=dict(context.environment),
    )
