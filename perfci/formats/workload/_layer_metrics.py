"""Layer tables' row model: one row per layer with forward / input-grad / weight-grad compute
and comm, turned into metrics as it is read (the readers of the layouts are ``_layer_readers``).

Two layouts share the row model:

* ASTRA-sim 1.0 / SimAI text workloads: a parallelism line (``HYBRID_TRANSFORMER
  model_parallel_NPU_group: 4 ...``), a row-count line, then whitespace-separated rows
  ``name reserved fwd_compute fwd_comm_type fwd_comm_bytes ig_compute ... wg_comm_bytes
  update_delay [per-layer parallelism]``. Tabs and runs of spaces are mixed and double tabs
  leave empty fields, so rows are split on any whitespace run (names never contain spaces).
* Header-row TSV tables (``name forward_compute_time forward_comm_type ...``), as the
  ``Work_Item`` dumps of NeuSight-based workload generators write them,
  where columns are found by their header names.

Metric naming (stable, relied on by stored series): a ``layer`` metric named
``<layer>/<phase>`` for each phase with a non-zero compute time, and a ``comm`` metric with the
same name for each phase whose comm type is not ``NONE``, with ``bytes`` and
``attrs["comm_type"]``. Phases are ``forward``, ``input_grad`` and ``weight_grad`` (the TSV's
``backward`` is the input gradient). A layer name that occurs on several rows (SimAI's
``attention_layer`` per transformer layer) is indexed on every row, ``mlp_layer#3``, so rows are
never merged silently. Zero compute times are left out: they are "nothing to compute", and a
zero baseline has no relative change to report; the row count is kept in the metadata.

Rows are streamed: each becomes its metrics as it is read, so memory is the metrics (one or two
per row, the output itself) and not the rows too. Errors are still reported in the order a
read-everything-first parser gives: the first malformed row, then a short row count, then the
first bad number or comm type.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from dataclasses import MISSING as MISSING_FIELD
from dataclasses import dataclass, fields
from decimal import Decimal
from typing import Any, TypeVar

from perfci.core.model import Device, Metric, MetricKind
from perfci.core.units import MISSING, NS_PER_UNIT, to_decimal
from perfci.formats._textio import scaled_decimal
from perfci.formats.caps import budget

PHASES = ("forward", "input_grad", "weight_grad")
NO_COMM = frozenset({"NONE", "None", "none", ""})
_COMM_TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
MAX_EXPONENT = 30  # 1e30: far above any real time or size
# Compute cells that mean "nothing to compute" without being parsed (most cells of a table).
_NO_COMPUTE = frozenset({"", "0", "0.0"})
_MEMO_SIZE = 4096
_POWER_OF_TEN = {1: 0, 1_000: 3, 1_000_000: 6, 1_000_000_000: 9}

Layout = Sequence[tuple[str, int, int, int]]
# One metric of a row, less its layer name: (kind, "/phase", phase, ns, bytes, comm type).
Entry = tuple[MetricKind, str, str, float | None, float | None, str | None]
Plan = tuple[Entry, ...]
_Key = TypeVar("_Key", bound=Hashable)
_Value = TypeVar("_Value")


@dataclass(slots=True)
class LayerTable:
    """The metrics of a layer table and what was learnt about the file on the way."""

    metrics: list[Metric]
    metadata: dict[str, Any]
    rows: int
    simai: bool = False  # SimAI-only header keys, comm types, or AICB's constant delay


class TableError(ValueError):
    """A table problem at a line; the caller turns it into a ``ParseError``."""

    def __init__(self, message: str, line: int) -> None:
        self.line = line
        super().__init__(message)


# --- rows to metrics --------------------------------------------------------------------------


class LayerMetrics:
    """``layer`` and ``comm`` metrics of rows added one at a time, compute times in ``unit``.

    ``unit`` is a key of ``units.NS_PER_UNIT`` or ``cycles`` (kept 1:1 as ns). A name's first
    row is named plainly until the name comes again, and then renamed ``#1``; so names are
    those of ``_aicb.indexed_names`` over all rows without holding the rows.

    A row's cells become a ``Plan`` (its metrics less the layer name) that ``emit`` turns into
    metrics. Tables repeat the same layers, so callers pass a ``key`` (the cells that the plan
    depends on) and look rows up in ``plans`` first: a repeated row then costs one dict lookup
    and its metrics, not its conversions.
    """

    __slots__ = (
        "_bytes",
        "_counted",
        "_counts",
        "_first",
        "_ns",
        "_power",
        "error",
        "metrics",
        "plans",
        "unit",
    )

    def __init__(self, unit: str) -> None:
        self.unit = unit
        self.metrics: list[Metric] = []
        self.error: TableError | None = None  # the first bad cell, raised by ``finish``
        self.plans: dict[Hashable, Plan] = {}  # by the caller's row key; only of good rows
        self._power = _POWER_OF_TEN.get(unit_factor(unit))
        self._counts: dict[str, int] = {}
        self._first: dict[str, tuple[int, int]] = {}  # where a name's first row's metrics are
        # Compute cells already converted: rows that differ elsewhere share times and sizes.
        self._ns: dict[str, float] = {}
        self._bytes: dict[str, float] = {}  # and comm sizes
        # Each metric made counts within a service upload's caps (issue 31); the registry
        # names the file in the error.
        self._counted = budget("", "")

    def add(
        self,
        name: str,
        line: int,
        cells: Sequence[str],
        layout: Layout,
        extra: dict[str, str],
        key: Hashable = None,
    ) -> None:
        """The metrics of one row; a bad cell is kept for ``finish`` (rows are still counted).

        ``layout`` gives each phase's (compute, comm type, comm size) cell indices; ``key``,
        when given, stands for those cells in ``plans``.
        """
        plan = self.plans.get(key) if key is not None else None
        if plan is None and self.error is None:
            try:
                plan = self._plan(cells, line, layout)
            except TableError as exc:
                self.error = exc
            else:
                if key is not None:
                    _remember(self.plans, key, plan)
        self.emit(name, plan or (), extra)

    def emit(self, name: str, plan: Plan, extra: dict[str, str]) -> None:
        """The metrics of a row named ``name`` whose cells gave ``plan``.

        This runs once per row of tables with millions of rows: no call per metric.
        """
        counts = self._counts
        count = counts[name] = counts.get(name, 0) + 1
        if self.error is not None:
            return  # rows are still counted for the row-count check
        metrics = self.metrics
        start = len(metrics)
        self._counted.metric(len(plan))
        label = name if count == 1 else f"{name}#{count}"
        for kind, suffix, phase, ns, size, comm_type in plan:
            if comm_type is None:
                attrs = (
                    {"layer": name, "phase": phase, **extra}
                    if extra
                    else {"layer": name, "phase": phase}
                )
            else:
                attrs = {"layer": name, "phase": phase, **extra, "comm_type": comm_type}
            metrics.append(
                Metric(
                    kind,
                    label + suffix,
                    _GPU,
                    1,
                    ns,
                    None,
                    ns,
                    ns,
                    ns,
                    None,
                    None,
                    size,
                    None,
                    0,
                    None,
                    attrs,
                )
                if _POSITIONAL
                else Metric(
                    kind=kind,
                    name=label + suffix,
                    calls=1,
                    total_ns=ns,
                    avg_ns=ns,
                    min_ns=ns,
                    max_ns=ns,
                    bytes=size,
                    attrs=attrs,
                )
            )
        if count == 1:
            self._first[name] = (start, len(metrics))
        elif count == 2:
            self._index_first(name)

    @property
    def rows(self) -> int:
        return sum(self._counts.values())

    def finish(self) -> list[Metric]:
        if self.error is not None:
            raise self.error
        return self.metrics

    def _index_first(self, name: str) -> None:
        """``name/phase`` → ``name#1/phase``: the first row of a name that turns out to repeat."""
        start, end = self._first.pop(name)
        for metric in self.metrics[start:end]:
            metric.name = f"{name}#1{metric.name[len(name) :]}"

    def _plan(self, cells: Sequence[str], line: int, layout: Layout) -> Plan:
        """Phase by phase: a layer entry for a non-zero compute time, a comm entry for a
        communication; the first bad cell raises."""
        plan: list[Entry] = []
        memo = self._ns
        for phase, compute, comm_type, comm_size in layout:
            text = cells[compute]
            if text not in _NO_COMPUTE:
                ns = memo.get(text) or self._compute_ns(text, line, phase)
                if ns:
                    plan.append((_LAYER, f"/{phase}", phase, ns, None, None))
            if cells[comm_type] not in NO_COMM:
                comm = self._comm(line, phase, cells[comm_type], cells[comm_size])
                if comm is not None:
                    plan.append(comm)
        return tuple(plan)

    def _comm(self, line: int, phase: str, comm_type: str, comm_size: str) -> Entry | None:
        comm_type = comm_type.strip()
        if comm_type in NO_COMM:
            return None
        if not _COMM_TYPE.match(comm_type):
            raise TableError(
                f"expected a {phase} communication type (NONE, ALLREDUCE, "
                f"...), found {comm_type[:40]!r}",
                line,
            )
        size = self._bytes.get(comm_size)
        if size is None:
            size = _remember(self._bytes, comm_size, scaled_decimal(comm_size, 0))
        if size is None:
            exact = _number(comm_size, line, f"{phase} communication size")
            size = float(exact) if exact is not None else None
        return (_COMM, f"/{phase}", phase, None, size, comm_type)

    def _compute_ns(self, text: str, line: int, phase: str) -> float | None:
        value = scaled_decimal(text, self._power) if self._power is not None else None
        if value is None:
            return _compute_ns(text, self.unit, line, phase)
        if value < 0:
            raise TableError(f"expected a non-negative {phase} compute time, found {text!r}", line)
        return _remember(self._ns, text, value)


