"""Layer tables: one row per layer with forward / input-grad / weight-grad compute and comm.

Two layouts share the row model (FORMATS.md f1, f2):

* ASTRA-sim 1.0 / SimAI text workloads: a parallelism line (``HYBRID_TRANSFORMER
  model_parallel_NPU_group: 4 ...``), a row-count line, then whitespace-separated rows
  ``name reserved fwd_compute fwd_comm_type fwd_comm_bytes ig_compute ... wg_comm_bytes
  update_delay [per-layer parallelism]``. Tabs and runs of spaces are mixed and double tabs
  leave empty fields, so rows are split on any whitespace run (names never contain spaces).
* The header-row TSV of seed 002 (``name forward_compute_time forward_comm_type ...``),
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
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import MISSING as MISSING_FIELD
from dataclasses import dataclass, field, fields
from decimal import Decimal
from typing import Any, TypeVar

from perfci.formats._textio import scaled_decimal
from perfci.model import Device, Metric, MetricKind
from perfci.units import MISSING, NS_PER_UNIT, to_decimal

PHASES = ("forward", "input_grad", "weight_grad")
NO_COMM = frozenset({"NONE", "None", "none", ""})
PARALLELISM = re.compile(r"^(DATA|MODEL|MICRO|HYBRID_[A-Z_]+)$")
_COUNT = re.compile(r"[0-9]{1,9}")  # ASCII only: str.isdigit() accepts "²", int() does not
_INTEGER = re.compile(r"-?[0-9]{1,18}")
_COMM_TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_SIMAI_KEYS = frozenset({"ep", "pp", "vpp", "ga", "all_gpus", "pp_comm"})
_SIMAI_COMM = re.compile(r"^(BROADCAST|.*_EP)$")
# AICB's Work_Item writes process_time=100 on every row; ASTRA-sim's own files use 5-16.
_AICB_PROCESS_TIME = Decimal(100)
MAX_EXPONENT = 30  # 1e30: far above any real time or size
# Header-row TSV column names: phase prefix and field, e.g. forward_compute_time, dp_comm.
_TSV_COLUMN = re.compile(
    r"^(?P<phase>forward|fwd|fwd_pass|backward|bwd|input_grad|ig|weight_grad|wg|dp)_"
    r"(?P<field>compute_time|comm_type|comm_size|comm)$")
_TSV_PHASE = {"forward": "forward", "fwd": "forward", "fwd_pass": "forward",
              "backward": "input_grad", "bwd": "input_grad", "input_grad": "input_grad",
              "ig": "input_grad", "weight_grad": "weight_grad", "wg": "weight_grad",
              "dp": "weight_grad"}
_TSV_FIELD = {"compute_time": "compute", "comm_type": "comm_type", "comm": "comm_type",
              "comm_size": "comm_size"}
_TSV_NAME = frozenset({"name", "layer", "layer_name"})
_TSV_DELAY = frozenset({"process_time", "update_time", "wg_update_time",
                        "delay_after_collectives"})
# Any whitespace but the tab: a TSV line without it has no cell that needs strip().
_NEEDS_STRIP = re.compile(r"[^\S\t]")
# Compute cells that mean "nothing to compute" without being parsed (most cells of a table).
_NO_COMPUTE = frozenset({"", "0", "0.0"})
_MEMO_SIZE = 4096
_NO_EXTRA: dict[str, str] = {}  # the attributes a TSV row adds (read, never written)
_POWER_OF_TEN = {1: 0, 1_000: 3, 1_000_000: 6, 1_000_000_000: 9}
# (phase, compute, comm type, comm size) cell indices of an ASTRA-sim row.
_ASTRASIM_LAYOUT = tuple((phase, 2 + 3 * i, 3 + 3 * i, 4 + 3 * i)
                         for i, phase in enumerate(PHASES))

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

    __slots__ = ("_bytes", "_counts", "_first", "_ns", "_power", "error", "metrics", "plans",
                 "unit")

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

    def add(self, name: str, line: int, cells: Sequence[str], layout: Layout,
            extra: dict[str, str], key: Hashable = None) -> None:
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
        label = name if count == 1 else f"{name}#{count}"
        for kind, suffix, phase, ns, size, comm_type in plan:
            if comm_type is None:
                attrs = {"layer": name, "phase": phase, **extra} if extra \
                    else {"layer": name, "phase": phase}
            else:
                attrs = {"layer": name, "phase": phase, **extra, "comm_type": comm_type}
            metrics.append(
                Metric(kind, label + suffix, _GPU, 1, ns, None, ns, ns, ns, None, None, size,
                       None, 0, None, attrs) if _POSITIONAL
                else Metric(kind=kind, name=label + suffix, calls=1, total_ns=ns, avg_ns=ns,
                            min_ns=ns, max_ns=ns, bytes=size, attrs=attrs))
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
            metric.name = f"{name}#1{metric.name[len(name):]}"

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
            raise TableError(f"expected a {phase} communication type (NONE, ALLREDUCE, "
                             f"...), found {comm_type[:40]!r}", line)
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
            raise TableError(f"expected a non-negative {phase} compute time, found {text!r}",
                             line)
        return _remember(self._ns, text, value)


def _remember(memo: dict[_Key, _Value], key: _Key, value: _Value | None) -> _Value | None:
    if value is not None:
        if len(memo) >= _MEMO_SIZE:
            memo.clear()  # a table of all-different rows or numbers: keep memory bounded
        memo[key] = value
    return value


# Positional arguments build a Metric in half the time of keywords, which is a third of the
# parse of a big table; taken only while the model's fields are in the order written above.
_METRIC_FIELDS = (("kind", MISSING_FIELD), ("name", MISSING_FIELD), ("device", Device.GPU),
                  ("calls", None), ("total_ns", None), ("self_ns", None), ("avg_ns", None),
                  ("min_ns", None), ("max_ns", None), ("std_ns", None), ("median_ns", None),
                  ("bytes", None), ("samples_ns", None), ("warmup", 0), ("scope", None),
                  ("attrs", MISSING_FIELD))
_POSITIONAL = tuple((f.name, f.default) for f in fields(Metric)) == _METRIC_FIELDS
_LAYER, _COMM, _GPU = MetricKind.LAYER, MetricKind.COMM, Device.GPU


def _compute_ns(text: str, unit: str, line: int, phase: str) -> float | None:
    """The general (``Decimal``) path for cells that are not plain decimal literals."""
    value = _number(text, line, f"{phase} compute time")
    if value is None:
        return None
    if value < 0:
        raise TableError(f"expected a non-negative {phase} compute time, found {text!r}", line)
    return float(value * unit_factor(unit))


def _nonblank(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """(1-based line number, text) of the lines with something besides whitespace."""
    return _nonblank_numbered(enumerate(lines, start=1))


def _nonblank_numbered(numbered: Iterable[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    return ((number, text) for number, text in numbered if text and not text.isspace())


# --- ASTRA-sim / SimAI text workloads ---------------------------------------------------------


@dataclass(slots=True)
class _Markers:
    """What tells a SimAI file from an ASTRA-sim one, gathered row by row."""

    comm_types: set[str] = field(default_factory=set)
    simai_comm: bool = False
    aicb_delays: bool = True  # every update_delay so far is AICB's 100

    def add(self, cells: list[str]) -> None:
        for index in (3, 6, 9):
            kind = cells[index]
            if kind not in self.comm_types:
                self.comm_types.add(kind)
                self.simai_comm = self.simai_comm or bool(_SIMAI_COMM.match(kind))
        delay = cells[11]
        if self.aicb_delays and delay != "100":
            self.aicb_delays = _is_number(delay) and to_decimal(delay) == _AICB_PROCESS_TIME


def read_astrasim(lines: Iterable[str], *, unit: str) -> LayerTable:
    """Parallelism line, row-count line, then rows; ``lines`` are the file's lines.

    ``unit`` converts the compute times; the caller decides from ``simai`` which unit the
    file is in only for the metadata (both dialects' default units are 1 ns per number).
    """
    counted = _Counted(lines)
    numbered = _nonblank(counted)
    head, count = next(numbered, None), next(numbered, None)
    if head is None or count is None:
        raise TableError("expected a parallelism line and a layer-count line",
                         counted.count or 1)
    tokens = head[1].split()
    if not PARALLELISM.match(tokens[0]):
        raise TableError(f"expected a parallelism keyword (DATA, HYBRID_..., MICRO), "
                         f"found {tokens[0][:40]!r}", head[0])
    declared = _row_count(count[1], count[0])
    sink, markers, last = LayerMetrics(unit), _Markers(), count[0]
    for last, text in numbered:
        cells = _astrasim_cells(text, last)
        markers.add(cells)
        extra = {"parallelism": cells[12]} if len(cells) == 13 else _NO_EXTRA
        # The plan key: the cells that _ASTRASIM_LAYOUT reads.
        sink.add(cells[0], last, cells, _ASTRASIM_LAYOUT, extra, tuple(cells[2:11]))
    rows = sink.rows
    if rows < declared:
        raise TableError(f"line {count[0]} declares {declared} layers but only "
                         f"{rows} rows follow (file cut short?)", last)
    header = header_params(tokens[1:])
    simai = bool(_SIMAI_KEYS & set(header)) or markers.simai_comm \
        or (rows > 0 and markers.aicb_delays)
    metadata = {"parallelism": tokens[0], "header": header, "declared_layers": declared}
    return LayerTable(metrics=sink.finish(), metadata=metadata, rows=rows, simai=simai)


class _Counted:
    """An iterable of lines that counts what it has given."""

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = lines
        self.count = 0

    def __iter__(self) -> Iterator[str]:
        for line in self._lines:
            self.count += 1
            yield line


def _row_count(text: str, line: int) -> int:
    first = text.split()[0]
    if not _COUNT.fullmatch(first):
        raise TableError(f"expected the number of layers, found {first[:40]!r}", line)
    return int(first)


def _astrasim_cells(text: str, line: int) -> list[str]:
    """``name reserved (compute type bytes) x3 update_delay [parallelism]``."""
    cells = text.split()
    if len(cells) not in (12, 13):
        raise TableError(f"expected 12 fields (13 with per-layer parallelism), "
                         f"found {len(cells)}", line)
    return cells


def header_params(tokens: list[str]) -> dict[str, Any]:
    """``model_parallel_NPU_group: 4 checkpoints: 2 2 11 pp_comm 50331648`` as a dict.

    A key is a token ending in ``:`` or any non-numeric token (SimAI writes ``pp_comm``
    without a colon); the numbers after it are its value (a list when several).
    """
    params: dict[str, list[str]] = {}
    key = "_"
    for token in tokens:
        if _is_number(token):
            params.setdefault(key, []).append(token)
            continue
        name, _, glued = token.partition(":")
        key = name or key
        params.setdefault(key, [])
        if glued:
            params[key].append(glued)  # "ep:16" written without a space
    numbers = {k: [int(x) if _INTEGER.fullmatch(x) else x for x in v]
               for k, v in params.items()}
    return {k: (v[0] if len(v) == 1 else v) for k, v in numbers.items()}


def _is_number(token: str) -> bool:
    try:
        to_decimal(token)
    except ValueError:
        return False
    return True


# --- header-row TSV ---------------------------------------------------------------------------


def read_tsv(lines: Iterable[str], *, unit: str) -> LayerTable:
    """A tab-separated table whose first line names the columns."""
    numbered = enumerate(lines, start=1)
    first = next(_nonblank_numbered(numbered), None)
    if first is None:
        raise TableError("expected a header with a 'name' column and *_compute_time columns",
                         1)
    columns = [cell.strip() for cell in first[1].split("\t")]
    roles = _tsv_roles(columns, first[0])
    # A column the table lacks reads the empty cell that _tsv_cells appends after the last.
    empty = len(columns)
    layout = [(phase, roles.get(f"{phase}.compute", empty),
               roles.get(f"{phase}.comm_type", empty), roles.get(f"{phase}.comm_size", empty))
              for phase in PHASES]
    sink = LayerMetrics(unit)
    plans = sink.plans
    name_index = roles["name"]
    name_first = name_index == 0
    width = len(columns)
    for number, text in numbered:
        # Plans are kept by the text after the name (when the name comes first) of rows that
        # needed no strip(): a row that repeats one of them with a name that needs none either
        # is that row's cells again, so it skips the split and the conversions.
        name, _, rest = text.partition("\t")
        plan = plans.get(rest)
        if plan is not None and name and not name[0].isspace() and not name[-1].isspace():
            sink.emit(name, plan, _NO_EXTRA)
            continue
        cells = text.split("\t")
        key = None
        if len(cells) == width and cells[name_index] and text.isascii() and " " not in text \
                and "\x1f" not in text:
            cells.append("")  # the common row (not blank: it has a name), without the checks
            key = rest if name_first else None
        elif not text or text.isspace():
            continue
        else:
            cells = _tsv_cells(text, number, width)
        name = cells[name_index]
        if not name:
            raise TableError("expected a layer name in the 'name' column", number)
        sink.add(name, number, cells, layout, _NO_EXTRA, key)
    return LayerTable(metrics=sink.finish(), metadata={"columns": columns}, rows=sink.rows)


def _tsv_roles(columns: list[str], line: int) -> dict[str, int]:
    """Column index by role: ``name``, ``delay``, and ``<phase>.<field>``."""
    roles: dict[str, int] = {}
    for index, column in enumerate(columns):
        match = _TSV_COLUMN.match(column)
        if column in _TSV_NAME:
            roles["name"] = index
        elif column in _TSV_DELAY:
            roles["delay"] = index
        elif match:
            role = f"{_TSV_PHASE[match['phase']]}.{_TSV_FIELD[match['field']]}"
            roles[role] = index
    if "name" not in roles or not any(r.endswith(".compute") for r in roles):
        raise TableError("expected a header with a 'name' column and *_compute_time columns",
                         line)
    return roles


def _tsv_cells(text: str, line: int, width: int) -> list[str]:
    """The cells of a line (from ``splitlines``, so its only ASCII blanks are tab, space and
    \\x1f), stripped, with an empty cell appended for the columns the table lacks."""
    cells = text.split("\t")
    if " " in text or "\x1f" in text or (not text.isascii() and _NEEDS_STRIP.search(text)):
        cells = [cell.strip() for cell in cells]
    while len(cells) > width and cells[-1] == "":
        cells.pop()  # trailing tabs
    if len(cells) != width:
        raise TableError(f"expected {width} tab-separated fields, found {len(cells)}", line)
    cells.append("")
    return cells


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
        raise TableError(f"expected a number for {what}, found {cleaned[:40]!r}",
                         line) from exc
    if value.adjusted() > MAX_EXPONENT:  # adjusted(): no context arithmetic, cannot overflow
        raise TableError(f"number out of range for {what}: {cleaned[:40]!r}", line)
    return value
