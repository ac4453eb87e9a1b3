"""PyTorch profiler ``key_averages().table()`` text (FORMATS.md a; seed 000).

A table is a dashed separator line, a header row whose first cell is ``Name``, the same
separator, the rows, the separator again, then optional footers (``Self CPU time total: ...``).
Column positions come from the dash runs of the separator, never from splitting on spaces:
names hold spaces and commas. Header cells may be wider than their column (``CUDA time avg``
is 13 characters in a 12-wide column), so the header alone is split on runs of 2+ spaces.
The device columns are read generically (``Self XPU``, ``NPU total`` ...), as are the legacy
torch <= 1.7 headers (left-aligned, ``Self CPU total``, ``Number of Calls``).

What becomes which metric:

* each row gives a CPU metric (``Self CPU`` → ``self_ns``, ``CPU total`` → ``total_ns``,
  ``CPU time avg`` → ``avg_ns``, calls) and, in tables with device columns, a GPU metric from
  the device columns. A side whose times and memory are all zero is left out when the other
  side has data (kernels have no CPU time, CUDA API calls no device time), so every row gives
  at least one metric. Memory columns go to ``attrs`` (``mem_bytes``, ``self_mem_bytes``), as
  do FLOPs, input shapes, node id, overload name and the stack of ``Source Location`` rows;
* the kind comes from the name (``_kind_of``); unknown names are ``record_function`` ranges,
  except in legacy tables where unprefixed names (``to``, ``matmul``) are operators;
* numbered step ranges (``train_step-0``, ``ProfilerStep#3``) become ``step`` metrics through
  ``_steps.collect_steps`` (one from CPU totals, one from device totals when present), and the
  merged ``ProfilerStep*`` row becomes a step metric with its call count.

Names are not unique within a table: names cut to 52 characters + ``...`` collide, as do rows
grouped by input shape or stack, legacy per-call rows, and the GPU projection of a
``record_function`` range. Rows are kept apart, never merged: on a collision the input shapes
(or ``@ first stack frame``) are appended where they tell the rows apart, then `` (2)``,
`` (3)`` ... in table order; ``attrs["table_name"]`` keeps the printed name, ``attrs["row"]``
the row's position and ``attrs["truncated"]`` marks cut names.

Each table is its own profile (logs print the same table per step or per rank), labelled by
its heading (``Top operators by CUDA time:``, the ``header=`` text after a ``=`` rule) or
``key_averages``, with `` (2)`` ... for repeats. Lines inside a table that do not fit its
columns (interleaved log lines) are skipped with a warning; a file that ends inside a table
keeps its complete rows and says so in ``Profile.warnings``.

The file is streamed line by line and a table becomes its profile as soon as it ends. Per row
the work is a few precomputed slices: each distinct cell text is parsed once (by
``perfci.units``), layouts are built once per distinct header, and the cyclic garbage collector
is paused while reading, which keeps a 100 MB log above 30 MB/s.
"""

from __future__ import annotations

import gc
import gzip
import re
import zlib
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from perfci.errors import ParseError
from perfci.formats._steps import collect_steps, step_number
from perfci.model import Device, Metric, MetricKind, Profile
from perfci.units import parse_duration, parse_int, parse_number, parse_size

if TYPE_CHECKING:
    from perfci.formats.registry import Head

NAME = "pytorch_table"
DESCRIPTION = "PyTorch profiler key_averages().table() text (torch >= 1.8 and legacy <= 1.7)"

_SEPARATOR = re.compile(r"^(?P<prefix>[ \t]*(?:#+ ?)?)(?P<sep>-{3,}(?: {2}-{3,})*) *$")
_SNIFF = re.compile(r"(?m)^[ \t]*(?:#+ ?)?-{3,}(?: {2}-{3,})+ *\r?\n"
                    r"[ \t]*(?:#+ ?)?[ \t]*Name {2,}[^\n]*(?:CPU|Calls)")