def _remember(memo: dict[_Key, _Value], key: _Key, value: _Value | None) -> _Value | None:
    if value is not None:
        if len(memo) >= _MEMO_SIZE:
            memo.clear()  # a table of all-different rows or numbers: keep memory bounded
        memo[key] = value
    return value


# Positional arguments build a Metric faster than keywords, and building metrics is a large
# share of a big table's parse; taken only while the model's first fields are in the order
# written here (later fields keep their defaults: a time, lower is better).
_METRIC_FIELDS = (
    ("kind", MISSING_FIELD),
    ("name", MISSING_FIELD),
    ("device", Device.GPU),
    ("calls", None),
    ("total_ns", None),
    ("self_ns", None),
    ("avg_ns", None),
    ("min_ns", None),
    ("max_ns", None),
    ("std_ns", None),
    ("median_ns", None),
    ("bytes", None),
    ("samples_ns", None),
    ("warmup", 0),
    ("scope", None),
    ("attrs", MISSING_FIELD),
)
_POSITIONAL = (
    tuple((f.name, f.default) for f in fields(Metric))[: len(_METRIC_FIELDS)] == _METRIC_FIELDS
)
_LAYER, _COMM, _GPU = MetricKind.LAYER, MetricKind.COMM, Device.GPU


def _compute_ns(text: str, unit: str, line: int, phase: str) -> float | None:
    """The general (``Decimal``) path for cells that are not plain decimal literals."""
    value = _number(text, line, f"{phase} compute time")
    if value is None:
        return None
    if value < 0:
        raise TableError(f"expected a non-negative {phase} compute time, found {text!r}", line)
    return float(value * unit_factor(unit))


