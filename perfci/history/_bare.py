"""The history branch's private bare repository (:mod:`perfci.history._git` makes it), and
git run in it: with perfci's safe flags, the branch's authentication in the environment, a
timeout, and errors that name the branch and never a credential."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from perfci.core.errors import StorageError
from perfci.history._git import LOCAL_TIMEOUT_S, SAFE_FLAGS
from perfci.history._remote import last_line, redact

NETWORK_TIMEOUT_S = 300


class BareRepo:
    """Git in the bare repository ``repo``, which mirrors ``branch`` of ``url``."""

    def __init__(self, repo: Path, *, env: Mapping[str, str], url: str, branch: str) -> None:
        self.repo = repo
        self.url = url
        self.branch = branch
        self._env = dict(env)

    def run(
        self,
        *args: str,
        input: bytes | None = None,
        env: Mapping[str, str] | None = None,
        timeout: int = LOCAL_TIMEOUT_S,
    ) -> subprocess.CompletedProcess[bytes]:
        """``git ARGS`` in the repository, whatever its exit status."""
        try:
            return subprocess.run(
                ["git", *SAFE_FLAGS, f"--git-dir={self.repo}", *args],
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
                f"git {args[0]} on {redact(self.url)} took over {timeout} s and was stopped"
            ) from None

    def git(
        self,
        *args: str,
        input: bytes | None = None,
        network: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> bytes:
        """The output of ``git ARGS``; a ``StorageError`` naming the branch when it fails."""
        done = self.run(
            *args,
            input=input,
            env=env,
            timeout=NETWORK_TIMEOUT_S if network else LOCAL_TIMEOUT_S,
        )
        if done.returncode != 0:
            reason = last_line(done.stderr.decode(errors="replace"))
            where = f" {redact(self.url)}" if network else ""
            raise StorageError(
                f"history branch {self.branch}: git {args[0]}{where} failed: {reason}"
            )
        return done.stdout

    def read(self, blobs: Sequence[str]) -> Iterator[bytes]:
        """The contents of ``blobs``, in order (one ``git cat-file --batch`` for all)."""
        if not blobs:
            return
        with subprocess.Popen(
            ["git", *SAFE_FLAGS, f"--git-dir={self.repo}", "cat-file", "--batch"],
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
