"""What a benchmark's processes may see of perfci's: an environment without perfci's and the
CI's secrets (``pass_env`` lets named ones through), and the job's workflow-command files
put back as they were after each repeat (issue 13, issue 31). The runner
(:mod:`perfci.integrations.runner`) starts each repeat with these."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from perfci.core import private_env
from perfci.core.private_env import WORKFLOW_FILES


def benchmark_environment(
    base: Mapping[str, str], *, pass_env: Collection[str] = ()
) -> tuple[dict[str, str], list[str]]:
    """The environment a benchmark starts with: ``base`` without perfci's and the CI's secrets.

    Parameters
    ----------
    base
        The environment perfci runs in (:func:`perfci.core.private_env.environ`).
    pass_env
        Names to let through although they would be withheld.

    Returns
    -------
    tuple
        The benchmark's environment, and the sorted names withheld from it (names only: the
        values are secrets and go nowhere).
    """
    allowed = set(pass_env)
    withheld = sorted(name for name in base if name not in allowed and _withheld(name))
    dropped = set(withheld)
    return {k: v for k, v in base.items() if k not in dropped}, withheld


def _withheld(name: str) -> bool:
    # Default-deny for perfci's namespace: a setting added later (a webhook, a token) is
    # withheld without anyone having to remember this list.
    return private_env.is_private(name)


@contextmanager
def workflow_files_kept(env: Mapping[str, str]) -> Iterator[None]:
    """Undo, on the way out, whatever was written meanwhile to the job's workflow-command files.

    The benchmark gets neither the variables naming them nor its parent's (:mod:`private_env`),
    but runs as the same user and may find them (``$RUNNER_TEMP/_runner_file_commands``). A
    line it appended to ``GITHUB_ENV`` (``BASH_ENV=…``) would run code in every later step, one
    in ``GITHUB_OUTPUT`` would forge this step's outputs. So each file (up to
    :data:`_MAX_WORKFLOW_FILE` bytes) is read before the repeat and put back as it was after
    it, however the repeat ended: a file replaced by a link is replaced again, never written
    through.
    """
    saved: dict[Path, bytes | None] = {}
    for name in WORKFLOW_FILES:
        if env.get(name):
            path = Path(env[name])
            with contextlib.suppress(OSError, ValueError):
                saved[path] = _plain_file_bytes(path)
    try:
        yield
    finally:
        for path, data in saved.items():
            with contextlib.suppress(OSError):
                _put_back(path, data)


_MAX_WORKFLOW_FILE = 64 * 1024 * 1024


def _plain_file_bytes(path: Path) -> bytes | None:
    """The content of a regular file, ``None`` when there is none; ``ValueError`` for any
    other thing (a link, a pipe, a huge file): left alone."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_WORKFLOW_FILE:
        raise ValueError(path)
    return path.read_bytes()


def _put_back(path: Path, data: bytes | None) -> None:
    with contextlib.suppress(ValueError):
        if _plain_file_bytes(path) == data:
            return
    path.unlink(missing_ok=True)  # a link or a changed file: removed, never written through
    if data is not None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        with os.fdopen(os.open(path, flags, 0o644), "wb") as handle:
            handle.write(data)
