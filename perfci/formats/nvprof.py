"""nvprof (CUDA ≤ 11 profiler) summary text and ``--csv`` output (FORMATS.md c; seed 001).

What becomes which metric:

* ``GPU activities`` rows → ``kernel``; ``[CUDA memcpy …]`` / ``[CUDA memset]`` → ``memory``;
  NCCL kernels (``ncclKernel…``, ``ncclDevKernel…``) → ``comm``. ``API calls`` rows → ``api``.
  Continuation rows (blank Type) belong to the group above them; tables printed without the
  Type column take their group from the section (``==PID== API calls:`` in old builds).
* ``NVTX result``: each ``Range "X"`` block's ``Range:`` row → a ``range`` metric ``X`` (no
  scope); the block's kernel / memory / API rows → metrics with ``scope="X"``. nvprof cuts
  names in these blocks without a marker; a cut name that is the prefix of exactly one name
  of the same kind in the summary gets that full name (``attrs["nvtx_name"]`` keeps the cut).
  Numbered step ranges (``Train step 0..N``) also become a ``step`` metric with one sample
  per step (the range's total time) and warm-up detection (``_steps.collect_steps``).
* ``Unified Memory profiling result`` rows → ``memory`` metrics ``[Unified Memory] <name>``
  with ``bytes`` = Total Size; the ``Total CPU Page faults: 17`` lines go to metadata.
* ``Metric result`` / ``Event result`` (``--metrics`` / ``--events``) carry no times: each
  kernel becomes a ``kernel`` metric with ``calls`` = invocations and the raw values in
  ``attrs["nvprof_metrics"]`` / ``attrs["nvprof_events"]``, and the profile gets a warning.
* GPU/API trace tables (``--print-gpu-trace``) are skipped with a warning naming the rows.
* ``--csv`` tables are read by column name, bare numbers in the unit of the units row under
  the header (``,%,us,,us,us,us,``); a text table's ``-u`` units line works the same way.

Every ``Profiling result:`` block is its own profile, labelled by the profiled command (plus
``#N`` when one log holds several). Lines the tables do not explain (application output,
nvprof notes) are ignored outside tables; inside a table a line that starts like a row but
cannot be read is a ``ParseError``, except the file's unterminated last line, which a cut
file leaves behind and which gives a warning instead.

The file is streamed line by line; duration cells repeat a lot, so conversions are memoised.
"""

from __future__ import annotations

import csv
import gc
import gzip
import re
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from perfci.errors import ParseError
from perfci.formats._steps import collect_steps
from perfci.model import Device, Metric, MetricKind, Profile
from perfci.units import NS_PER_UNIT, parse_duration, parse_int, parse_size

if TYPE_CHECKING:
    from perfci.formats.registry import Head

NAME = "nvprof"
DESCRIPTION = ("nvprof summary text and --csv (GPU activities, API calls, NVTX ranges, "
               "unified memory, metrics/events)")

_RESULT_WORDS = (r"(?:NVPROF is profiling process|Profiling application:|Profiling result:"
                 r"|NVTX result:|Metric result:|Event result:|Unified Memory profiling result:)")
_SNIFF = re.compile(
    rf"(?m)^(?:==\d+==|={{8}})\s*{_RESULT_WORDS}"
    r"|^\s*(?:Type\s+)?Time\(%\)\s+Time\s+Calls\s+Avg\s+Min\s+Max\s+Name\s*$"
    r'|^"Type","Time\(%\)","Time","Calls","Avg","Min","Max","Name"\r?\n,%,')
_BANNER = re.compile(r"(?:==(\d+)==|={8})\s*(.*)")
_SUMMARY_HEADER = re.compile(r"\s*(Type\s+)?Time\(%\)\s+Time\s+Calls\s+Avg\s+Min\s+Max\s+Name")
_UM_HEADER = re.compile(r"\s*Count\s+Avg Size\s+Min Size\s+Max Size\s+Total Size\s+Total Time"
                        r"\s+Name")
