"""The history branch on ``origin``, through plain ``git`` subprocesses.

All the work happens in a private bare repository, ``.perfci/history/<branch>.git`` in the
checkout: the user's working tree, index, branches and ``.git`` are never touched (no
``checkout``, no ``stash``, no new refs). Files are added with plumbing (``hash-object``,
``update-index`` on a temporary index, ``write-tree``, ``commit-tree``), so no worktree is needed
either, and the cached bare repository is what makes a second sync on a persistent runner
incremental.

Concurrent writers: a push is ``--force-with-lease`` on the tip the commit was built on. When
another job pushed first, the lease fails; we fetch the new tip, rebuild our commit on it (run
files have unique names, so there is never a conflict) and push again, with a growing random
back-off. A fast-forward push would do for appends alone, but retention rewrites the branch, and
the lease makes that safe too: a squash built on a tip that moved is refused, never forced over
another job's run.

Authentication: the checkout's own ``http.*.extraheader`` (what ``actions/checkout`` persists)
is reused, else a GitHub token is sent as the same header for an ``https://`` origin. Both go to
git through ``GIT_CONFIG_*`` environment variables, never on a command line (``ps`` shows those)
and never in a message.
"""

from __future__ import annotations

import base64
import os
import random
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from perfci.errors import ConfigError, StorageError

DEFAULT_BRANCH = "perfci-data"
_BRANCH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,199}")
_CREDENTIALS = re.compile(r"://[^/@\s]+@")
_RETRYABLE = (
    "[rejected]",
    "stale info",
    "non-fast-forward",
    "fetch first",
    "cannot lock ref",
    "failed to update ref",
    "incorrect old value",
)
_NETWORK_TIMEOUT_S = 300
_LOCAL_TIMEOUT_S = 120
_IDENTITY = {
    "GIT_AUTHOR_NAME": "perfci",
    "GIT_AUTHOR_EMAIL": "perfci@users.noreply.github.com",
    "GIT_COMMITTER_NAME": "perfci",
    "GIT_COMMITTER_EMAIL": "perfci@users.noreply.github.com",
}
#: The file at the branch's root that tells a human what the branch is.
README = """# perfci history

Performance runs recorded by `perfci check` on the base branch, one gzip-compressed JSON
document per run under `runs/<benchmark>/`. perfci reads this branch into its embedded store
at the start of every job (`history = "git:BRANCH"`). Written by CI only; do not edit.
"""


def parse_history(value: str | None) -> str | None:
    """The history branch named by a ``history`` setting, or ``None`` for no history.

    ``git:BRANCH``, or ``git`` for :data:`DEFAULT_BRANCH`; ``none``/``off``/empty: no history.
    """
    if value is None or value.strip().lower() in ("", "none", "off", "false"):
        return None
    scheme, _, branch = value.strip().partition(":")
    if scheme != "git":
        raise ConfigError(
            f"history {value!r}: expected git:BRANCH (e.g. git:{DEFAULT_BRANCH}) or none"
        )
    branch = branch or DEFAULT_BRANCH
    if not _BRANCH.fullmatch(branch) or ".." in branch or branch.endswith((".lock", "/", ".")):
        raise ConfigError(f"history {value!r}: {branch!r} is not a valid branch name")
    return branch


