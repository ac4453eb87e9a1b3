"""How many metrics and samples the parsers may make, counted while a file is read (issue 31).

The service refuses a run of more than ``max_metrics`` metrics (or ``max_samples`` samples);
checked once the files were parsed, that cap let a 0.47 MB gzipped CSV of 1.7 M model rows
take 68 s and 1 GB before the refusal. Inside :func:`parse_limits` every reader counts as it
goes, through the :class:`Budget` that :func:`budget` gives it, and stops with
:class:`~perfci.core.errors.InputTooLarge` at the first metric or sample past the cap: the time and
memory of a refused file are bounded by the cap, not by the file.

A metric is counted when a reader first keeps a value under a new name (one that will be a
metric of the profile); a sample is every further value kept for a metric. Counts add up over
all the files parsed inside one :func:`parse_limits` block (a run's repeats together), as the
service's caps do. Outside such a block :func:`budget` gives a budget that counts nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from perfci.core.errors import InputTooLarge

__all__ = ["Budget", "ParseLimits", "budget", "parse_limits"]


@dataclass(frozen=True, slots=True)
class ParseLimits:
    """The caps of one parse block; ``None``: no cap."""

    max_metrics: int | None = None
    max_samples: int | None = None
    #: Where a user changes the caps, named by the error (``PERFCI_MAX_METRICS`` …).
    metrics_setting: str = "PERFCI_MAX_METRICS"
    samples_setting: str = "PERFCI_MAX_SAMPLES"


@dataclass(slots=True)
class _Totals:
    limits: ParseLimits
    metrics: int = 0
    samples: int = 0


_TOTALS: ContextVar[_Totals | None] = ContextVar("perfci_parse_totals", default=None)


@contextmanager
def parse_limits(limits: ParseLimits) -> Iterator[None]:
    """Count the metrics and samples of every file parsed inside the block against ``limits``."""
    token = _TOTALS.set(_Totals(limits))
    try:
        yield
    finally:
        _TOTALS.reset(token)


class Budget:
    """What one reader may still make: call :meth:`metric` for each new metric and
    :meth:`sample` for each further value kept; each raises ``InputTooLarge`` past a cap."""

    __slots__ = ("_format", "_source", "_totals")

    def __init__(self, totals: _Totals | None, source: str, format: str) -> None:
        self._totals = totals
        self._source = source
        self._format = format

    def metric(self, count: int = 1) -> None:
        totals = self._totals
        if totals is not None:
            totals.metrics += count
            limits = totals.limits
            self._check("metrics", totals.metrics, limits.max_metrics, limits.metrics_setting)

    def sample(self, count: int = 1) -> None:
        totals = self._totals
        if totals is not None:
            totals.samples += count
            limits = totals.limits
            self._check("samples", totals.samples, limits.max_samples, limits.samples_setting)

    def _check(self, what: str, total: int, cap: int | None, setting: str) -> None:
        """Refuse the run once ``total`` is past ``cap``."""
        if cap is None or total <= cap:
            return
        raise InputTooLarge(
            f"the run has more than {cap} {what}; this server accepts at most {cap} per run "
            f"({setting}): refused while reading, at the first {what[:-1]} past the cap",
            source=self._source,
            format=self._format,
        )


def budget(source: str, format: str) -> Budget:
    """The budget of the reader of ``source`` (a file of ``format``) in the current block."""
    return Budget(_TOTALS.get(), source, format)
