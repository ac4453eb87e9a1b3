"""How busy the host was with other work while a repeat ran: CPU time used by other processes.

On a shared runner another job can take the CPU cores a benchmark needs: on the 2-core VM perfci is
developed on, two busy loops beside the example made its large operators 39–53 % slower and its
small ones no slower (``benchmarks/host_load.py``), so the run did not read as "slower in
everything" and the metrics alone could not tell it from a code change. The runner therefore
measures, around each repeat, the CPU time the whole machine spent busy (``/proc/stat``) less the
CPU time the benchmark's own processes used (``getrusage`` of the waited-for children), as a share
of all cores over the repeat's wall time: the share of the machine other work took. It travels with
the repeat's state (``host`` in ``gpu_state``) and
:class:`perfci.integrations.machine.judge.StateJudge` calls a repeat suspect when that share was
well above what is usual for the benchmark's runners.

Linux only (``/proc/stat``, and ``resource`` for the benchmark's own CPU time); elsewhere
nothing is measured and nothing is said.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["BUSY_EXCESS", "MIN_WALL_S", "HostLoadMeter", "busy_jiffies", "others_share"]

#: A repeat is suspect when other work took at least this share of all cores more than usual
#: (half a core's worth on a 2-core runner, 4 cores on a 16-core one).
BUSY_EXCESS = 0.25
#: Shortest repeat whose share is read. ``/proc/stat`` counts in clock ticks (10 ms at the
#: usual 100 Hz), read at both ends on every core: the share is off by up to 2 / (wall × Hz),
#: ±2 % over a second but ±40 % over a 50 ms repeat, where a neighbour's two ticks read as a
#: busy host (a test benchmark's repeats beside another test worker did).
MIN_WALL_S = 1.0
_PROC_STAT = Path("/proc/stat")
#: ``/proc/stat`` fields (after "cpu") that are idle time: idle and iowait.
_IDLE_FIELDS = (3, 4)
#: Guest time is already counted in user and nice.
_COUNTED_FIELDS = 8


def busy_jiffies(text: str) -> tuple[int, int] | None:
    """(busy, total) clock ticks of all CPUs from ``/proc/stat``'s text; ``None`` if unreadable."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            try:
                ticks = [int(v) for v in parts[1 : 1 + _COUNTED_FIELDS]]
            except ValueError:
                return None
            if len(ticks) < 4:
                return None
            idle = sum(ticks[i] for i in _IDLE_FIELDS if i < len(ticks))
            total = sum(ticks)
            return total - idle, total
    return None


def others_share(
    busy_ticks: int, own_cpu_s: float, wall_s: float, cpus: int, ticks_per_s: float
) -> float | None:
    """Share of all cores other processes used: (machine busy − own CPU) / (wall × cores);
    ``None`` when it cannot be told: a repeat shorter than :data:`MIN_WALL_S`."""
    if wall_s < MIN_WALL_S or cpus <= 0 or ticks_per_s <= 0:
        return None
    others = busy_ticks / ticks_per_s - own_cpu_s
    return min(1.0, max(0.0, others / (wall_s * cpus)))


@dataclass
class _Mark:
    busy: int
    own_cpu_s: float
    wall_s: float


class HostLoadMeter:
    """Measures the host's other work over one repeat: ``start()`` before, ``stop()`` after.

    The repeat's processes must have been waited for before ``stop()`` so that their CPU
    time is in ``RUSAGE_CHILDREN``. ``stop()`` returns ``None`` where ``/proc/stat`` cannot
    be read; measuring never fails a repeat.
    """

    def __init__(self) -> None:
        self._start: _Mark | None = None

    def start(self) -> None:
        self._start = _mark()

    def stop(self) -> dict[str, Any] | None:
        begin, end = self._start, _mark()
        if begin is None or end is None:
            return None
        cpus = os.cpu_count() or 1
        share = others_share(
            end.busy - begin.busy,
            end.own_cpu_s - begin.own_cpu_s,
            end.wall_s - begin.wall_s,
            cpus,
            float(os.sysconf("SC_CLK_TCK")),
        )
        if share is None:
            return None
        return {"others_cpu_share": round(share, 4), "cpus": cpus}


def _mark() -> _Mark | None:
    try:
        found = busy_jiffies(_PROC_STAT.read_text(encoding="ascii", errors="replace"))
    except OSError:
        return None
    if found is None:
        return None
    try:
        import resource  # lazy: Unix only; without it there is nothing to subtract
    except ImportError:
        return None
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = resource.getrusage(resource.RUSAGE_SELF)  # the runner's own threads (GPU sampler)
    cpu = children.ru_utime + children.ru_stime + own.ru_utime + own.ru_stime
    return _Mark(busy=found[0], own_cpu_s=cpu, wall_s=time.monotonic())
