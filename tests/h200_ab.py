"""The A/B comparisons recorded on an H200 (``data/h200_ab``), for tests and benchmarks.

:func:`recorded` reads one comparison's per-process values; :func:`with_process_factors` scales
them the way a runner whose processes differ in speed would, and :func:`as_history` turns them
into history-mode runs (used by ``tests/test_host_timings.py`` and
``benchmarks/ab_gpu_factor.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from perfci.analysis.gating import host_timing
from perfci.core.model import Better, Device, MetricKind, SeriesKey

DATA = Path(__file__).parent / "data" / "h200_ab" / "gelu_ab.json"

Values = dict[SeriesKey, list[float | None]]


def recorded(name: str) -> dict[SeriesKey, dict[str, list[float]]]:
    """Per series of comparison ``name`` (``slower``, ``unchanged``): ``base`` and ``pr``
    values, one per process, pair by pair."""
    out = {}
    for row in json.loads(DATA.read_text(encoding="utf-8"))[name]:
        key = SeriesKey(
            kind=MetricKind(row["kind"]),
            name=row["name"],
            device=Device(row["device"]),
            scope=row["scope"],
            section=row["section"],
            unit=row["unit"],
            better=Better(row["better"]),
        )
        out[key] = {"base": row["base"], "pr": row["pr"]}
    return out


def with_process_factors(
    rows: dict[SeriesKey, dict[str, list[float]]], gpu: np.ndarray, host: np.ndarray
) -> tuple[Values, Values]:
    """Base and PR values with each process's GPU-side times scaled by ``exp(gpu[side, k])``
    and its CPU-side times by ``exp(host[side, k])`` (side 0 base, 1 PR; ``k`` the pair)."""
    base: Values = {}
    pr: Values = {}
    for key, row in rows.items():
        factor = host if host_timing(key, True) else gpu
        scale = np.exp(factor) if key.is_time else np.ones_like(factor)
        base[key] = [v * float(scale[0, i]) for i, v in enumerate(row["base"])]
        pr[key] = [v * float(scale[1, i]) for i, v in enumerate(row["pr"])]
    return base, pr


def as_history(
    rows: dict[SeriesKey, dict[str, list[float]]],
    other: dict[SeriesKey, dict[str, list[float]]],
    gpu: np.ndarray,
    host: np.ndarray,
) -> tuple[dict[SeriesKey, list[list[float]]], dict[SeriesKey, list[float]]]:
    """History-mode input: the base processes of ``rows`` and then ``other`` as ten one-repeat
    baseline runs, and ``rows``' five PR processes as one candidate run of five repeats. Run
    ``j``'s GPU-side times are scaled by ``exp(gpu[j])`` and its CPU-side times by
    ``exp(host[j])``; index 10 is the candidate's."""
    keys = [k for k in rows if k in other]

    def scale(key: SeriesKey, run: int) -> float:
        if not key.is_time:
            return 1.0
        return float(np.exp(host[run] if host_timing(key, True) else gpu[run]))

    baseline = {
        k: [[v * scale(k, j)] for j, v in enumerate([*rows[k]["base"], *other[k]["base"]])]
        for k in keys
    }
    return baseline, {k: [v * scale(k, 10) for v in rows[k]["pr"]] for k in keys}
