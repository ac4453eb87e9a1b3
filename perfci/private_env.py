"""The variables perfci keeps from every process it starts: its secrets and the job's files.

The benchmark is the code under test (a pull request's, in CI) and runs as the same user as
perfci. Leaving a secret out of its environment (:func:`perfci.runner.benchmark_environment`)
is not enough: ``/proc/$PPID/environ`` shows the environment perfci itself was *started* with,
and changing ``os.environ`` does not change that block. So ``perfci check`` and ``perfci run``
begin with :func:`isolate`:

1. The variables :func:`is_private` names (every ``PERFCI_*`` setting, the CI's tokens, and
   the workflow-command files ``GITHUB_ENV``, ``GITHUB_OUTPUT``, ``GITHUB_PATH``,
   ``GITHUB_STATE``, ``GITHUB_STEP_SUMMARY``) are written to an anonymous in-memory file
   (``memfd``), and the process re-executes itself, same pid and arguments, with an
   environment without them. The new process reads them back from that file descriptor,
   closes it, and keeps them in memory only: :func:`environ` and :func:`get` are how perfci
   reads them. No process perfci starts (the benchmark, git, nvidia-smi) inherits them.
2. While it holds any, the process marks itself not dumpable (``PR_SET_DUMPABLE``), so that
   another process of the same user without ``CAP_SYS_PTRACE`` can read neither its memory
   nor its file descriptors (``/proc/PID/mem``, ``/proc/PID/fd``, ptrace).

A variable ``PERFCI_SECRETS_FILE`` names a file of ``NAME=VALUE`` entries, each ended by a NUL
byte, that is read and deleted at the start: the GitHub Action hands its tokens over so, keeping
them out of the environment of its own bash step (the benchmark's grandparent).

What this cannot do: a benchmark running as the same user can still read every file that user
can (``.git/config`` with a token persisted by ``actions/checkout``, ``~/.docker/config.json``)
and, as root with ``CAP_SYS_PTRACE``, any memory. Isolating those takes another user or a
container; README "Security" says so.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "BENCHMARK_VARIABLES",
    "SECRETS_FD",
    "SECRETS_FILE",
    "WITHHELD_CI_VARIABLES",
    "WORKFLOW_FILES",
    "environ",
    "get",
    "held",
    "is_private",
    "isolate",
    "receive",
]

#: What perfci sets for each repeat of the benchmark; every other ``PERFCI_*`` is private.
BENCHMARK_VARIABLES = ("PERFCI_OUTPUT_DIR", "PERFCI_REPEAT", "PERFCI_PROFILER")
#: The CI's credentials: GitHub's API tokens, and the Actions runtime's tokens with the
#: service URLs they unlock (cache, artifacts, OIDC id tokens).
WITHHELD_CI_VARIABLES = (
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_RUNTIME_URL",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
    "ACTIONS_CACHE_URL",
    "ACTIONS_RESULTS_URL",
)
#: GitHub Actions' workflow-command files: whoever writes to them sets the job's environment
#: (``GITHUB_ENV``, ``GITHUB_PATH``), its outputs and its summary, for every later step.
WORKFLOW_FILES = (
    "GITHUB_ENV",
    "GITHUB_OUTPUT",
    "GITHUB_PATH",
    "GITHUB_STATE",
    "GITHUB_STEP_SUMMARY",
)
#: The inherited file descriptor the re-executed process reads its private variables from.
SECRETS_FD = "PERFCI_SECRETS_FD"
#: A file of private variables, read and deleted at the start (the Action's hand-over).
SECRETS_FILE = "PERFCI_SECRETS_FILE"
_PR_SET_DUMPABLE = 4
_MAX_BYTES = 1 << 20  # far more than any set of tokens

#: The private variables this process holds in memory (after :func:`receive`).
_held: dict[str, str] = {}


def is_private(name: str) -> bool:
    """Whether ``name`` is kept from the processes perfci starts (module docstring)."""
    if name.startswith("PERFCI_"):
        # Default-deny for perfci's namespace: a setting added later (a webhook, a token) is
        # private without anyone having to remember this list.
        return name not in BENCHMARK_VARIABLES
    return name in WITHHELD_CI_VARIABLES or name in WORKFLOW_FILES


def held() -> dict[str, str]:
    """The private variables this process received (empty when it was not isolated)."""
    return dict(_held)


def environ() -> dict[str, str]:
    """``os.environ`` with the private variables this process holds: what perfci reads."""
    return {**os.environ, **_held}


def get(name: str, default: str | None = None) -> str | None:
    """One variable of :func:`environ`."""
    return _held.get(name, os.environ.get(name, default))


def receive() -> None:
    """Take the private variables handed over by :data:`SECRETS_FD` or :data:`SECRETS_FILE`.

    Both variables leave ``os.environ``; the file is deleted. A descriptor or file that
    cannot be read is ignored: perfci then runs without what it held.
    """
    number = os.environ.pop(SECRETS_FD, None)
    if number is not None and number.isdigit():
        with contextlib.suppress(OSError), os.fdopen(int(number), "rb") as handle:
            _held.update(_decode(handle.read(_MAX_BYTES)))
    path = os.environ.pop(SECRETS_FILE, None)
    if path:
        file = Path(path)
        with contextlib.suppress(OSError):
            with file.open("rb") as handle:
                data = handle.read(_MAX_BYTES)
            file.unlink()
            _held.update(_decode(data))


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
    for name in names:  # not reached after a re-execution
        _held[name] = os.environ.pop(name)
    if _held:
        _not_dumpable()


def _reexecute(private: Mapping[str, str]) -> None:
    """``execv`` this interpreter with its arguments, ``private`` moved to a descriptor."""
    payload = _encode({**_held, **private})
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
        import ctypes

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