@dataclass(frozen=True, slots=True)
class BranchFile:
    """One file of a commit on the branch: its path, blob id and size in bytes."""

    path: str
    blob: str
    size: int


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
        Where the bare repository lives (``.perfci/history``).
    token
        A GitHub token for an ``https://`` origin when the checkout has no auth header.
    remote
        The remote whose URL is used (``origin``).

    Raises
    ------
    StorageError
        No git, no such remote: every message says what to do.
    """

    def __init__(
        self,
        *,
        checkout: Path,
        branch: str,
        cache: Path,
        token: str | None = None,
        remote: str = "origin",
    ) -> None:
        self.branch = branch
        self._ref = f"refs/heads/{branch}"
        self._checkout = checkout
        self.url = self._remote_url(remote)
        self._env = _git_env(self._auth_config(token))
        self.repo = cache / f"{_dir_name(branch)}.git"
        if not (self.repo / "HEAD").is_file():
            self.repo.parent.mkdir(parents=True, exist_ok=True)
            self._git("init", "--bare", "--quiet", str(self.repo), cwd=self.repo.parent)

    # --- reading ---------------------------------------------------------------------------

    def fetch(self) -> str | None:
        """Fetch the branch; its tip commit, or ``None`` when the remote has no such branch."""
        listed = self._git("ls-remote", self.url, self._ref, network=True).decode()
        if not listed.strip():
            return None
        self._git(
            "fetch", "--quiet", "--no-tags", self.url, f"+{self._ref}:{self._ref}", network=True
        )
        return self._git("rev-parse", "--verify", f"{self._ref}^{{commit}}").decode().strip()

    def has_commit(self, commit: str) -> bool:
        """Whether ``commit`` is in the cached repository (a previous fetch brought it)."""
        done = self._run("cat-file", "-e", f"{commit}^{{commit}}")
        return done.returncode == 0

    def files(self, commit: str, prefix: str = "") -> list[BranchFile]:
        """Every file of ``commit`` (under ``prefix``), sorted by path."""
        out = self._git(
            "ls-tree", "-r", "-l", "-z", "--full-tree", commit, *([prefix] if prefix else [])
        )
        return sorted(_parse_tree(out), key=lambda f: f.path)

    def added(self, old: str, new: str, prefix: str = "") -> list[BranchFile]:
        """Files in ``new`` that ``old`` does not have (``old`` must be cached)."""
        out = self._git(
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
        if not blobs:
            return
        with subprocess.Popen(
            ["git", "-C", str(self.repo), "cat-file", "--batch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=self._env,
        ) as process:
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write("".join(f"{b}\n" for b in blobs).encode())
            process.stdin.close()
            for blob in blobs:
                header = process.stdout.readline().split()
                if len(header) != 3 or header[1] != b"blob":
                    raise StorageError(
                        f"history branch {self.branch}: blob {blob} is missing "
                        "from the fetched data"
                    )
                data = process.stdout.read(int(header[2]))
                process.stdout.read(1)  # the newline after each object
                yield data

    # --- writing ---------------------------------------------------------------------------

    def append(
        self,
        new_files: Mapping[str, bytes],
        *,
        max_bytes: int,
        prefix: str = "",
        message: str,
        attempts: int = 8,
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
            protected branch), or still lost the race after ``attempts`` tries.
        """
        blobs = {path: self._hash(data) for path, data in new_files.items()}
        sizes = {path: len(data) for path, data in new_files.items()}
        for attempt in range(1, attempts + 1):
            tip = self.fetch()
            current = self.files(tip) if tip else []
            if all(any(f.path == p for f in current) for p in blobs):
                return AppendResult(
                    commit=tip or "", dropped=(), attempts=attempt, already_there=True
                )
            merged = {f.path: f for f in current}
            merged.update({p: BranchFile(p, b, sizes[p]) for p, b in blobs.items()})
            if tip is None:
                merged["README.md"] = BranchFile(
                    "README.md", self._hash(README.encode()), len(README)
                )
            dropped = _over_cap(merged, max_bytes=max_bytes, prefix=prefix, keep=set(blobs))
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
            # again), then rebuild on its tip.
            time.sleep(random.uniform(0.05, 0.25) * attempt)
        raise StorageError(
            f"could not push to {self.branch} of {_redact(self.url)} after "
            f"{attempts} attempts: other jobs kept pushing first"
        )

    def _hash(self, data: bytes) -> str:
        return self._git("hash-object", "-w", "--stdin", input=data).decode().strip()

    def _commit(self, files: Sequence[BranchFile], *, parent: str | None, message: str) -> str:
        entries = "".join(
            f"100644 {f.blob}\t{f.path}\0" for f in sorted(files, key=lambda f: f.path)
        )
        with tempfile.TemporaryDirectory(prefix="perfci-index-") as scratch:
            env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
            self._git("update-index", "-z", "--index-info", input=entries.encode(), env=env)
            tree = self._git("write-tree", env=env).decode().strip()
        parents = ["-p", parent] if parent else []
        return (
            self._git("commit-tree", tree, *parents, input=message.encode(), env=_IDENTITY)
            .decode()
            .strip()
        )

    def _push(self, commit: str, *, expected: str | None) -> bool:
        """Push ``commit`` if the remote tip is still ``expected``; False when it moved."""
        lease = f"--force-with-lease={self._ref}:{expected or ''}"
        done = self._run(
            "push",
            "--quiet",
            "--no-verify",
            lease,
            self.url,
            f"{commit}:{self._ref}",
            timeout=_NETWORK_TIMEOUT_S,
        )
        if done.returncode == 0:
            return True
        reason = done.stderr.decode(errors="replace")
        if any(marker in reason for marker in _RETRYABLE):
            return False
        raise StorageError(
            f"could not push to {self.branch} of {_redact(self.url)}: "
            f"{_last_line(reason)} (does the job's token have `contents: write`?)"
        )

    # --- git -------------------------------------------------------------------------------

    def _remote_url(self, remote: str) -> str:
        done = _plain_git(self._checkout, "remote", "get-url", remote)
        url = done.stdout.decode().strip()
        if done.returncode != 0 or not url:
            raise StorageError(
                f"the checkout {self._checkout} has no `{remote}` remote, so "
                f"there is no {self.branch} branch to read or write history"
            )
        if "://" not in url and not re.match(r"^[^/]+:", url) and not Path(url).is_absolute():
            url = str((self._checkout / url).resolve())  # a relative local path
        return url

    def _auth_config(self, token: str | None) -> list[tuple[str, str]]:
        done = _plain_git(self._checkout, "config", "--get-regexp", r"^http\..*extraheader$")
        persisted = [
            tuple(line.split(" ", 1)) for line in done.stdout.decode().splitlines() if " " in line
        ]
        if persisted:
            return [(k, v) for k, v in persisted]
        parts = urlsplit(self.url)
        if token and parts.scheme == "https" and parts.hostname:
            basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
            host = parts.hostname + (f":{parts.port}" if parts.port else "")
            return [(f"http.https://{host}/.extraheader", f"AUTHORIZATION: basic {basic}")]
        return []

    def _run(
        self,
        *args: str,
        input: bytes | None = None,
        env: Mapping[str, str] | None = None,
        timeout: int = _LOCAL_TIMEOUT_S,
    ) -> subprocess.CompletedProcess[bytes]:
        try:
            return subprocess.run(
                ["git", "-C", str(self.repo), *args],
                input=input,
                capture_output=True,
                env={**self._env, **(env or {})},
                timeout=timeout,
                check=False,
            )
        except FileNotFoundError:
            raise StorageError("git is not installed: the history branch needs it") from None
        except subprocess.TimeoutExpired:
            raise StorageError(
                f"git {args[0]} on {_redact(self.url)} took over {timeout} s and was stopped"
            ) from None

    def _git(
        self,
        *args: str,
        input: bytes | None = None,
        network: bool = False,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> bytes:
        if cwd is not None:  # `git init` of the bare repository itself
            done = _plain_git(cwd, *args)
        else:
            done = self._run(
                *args,
                input=input,
                env=env,
                timeout=_NETWORK_TIMEOUT_S if network else _LOCAL_TIMEOUT_S,
            )
        if done.returncode != 0:
            reason = _last_line(done.stderr.decode(errors="replace"))
            where = f" {_redact(self.url)}" if network else ""
            raise StorageError(
                f"history branch {self.branch}: git {args[0]}{where} failed: {reason}"
            )
        return done.stdout


def _over_cap(
    files: Mapping[str, BranchFile], *, max_bytes: int, prefix: str, keep: set[str]
) -> list[str]:
    """The oldest run files to drop so that the runs fit (80 % of the cap, for hysteresis)."""
    runs = sorted(
        (f for f in files.values() if f.path.startswith(prefix)),
        key=lambda f: (Path(f.path).name, f.path),
    )
    total = sum(f.size for f in runs)
    if total <= max_bytes:
        return []
    target, dropped = int(max_bytes * 0.8), []
    for candidate in runs:
        if total <= target:
            break
        if candidate.path not in keep:
            dropped.append(candidate.path)
            total -= candidate.size
    return dropped


def _parse_tree(out: bytes) -> Iterator[BranchFile]:
    for record in out.decode().split("\0"):
        if not record:
            continue
        meta, _, path = record.partition("\t")
        _mode, kind, blob, size = meta.split()
        if kind == "blob":
            yield BranchFile(path=path, blob=blob, size=int(size))


def _git_env(config: Sequence[tuple[str, str]]) -> dict[str, str]:
    # Variables that would point git at the user's repository or index must not leak in.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY")
    }
    env["GIT_TERMINAL_PROMPT"] = "0"  # fail, never wait for a password on a CI runner
    start = int(env.get("GIT_CONFIG_COUNT", "0") or 0)
    for index, (key, value) in enumerate(config, start=start):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    if config:
        env["GIT_CONFIG_COUNT"] = str(start + len(config))
    return env


def _plain_git(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            ["git", "-C", str(cwd), *args],
            capture_output=True,
            timeout=_LOCAL_TIMEOUT_S,
            check=False,
            env=_git_env([]),
        )
    except FileNotFoundError:
        raise StorageError("git is not installed: the history branch needs it") from None


def _dir_name(branch: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", branch)


def _redact(url: str) -> str:
    return _CREDENTIALS.sub("://***@", url)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return _redact(lines[-1]) if lines else "no message"
