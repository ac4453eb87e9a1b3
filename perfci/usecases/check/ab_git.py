"""The base side of an A/B check in git: the merge-base, a clean tree, a detached worktree.

The merge-base of ``HEAD`` with the base branch is checked out with ``git worktree add
--detach`` into a temporary directory (the working tree must be clean, ``.perfci/`` aside),
and removed (``git worktree remove --force``, then ``git worktree prune``) on every way out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from perfci.core.errors import ConfigError
from perfci.core.model import RunContext
from perfci.core.settings import Settings
from perfci.integrations import git
from perfci.integrations.context import merge_base

if TYPE_CHECKING:
    from perfci.usecases.check.spec import CheckRequest

__all__ = [
    "BASE_RUN_SUFFIX",
    "ABSetup",
    "base_run_context",
    "base_worktree",
    "merge_base_sha",
    "prepare",
]

#: ``ci_run_id`` suffix of the base side's run, so that both runs of one job are stored apart.
BASE_RUN_SUFFIX = "-ab-base"


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
    top = git.output(here, "rev-parse", "--show-toplevel")
    if not top:
        raise ConfigError(f"--ab needs a git checkout; {here} is not inside one")
    root = Path(top).resolve()
    try:
        dirty = [path for path in git.changed_paths(root) if not _ignored(path)]
    except OSError as exc:
        raise ConfigError(f"--ab could not read the working tree's status: {exc}") from None
    if dirty:
        listed = ", ".join(dirty[:5]) + (" …" if len(dirty) > 5 else "")
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
    found = merge_base(root, branch, "HEAD")
    if (
        found is None
        and branch == context.base_branch
        and context.merge_base
        and git.output(root, "cat-file", "-e", f"{context.merge_base}^{{commit}}") is not None
    ):
        found = context.merge_base
    if found is None:
        raise ConfigError(
            f"--ab compares with the merge-base of HEAD and the base branch {branch!r}, but git "
            f"finds no such branch or no common commit (neither origin/{branch} nor {branch}); "
            "pass --baseline-branch, or fetch the base branch with its history (in GitHub "
            "Actions: actions/checkout with fetch-depth: 0)"
        )
    return git.output(root, "rev-parse", found) or found


@contextmanager
def base_worktree(root: Path, sha: str) -> Iterator[Path]:
    """The merge-base checked out in a throwaway worktree (:func:`perfci.integrations.git.
    worktree`), removed on every way out."""
    try:
        with git.worktree(root, sha) as tree:
            yield tree
    except OSError as exc:
        raise ConfigError(
            f"could not check out the merge-base {sha[:12]} into a git worktree: {exc}"
        ) from None


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
        commit_time=git.output(setup.root, "log", "-1", "--format=%cI", setup.base_sha) or None,
        environment=dict(context.environment),
    )