_FOOTER = re.compile(r"^(Self )?(\S+) time total: *(\S*)")
_HEADER_SPLIT = re.compile(r" {2,}")
_RULE = re.compile(r"^=+$")
_LEGACY_CAVEAT = re.compile(r"autograd profiler uses the CUDA event API|CUDA time column "
                            r"reports|Please ignore this output")
_STEP_WILDCARD = re.compile(r"^(?P<stem>.*(?:step|Step|STEP|iter|Iter|ITER))\*$")
_LABEL = "key_averages"
_STEP = MetricKind.STEP
_K = TypeVar("_K")
_V = TypeVar("_V")
_CACHE_LIMIT = 200_000  # distinct cell texts kept per parse; bounds memory on huge logs

# (header pattern, role). The device-qualified patterns capture the device name.
_COLUMN_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), role) for pattern, role in (
        (r"Name", "name"),
        (r"Overload Name", "overload"),
        (r"(?:Self )?(\S+)(?: total)? %", "percent"),
        (r"Self (\S+) Mem", "self_mem"),
        (r"(\S+) Mem", "mem"),
        (r"Self (\S+)(?: total)?", "self"),
        (r"(\S+) total", "total"),
        (r"(\S+) time avg", "avg"),
        (r"# of Calls|Number of Calls", "calls"),
        (r"Node ID", "node_id"),
        (r"Input Shapes", "shapes"),
        (r"Source Location", "stack"),
        (r"Total ([KMGTP]?)FLOPs", "flops"),
    )
)
_FLOPS_SCALE = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15}
_TIME_ROLES = ("self", "total", "avg")
_ATTR_ROLES = frozenset({"flops", "node_id", "shapes", "overload", "stack", "extra"})
_MEM_ROLES = ("mem", "self_mem")
# Cells that must hold a value in every data row (text columns may be empty or cut).
_REQUIRED = frozenset({"name", "percent", "self", "total", "avg", "mem", "self_mem", "calls",
                       "node_id", "flops"})

