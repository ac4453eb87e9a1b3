"""git, the one way perfci runs it: a command's output, a checkout's state, a throwaway worktree.

Every git process perfci starts in a user's checkout goes through :func:`run`, which never
raises for git's own failures (a missing binary, a timeout, a non-zero exit are results) and
runs no hook (``core.hooksPath=/dev/null``): a repository's ``.git/hooks`` may hold code an
earlier job's benchmark left there (issue 31). The history branch's own bare repositories add
stricter rules on top (:mod:`perfci.history._git`: no global config, no config from the
environment, a repository perfci made itself).

Output is given back as git printed it, stripped: :func:`output` returns ``None`` when git
failed and ``""`` when it succeeded printing nothing, so a caller tells the two apart.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "NO_HOOKS",
    "Result",
    "changed_paths",
    "first_parent_commits",
    "output",
    "remove_worktree",
    "run",
    "worktree",
]

#: ``-c`` settings of every git command perfci runs in a checkout.
NO_HOOKS = ("-c", "core.hooksPath=/dev/null")
#: A read of a small repository's state; checking out a large repository takes longer.
QUICK_TIMEOUT_S = 5
CHECKOUT_TIMEOUT_S = 600


@dataclass(frozen=True, slots=True)
class Result:
    """What one git command did: ``ok`` when it ran and exited 0."""

    ok: bool
    stdout: str
    stderr: str


def run(
    cwd: Path | None,
    args: Sequence[str],
    *,
    timeout: float = QUICK_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
) -> Result:
    """``git ARGS`` in ``cwd``; a missing git, a timeout or an error exit is ``ok=False``."""
    if shutil.which("git") is None:
        return Result(False, "", "git is not installed")
    try:
        done = subprocess.run(
            ["git", *NO_HOOKS, *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=None if env is None else dict(env),
        )
    except subprocess.TimeoutExpired:
        return Result(False, "", f"git {args[0] if args else ''} timed out after {timeout:g} s")
    except OSError as exc:
        return Result(False, "", str(exc))
    return Result(done.returncode == 0, done.stdout, done.stderr)


def output(cwd: Path | None, *args: str, timeout: float = QUICK_TIMEOUT_S) -> str | None:
    """``git ARGS``'s stripped output, ``""`` when it printed nothing, ``None`` when it failed."""
    found = run(cwd, args, timeout=timeout)
    return found.stdout.strip() if found.ok else None


def changed_paths(root: Path) -> list[str]:
    """The paths ``git status --porcelain`` lists (tracked changes and untracked files).

    Raises ``OSError`` naming git's complaint when the status cannot be read.
    """
    found = run(root, ("status", "--porcelain"))
    if not found.ok:
        raise OSError(found.stderr.strip() or "git status failed")
    # ``XY path``: not stripped before the slice, X may be a space.
    return [line[3:] for line in found.stdout.splitlines() if line.strip()]


def first_parent_commits(root: Path, good: str, bad: str) -> list[str]:
    """The full shas of ``good..bad`` along first parents, oldest first (``bad`` last).

    First parents only: on main, a merged pull request is one step, the merge commit, not
    the pull request's own commits interleaved by date. Raises ``OSError`` naming git's
    complaint when either revision is unknown.
    """
    found = run(
        root,
        ("rev-list", "--first-parent", "--reverse", f"{good}..{bad}", "--"),
        timeout=CHECKOUT_TIMEOUT_S,
    )
    if not found.ok:
        raise OSError(found.stderr.strip() or "git rev-list failed")
    return found.stdout.split()


@contextmanager
def worktree(root: Path, sha: str) -> Iterator[Path]:
    """A detached worktree of ``sha`` in a temporary directory, removed on every way out.

    ``git worktree remove --force`` and ``git worktree prune`` run in a ``finally``, so a
    failing repeat, a bad profile, Ctrl-C and SIGTERM (raised as an exception by the CLI) all
    leave the repository's worktree list and the temporary directory as they were. Raises
    ``OSError`` naming git's complaint when the checkout fails.
    """
    folder = Path(tempfile.mkdtemp(prefix="perfci-ab-"))
    tree = folder / "base"
    try:
        found = run(
            root, ("worktree", "add", "--detach", str(tree), sha), timeout=CHECKOUT_TIMEOUT_S
        )
        if not found.ok:
            raise OSError(found.stderr.strip() or found.stdout.strip() or "git worktree add failed")
        yield tree
    finally:
        remove_worktree(root, tree)
        shutil.rmtree(folder, ignore_errors=True)


def remove_worktree(root: Path, tree: Path) -> None:
    """Remove ``tree`` from the repository's worktrees (forced: it may hold benchmark output)."""
    run(root, ("worktree", "remove", "--force", str(tree)), timeout=CHECKOUT_TIMEOUT_S)
    run(root, ("worktree", "prune"), timeout=CHECKOUT_TIMEOUT_S)