_METRIC_HEADER = re.compile(r"\s*Invocations\s+Metric Name\s+Metric Description\s+Min\s+Max"
                            r"\s+Avg")
_EVENT_HEADER = re.compile(r"\s*Invocations\s+Event Name\s+Min\s+Max\s+Avg\s+Total")
_TRACE_HEADER = re.compile(r"\s*Start\s+Duration\s")
_HEADERS = (_SUMMARY_HEADER, _UM_HEADER, _METRIC_HEADER, _EVENT_HEADER, _TRACE_HEADER)
_ROW = re.compile(
    r"\s*(?:([A-Za-z][A-Za-z ()]*?):)?\s*(\d+(?:\.\d+)?)%\s+(\S+)\s+(\d+)\s+(\S+)\s+(\S+)"
    r"\s+(\S+)\s+(\S.*)")
_ROW_START = re.compile(r"\s*(?:[A-Za-z][A-Za-z ()]*:)?\s*\d+(?:\.\d+)?%")
_UM_ROW = re.compile(r"\s*(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S.*)")
# Values are one token or a utilisation level with its number: ``Low (1)``, ``Idle (0)``.
_VALUE = r"([A-Za-z]+ \(\d+\)|\S+)"
_METRIC_ROW = re.compile(rf"\s*(\d+)\s+(\S+)\s+(.*?)\s+{_VALUE}\s+{_VALUE}\s+{_VALUE}")
_EVENT_ROW = re.compile(r"\s*(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)")
_COUNT_START = re.compile(r"\s*\d+\s")
_QUOTED = re.compile(r'(Thread|Domain|Range) "(.*)"(?:\s*\(id = (\d+)\))?')
_DEVICE = re.compile(r'Device "(.*)"')
_KERNEL = re.compile(r"\s*Kernel: (.*)")
_TOTAL = re.compile(r"(Total [A-Za-z ]+):\s*(\d+)")
_NCCL = ("nccl", "void nccl")
_TIME_UNITS = frozenset(NS_PER_UNIT) | {"%"}
_CSV_HEADER_FIRST = frozenset({"Type", "Time(%)", "Device", "Start", "Invocations", "Count"})

GPU = "GPU activities"
API = "API calls"
_GROUP_KINDS = {API: MetricKind.API, "Range": MetricKind.RANGE}
_SUMMARY_KINDS = (MetricKind.KERNEL, MetricKind.MEMORY, MetricKind.COMM, MetricKind.API)
# API calls (and NVTX ranges, see _add_range) are timed on the host; the rest on the GPU.
_DEVICES = {kind: Device.GPU for kind in MetricKind} | {MetricKind.API: Device.CPU}
_TIME_COLUMNS = ("Time", "Avg", "Min", "Max")


@dataclass(slots=True)
class _Table:
    """The table being read: its kind, where it started, and per-column units."""

    kind: str  # summary | um | metrics | events | skip
    line: int
    group: str | None = None  # current Type group, for continuation rows
    units: tuple[str | None, ...] | None = None  # Time, Avg, Min, Max (``-u`` units row)
    columns: dict[str, int] | None = None  # CSV tables: column name → index
    csv_units: list[str] | None = None
    expect_units: bool = True
    rows: int = 0
    what: str = ""  # skipped tables: what the warning calls their rows
    text_summary: bool = False


@dataclass(slots=True)
class _Run:
    """One ``Profiling result:`` block and what its later sections need from the summary."""

    profile: Profile
    ranges: list[tuple[str, float]] = field(default_factory=list)
    names: dict[MetricKind, set[str]] = field(
        default_factory=lambda: {kind: set() for kind in _SUMMARY_KINDS})
    resolved: dict[tuple[MetricKind, str], str] = field(default_factory=dict)
    scopes: dict[str, int] = field(default_factory=dict)
    kernels: dict[tuple[str, str], Metric] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    um_names: set[str] = field(default_factory=set)


