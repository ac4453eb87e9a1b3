"""Bursts of allocation without the cyclic garbage collector walking the heap meanwhile."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def no_cycle_collection() -> Iterator[None]:
    """Pause the cyclic garbage collector around a burst of allocations.

    Building tens of thousands of tuples and lists (a run's samples, a baseline's values)
    triggers collections that each walk every live object, several times the work itself
    (benchmarks/store_speed.py measures it); once a 10,000-series baseline is in memory (1.5 M
    values in 300,000 lists), one full collection costs as much as a tenth of the comparison
    (benchmarks/compare_speed.py). The hot paths create no reference cycles, so nothing is
    lost by collecting later. Only the caller that found it enabled turns it back on, so the
    pauses nest.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
