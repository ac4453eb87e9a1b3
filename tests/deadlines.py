"""Deadlines for the waits of the tests, stretched to how busy the machine is.

A test waits for something to be ready (a server's ``/healthz``, a child's first write, a
subprocess's end) with a readiness check and a deadline, never a fixed sleep. The deadline is a
quiet machine's generous figure times :func:`time_scale`: on a shared 2-core runner with a load
of 14 everything takes several times longer (``perfci serve`` then answers ``/healthz`` 10-18 s
after printing "serving"), and a fixed clock turns that into a failure that says nothing about
the code. A deadline only bounds a wait that would otherwise hang; no test asserts a duration.

``PERFCI_TEST_TIME_SCALE`` fixes the factor (e.g. ``4`` on a known-slow emulator); by default it
is the load average per CPU, at least 1, taken again while a :class:`Deadline` runs so that a
wait begun on a quiet machine still stretches when the load arrives.
"""

from __future__ import annotations

import os
import time

TIME_SCALE_ENV = "PERFCI_TEST_TIME_SCALE"


def time_scale() -> float:
    """How many times slower than a quiet machine this one is taken to be (1 or more)."""
    fixed = os.environ.get(TIME_SCALE_ENV)
    if fixed:
        try:
            value = float(fixed)
        except ValueError:
            raise ValueError(f"{TIME_SCALE_ENV}={fixed!r} is not a number (e.g. 4)") from None
        return max(value, 1.0)
    try:
        one, five, _ = os.getloadavg()
    except OSError:  # no load average on this platform: the quiet figure, which is generous
        return 1.0
    # The larger of the 1- and 5-minute averages: a burst that just ended still slows the disk
    # caches and the scheduler's queues, and the 1-minute figure lags a burst that just began.
    return max(1.0, max(one, five) / (os.cpu_count() or 1))


def scaled(seconds: float) -> float:
    """``seconds`` on a quiet machine, in seconds on this one now (for ``timeout=``)."""
    return seconds * time_scale()


class Deadline:
    """A deadline of ``seconds`` on a quiet machine, re-stretched each time it is asked.

    The scale only ever grows while it runs: a load that came and went still had its effect.
    """

    def __init__(self, seconds: float) -> None:
        self.base_s = seconds
        self._start = time.monotonic()
        self._scale = time_scale()

    @property
    def seconds(self) -> float:
        """The deadline now, in seconds from its start."""
        self._scale = max(self._scale, time_scale())
        return self.base_s * self._scale

    def expired(self) -> bool:
        return self.elapsed() > self.seconds

    def remaining(self) -> float:
        return max(0.0, self.seconds - self.elapsed())

    def elapsed(self) -> float:
        return time.monotonic() - self._start

    def describe(self) -> str:
        """For a failure message: how long it waited and how the deadline was stretched."""
        return (
            f"{self.elapsed():.0f} s (deadline {self.base_s:.0f} s x {self._scale:.1f} for the "
            f"load; {TIME_SCALE_ENV} sets the factor)"
        )