# --- names and numbers ------------------------------------------------------------------------


def unit_factor(unit: str) -> int:
    """ns per ``unit``; ``cycles`` count as 1 ns each (the file gives no clock rate)."""
    return 1 if unit == "cycles" else NS_PER_UNIT[unit]


def _number(text: str, line: int, what: str) -> Decimal | None:
    return number_cell(text, line, f"the {what}")


def number_cell(text: str, line: int, what: str) -> Decimal | None:
    """A table cell as a Decimal; ``None`` for placeholders (``None``, ``-``, empty).

    Magnitudes of 1e31 and above are rejected: no real time or size is that large,
    and converting them would overflow Decimal arithmetic or become an infinite float.
    """
    cleaned = text.strip()
    if cleaned in MISSING:
        return None
    try:
        value = to_decimal(cleaned, grouping="")
    except ValueError as exc:
        raise TableError(f"expected a number for {what}, found {cleaned[:40]!r}", line) from exc
    if value.adjusted() > MAX_EXPONENT:  # adjusted(): no context arithmetic, cannot overflow
        raise TableError(f"number out of range for {what}: {cleaned[:40]!r}", line)
    return value


def summary_cell(cell: str) -> tuple[str, str | None]:
    """A summary cell's value and its share of the total: ``"12.5 (3.1%)"`` → ``("12.5",
    "3.1")``; a cell without ``(…%)`` at its end is its value (stripped at the end).

    What ``^(.*?)\\s*(?:\\(([^()]*)%\\))?$`` took, found with ``str.rfind``: that pattern tried
    the rest of the cell from each of its characters (issue 31).
    """
    text = cell.removesuffix("\n")  # as ``$`` matched before a last line break
    if text.endswith("%)"):
        opening = text.rfind("(")
        if opening >= 0 and text.find(")", opening) == len(text) - 1:
            return text[:opening].rstrip(), text[opening + 1 : -2]
    return cell.rstrip(), None