# Name → kind, first match wins. Order matters: ``cudaMemcpyAsync`` is an API call, ``Memcpy
# HtoD`` a copy on the GPU; ``ncclDevKernel_*`` is communication although it is a kernel.
_KIND_RULES: tuple[tuple[re.Pattern[str], MetricKind], ...] = tuple(
    (re.compile(pattern), kind) for pattern, kind in (
        (r"^(?:Memcpy|Memset)\b|^\[memory\]$", MetricKind.MEMORY),
        (r"^(?:cuda|cu|hip|hsa|cudnn|cublas|cublasLt|nvrtc|cupti)[A-Z]"
         r"|^Activity Buffer Request$", MetricKind.API),
        (r"^(?:void )?(?:nccl|rccl|gloo|c10d|ucc|mpi)[:_A-Z]|^record_param_comms$",
         MetricKind.COMM),
        (r"^void |(?i:kernel|gemm)|^(?:ampere|volta|turing|hopper|sm\d+|cutlass|cudnn|triton"
         r"|nvjet|xmma|fmha|flash)_", MetricKind.KERNEL),
        (r"::|Backward", MetricKind.OP),
    )
)


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a table: its header, what it holds, and its character span."""

    header: str
    role: str
    device: str | None
    start: int
    end: int | None  # None: the last column, read to the end of the line
    scale: int = 1
    probe: bool = True  # whether a row's value sits flush against the column's edge


@dataclass(frozen=True, slots=True)
class Side:
    """The columns of one device. Absent columns read index -1: the blank cell ``_add_row``
    appends, which parses to ``None``."""

    name: str  # CPU, CUDA, XPU, NPU ...
    device: Device
    times: Callable[[list[str]], tuple[str, ...]]  # self, total, avg cells
    mems: Callable[[list[str]], tuple[str, ...]] | None  # memory, self memory cells
    label: str | None  # attrs["device_name"] for devices other than CUDA


@dataclass(slots=True)
class Layout:
    """Precomputed slicing for the rows of one table (``_layout`` builds it)."""

    prefix: str
    separator: str
    headers: list[str]
    columns: list[Column]  # the columns that are read: all but the percentages
    legacy: bool
    width: int
    cells: Callable[[str], tuple[str, ...]]
    gaps: Callable[[str], tuple[str, ...]]
    probes: Callable[[str], tuple[str, ...]]
    gap_ok: tuple[str, ...]
    sides: tuple[Side, ...]  # CPU first, then the device (if the table has device columns)
    calls: int | None  # index of the calls column
    extras: tuple[tuple[int, Column], ...]  # columns that go to attrs
    stack: int | None  # the column whose cell holds the Source Location frame
    blank_before: int | None  # a continuation row is blank up to the stack column (or all)


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
    count: int = 0  # rows read so far
    warnings: list[str] = field(default_factory=list)


def sniff(head: Head) -> bool:
    """A dashed separator followed by a ``Name  ...`` header with CPU or call columns."""
    return _SNIFF.search(head.text) is not None


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """One profile per ``key_averages()`` table in ``path``, in file order."""
    source = str(path)
    reader = _Reader(source)
    try:
        with _open(path) as handle, _no_cycle_collection():
            reader.feed(handle)
    except (OSError, EOFError, zlib.error) as exc:
        raise ParseError(f"cannot read file: {exc}", source=source, format=NAME) from exc
    if not reader.profiles:
        raise ParseError("no key_averages() table found: expected a dashed separator line, "
                         "a header row starting with 'Name', and the separator again",
                         source=source, line=1, format=NAME)
    return reader.profiles


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Pause the cyclic garbage collector while reading.

    A large log yields hundreds of thousands of metrics; each allocation burst triggers a
    collection that walks every live object, which made parsing several times slower. The
    parser creates no reference cycles, so nothing is lost by collecting afterwards.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _open(path: Path) -> TextIO:
    """The file as text lines (gunzipped when it starts with the gzip magic)."""
    with path.open("rb") as probe:
        gzipped = probe.read(2) == b"\x1f\x8b"
    if gzipped:
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return path.open(encoding="utf-8", errors="replace")


# --- reading tables -----------------------------------------------------------------------


class _Reader:
    """A line-at-a-time state machine: look for a table, read its rows, read its footer."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.profiles: list[Profile] = []
        self.labels: Counter[str] = Counter()
        self.values = _Values()
        self.layouts: dict[tuple[str, str, str], Layout] = {}
        self.recent: deque[str] = deque(maxlen=3)  # last non-blank lines, for headings
        self.pending: tuple[int, re.Match[str]] | None = None  # a separator line
        self.header: tuple[int, str] | None = None  # a header row after it
        self.table: Table | None = None

    def feed(self, lines: Iterator[str] | TextIO) -> None:
        number, line = 0, ""
        for number, line in enumerate(lines, 1):
            if self.table is not None:
                self._in_table(number, line)
            else:
                self._seek(number, line.rstrip("\r\n"))
        if self.table is not None:
            self._cut_short(number)

    def _seek(self, number: int, text: str) -> None:
        if self.header is not None and self.pending is not None:
            start, match = self.pending
            if text.rstrip() == match.group(0).rstrip():
                self._begin(start, match, self.header[1])
                return
            self.pending = self.header = None
        if self.pending is not None:
            prefix = self.pending[1].group("prefix")
            if (text.startswith(prefix) and text[len(prefix):].lstrip().startswith("Name  ")
                    and ("CPU" in text or "Calls" in text)):
                self.header = (number, text)
                return
            self.pending = None
        if "---" in text:
            separator = _SEPARATOR.match(text)
            if separator is not None:
                self.pending = (number, separator)
                return
        self._outside(text)

    def _outside(self, text: str) -> None:
        """A line outside any table: a footer of the last table, or a possible heading."""
        stripped = text.strip().lstrip("#").strip()
        if not stripped:
            return
        if "time total:" in stripped and self.profiles and not self.recent:
            footer = _FOOTER.match(stripped)
            if footer is not None:
                self._footer(footer)
                return
        self.recent.append(stripped)

    def _footer(self, match: re.Match[str]) -> None:
        last = self.profiles[-1]
        key = f"{'self_' if match.group(1) else ''}{match.group(2).lower()}_time_total"
        try:
            value = parse_duration(match.group(3))
        except ValueError:
            last.warnings.append(f"footer {match.group(0)!r}: unreadable time, kept as text")
            last.metadata[key] = match.group(3)
            return
        last.metadata[f"{key}_ns"] = value

    def _begin(self, start: int, match: re.Match[str], header: str) -> None:
        prefix = match.group("prefix")
        key = (prefix, match.group("sep"), header[len(prefix):])
        layout = self.layouts.get(key)
        if layout is None:  # logs print the same table layout over and over
            layout = self.layouts[key] = _layout(*key, source=self.source, line=start + 1)
        heading = _heading(list(self.recent))
        self.recent.clear()
        self.pending = self.header = None
        self.table = Table(layout=layout, line=start, heading=heading)

    def _finish(self, table: Table) -> None:
        """Turn a table into its profile as soon as it ends: only one table is held at a time."""
        label = table.heading or _LABEL
        self.labels[label] += 1
        if self.labels[label] > 1:
            label = f"{label} ({self.labels[label]})"
        self.profiles.append(_profile(table, label, self.source))
        self.table = None

    def _in_table(self, number: int, line: str) -> None:
        table = self.table
        assert table is not None
        layout = table.layout
        complete = line.endswith("\n")
        text = line.rstrip("\r\n")
        if layout.prefix:
            if not text.startswith(layout.prefix):
                self._foreign(table, number, text, complete)
                return
            text = text[len(layout.prefix):]
        if text[:1] == "-" and text.rstrip() == layout.separator:
            self._finish(table)
            # The same line may open the next table: a doc excerpt that left out the closing
            # separator, or tables printed back to back.
            reopened = _SEPARATOR.match(line.rstrip("\r\n"))
            self.pending = (number, reopened) if reopened else None
            return
        if len(text) < layout.width:
            text = text.ljust(layout.width)
        if layout.gaps(text) != layout.gap_ok:
            self._foreign(table, number, text, complete)
            return
        probes = layout.probes(text)
        if " " not in probes and (complete or not layout.legacy):
            try:
                _add_row(table, layout.cells(text), self.values)
            except CellError as exc:
                raise _cell_error(exc, layout, text, self.source, number) from exc
        elif not text[:layout.blank_before].strip():
            _continuation(table, layout, layout.cells(text))
        else:
            self._foreign(table, number, text, complete)

    def _foreign(self, table: Table, number: int, text: str, complete: bool) -> None:
        """A line inside a table that is not one of its rows: a log line, or a cut row."""
        shown = text.strip()
        if not shown.lstrip("#").strip():
            return
        if not complete:
            table.warnings.append(f"line {number}: the file ends inside a row of the table "
                                  f"(cut short?); the incomplete row was not read")
            return
        if shown.lstrip("# ").startswith("Self CPU time total:") or (
                "  -" in shown and _SEPARATOR.match(shown)):
            # The closing separator was left out (a doc excerpt): the table ends here.
            table.warnings.append(f"line {number}: the table started at line {table.line} "
                                  f"ends without its closing separator")
            self._finish(table)
            self._seek(number, text.rstrip())
            return
        table.warnings.append(f"line {number}: not a row of the table started at line "
                              f"{table.line} (interleaved output?), skipped: {shown[:80]!r}")

    def _cut_short(self, number: int) -> None:
        table = self.table
        assert table is not None
        table.warnings.append(f"the table started at line {table.line} has no closing "
                              f"separator: the file ends at line {number} (cut short?)")
        self._finish(table)


