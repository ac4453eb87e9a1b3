"""SIGTERM and SIGHUP as exceptions, so that a stopped ``perfci check`` cleans up after itself.

By default SIGTERM (a CI job cancelled, ``kill``, a container stopped) and SIGHUP (the terminal
closed) end the process at once: no ``finally`` runs, so an A/B check leaves its git worktree, its
temporary folder and the benchmark's processes behind (issue 31). While a command runs under
:func:`raising_on_termination`, either signal raises :class:`Terminated` where the process was, like
Ctrl-C raises ``KeyboardInterrupt``: the worktree is removed, the benchmark's process group ended
(:mod:`perfci.integrations.runner`), the transaction rolled back. A second signal during that
cleanup is ignored; SIGKILL still ends everything at once.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

__all__ = ["Stop", "Terminated", "raising_on_termination"]

_SIGNALS = tuple(
    s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None
)


class Terminated(KeyboardInterrupt):
    """The process got SIGTERM or SIGHUP; ``exit_code`` is the shell's 128 + signal number.

    A ``KeyboardInterrupt`` so that every cleanup written for Ctrl-C runs for it too.
    """

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(signal.Signals(signum).name)


@dataclass(slots=True)
class Stop:
    """The signal that stopped the command, if one did (typer hides the exception)."""

    signum: int | None = None

    @property
    def exit_code(self) -> int | None:
        return None if self.signum is None else 128 + self.signum


@contextmanager
def raising_on_termination(enabled: bool = True) -> Iterator[Stop]:
    """Within the block, SIGTERM and SIGHUP raise :class:`Terminated` (once); restored after.

    The :class:`Stop` it yields says which signal came. Not ``enabled``, or outside the main
    thread (signal handlers cannot be set there), it changes nothing.
    """
    stop = Stop()
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {signum: signal.getsignal(signum) for signum in _SIGNALS}

    def handler(signum: int, frame: FrameType | None) -> None:
        for other in _SIGNALS:  # the cleanup the exception starts must not be cut short
            signal.signal(other, signal.SIG_IGN)
        stop.signum = signum
        raise Terminated(signum)

    for signum in _SIGNALS:
        signal.signal(signum, handler)
    try:
        yield stop
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
