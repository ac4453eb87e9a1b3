"""A process that starts the benchmark begins as one that never held perfci's secrets.

Leaving a secret out of the benchmark's environment
(:func:`perfci.integrations.benchmark_env.benchmark_environment`) is not enough:
``/proc/$PPID/environ`` shows the environment perfci itself was *started* with, and changing
``os.environ`` does not change that block. So
``perfci check`` and ``perfci run`` begin with :func:`isolate`:

1. The private variables (:func:`perfci.core.private_env.is_private`: every ``PERFCI_*``
   setting, the CI's tokens, the workflow-command files) are written to an anonymous
   in-memory file (``memfd``), and the process re-executes itself, same pid and arguments,
   with an environment without them. The new process reads them back from that file
   descriptor, closes it, and holds them in memory only (:mod:`perfci.core.private_env`). No
   process perfci starts (the benchmark, git, nvidia-smi) inherits them.
2. While it holds any, the process marks itself not dumpable (``PR_SET_DUMPABLE``), so that
   another process of the same user without ``CAP_SYS_PTRACE`` can read neither its memory
   nor its file descriptors (``/proc/PID/mem``, ``/proc/PID/fd``, ptrace).

A variable ``PERFCI_SECRETS_FILE`` names a file of ``NAME=VALUE`` entries, each ended by a NUL
byte, that is read and deleted at the start: the GitHub Action hands its tokens over so, keeping
them out of the environment of its own bash step (the benchmark's grandparent).

What this cannot do: a benchmark running as the same user can still read every file that user
can (``.git/config`` with a token persisted by ``actions/checkout``, ``~/.docker/config.json``)
and, as root with ``CAP_SYS_PTRACE``, any memory. Isolating those takes another user or a
container; docs/security.md says so.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from perfci.core import private_env
from perfci.core.private_env import SECRETS_FD, SECRETS_FILE, is_private

__all__ = ["isolate", "receive"]

_PR_SET_DUMPABLE = 4
_MAX_BYTES = 1 << 20  # far more than any set of tokens


def receive() -> None:
    """Take the private variables handed over by :data:`SECRETS_FD` or :data:`SECRETS_FILE`.

    Both variables leave ``os.environ``; the file is deleted. A descriptor or file that
    cannot be read is ignored: perfci then runs without what it held.
    """
    number = os.environ.pop(SECRETS_FD, None)
    if number is not None and number.isdigit():
        with contextlib.suppress(OSError), os.fdopen(int(number), "rb") as handle:
            private_env.hold(_decode(handle.read(_MAX_BYTES)))
    path = os.environ.pop(SECRETS_FILE, None)
    if path:
        file = Path(path)
        with contextlib.suppress(OSError):
            with file.open("rb") as handle:
                data = handle.read(_MAX_BYTES)
            file.unlink()
            private_env.hold(_decode(data))


def isolate() -> None:
    """Make this process one that never held its private variables in its environment.

    Call it first thing in a process that will start the benchmark. When the environment the
    process was started with holds a private variable (:func:`is_private`), the process
    re-executes itself without them (it does not return then); the new process receives them
    (:func:`receive`) and marks itself not dumpable. Where it cannot re-execute itself (no
    ``execve``, no ``sys.executable``) it only moves them out of ``os.environ``.
    """
    receive()
    names = [name for name in os.environ if is_private(name)]
    if names and os.name == "posix" and sys.executable:
        _reexecute({n: os.environ[n] for n in names})
    # Not reached after a re-execution.
    private_env.hold({name: os.environ.pop(name) for name in names})
    if private_env.held():
        _not_dumpable()


def _reexecute(private: Mapping[str, str]) -> None:
    """``execv`` this interpreter with its arguments, ``private`` moved to a descriptor."""
    payload = _encode({**private_env.held(), **private})
    handle = _anonymous_file()
    try:
        os.write(handle, payload)
        os.lseek(handle, 0, os.SEEK_SET)
        os.set_inheritable(handle, True)
        env = {k: v for k, v in os.environ.items() if k not in private}
        env[SECRETS_FD] = str(handle)
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
    except OSError:
        os.close(handle)  # no exec: go on in this process (isolate moves them out)


def _anonymous_file() -> int:
    """A file descriptor of a file no path names (memory, on Linux)."""
    if hasattr(os, "memfd_create"):
        return os.memfd_create("perfci-private", 0)
    with tempfile.TemporaryFile() as named:  # unlinked at once on POSIX
        return os.dup(named.fileno())


def _not_dumpable() -> None:
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):  # best effort: no libc, a sandbox refusing prctl
        import ctypes  # lazy: Linux only, and a Python built without ctypes still isolates

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def _encode(values: Mapping[str, str]) -> bytes:
    return b"".join(
        f"{k}={v}".encode("utf-8", "surrogateescape") + b"\0" for k, v in values.items()
    )


def _decode(data: bytes) -> dict[str, str]:
    values = {}
    for entry in data.split(b"\0"):
        name, sep, value = entry.decode("utf-8", "surrogateescape").partition("=")
        if sep and name:
            values[name] = value
    return values