def _cell_error(error: CellError, layout: Layout, text: str, source: str,
                line: int) -> ParseError:
    """The ParseError for a bad cell, naming its column."""
    cells = [cell.strip() for cell in layout.cells(text)]
    header = next((c.header for c, cell in zip(layout.columns, cells, strict=True)
                   if cell == error.text), "?")
    return ParseError(f"column {header!r}: {error}", source=source, line=line, format=NAME)


def _heading(recent: list[str]) -> str | None:
    """The table's title: the ``header=`` text around a ``=`` rule, or a line ending in ``:``.

    Log lines just before a table (``step=007 loss=7.79``) must not become labels: they
    change from run to run, and labels identify series across runs.
    """
    lines = [line for line in recent if not _LEGACY_CAVEAT.search(line)]
    if not lines:
        return None
    if _RULE.match(lines[-1]):
        return lines[-2] if len(lines) > 1 and not _RULE.match(lines[-2]) else None
    if len(lines) > 1 and _RULE.match(lines[-2]):
        return lines[-1]
    if lines[-1].endswith(":") and len(lines[-1]) <= 100:
        return lines[-1].rstrip(":").strip() or None
    return None


# --- layout -------------------------------------------------------------------------------


def _layout(prefix: str, separator: str, header: str, *, source: str, line: int) -> Layout:
    """Column spans from the separator's dash runs, roles from the header's names."""
    spans = [(m.start(), m.end()) for m in re.finditer(r"-+", separator)]
    names = _HEADER_SPLIT.split(header.strip())
    if len(names) != len(spans) or names[0] != "Name":
        raise ParseError(f"header has {len(names)} column names for {len(spans)} dashed "
                         f"columns; expected one name per column, starting with 'Name'",
                         source=source, line=line, format=NAME)
    legacy = header.startswith("Name")
    columns = [_column(name, start, end if index < len(spans) - 1 else None)
               for index, (name, (start, end)) in enumerate(zip(names, spans, strict=True))]
    columns = _swap_stack_and_flops(columns)
    required = [i for i, c in enumerate(columns) if c.role in _REQUIRED and c.probe]
    # A right-aligned value ends at its column's end, a left-aligned one starts at its start:
    # a blank there means a cut or foreign line, not a row.
    probe_at = [columns[i].start if legacy else _end(columns[i], spans[i]) - 1 for i in required]
    gap_at = [end + offset for _, end in spans[:-1] for offset in (0, 1)]
    headers = [column.header for column in columns]
    columns = [column for column in columns if column.role != "percent"]  # probed, not read
    return Layout(
        prefix=prefix, separator=separator, headers=headers, columns=columns, legacy=legacy,
        width=spans[-1][1] + 2,
        cells=_getter([slice(c.start, c.end) for c in columns]),
        gaps=_getter(gap_at), probes=_getter(probe_at), gap_ok=(" ",) * len(gap_at),
        sides=_sides(columns),
        calls=next((i for i, c in enumerate(columns) if c.role == "calls"), None),
        extras=tuple((i, c) for i, c in enumerate(columns) if c.role in _ATTR_ROLES),
        stack=next((i for i, c in enumerate(columns) if c.role == "stack"), None),
        blank_before=next((c.start for c in columns if c.role == "stack"), None),
    )


