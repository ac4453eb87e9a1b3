"""Helper processes of the benchmark scripts (busy loops, servers) that die with the script.

A ``finally`` that kills them runs only when the script ends by itself or by an exception: a
script killed by ``SIGKILL`` (``subprocess.run(timeout=...)`` in a test, a CI job's cancel, an
OOM kill) leaves them running. A ``while True: pass`` of ``fastest_step.py`` once kept a core busy
for 1 h 54 min after its test timed out (issue 36). So every helper is started with
``PR_SET_PDEATHSIG`` (Linux): the kernel sends it ``SIGKILL`` when the script dies, whatever
the way. The helpers stay in the script's process group, so that killing the group (what the
tests do on timeout, ``tests/processes.py``) reaches them too.

Imported by the scripts as ``from children import ...`` (a script's own folder is on
``sys.path``).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_PR_SET_PDEATHSIG = 1
BUSY_LOOP = "while True:\n    pass\n"


def _libc_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


# Looked up here, not in the child: between fork and exec only the call itself should run.
_PRCTL = _libc_prctl()


def die_with_this_process() -> Callable[[], None]:
    """A ``preexec_fn`` that has the child killed when this process (its parent) dies."""
    parent = os.getpid()

    def preexec() -> None:
        if _PRCTL is not None:
            _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return preexec


def start(command: Sequence[str | Path], **kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(command, **kwargs)``, the child dying with this process."""
    return subprocess.Popen(command, preexec_fn=die_with_this_process(), **kwargs)


def stop(process: subprocess.Popen[Any]) -> None:
    """Kill ``process`` (if still running) and reap it."""
    if process.poll() is None:
        process.kill()
    process.wait()


@contextmanager
def busy_loops(count: int) -> Iterator[list[subprocess.Popen[Any]]]:
    """``count`` busy-loop processes (one core each) for the duration of the block."""
    processes: list[subprocess.Popen[Any]] = []
    try:
        for _ in range(count):
            processes.append(start([sys.executable, "-c", BUSY_LOOP]))
        yield processes
    finally:
        for process in processes:
            stop(process)
