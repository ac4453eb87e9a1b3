"""Processes a test starts die with it: a group of their own, ended whole, and a death signal.

``subprocess.run(timeout=...)`` kills only the process it started: a benchmark script's busy
loop, a server a script started, a git a CLI started live on after it, for hours (issue 36: a
``while True: pass`` of ``benchmarks/fastest_step.py`` kept a core busy for 1 h 54 min after its
test timed out). Here every process is started

- leading a process group of its own, which :func:`end_group` kills whole (its children and
  theirs, unless one made a group of its own);
- with ``PR_SET_PDEATHSIG`` (Linux): the kernel kills it when the test process dies, even by
  ``SIGKILL`` (a worker killed by pytest-timeout or by hand), where no ``finally`` runs.

:func:`run` is ``subprocess.run`` with both, and a deadline stretched to the load
(:mod:`deadlines`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from deadlines import scaled

_PR_SET_PDEATHSIG = 1


def _libc_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


# Looked up here, not in the child: between fork and exec only the call itself should run.
_PRCTL = _libc_prctl()


def _die_with(parent: int) -> Callable[[], None]:
    def preexec() -> None:
        if _PRCTL is not None:
            _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return preexec


def own_group() -> dict[str, Any]:
    """Popen's arguments: a process group of its own, killed when this process dies."""
    if os.name != "posix":
        return {}
    return {"process_group": 0, "preexec_fn": _die_with(os.getpid())}


def end_group(process: subprocess.Popen[Any]) -> None:
    """Kill every process left in ``process``'s group (it leads one: :func:`own_group`)."""
    if os.name == "posix":
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    elif process.poll() is None:
        process.kill()
    process.wait()


def run(
    command: Sequence[str | Path],
    *,
    timeout_s: float,
    input: str | None = None,
    **kwargs: Any,
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(command, capture_output=True, text=True)`` in a group of its own.

    ``timeout_s`` is a quiet machine's figure, stretched to the load; on timeout (or any other
    way out) the whole group is killed before ``TimeoutExpired`` goes on, and after a normal end
    any process the command left behind is killed too.
    """
    with subprocess.Popen(
        command,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **own_group(),
        **kwargs,
    ) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=scaled(timeout_s))
        finally:
            end_group(process)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