def _end(column: Column, span: tuple[int, int]) -> int:
    return column.end if column.end is not None else span[1]


def _getter(items: list[Any]) -> Callable[[str], tuple[str, ...]]:
    """``itemgetter`` that always returns a tuple, even for one item."""
    if len(items) == 1:
        single = items[0]
        return lambda text: (text[single],)
    return itemgetter(*items)


def _column(header: str, start: int, end: int | None) -> Column:
    for pattern, role in _COLUMN_RULES:
        match = pattern.fullmatch(header)
        if match is None:
            continue
        if role == "flops":
            return Column(header, role, None, start, end, _FLOPS_SCALE[match.group(1)])
        device = match.group(1) if match.groups() else None
        return Column(header, role, device, start, end)
    return Column(header, "extra", None, start, end)


def _swap_stack_and_flops(columns: list[Column]) -> list[Column]:
    """torch prints the FLOPs value under ``Source Location`` and the frame under FLOPs.

    ``_build_table`` appends the headers as shapes, stack, FLOPs but the row values as shapes,
    FLOPs, stack; the columns keep the headers' widths. Reading by header would take a path
    for a number, so the two roles swap. The FLOPs value then sits left-aligned and padded
    (``{:8.3f}``), flush with neither edge, so it is not probed.
    """
    roles = [column.role for column in columns]
    if roles[-2:] != ["stack", "flops"]:
        return columns
    stack, flops = columns[-2], columns[-1]
    return [*columns[:-2],
            Column(flops.header, "flops", None, stack.start, stack.end, flops.scale, False),
            Column(stack.header, "stack", None, flops.start, flops.end)]