def sniff(head: Head) -> bool:
    """An nvprof banner (``==PID== Profiling result:`` …), summary header or CSV header."""
    return _SNIFF.search(head.text) is not None


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """One profile per ``Profiling result:`` block of the log."""
    reader = _Reader(str(path))
    feed = reader.feed
    try:
        with _open(path) as handle, _gc_paused():
            for lineno, line in enumerate(handle, 1):
                feed(lineno, line)
    except (OSError, EOFError, zlib.error) as exc:
        raise ParseError(f"cannot read file: {exc}", source=str(path), format=NAME) from exc
    return reader.finish()


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic GC while parsing: a big log makes millions of acyclic objects (metrics, their
    attrs), and the repeated full collections they trigger double the parse time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _open(path: Path) -> TextIO:
    """The file as text, gunzipped when it starts with the gzip magic.

    Undecodable bytes become U+FFFD: a stray byte in application output must not lose the log.
    """
    with path.open("rb") as probe:
        gzipped = probe.read(2) == b"\x1f\x8b"
    if gzipped:
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return path.open(encoding="utf-8", errors="replace")


class _Reader:
    """A line-driven state machine over one log; ``finish`` returns its profiles."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.runs: list[_Run] = []
        self.run: _Run | None = None
        self.commands: dict[str, str] = {}  # pid → command
        self.command: str | None = None
        self.pid: str | None = None
        self.pending: list[str] = []  # nvprof warnings printed before the result they concern
        self.section = "summary"
        self.thread: str | None = None
        self.domain: str | None = None
        self.scope: str | None = None
        self.device: str | None = None
        self.kernel: Metric | None = None
        self.table: _Table | None = None
        self.cache: dict[Any, float | None] = {}
        self.cut_noted = False

    # --- dispatch --------------------------------------------------------------------------

    def feed(self, lineno: int, raw: str) -> None:
        line = raw.rstrip()
        table = self.table
        # Summary rows are nearly all of a big log: they are tried first, with least work.
        if table is not None and table.text_summary and line:
            match = _ROW.fullmatch(line)
            if match is not None:
                self._summary_row(lineno, table, match)
                if not raw.endswith("\n"):
                    self._cut_row(lineno, line)
                return
        if not line:
            self.table = None
            return
        if line.startswith("==") and (banner := _BANNER.match(line)):
            self._banner(lineno, banner.group(1), banner.group(2))
            return
        if table is not None and self._table_line(lineno, line, raw, table):
            if not raw.endswith("\n"):
                self._cut_row(lineno, line)
            return
        self._free_line(lineno, line)

    def _cut_row(self, lineno: int, line: str) -> None:
        if not self.cut_noted:
            self._warning(f"line {lineno}, the file's last line, has no line break; it was "
                          f"read but may have been cut short: {line.strip()[:80]!r}")

    def _table_line(self, lineno: int, line: str, raw: str, table: _Table) -> bool:
        """Read ``line`` as a row of ``table``; ``False`` when it ends the table."""
        if table.columns is not None:
            return self._csv_line(lineno, line, raw, table)
        if table.kind == "summary":  # not a row: ``feed`` tried that first
            return self._units_row(line, table) or self._not_a_row(lineno, line, raw, table,
                                                                   _ROW_START)
        if table.kind == "metrics" or table.kind == "events":
            return self._metric_line(lineno, line, raw, table)
        if table.kind == "um":
            match = _UM_ROW.fullmatch(line)
            if match is not None:
                count, avg, low, high, total, time, name = match.groups()
                self._um_row(lineno, count, [(avg, None), (low, None), (high, None),
                                             (total, None)], (time, None), name)
                return True
            return self._not_a_row(lineno, line, raw, table, _COUNT_START)
        table.rows += 1  # a skipped table: its rows are counted into a warning
        self._current(lineno).skipped[table.what] = table.rows
        return True

    def _skip(self, lineno: int, what: str) -> None:
        """Count the rows of a table perfci does not read, for a warning."""
        self.table = _Table("skip", lineno, what=what)
        self._current(lineno).skipped[what] = 0

    @staticmethod
    def _units_row(line: str, table: _Table) -> bool:
        """The units line under a ``-u/--normalized-time-unit`` header (``%  ms  ms  ms  ms``):
        from then on bare numbers in Time, Avg, Min and Max are in these units."""
        tokens = line.split()
        if not 4 <= len(tokens) <= 5 or not all(token in _TIME_UNITS for token in tokens):
            return False
        table.units = tuple(tokens[-4:])
        return True

    def _free_line(self, lineno: int, line: str) -> None:
        """A line outside any table: a header, a section line, or application output."""
        stripped = line.strip()
        if header := _SUMMARY_HEADER.match(line):
            group = None if header.group(1) else (API if self.section == "api" else GPU)
            self.table = _Table("summary", lineno, group=group, text_summary=True)
        elif line.startswith('"') and '","' in line:
            self._csv_header(lineno, line)
        elif _UM_HEADER.match(line):
            self.table = _Table("um", lineno)
        elif _METRIC_HEADER.match(line):
            self.table = _Table("metrics", lineno)
        elif _EVENT_HEADER.match(line):
            self.table = _Table("events", lineno)
        elif _TRACE_HEADER.match(line):
            self._skip(lineno, f"rows of the trace table at line {lineno} (perfci reads the "
                       "summary: run without --print-gpu-trace / --print-api-trace)")
        elif self.run is not None and _ROW.fullmatch(line):
            raise self._error(lineno, "a summary row outside a table: expected the header "
                              "'Type  Time(%)  Time  Calls  Avg  Min  Max  Name' before it")
        elif stripped == "No kernels were profiled.":
            self._current(lineno).profile.metadata["no_kernels_profiled"] = True
        elif device := _DEVICE.fullmatch(stripped):
            self.device = device.group(1)
        elif total := _TOTAL.fullmatch(stripped):
            unified = self._current(lineno).profile.metadata.setdefault("unified_memory", {})
            unified[total.group(1)] = int(total.group(2))

    # --- banners ---------------------------------------------------------------------------

    def _banner(self, lineno: int, pid: str | None, text: str) -> None:
        if text.startswith("Profiling result:"):
            self._start_run(lineno, pid)
        elif text.startswith("NVPROF is profiling process"):
            command = text.partition("command: ")[2].strip()
            self.commands[pid or ""] = command
            self.command, self.pid = command or None, pid
        elif text.startswith("Profiling application:"):
            self.command = text.partition(":")[2].strip() or None
            self.pid = pid
        elif text.startswith("Warning:"):
            self._warning(f"nvprof: {text.removeprefix('Warning:').strip()}")
        elif quoted := _QUOTED.match(text.strip()):
            self._nvtx_line(lineno, *quoted.groups())
        else:
            self._section(lineno, text.strip())

    def _section(self, lineno: int, text: str) -> None:
        sections = {"API calls:": "api", "NVTX result:": "nvtx", "Metric result:": "metrics",
                    "Event result:": "events", "Unified Memory profiling result:": "um"}
        section = sections.get(text)
        if section is None:
            return  # "Some kernel(s) will be replayed …", "Generated result file: …"
        self._current(lineno)
        self.table = None
        self.section = section
        self.thread = self.domain = self.scope = None
        self.kernel = None

    def _nvtx_line(self, lineno: int, what: str, name: str, thread_id: str | None) -> None:
        self.table = None
        if what == "Thread":
            self.thread = f"{name} ({thread_id})" if thread_id else name
            self.domain = self.scope = None
        elif what == "Domain":
            self.domain, self.scope = name, None
        else:
            run = self._current(lineno)
            seen = run.scopes.get(name, 0)
            run.scopes[name] = seen + 1
            # The same range name in another thread or domain must not merge with the first.
            self.scope = name if seen == 0 else f"{name} #{seen + 1}"

    def _start_run(self, lineno: int, pid: str | None) -> None:
        command = self.command if pid is None or self.pid == pid else None
        command = command or self.commands.get(pid or "")
        metadata: dict[str, Any] = {"command": command, "pid": int(pid) if pid else None,
                                    "line": lineno}
        profile = Profile(label=command or "nvprof", format=NAME, source=self.source,
                          metadata=metadata, warnings=self.pending)
        self.pending = []
        self.run = _Run(profile)
        self.runs.append(self.run)
        self.table = None
        self.section = "summary"
        self.thread = self.domain = self.scope = self.device = None
        self.kernel = None
        self.command = self.pid = None

    def _current(self, lineno: int) -> _Run:
        """The run being read; tables before any ``Profiling result:`` line start one."""
        if self.run is None:
            self._start_run(lineno, None)
        assert self.run is not None
        return self.run

    def _warning(self, message: str) -> None:
        # After a new "Profiling application:" line, warnings concern the result to come.
        if self.run is None or self.command is not None:
            self.pending.append(message)
        else:
            self.run.profile.warnings.append(message)

    # --- summary rows ----------------------------------------------------------------------

    def _summary_row(self, lineno: int, table: _Table, match: re.Match[str]) -> None:
        group, pct, time, calls, avg, low, high, name = match.groups()
        if group is None:
            group = table.group
            if group is None:
                raise self._error(lineno, "expected a Type (GPU activities:, API calls:) on "
                                  "the first row of a table")
        else:
            table.group = group
        cache = self.cache
        times: tuple[float | None, ...]
        if table.units is None and time in cache and avg in cache and low in cache \
                and high in cache:
            times = (cache[time], cache[avg], cache[low], cache[high])
        else:
            times = self._times(lineno, (time, avg, low, high), table.units)
        self._add_summary(lineno, group, float(pct), int(calls), name, times)

    def _times(self, lineno: int, cells: tuple[str, ...], units: tuple[str | None, ...] | None
               ) -> tuple[float | None, ...]:
        units = units or (None, None, None, None)
        return tuple(self._ns(lineno, cell, unit, column)
                     for cell, unit, column in zip(cells, units, _TIME_COLUMNS, strict=True))

    def _add_summary(self, lineno: int, group: str, pct: float, calls: int, name: str,
                     times: tuple[float | None, ...]) -> None:
        run = self.run or self._current(lineno)
        if group == GPU:
            kind = (MetricKind.MEMORY if name.startswith("[CUDA ") else MetricKind.COMM
                    if name.startswith(_NCCL) else MetricKind.KERNEL)
        else:
            found = _GROUP_KINDS.get(group)
            if found is None or found is MetricKind.RANGE:
                self._add_range(run, group, pct, calls, name, times)
                return
            kind = found
        scope = self.scope
        cut = None
        if scope is None:
            run.names[kind].add(name)
        elif name not in run.names[kind]:
            cut, name = name, self._full_name(run, kind, name)
        # Positional arguments: this runs for every row of logs that reach 100 MB.
        metric = Metric(kind, name, _DEVICES[kind], calls, times[0], None, times[1], times[2],
                        times[3])
        metric.scope = scope
        metric.attrs["time_pct"] = pct
        if cut is not None and cut != name:
            metric.attrs["nvtx_name"] = cut
        run.profile.metrics.append(metric)

    def _add_range(self, run: _Run, group: str, pct: float, calls: int, name: str,
                   times: tuple[float | None, ...]) -> None:
        """A ``Range:`` row (the NVTX block's own time), or a row of a group perfci skips."""
        if group != "Range":
            key = f"rows of type {group!r} (no matching metric kind)"
            run.skipped[key] = run.skipped.get(key, 0) + 1
            return
        name = self.scope or name
        if times[0] is not None:
            run.ranges.append((name, times[0]))
        run.profile.metrics.append(Metric(
            kind=MetricKind.RANGE, name=name, device=Device.CPU, calls=calls,
            total_ns=times[0], avg_ns=times[1], min_ns=times[2], max_ns=times[3],
            attrs={"time_pct": pct, "thread": self.thread, "domain": self.domain}))

    @staticmethod
    def _full_name(run: _Run, kind: MetricKind, name: str) -> str:
        """The summary's full name for a name nvprof cut in an NVTX block, when unambiguous."""
        key = (kind, name)
        if key not in run.resolved:
            matches = [full for full in run.names[kind] if full.startswith(name)]
            run.resolved[key] = matches[0] if len(matches) == 1 else name
        return run.resolved[key]

    def _ns(self, lineno: int, cell: str, unit: str | None, column: str) -> float | None:
        key = cell if unit is None else (cell, unit)
        try:
            return self.cache[key]
        except KeyError:
            pass
        try:
            value = parse_duration(cell, unit=unit)
        except ValueError as exc:
            raise self._error(lineno, f"expected a duration such as 4.0922ms in column "
                              f"{column}, got {cell!r} ({exc})") from exc
        self.cache[key] = value
        return value

    # --- other tables ----------------------------------------------------------------------

    def _um_row(self, lineno: int, count: str, sized: list[tuple[str, str | None]],
                timed: tuple[str, str | None], name: str) -> None:
        """A unified memory row; sizes and time are ``(cell, unit for bare numbers)``."""
        run = self._current(lineno)
        sizes = [self._bytes(lineno, cell, unit) for cell, unit in sized]
        attrs = {"avg_size": sizes[0], "min_size": sizes[1], "max_size": sizes[2],
                 "device": self.device}
        run.profile.metrics.append(Metric(
            MetricKind.MEMORY, f"[Unified Memory] {name}", calls=int(count),
            total_ns=self._ns(lineno, *timed, "Total Time"), bytes=sizes[3],
            scope=self._um_scope(run, name), attrs=attrs))

    def _um_scope(self, run: _Run, name: str) -> str | None:
        """``None``, or the device when an earlier device gave a row of this name (multi-GPU)."""
        if name not in run.um_names:
            run.um_names.add(name)
            return None
        return self.device or "device"

    def _bytes(self, lineno: int, cell: str, unit: str | None) -> float | None:
        try:
            return parse_size(cell, unit=unit)
        except ValueError as exc:
            raise self._error(lineno, f"expected a size such as 32.889KB, got {cell!r}") from exc

    def _metric_line(self, lineno: int, line: str, raw: str, table: _Table) -> bool:
        stripped = line.strip()
        if kernel := _KERNEL.fullmatch(line):
            self._start_kernel(lineno, kernel.group(1).strip())
            return True
        if device := _DEVICE.fullmatch(stripped):
            self.device = device.group(1)
            return True
        pattern = _METRIC_ROW if table.kind == "metrics" else _EVENT_ROW
        match = pattern.fullmatch(line)
        if match is None:
            return self._not_a_row(lineno, line, raw, table, _COUNT_START)
        self._add_value(lineno, table.kind, match.groups())
        return True

    def _start_kernel(self, lineno: int, name: str) -> None:
        run = self._current(lineno)
        device = self.device or ""
        key = (device, name)
        if key not in run.kernels:
            clash = any(kernel == name for _, kernel in run.kernels)
            metric = Metric(MetricKind.KERNEL, name, scope=device if clash else None,
                            attrs={"device": self.device})
            run.kernels[key] = metric
            run.profile.metrics.append(metric)
        self.kernel = run.kernels[key]

    def _add_value(self, lineno: int, kind: str, cells: tuple[str, ...]) -> None:
        kernel = self.kernel
        if kernel is None:
            raise self._error(lineno, f"expected a 'Kernel: <name>' line before the {kind} rows")
        kernel.calls = max(kernel.calls or 0, int(cells[0]))
        if kind == "metrics":
            value = {"description": cells[2], "min": cells[3], "max": cells[4], "avg": cells[5]}
        else:
            value = {"min": cells[2], "max": cells[3], "avg": cells[4], "total": cells[5]}
        kernel.attrs.setdefault(f"nvprof_{kind}", {})[cells[1]] = value

    def _not_a_row(self, lineno: int, line: str, raw: str, table: _Table,
                   row_start: re.Pattern[str]) -> bool:
        """A line a table cannot read: a cut last line, a broken row, or the table's end."""
        if not raw.endswith("\n"):
            self.cut_noted = True
            self._warning(f"line {lineno}: the file ends in the middle of a line, which was "
                          f"not read: {line.strip()[:80]!r}")
            return True
        if row_start.match(line):
            raise self._error(lineno, f"cannot read this {_TABLE_NAMES[table.kind]} row: "
                              f"{line.strip()[:120]!r}")
        self.table = None
        # Unified memory tables end at their device and page-fault lines; other tables end at
        # a blank line or a header, so other text here is worth a word.
        if table.kind != "um" and not any(h.match(line) for h in _HEADERS):
            self._warning(f"line {lineno}: text after a table was not read: "
                          f"{line.strip()[:80]!r}")
        return False

    # --- CSV -------------------------------------------------------------------------------

    def _csv_header(self, lineno: int, line: str) -> None:
        columns = {name: index for index, name in enumerate(_csv(line))}
        if {"Time(%)", "Time", "Calls", "Name"} <= columns.keys():
            kind = "summary"
        elif {"Count", "Total Size", "Total Time", "Name"} <= columns.keys():
            kind = "um"
        elif {"Kernel", "Invocations", "Metric Name", "Avg"} <= columns.keys():
            kind = "metrics"
        elif {"Kernel", "Invocations", "Event Name", "Total"} <= columns.keys():
            kind = "events"
        else:
            self._skip(lineno, f"rows of the CSV table at line {lineno} with columns "
                       f"{line[:80]}")
            return
        self.table = _Table(kind, lineno, group=GPU, columns=columns)

    def _csv_line(self, lineno: int, line: str, raw: str, table: _Table) -> bool:
        cells = _csv(line)
        if line.startswith('"') and cells and cells[0] in _CSV_HEADER_FIRST:
            return False  # the next table's header
        if table.expect_units:
            table.expect_units = False
            if not line.startswith('"') and all(c.strip() in _TIME_UNITS or c.strip() in
                                                ("", "B", "KB", "MB", "GB") for c in cells):
                table.csv_units = [c.strip() or "" for c in cells]
                return True
        if len(cells) != len(table.columns or {}):
            if not raw.endswith("\n"):
                return self._not_a_row(lineno, line, raw, table, _COUNT_START)
            raise self._error(lineno, f"expected {len(table.columns or {})} CSV cells like the "
                              f"header on line {table.line}, got {len(cells)}")
        getattr(self, f"_csv_{table.kind}")(lineno, table, cells)
        return True

    def _cell(self, table: _Table, cells: list[str], column: str) -> tuple[str, str | None]:
        """A CSV cell and its unit from the units row."""
        index = (table.columns or {}).get(column)
        if index is None:
            return "", None
        units = table.csv_units
        unit = units[index] if units and index < len(units) and units[index] else None
        return cells[index], unit

    def _csv_summary(self, lineno: int, table: _Table, cells: list[str]) -> None:
        group = self._cell(table, cells, "Type")[0].strip() or table.group or GPU
        table.group = group
        pct = self._cell(table, cells, "Time(%)")[0]
        calls = self._cell(table, cells, "Calls")[0]
        name = self._cell(table, cells, "Name")[0]
        try:
            pct_value = float(pct) if pct.strip() else 0.0
            count = parse_int(calls) or 0
        except ValueError as exc:
            raise self._error(lineno, f"expected numbers in Time(%) and Calls, got {pct!r} "
                              f"and {calls!r}") from exc
        times = tuple(self._ns(lineno, *self._cell(table, cells, column), column)
                      for column in _TIME_COLUMNS)
        self._add_summary(lineno, group, pct_value, count, name, times)

    def _csv_um(self, lineno: int, table: _Table, cells: list[str]) -> None:
        if device := self._cell(table, cells, "Device")[0]:
            self.device = device
        count = self._cell(table, cells, "Count")[0]
        if not count.strip().isdigit():
            raise self._error(lineno, f"expected a count in column Count, got {count!r}")
        sizes = [self._cell(table, cells, c) for c in ("Avg Size", "Min Size", "Max Size",
                                                       "Total Size")]
        time, unit = self._cell(table, cells, "Total Time")
        self._um_row(lineno, count.strip(), sizes, (time, unit),
                     self._cell(table, cells, "Name")[0])

    def _csv_metrics(self, lineno: int, table: _Table, cells: list[str]) -> None:
        self._csv_values(lineno, table, cells, ("Metric Name", "Metric Description", "Min",
                                                "Max", "Avg"))

    def _csv_events(self, lineno: int, table: _Table, cells: list[str]) -> None:
        self._csv_values(lineno, table, cells, ("Event Name", "Min", "Max", "Avg", "Total"))

    def _csv_values(self, lineno: int, table: _Table, cells: list[str],
                    columns: tuple[str, ...]) -> None:
        self.device = self._cell(table, cells, "Device")[0] or self.device
        self._start_kernel(lineno, self._cell(table, cells, "Kernel")[0])
        invocations = self._cell(table, cells, "Invocations")[0].strip()
        if not invocations.isdigit():
            raise self._error(lineno, f"expected a count in column Invocations, got "
                              f"{invocations!r}")
        values = tuple(self._cell(table, cells, column)[0] for column in columns)
        self._add_value(lineno, table.kind, (invocations, *values))

    # --- the end ---------------------------------------------------------------------------

    def _error(self, lineno: int, message: str) -> ParseError:
        return ParseError(message, source=self.source, line=lineno, format=NAME)

    def finish(self) -> list[Profile]:
        profiles = [profile for run in self.runs if (profile := _finish_run(run)).metrics]
        if not profiles:
            raise ParseError("no nvprof result found: expected a 'Profiling result:' block "
                             "with GPU activities / API calls rows, or nvprof --csv tables",
                             source=self.source, format=NAME)
        empty = len(self.runs) - len(profiles)
        if empty:
            profiles[0].warnings.append(f"{empty} 'Profiling result:' block(s) had no rows "
                                        "and were left out")
        if self.pending:
            profiles[-1].warnings.extend(self.pending)
        if len(profiles) > 1:
            for index, profile in enumerate(profiles, 1):
                profile.label = f"{profile.label} #{index}"
                profile.metadata["index"] = index
        return profiles


_TABLE_NAMES = {"summary": "summary (Time(%) Time Calls Avg Min Max Name)",
                "um": "unified memory (Count Avg Size Min Size Max Size Total Size Total Time "
                      "Name)",
                "metrics": "metric (Invocations Metric Name Description Min Max Avg)",
                "events": "event (Invocations Event Name Min Max Avg Total)"}


def _csv(line: str) -> list[str]:
    return next(csv.reader([line]), [])


def _finish_run(run: _Run) -> Profile:
    """Steps from the numbered ranges, and warnings for what was not read."""
    profile = run.profile
    steps = collect_steps(run.ranges, device=Device.CPU)
    if steps:
        profile.metrics.extend(steps)
        profile.steps = max(len(step.samples_ns or ()) for step in steps)
    for what, count in run.skipped.items():
        profile.warnings.append(f"{count} {what} were not read")
    metered = [m for m in profile.metrics if "nvprof_metrics" in m.attrs
               or "nvprof_events" in m.attrs]
    if metered:
        profile.metadata["mode"] = "metrics/events"
        profile.warnings.append(f"metrics/events mode: {len(metered)} kernels carry their "
                                "values in attrs['nvprof_metrics'] / attrs['nvprof_events'] "
                                "and have no times")
    return profile
