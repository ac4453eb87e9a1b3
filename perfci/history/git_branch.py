"""The history branch on ``origin``, through plain ``git`` subprocesses.

All the work happens in a private bare repository that perfci makes in its own cache folder,
outside the checkout (:mod:`perfci.history._git`: no hook, no repository-controlled config):
the user's working tree, index, branches and ``.git`` are never touched (no ``checkout``, no
``stash``, no new refs). Files are added with plumbing (``hash-object``,
``update-index`` on a temporary index, ``write-tree``, ``commit-tree``), so no worktree is needed
either, and the cached bare repository is what makes a second sync on a persistent runner
incremental.

Concurrent writers: a push is ``--force-with-lease`` on the tip the commit was built on. When
another job pushed first, the lease fails; we fetch the new tip, rebuild our commit on it (run
files have unique names, so there is never a conflict) and push again, with a growing random
back-off. A fast-forward push would do for appends alone, but retention rewrites the branch, and
the lease makes that safe too: a squash built on a tip that moved is refused, never forced over
another job's run.

How long to keep trying follows the contention, not a fixed count: a lost race whose tip moved
means another job landed, which is progress (with N jobs pushing at once, one may lose N - 1
times and still land). Only refusals with no landing in between (the tip stays where it was:
a lock held by a stuck push, a server refusing for a reason git words like a race) count
against ``patience``.

Whose branch it is (issue 31): perfci reads and writes only a branch it made. The branch's root
commit holds :data:`MARKER`, and every file of its tip is one perfci writes (``README.md``, the
marker, ``runs/<benchmark>/<file>.json.gz``, plain files). The repository's default branch, or a
branch holding anything else (``history = "git:main"``: code, exec bits, links), is refused
before anything is read or written, so retention never squashes a branch perfci did not create.
A branch made by perfci before the marker existed is recognised by its root commit's README.

Authentication: :mod:`perfci.history._remote`.
"""

from __future__ import annotations

import random
import re
import tempfile
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from perfci.core.errors import StorageError
from perfci.history._bare import NETWORK_TIMEOUT_S, BareRepo
from perfci.history._files import (
    MARKER,
    MARKER_TEXT,
    README,
    BranchFile,
    over_cap,
    parse_tree,
    perfci_file,
)
from perfci.history._git import cache_name, git_env, open_cache
from perfci.history._remote import auth_config, last_line, redact, remote_url
from perfci.history.setting import DEFAULT_BRANCH

_RETRYABLE = (
    "[rejected]",
    "stale info",
    "non-fast-forward",
    "fetch first",
    "cannot lock ref",
    "failed to update ref",
    "incorrect old value",
)


_IDENTITY = {
    "GIT_AUTHOR_NAME": "perfci",
    "GIT_AUTHOR_EMAIL": "perfci@users.noreply.github.com",
    "GIT_COMMITTER_NAME": "perfci",
    "GIT_COMMITTER_EMAIL": "perfci@users.noreply.github.com",
}


@dataclass(frozen=True, slots=True)
class AppendResult:
    """A finished append: the pushed commit, the paths retention dropped, pushes it took."""

    commit: str
    dropped: tuple[str, ...]
    attempts: int
    already_there: bool