def _sides(columns: list[Column]) -> tuple[Side, ...]:
    roles: dict[str, dict[str, int]] = {}
    for index, column in enumerate(columns):
        if column.device is not None and column.role in (*_TIME_ROLES, *_MEM_ROLES):
            roles.setdefault(column.device, {})[column.role] = index
    sides = []
    for name, found in sorted(roles.items(), key=lambda item: item[0] != "CPU"):
        mems = [found.get(role, -1) for role in _MEM_ROLES]
        sides.append(Side(name, Device.CPU if name == "CPU" else Device.GPU,
                          itemgetter(*(found.get(role, -1) for role in _TIME_ROLES)),
                          itemgetter(*mems) if mems != [-1, -1] else None,
                          None if name in ("CPU", "CUDA") else name))
    return tuple(sides)


# --- rows ---------------------------------------------------------------------------------


class CellError(ValueError):
    """A value cell that ``perfci.units`` cannot read; ``_in_table`` adds file, line, column."""

    def __init__(self, text: str, expected: str) -> None:
        super().__init__(f"expected {expected}, got {text!r}")
        self.text = text


class _Values:
    """Cell text → number, each distinct text parsed once by ``perfci.units``.

    Tables repeat a few thousand distinct cells, so a dictionary hit replaces the regex and
    Decimal work of the units helpers on almost every cell of a large log.
    """

    def __init__(self) -> None:
        self.times: dict[str, float | None] = {"": None}
        self.sizes: dict[str, float | None] = {"": None}
        self.ints: dict[str, int | None] = {"": None}
        self.kinds: dict[tuple[str, bool], MetricKind] = {}

    def time(self, text: str) -> float | None:
        try:
            return self.times[text]
        except KeyError:
            pass
        try:
            value = parse_duration(text)
        except ValueError as exc:
            raise CellError(text, "a time like 1.234ms") from exc
        return _remember(self.times, text, value)

    def size(self, text: str) -> float | None:
        try:
            return self.sizes[text]
        except KeyError:
            pass
        try:
            value = parse_size(text)
        except ValueError as exc:
            raise CellError(text, "a size like 4.50 KB") from exc
        return _remember(self.sizes, text, value)

    def integer(self, text: str) -> int | None:
        try:
            return self.ints[text]
        except KeyError:
            pass
        try:
            value = parse_int(text)
        except ValueError as exc:
            raise CellError(text, "a whole number") from exc
        return _remember(self.ints, text, value)

    def kind(self, name: str, legacy: bool) -> MetricKind:
        """``_kind_of``, remembered: the same names recur in every table of a log."""
        key = (name, legacy)
        kind = self.kinds.get(key)
        if kind is None:
            kind = _kind_of(name, legacy=legacy)
            _remember(self.kinds, key, kind)
        return kind


def _remember(cache: dict[_K, _V], key: _K, value: _V) -> _V:
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
    cache[key] = value
    return value


def _add_row(table: Table, raw: tuple[str, ...], values: _Values) -> None:
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
    row = Row(name, kind, _side_metrics(layout, cells, values, kind, name, calls, attrs),
              attrs.get("input_shapes"))
    (table.step_rows if kind is _STEP else table.rows).append(row)


def _row_attrs(layout: Layout, cells: list[str], values: _Values) -> dict[str, Any]:
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


