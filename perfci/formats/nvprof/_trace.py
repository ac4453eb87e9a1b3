"""nvprof's trace tables (``--print-gpu-trace`` / ``--print-api-trace``, ``--csv`` or text), summed
per name into the metrics a summary row of the same launches gives.

A trace has one row per launch, copy or API call (``"Start","Duration",…,"Name"``). Rows are
grouped by what they are, with the kind, name and device the summary path uses, so that a
series from a trace run and one from a summary run line up:

* GPU trace rows: ``[CUDA memcpy …]`` / ``[CUDA memset]`` → ``memory``; NCCL kernels → ``comm``;
  other kernels → ``kernel``, their name without the `` [123]`` that older nvprof builds append
  (the launching API call's correlation id; the summary prints the bare name).
  ``[Unified Memory …]`` rows → ``memory`` under their own name (the summary's unified memory
  table names them differently).
* API trace rows, and rows without a Device in a GPU trace (an API call when both traces are
  printed as one table) → ``api`` on the CPU.

Each name's metric has ``calls`` = rows, ``samples_ns`` = the durations in file order (rows
without a duration are counted in ``calls`` and in ``attrs["rows_without_duration"]``),
``total_ns`` / ``avg_ns`` / ``min_ns`` / ``max_ns`` from them, ``bytes`` = the sum of Size (each
row rounded to whole bytes: nvprof prints 1028 bytes as 1.003906 KB), and in ``attrs`` up to 8
distinct grids, blocks and devices (``128x1x1``). A copy's per-row sizes and throughputs
(bytes/s; nvprof's GB/s are 1024-based) are ``counter`` metrics ``size`` and ``throughput``
scoped by its name.

When a summary table of the same result has rows of a group (GPU activities, API calls, unified
memory), that group's trace rows are not read again: the summary wins, and a warning says so.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from perfci.core.model import Better, Device, Metric, MetricKind
from perfci.core.units import parse_size

GPU_TRACE = "GPU trace"
API_TRACE = "API trace"
UM_TRACE = "unified memory trace"

#: ``void matrixMulCUDA<int=32>(float*, float*, float*, int, int) [1073]``: the correlation id.
_CORRELATION = re.compile(r" \[\d+\]$")
#: NCCL kernels, ``comm`` metrics in the summary (``_runs``) and in traces.
NCCL_PREFIXES = ("nccl", "void nccl")
_UNIFIED = "[Unified Memory"
_MAX_DISTINCT = 8  # grids, blocks, devices kept in attrs per name


@dataclass(slots=True)
class TraceSeries:
    """The trace rows of one name, summed as they are read."""

    kind: MetricKind
    name: str
    group: str
    table: int  # the header line of the first table with this name
    rows: int = 0
    samples: list[float] = field(default_factory=list)
    size: float | None = None
    sizes: list[float] = field(default_factory=list)  # per copy, for the ``size`` counter
    rates: list[float] = field(default_factory=list)  # per copy, bytes/s
    launch: dict[str, dict[str, None]] = field(default_factory=dict)

    def add(
        self,
        duration: float | None,
        size: float | None,
        launch: Iterable[tuple[str, str]],
        rate: float | None = None,
    ) -> None:
        self.rows += 1
        if duration is not None:
            self.samples.append(duration)
        if size is not None:
            self.size = size if self.size is None else self.size + size
            if self.kind is MetricKind.MEMORY:
                self.sizes.append(size)
        if rate is not None and self.kind is MetricKind.MEMORY:
            self.rates.append(rate)
        for what, value in launch:
            seen = self.launch.setdefault(what, {})
            if len(seen) < _MAX_DISTINCT:
                seen[value] = None

    def metric(self) -> Metric:
        samples = self.samples
        total = math.fsum(samples) if samples else None
        metric = Metric(
            self.kind,
            self.name,
            Device.CPU if self.kind is MetricKind.API else Device.GPU,
            calls=self.rows,
            total_ns=total,
            avg_ns=None if total is None else total / len(samples),
            min_ns=min(samples) if samples else None,
            max_ns=max(samples) if samples else None,
            bytes=self.size,
            samples_ns=list(samples) if samples else None,
        )
        for what, values in self.launch.items():
            metric.attrs[what] = list(values)
        if len(samples) != self.rows:
            metric.attrs["rows_without_duration"] = self.rows - len(samples)
        return metric

    def counters(self) -> list[Metric]:
        """A copy's ``size`` (bytes) and ``throughput`` (bytes/s, higher is better) per row,
        as counters scoped by the copy's name: what each copy moved and how fast."""
        found = []
        for name, values, unit, better in (
            ("size", self.sizes, "bytes", Better.LOWER),
            ("throughput", self.rates, "bytes/s", Better.HIGHER),
        ):
            if values:
                found.append(
                    Metric(
                        MetricKind.COUNTER,
                        name,
                        Device.GPU,
                        calls=len(values),
                        scope=self.name,
                        unit=unit,
                        better=better,
                        value=math.fsum(values) / len(values),
                        samples=list(values),
                    )
                )
        return found