class GitBranch:
    """The branch ``branch`` of the checkout's ``remote``, mirrored in a private bare repo.

    Parameters
    ----------
    checkout
        The user's repository (its ``remote`` URL and any persisted auth header are read).
    branch
        The data branch, e.g. ``perfci-data``.
    cache
        The folder of perfci's bare repositories, outside the checkout
        (:func:`perfci.history._git.cache_root`); one per branch and remote URL.
    token
        A GitHub token for an ``https://`` origin when the checkout has no auth header.
    token_hosts
        The hosts the token may go to (``None``: any). The origin's URL is the checkout's
        to say, and a benchmark may change ``.git/config``: the token goes to GitHub only.
    remote
        The remote whose URL is used (``origin``).

    Raises
    ------
    StorageError
        No git, no such remote, a cache inside the checkout: every message says what to do.
    """

    def __init__(
        self,
        *,
        checkout: Path,
        branch: str,
        cache: Path,
        token: str | None = None,
        token_hosts: Collection[str] | None = None,
        remote: str = "origin",
    ) -> None:
        self.branch = branch
        self._ref = f"refs/heads/{branch}"
        self._checkout = checkout
        self.url = remote_url(checkout, remote, branch)
        self.repo = cache / cache_name(_dir_name(branch), redact(self.url))
        open_cache(self.repo, checkout=checkout)
        self._env = git_env(auth_config(checkout, self.url, token, token_hosts))
        self._bare = BareRepo(self.repo, env=self._env, url=self.url, branch=branch)

    # --- reading ---------------------------------------------------------------------------

    def fetch(self) -> str | None:
        """Fetch the branch; its tip commit, or ``None`` when the remote has no such branch.

        Raises
        ------
        StorageError
            The branch is the remote's default branch, or not one perfci made (module doc).
        """
        listed = self._bare.git("ls-remote", "--symref", self.url, "HEAD", self._ref, network=True)
        lines = [line.split("\t") for line in listed.decode().splitlines()]
        if [f"ref: {self._ref}", "HEAD"] in lines:
            raise StorageError(
                f"history branch {self.branch} is the repository's default branch: perfci "
                f"keeps its runs on a branch of their own (e.g. git:{DEFAULT_BRANCH})"
            )
        if not any(len(line) == 2 and line[1] == self._ref for line in lines):
            return None
        self._bare.git(
            "fetch", "--quiet", "--no-tags", self.url, f"+{self._ref}:{self._ref}", network=True
        )
        tip = self._bare.git("rev-parse", "--verify", f"{self._ref}^{{commit}}").decode().strip()
        self._check_ours(tip)
        return tip

    def _check_ours(self, tip: str) -> None:
        """Refuse a branch perfci did not make, or that holds a file perfci did not write."""
        foreign = [path for mode, path in self._entries(tip) if not perfci_file(mode, path)]
        if foreign:
            listed = ", ".join(repr(p) for p in foreign[:3]) + (" …" if len(foreign) > 3 else "")
            raise StorageError(
                f"history branch {self.branch} holds files perfci did not write ({listed}): "
                "it is not a perfci history branch, and perfci never writes to a branch of "
                f"code; name one of its own (e.g. git:{DEFAULT_BRANCH})"
            )
        roots = self._bare.git("rev-list", "--max-parents=0", tip).decode().split()
        marker, readme = self._hash(MARKER_TEXT.encode()), self._hash(README.encode())
        for root in roots:
            blobs = {f.path: f.blob for f in self.files(root)}
            if blobs.get(MARKER) != marker and blobs.get("README.md") != readme:
                raise StorageError(
                    f"history branch {self.branch} was not made by perfci (its first commit "
                    f"has no {MARKER}): perfci never writes to a branch it did not create; "
                    f"name a new one (e.g. git:{DEFAULT_BRANCH})"
                )

    def _entries(self, commit: str) -> list[tuple[str, str]]:
        """(mode, path) of every entry of ``commit``'s tree, links and submodules included."""
        out = self._bare.git("ls-tree", "-r", "-z", "--full-tree", commit).decode()
        entries = []
        for record in filter(None, out.split("\0")):
            meta, _, path = record.partition("\t")
            entries.append((meta.split()[0], path))
        return entries

    def has_commit(self, commit: str) -> bool:
        """Whether ``commit`` is in the cached repository (a previous fetch brought it)."""
        done = self._bare.run("cat-file", "-e", f"{commit}^{{commit}}")
        return done.returncode == 0

    def files(self, commit: str, prefix: str = "") -> list[BranchFile]:
        """Every file of ``commit`` (under ``prefix``), sorted by path."""
        out = self._bare.git(
            "ls-tree", "-r", "-l", "-z", "--full-tree", commit, *([prefix] if prefix else [])
        )
        return sorted(parse_tree(out), key=lambda f: f.path)

    def added(self, old: str, new: str, prefix: str = "") -> list[BranchFile]:
        """Files in ``new`` that ``old`` does not have (``old`` must be cached)."""
        out = self._bare.git(
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--diff-filter=A",
            "--name-only",
            old,
            new,
            *(["--", prefix] if prefix else []),
        )
        added = {p for p in out.decode().split("\0") if p}
        return [f for f in self.files(new, prefix) if f.path in added]

    def read(self, blobs: Sequence[str]) -> Iterator[bytes]:
        """The contents of ``blobs``, in order (one ``git cat-file --batch`` for all)."""
        return self._bare.read(blobs)

    # --- writing ---------------------------------------------------------------------------

    def append(
        self,
        new_files: Mapping[str, bytes],
        *,
        max_bytes: int,
        prefix: str = "",
        message: str,
        patience: int = 8,
    ) -> AppendResult:
        """Add ``new_files`` to the branch (creating it, orphan, when absent) and push.

        Retention: when the files under ``prefix`` exceed ``max_bytes`` (their stored, compressed
        size), the oldest by path are dropped until they fit in 80 % of it, never the new ones,
        and the branch is squashed into one parentless commit so that the dropped runs leave its
        history too (the remote frees them at its next garbage collection).

        Raises
        ------
        StorageError
            The push was refused for another reason than a concurrent push (no permission,
            protected branch), or was refused ``patience`` times in a row while no other job
            landed (module docstring: races lost to jobs that landed never use it up).
        """
        blobs = {path: self._hash(data) for path, data in new_files.items()}
        sizes = {path: len(data) for path, data in new_files.items()}
        attempt = 0
        stalled = 0
        built_on: str | None = None
        while True:
            attempt += 1
            tip = self.fetch()
            if attempt > 1:
                # The last push lost: was it to a job that landed (the tip moved), or to none?
                stalled = stalled + 1 if tip == built_on else 0
                if stalled >= patience:
                    raise StorageError(
                        f"could not push to {self.branch} of {redact(self.url)}: refused "
                        f"{stalled} times in a row while its tip stayed at "
                        f"{(tip or 'nothing')[:12]} (no other job landed in between)"
                    )
            built_on = tip
            current = self.files(tip) if tip else []
            if all(any(f.path == p for f in current) for p in blobs):
                return AppendResult(
                    commit=tip or "", dropped=(), attempts=attempt, already_there=True
                )
            merged = {f.path: f for f in current}
            merged.update({p: BranchFile(p, b, sizes[p]) for p, b in blobs.items()})
            if tip is None:  # a new branch: its root commit says that perfci made it
                for path, text in (("README.md", README), (MARKER, MARKER_TEXT)):
                    merged[path] = BranchFile(path, self._hash(text.encode()), len(text))
            dropped = over_cap(merged, max_bytes=max_bytes, prefix=prefix, keep=set(blobs))
            for path in dropped:
                del merged[path]
            text = message + (
                f"\n\nRetention: dropped the {len(dropped)} oldest run(s) to "
                f"stay under {max_bytes} bytes; history squashed."
                if dropped
                else ""
            )
            commit = self._commit(
                list(merged.values()), parent=None if dropped else tip, message=text
            )
            if self._push(commit, expected=tip):
                return AppendResult(
                    commit=commit, dropped=tuple(dropped), attempts=attempt, already_there=False
                )
            # Another job pushed first: back off (randomised, so two losers don't collide
            # again; growing, up to 2 s, so that many jobs spread out), then rebuild on its tip.
            time.sleep(random.uniform(0.05, 0.25) * min(attempt, 8))

    def _hash(self, data: bytes) -> str:
        return self._bare.git("hash-object", "-w", "--stdin", input=data).decode().strip()

    def _commit(self, files: Sequence[BranchFile], *, parent: str | None, message: str) -> str:
        entries = "".join(
            f"100644 {f.blob}\t{f.path}\0" for f in sorted(files, key=lambda f: f.path)
        )
        with tempfile.TemporaryDirectory(prefix="perfci-index-") as scratch:
            env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
            self._bare.git("update-index", "-z", "--index-info", input=entries.encode(), env=env)
            tree = self._bare.git("write-tree", env=env).decode().strip()
        parents = ["-p", parent] if parent else []
        return (
            self._bare.git("commit-tree", tree, *parents, input=message.encode(), env=_IDENTITY)
            .decode()
            .strip()
        )

    def _push(self, commit: str, *, expected: str | None) -> bool:
        """Push ``commit`` if the remote tip is still ``expected``; False when it moved."""
        lease = f"--force-with-lease={self._ref}:{expected or ''}"
        done = self._bare.run(
            "push",
            "--quiet",
            "--no-verify",
            lease,
            self.url,
            f"{commit}:{self._ref}",
            timeout=NETWORK_TIMEOUT_S,
        )
        if done.returncode == 0:
            return True
        reason = done.stderr.decode(errors="replace")
        if any(marker in reason for marker in _RETRYABLE):
            return False
        raise StorageError(
            f"could not push to {self.branch} of {redact(self.url)}: "
            f"{last_line(reason)} (does the job's token have `contents: write`?)"
        )


def _dir_name(branch: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", branch)
