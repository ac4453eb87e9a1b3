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
class _Tally:
    """One cap of a parse block and what was counted against it."""

    what: str  # "metrics" or "samples", as the error says it
    cap: int | None
    setting: str
    total: int = 0


@dataclass(slots=True)
class _Totals:
    metrics: _Tally
    samples: _Tally


_TOTALS: ContextVar[_Totals | None] = ContextVar("perfci_parse_totals", default=None)


@contextmanager
def parse_limits(limits: ParseLimits) -> Iterator[None]:
    """Count the metrics and samples of every file parsed inside the block against ``limits``."""
    totals = _Totals(
        _Tally("metrics", limits.max_metrics, limits.metrics_setting),
        _Tally("samples", limits.max_samples, limits.samples_setting),
    )
    token = _TOTALS.set(totals)
    try:
        yield
    finally:
        _TOTALS.reset(token)


class Budget:
    """What one reader may still make: call :meth:`metric` for each new metric and
    :meth:`sample` for each further value kept; each raises ``InputTooLarge`` past a cap."""

    __slots__ = ("_format", "_metrics", "_samples", "_source")

    def __init__(self, totals: _Totals | None, source: str, format: str) -> None:
        self._metrics = None if totals is None else totals.metrics
        self._samples = None if totals is None else totals.samples
        self._source = source
        self._format = format

    def metric(self, count: int = 1) -> None:
        if self._metrics is not None:
            self._add(self._metrics, count)

    def sample(self, count: int = 1) -> None:
        if self._samples is not None:
            self._add(self._samples, count)

    def _add(self, tally: _Tally, count: int) -> None:
        """Count ``count`` more against ``tally``; refuse the run once past its cap."""
        tally.total += count
        cap, what = tally.cap, tally.what
        if cap is None or tally.total <= cap:
            return
        raise InputTooLarge(
            f"the run has more than {cap} {what}; this server accepts at most {cap} per run "
            f"({tally.setting}): refused while reading, at the first {what[:-1]} past the cap",
            source=self._source,
            format=self._format,
        )


def budget(source: str, format: str) -> Budget:
    """The budget of the reader of ``source`` (a file of ``format``) in the current block."""
    return Budget(_TOTALS.get(), source, format)
