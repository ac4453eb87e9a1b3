"""The columns of a large trace's events kept and reduced with numpy: ``_chrome_plain``'s
``Columns``, figure for figure, at array speed. Imported only for a file large enough for
numpy's import (about 0.1 s of CPU) to pay for itself, or when numpy is loaded already."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfci.formats.pytorch._chrome_plain import Summary, start_of


@dataclass
class Columns:
    """``_chrome_plain.Columns`` in numpy arrays, batch by batch: the same 20 bytes an event."""

    id_chunks: list[np.ndarray] = field(default_factory=list)
    micro_chunks: list[np.ndarray] = field(default_factory=list)
    start_chunks: list[np.ndarray] = field(default_factory=list)

    def add(self, ids: list[int], micros: list[float], starts: list[Any]) -> None:
        self.id_chunks.append(np.array(ids, dtype=np.int32))
        self.micro_chunks.append(np.array(micros, dtype=np.float64))
        self.start_chunks.append(_starts(starts))

    def grouped(self, keys: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per key id, its durations in ns and its starts in µs, in trace order; empties the
        columns."""
        if not self.id_chunks:
            return []
        ids = np.concatenate(self.id_chunks)
        durations = np.rint(np.concatenate(self.micro_chunks) * 1000.0).astype(np.int64)
        starts = np.concatenate(self.start_chunks)
        self.id_chunks, self.micro_chunks, self.start_chunks = [], [], []
        order = np.argsort(ids, kind="stable")
        bounds = np.cumsum(np.bincount(ids, minlength=keys))[:-1]
        return list(
            zip(np.split(durations[order], bounds), np.split(starts[order], bounds), strict=True)
        )

    @staticmethod
    def concat(parts: Sequence[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts)

    @staticmethod
    def summary(values: np.ndarray) -> Summary:
        count = int(values.size)
        return Summary(
            count=count,
            total=int(values.sum()),
            minimum=float(values.min()),
            maximum=float(values.max()),
            median=float(np.median(values)),
            std=float(np.std(values, ddof=1)) if count > 1 else None,
        )

    @staticmethod
    def step_totals(
        spans: Sequence[tuple[float, float]], durations_ns: np.ndarray, starts_us: np.ndarray
    ) -> list[float] | None:
        """The summed duration of the events that start inside each step, in step order;
        ``None`` when some step has none."""
        ordered = np.array(spans, dtype=np.float64)
        begins, ends = ordered[:, 0], ordered[:, 1]
        index = np.searchsorted(begins, starts_us, side="right") - 1
        clipped = np.clip(index, 0, None)
        inside = (index >= 0) & (starts_us < ends[clipped])  # NaN starts compare False
        totals = np.bincount(
            index[inside], weights=durations_ns[inside].astype(np.float64), minlength=begins.size
        )
        if not np.all(totals > 0):
            return None
        return [float(total) for total in totals]


def _starts(values: list[Any]) -> np.ndarray:
    """``_chrome_plain.starts_of`` as an array."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return np.array([start_of(value) for value in values], dtype=np.float64)
