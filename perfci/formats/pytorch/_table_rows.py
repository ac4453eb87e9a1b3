"""The rows of a PyTorch ``key_averages()`` table: cells to metrics, and their kinds.

Each row gives a CPU metric and, in tables with device columns, a GPU metric; a side whose
times and memory are all zero is left out when the other side has data. Each distinct cell
text is parsed once (by ``perfci.core.units``) and remembered, since tables repeat a few thousand
distinct cells. What a table gives when it ends (distinct names, steps, memory counters) is
``_table_finish``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from perfci.core.model import Device, Metric, MetricKind
from perfci.core.units import parse_duration, parse_int, parse_number, parse_size
from perfci.formats._fixed_width import Layout
from perfci.formats._steps import step_number
from perfci.formats.caps import Budget

STEP_WILDCARD = re.compile(r"^(?P<stem>.*(?:step|Step|STEP|iter|Iter|ITER))\*$")
_STEP = MetricKind.STEP
_K = TypeVar("_K")
_V = TypeVar("_V")
_CACHE_LIMIT = 200_000  # distinct cell texts kept per parse; bounds memory on huge logs

# Name → kind, first match wins. Order matters: ``cudaMemcpyAsync`` is an API call, ``Memcpy
# HtoD`` a copy on the GPU; ``ncclDevKernel_*`` is communication although it is a kernel.
_KIND_RULES: tuple[tuple[re.Pattern[str], MetricKind], ...] = tuple(
    (re.compile(pattern), kind)
    for pattern, kind in (
        (r"^(?:Memcpy|Memset)\b|^\[memory\]$", MetricKind.MEMORY),
        (
            r"^(?:cuda|cu|hip|hsa|cudnn|cublas|cublasLt|nvrtc|cupti)[A-Z]"
            r"|^Activity Buffer Request$",
            MetricKind.API,
        ),
        (
            r"^(?:void )?(?:nccl|rccl|gloo|c10d|ucc|mpi)[:_A-Z]|^record_param_comms$",
            MetricKind.COMM,
        ),
        (
            r"^void |(?i:kernel|gemm)|^(?:ampere|volta|turing|hopper|sm\d+|cutlass|cudnn|triton"
            r"|nvjet|xmma|fmha|flash)_",
            MetricKind.KERNEL,
        ),
        (r"::|Backward", MetricKind.OP),
    )
)


@dataclass(slots=True)
class Row:
    """One data row: its name and kind, its metrics (one per side), its input shapes."""

    name: str
    kind: MetricKind
    metrics: list[Metric]
    shapes: str | None = None


@dataclass(slots=True)
class Table:
    layout: Layout
    line: int
    heading: str | None
    rows: list[Row] = field(default_factory=list)
    step_rows: list[Row] = field(default_factory=list)
    last: Row | None = None  # the row read last, step row or not: its stack grows
    count: int = 0  # rows read so far
    warnings: list[str] = field(default_factory=list)


class CellError(ValueError):
    """A value cell that ``perfci.core.units`` cannot read; the reader adds file, line, column."""

    def __init__(self, text: str, expected: str) -> None:
        super().__init__(f"expected {expected}, got {text!r}")
        self.text = text


class Values:
    """Cell text → number, each distinct text parsed once by ``perfci.core.units``.

    Tables repeat a few thousand distinct cells, so a dictionary hit replaces the regex and
    Decimal work of the units helpers on almost every cell of a large log.
    """

    def __init__(self) -> None:
        self.times: dict[str, float | None] = {"": None}
        self.sizes: dict[str, float | None] = {"": None}
        self.ints: dict[str, int | None] = {"": None}
        self.kinds: dict[tuple[str, bool], MetricKind] = {}

    def time(self, text: str) -> float | None:
        return _parsed(self.times, text, parse_duration, "a time like 1.234ms")

    def size(self, text: str) -> float | None:
        return _parsed(self.sizes, text, parse_size, "a size like 4.50 KB")

    def integer(self, text: str) -> int | None:
        return _parsed(self.ints, text, parse_int, "a whole number")

    def kind(self, name: str, legacy: bool) -> MetricKind:
        """``kind_of``, remembered: the same names recur in every table of a log."""
        key = (name, legacy)
        kind = self.kinds.get(key)
        if kind is None:
            kind = kind_of(name, legacy=legacy)
            _remember(self.kinds, key, kind)
        return kind


def _parsed(cache: dict[str, _V], text: str, parse: Callable[[str], _V], expected: str) -> _V:
    """``parse(text)``, remembered in ``cache``; a ``CellError`` naming ``expected`` if bad."""
    try:
        return cache[text]
    except KeyError:
        pass
    try:
        value = parse(text)
    except ValueError as exc:
        raise CellError(text, expected) from exc
    return _remember(cache, text, value)


def _remember(cache: dict[_K, _V], key: _K, value: _V) -> _V:
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
    cache[key] = value
    return value


_NEGATIVE_SELF = "a negative Self time"


def add_row(table: Table, raw: tuple[str, ...], values: Values, counted: Budget) -> None:
    layout = table.layout
    cells = list(map(str.strip, raw))
    cells.append("")  # what absent columns (index -1) read
    name = cells[0]
    kind = values.kinds.get((name, layout.legacy)) or values.kind(name, layout.legacy)
    calls = None
    if layout.calls is not None:
        text = cells[layout.calls]
        calls = values.ints[text] if text in values.ints else values.integer(text)
    attrs = _row_attrs(layout, cells, values) if layout.extras else {}
    table.count += 1
    attrs["row"] = table.count
    if "overload" in attrs:
        name = f"{name}.{attrs['overload']}"
    metrics = _side_metrics(layout, cells, values, kind, name, calls, attrs)
    for metric in metrics:
        if metric.self_ns is not None and metric.self_ns < 0:
            _negative_self(table, metric, metric.self_ns)
    row = Row(name, kind, metrics, attrs.get("input_shapes"))
    if kind is not _STEP:
        counted.metric(len(metrics))
    elif table.step_rows:
        counted.sample(len(metrics))  # samples of the step metrics (see table_steps)
    (table.step_rows if kind is _STEP else table.rows).append(row)
    table.last = row


def _negative_self(table: Table, metric: Metric, self_ns: float) -> None:
    """Leave out a negative self time, saying so once per table.

    torch derives a row's self time as its total less its children's. Where the children
    overlap or ran on another thread (``with_stack=True``: a Python function "holds" the
    autograd engine's backward ops), the difference falls below zero: torch 2.13 prints
    ``-1955.860us`` for such a row. It is no measurement, and a stored negative time would have
    the whole run refused, so it is dropped; the row's total is kept.
    """
    if not any(w.startswith(_NEGATIVE_SELF) for w in table.warnings):
        table.warnings.append(
            f"{_NEGATIVE_SELF} ({metric.name!r}: {self_ns / 1e6:.3f} ms, first of "
            f"possibly several): torch subtracts the children's times, which may overlap or "
            f"run on another thread; such self times are left out, totals kept"
        )
    metric.self_ns = None


def _row_attrs(layout: Layout, cells: list[str], values: Values) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for index, column in layout.extras:
        cell = cells[index]
        role = column.role
        if role == "flops":
            number = _flops(cell)
            if number is not None:
                attrs["flops"] = number * column.scale
        elif role == "node_id":
            attrs["node_id"] = values.integer(cell)
        elif role == "shapes":
            attrs["input_shapes"] = cell
        elif role == "stack":
            attrs["stack"] = [cell] if cell else []
        elif cell:  # overload name, or a column this parser does not know
            attrs["overload" if role == "overload" else column.header] = cell
    return attrs


def _flops(text: str) -> float | None:
    try:
        return parse_number(text)
    except ValueError as exc:
        raise CellError(text, "a FLOP count or --") from exc


def _side_metrics(
    layout: Layout,
    cells: list[str],
    values: Values,
    kind: MetricKind,
    name: str,
    calls: int | None,
    attrs: dict[str, Any],
) -> list[Metric]:
    """The CPU and device metrics of one row; an all-zero side is left out if the other has data.

    This runs once per row of every table, so cached values are looked up inline and a
    metric is only built for a side that is kept.
    """
    times = values.times
    kept: list[Metric] = []
    idle: Metric | None = None  # the first all-zero side, kept if no side has data
    for side in layout.sides:
        self_text, total_text, avg_text = side.times(cells)
        self_ns = times[self_text] if self_text in times else values.time(self_text)
        total_ns = times[total_text] if total_text in times else values.time(total_text)
        avg_ns = times[avg_text] if avg_text in times else values.time(avg_text)
        busy = bool(self_ns or total_ns or avg_ns)
        if not busy and idle is not None:
            continue
        extra = attrs.copy()
        if side.mems is not None:
            busy = _add_sizes(extra, values, side.mems(cells)) or busy
        if "stack" in extra:  # continuation rows append to each metric's own list
            extra["stack"] = list(extra["stack"])
        if side.label is not None:
            extra["device_name"] = side.label
        metric = Metric(
            kind=kind,
            name=name,
            device=side.device,
            calls=calls,
            total_ns=total_ns,
            self_ns=self_ns,
            avg_ns=avg_ns,
            attrs=extra,
        )
        if busy:
            kept.append(metric)
        elif idle is None:
            idle = metric
    if kept:
        return kept
    if idle is not None:
        return [idle]
    return [Metric(kind=kind, name=name, device=Device.CPU, calls=calls, attrs=attrs)]


def _add_sizes(attrs: dict[str, Any], values: Values, texts: tuple[str, ...]) -> bool:
    """Put the memory cells into ``attrs``; whether any is non-zero."""
    sizes = values.sizes
    nonzero = False
    for key, text in zip(("mem_bytes", "self_mem_bytes"), texts, strict=True):
        size = sizes[text] if text in sizes else values.size(text)
        if size is not None:
            attrs[key] = size
            nonzero = nonzero or size != 0
    return nonzero


def continuation(table: Table, layout: Layout, cells: tuple[str, ...]) -> None:
    """A ``Source Location`` row: one more frame of the previous row's stack, or a blank."""
    if layout.stack is None:
        return
    frame = cells[layout.stack].strip()
    if frame and table.last is not None:
        for metric in table.last.metrics:
            metric.attrs.setdefault("stack", []).append(frame)


def kind_of(name: str, *, legacy: bool) -> MetricKind:
    """The metric kind a row's name implies (``_KIND_RULES``, then steps, then the default)."""
    for pattern, kind in _KIND_RULES:
        if pattern.search(name):
            return kind
    if step_number(name) is not None or STEP_WILDCARD.match(name):
        return MetricKind.STEP
    # Before torch 1.8 operators were printed without the ``aten::`` namespace.
    return MetricKind.OP if legacy else MetricKind.RANGE
