"""The rows of a PyTorch ``key_averages()`` table: cells to metrics, kinds, names and steps.

Each row gives a CPU metric and, in tables with device columns, a GPU metric; a side whose
times and memory are all zero is left out when the other side has data. Each distinct cell
text is parsed once (by ``perfci.core.units``) and remembered, since tables repeat a few thousand
distinct cells. When a table ends, colliding names are told apart (``name_rows``) and the
step rows become ``step`` metrics (``table_steps``), and the memory cells of the rows
``counter`` metrics in bytes (``memory_counters``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from perfci.core.model import Better, Device, Metric, MetricKind
from perfci.core.units import parse_duration, parse_int, parse_number, parse_size
from perfci.formats._fixed_width import Layout
from perfci.formats._steps import collect_steps, step_number
from perfci.formats.caps import Budget

_STEP_WILDCARD = re.compile(r"^(?P<stem>.*(?:step|Step|STEP|iter|Iter|ITER))\*$")
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
    if step_number(name) is not None or _STEP_WILDCARD.match(name):
        return MetricKind.STEP
    # Before torch 1.8 operators were printed without the ``aten::`` namespace.
    return MetricKind.OP if legacy else MetricKind.RANGE


def name_rows(rows: list[Row]) -> None:
    """Give colliding (kind, device, name) metrics distinct names, keeping table order.

    The input shapes (or the first stack frame) are appended only where they tell the
    colliding rows apart (legacy tables print ``[]`` for every row); what still collides is
    numbered.
    """
    for row in rows:
        if row.name.endswith("..."):
            for metric in row.metrics:
                metric.attrs["truncated"] = True
    keys = [(metric.kind, metric.device, metric.name) for row in rows for metric in row.metrics]
    if len(set(keys)) == len(keys):
        return
    clashing = {key for key, count in Counter(keys).items() if count > 1}
    details: dict[tuple[MetricKind, Device, str], set[str | None]] = {}
    for row in rows:
        for metric in row.metrics:
            key = (metric.kind, metric.device, metric.name)
            if key in clashing:
                details.setdefault(key, set()).add(_detail(row))
    seen: Counter[tuple[MetricKind, Device, str]] = Counter()
    for row in rows:
        for metric in row.metrics:
            base = name = metric.name
            if (metric.kind, metric.device, base) not in clashing:
                continue
            detail = _detail(row)
            if detail and len(details[(metric.kind, metric.device, base)]) > 1:
                name = f"{base} {detail}"
            seen[(metric.kind, metric.device, name)] += 1
            ordinal = seen[(metric.kind, metric.device, name)]
            if ordinal > 1:
                name = f"{name} ({ordinal})"
            if name != base:
                metric.attrs["table_name"] = base
                metric.name = name


def _detail(row: Row) -> str | None:
    """What tells grouped rows apart: input shapes, else the first stack frame (``@ frame``)."""
    if row.shapes:
        return row.shapes
    stack = row.metrics[0].attrs.get("stack")
    return f"@ {stack[0]}" if stack else None


# A side's device name (CPU, CUDA, XPU ...) → its memory columns' headers.
_MEMORY_HEADERS: dict[str, tuple[str, str]] = {}


def memory_counters(rows: list[Row]) -> list[Metric]:
    """One ``counter`` per non-negative memory cell: scope = the row's metric name, name = the
    column (``CUDA Mem``, ``Self CPU Mem`` ...), value in bytes, lower is better.

    A negative cell is a net free (``-540.00 MB``): a quantity perfci's store refuses and not
    an allocation to watch grow, so it gives no counter (``attrs`` still hold every cell).
    Only the kept side metrics of a row give counters, after ``name_rows``: an all-zero side
    was left out, and colliding names are already told apart. Step rows give none.
    """
    counters: list[Metric] = []
    seen: set[tuple[Device, str, str]] = set()
    counter, lower = MetricKind.COUNTER, Better.LOWER
    for row in rows:
        for metric in row.metrics:
            attrs = metric.attrs
            sizes = (attrs.get("mem_bytes"), attrs.get("self_mem_bytes"))
            if sizes == (None, None):
                continue
            side = "CPU" if metric.device is Device.CPU else attrs.get("device_name") or "CUDA"
            headers = _MEMORY_HEADERS.get(side)
            if headers is None:
                headers = _MEMORY_HEADERS[side] = (f"{side} Mem", f"Self {side} Mem")
            for size, name in zip(sizes, headers, strict=True):
                if size is None or size < 0:
                    continue
                ident = (metric.device, metric.name, name)
                if ident in seen:
                    continue
                seen.add(ident)
                counters.append(
                    Metric(
                        counter,
                        name,
                        metric.device,
                        scope=metric.name,
                        unit="bytes",
                        better=lower,
                        value=float(size),
                    )
                )
    return counters


def table_steps(table: Table) -> tuple[list[Metric], int | None]:
    """Step metrics from the step rows, and the number of profiled steps.

    Numbered rows give one sample each (their ``total``: the range's wall time on the CPU, or
    its time on the device); the merged ``ProfilerStep*`` row gives an aggregate per side.
    """
    numbered = [row for row in table.step_rows if not _STEP_WILDCARD.match(row.name)]
    metrics: list[Metric] = []
    for device in (Device.CPU, Device.GPU):
        pairs = [
            (row.name, metric.total_ns)
            for row in numbered
            for metric in row.metrics
            if metric.device is device and metric.total_ns is not None
        ]
        metrics += collect_steps(pairs, device=device)
    count = max((metric.calls or 0 for metric in metrics), default=0)
    for row in table.step_rows:
        wildcard = _STEP_WILDCARD.match(row.name)
        if wildcard is None:
            continue
        for side in row.metrics:
            metrics.append(
                Metric(
                    kind=MetricKind.STEP,
                    name=wildcard.group("stem"),
                    device=side.device,
                    calls=side.calls,
                    total_ns=side.total_ns,
                    self_ns=side.self_ns,
                    avg_ns=side.avg_ns,
                    attrs=side.attrs,
                )
            )
            count = max(count, side.calls or 0)
    return metrics, count or None