def _side_metrics(layout: Layout, cells: list[str], values: _Values, kind: MetricKind,
                  name: str, calls: int | None, attrs: dict[str, Any]) -> list[Metric]:
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
        metric = Metric(kind=kind, name=name, device=side.device, calls=calls, total_ns=total_ns,
                        self_ns=self_ns, avg_ns=avg_ns, attrs=extra)
        if busy:
            kept.append(metric)
        elif idle is None:
            idle = metric
    if kept:
        return kept
    if idle is not None:
        return [idle]
    return [Metric(kind=kind, name=name, device=Device.CPU, calls=calls, attrs=attrs)]


def _add_sizes(attrs: dict[str, Any], values: _Values, texts: tuple[str, ...]) -> bool:
    """Put the memory cells into ``attrs``; whether any is non-zero."""
    sizes = values.sizes
    nonzero = False
    for key, text in zip(("mem_bytes", "self_mem_bytes"), texts, strict=True):
        size = sizes[text] if text in sizes else values.size(text)
        if size is not None:
            attrs[key] = size
            nonzero = nonzero or size != 0
    return nonzero


def _continuation(table: Table, layout: Layout, cells: tuple[str, ...]) -> None:
    """A ``Source Location`` row: one more frame of the previous row's stack, or a blank."""
    if layout.stack is None:
        return
    frame = cells[layout.stack].strip()
    rows = table.rows or table.step_rows
    if frame and rows:
        for metric in rows[-1].metrics:
            metric.attrs.setdefault("stack", []).append(frame)


def _kind_of(name: str, *, legacy: bool) -> MetricKind:
    """The metric kind a row's name implies (``_KIND_RULES``, then steps, then the default)."""
    for pattern, kind in _KIND_RULES:
        if pattern.search(name):
            return kind
    if step_number(name) is not None or _STEP_WILDCARD.match(name):
        return MetricKind.STEP
    # Before torch 1.8 operators were printed without the ``aten::`` namespace.
    return MetricKind.OP if legacy else MetricKind.RANGE


# --- profiles -----------------------------------------------------------------------------


def _profile(table: Table, label: str, source: str) -> Profile:
    layout = table.layout
    _name_rows(table.rows)
    steps, count = _steps(table)
    metrics = [metric for row in table.rows for metric in row.metrics]
    devices = [side.name for side in layout.sides if side.device is Device.GPU]
    metadata: dict[str, Any] = {
        "columns": layout.headers,
        "rows": len(table.rows) + len(table.step_rows), "line": table.line,
        "legacy": layout.legacy, "device": devices[0] if devices else None,
    }
    if table.heading:
        metadata["heading"] = table.heading
    if layout.legacy and devices:
        metadata["note"] = ("legacy profiler: the device total is about max(device, CPU) time "
                            "and is not comparable with torch >= 1.8 device times")
    return Profile(label=label, format=NAME, source=source, metrics=steps + metrics,
                   steps=count, metadata=metadata, warnings=list(table.warnings))


def _name_rows(rows: list[Row]) -> None:
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


def _steps(table: Table) -> tuple[list[Metric], int | None]:
    """Step metrics from the step rows, and the number of profiled steps.

    Numbered rows give one sample each (their ``total``: the range's wall time on the CPU, or
    its time on the device); the merged ``ProfilerStep*`` row gives an aggregate per side.
    """
    numbered = [row for row in table.step_rows if not _STEP_WILDCARD.match(row.name)]
    metrics: list[Metric] = []
    for device in (Device.CPU, Device.GPU):
        pairs = [(row.name, metric.total_ns) for row in numbered for metric in row.metrics
                 if metric.device is device and metric.total_ns is not None]
        metrics += collect_steps(pairs, device=device)
    count = max((metric.calls or 0 for metric in metrics), default=0)
    for row in table.step_rows:
        wildcard = _STEP_WILDCARD.match(row.name)
        if wildcard is None:
            continue
        for side in row.metrics:
            metrics.append(Metric(kind=MetricKind.STEP, name=wildcard.group("stem"),
                                  device=side.device, calls=side.calls, total_ns=side.total_ns,
                                  self_ns=side.self_ns, avg_ns=side.avg_ns, attrs=side.attrs))
            count = max(count, side.calls or 0)
    return metrics, count or None