def parse_rate(cell: str, *, unit: str | None = None) -> float | None:
    """A throughput in bytes/s from ``1.4426GB/s`` or a bare number in ``unit`` (``GB/s``);
    nvprof's KB/MB/GB are 1024-based, as its sizes. ``None`` for ``-`` and empty cells."""
    text = cell.strip()
    return parse_size(text.removesuffix("/s"), unit=unit.removesuffix("/s") if unit else None)


def classify(name: str, device: str | None) -> tuple[MetricKind, str, str]:
    """The kind, the name as the summary prints it, and the group of a trace row.

    ``device`` is the row's Device cell, ``None`` in a table without that column (API trace).
    """
    if device is None:
        return MetricKind.API, name, API_TRACE
    if name.startswith(_UNIFIED):
        return MetricKind.MEMORY, name, UM_TRACE
    if name.startswith("[CUDA "):
        return MetricKind.MEMORY, name, GPU_TRACE
    if not device:
        return MetricKind.API, name, API_TRACE
    name = _CORRELATION.sub("", name)
    return (
        (MetricKind.COMM if name.startswith(NCCL_PREFIXES) else MetricKind.KERNEL),
        name,
        GPU_TRACE,
    )


def trace_metrics(
    traces: dict[tuple[MetricKind, str], TraceSeries],
    *,
    covered: set[str],
    taken: set[tuple[MetricKind, str]],
) -> tuple[list[Metric], list[str]]:
    """The metrics of ``traces`` in file order, and warnings for the rows left out.

    ``covered``: the groups a summary table of the same result already gives; ``taken``: the
    (kind, name) of metrics other tables already made (a trace must not add a second series).
    """
    metrics: list[Metric] = []
    left: dict[tuple[str, bool], list[TraceSeries]] = {}
    for key, series in traces.items():
        summarised = series.group in covered
        if summarised or key in taken:
            left.setdefault((series.group, summarised), []).append(series)
        else:
            metrics.append(series.metric())
            metrics.extend(series.counters())
    return metrics, [
        _left_out(group, summarised, rows) for (group, summarised), rows in left.items()
    ]


def _left_out(group: str, summarised: bool, series: list[TraceSeries]) -> str:
    rows = sum(s.rows for s in series)
    lines = ", ".join(str(line) for line in sorted({s.table for s in series}))
    where = f"(table at line {lines})"
    if summarised:
        return (
            f"{rows} rows of the {group} {where} were not read: the summary of the same "
            "result already counts these calls, and perfci counts each call once"
        )
    first = series[0].name
    return (
        f"{rows} rows of the {group} {where} for {len(series)} name(s) that another table of "
        f"the same result already gives (first: {first[:80]!r}) were not read"
    )
