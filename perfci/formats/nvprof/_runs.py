"""The runs of an nvprof log being read, and the metrics that table rows add to them.

``RunReader`` holds the reader's state (the current ``Profiling result:`` run, section, NVTX
scope, device, kernel and table) and turns the cells of one row, however it was read (text
or ``--csv``), into metrics: summary rows, NVTX ranges, unified memory rows and the values
of ``--metrics`` / ``--events`` kernels; trace rows are summed per name (``_trace``).
``_run_end.finish_run`` adds the trace metrics, the steps and the warnings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from perfci.core.errors import ParseError
from perfci.core.model import Device, Metric, MetricKind, Profile
from perfci.core.units import NS_PER_UNIT, parse_duration, parse_size
from perfci.formats.caps import budget
from perfci.formats.nvprof._text_trace import TraceLayout
from perfci.formats.nvprof._trace import (
    NCCL_PREFIXES,
    TraceSeries,
)

SUMMARY_HEADER = re.compile(r"\s*(Type\s+)?Time\(%\)\s+Time\s+Calls\s+Avg\s+Min\s+Max\s+Name")
UM_HEADER = re.compile(
    r"\s*Count\s+Avg Size\s+Min Size\s+Max Size\s+Total Size\s+Total Time"
    r"\s+Name"
)
METRIC_HEADER = re.compile(
    r"\s*Invocations\s+Metric Name\s+Metric Description\s+Min\s+Max"
    r"\s+Avg"
)
EVENT_HEADER = re.compile(r"\s*Invocations\s+Event Name\s+Min\s+Max\s+Avg\s+Total")
TRACE_HEADER = re.compile(r"\s*Start\s+Duration\s")
_HEADERS = (SUMMARY_HEADER, UM_HEADER, METRIC_HEADER, EVENT_HEADER, TRACE_HEADER)
COUNT_START = re.compile(r"\s*\d+\s")
TIME_UNITS = frozenset(NS_PER_UNIT) | {"%"}
TIME_COLUMNS = ("Time", "Avg", "Min", "Max")
_NCCL = NCCL_PREFIXES

GPU = "GPU activities"
API = "API calls"
_GROUP_KINDS = {API: MetricKind.API, "Range": MetricKind.RANGE}
_SUMMARY_KINDS = (MetricKind.KERNEL, MetricKind.MEMORY, MetricKind.COMM, MetricKind.API)
# API calls (and NVTX ranges, see _add_range) are timed on the host; the rest on the GPU.
_DEVICES = {kind: Device.GPU for kind in MetricKind} | {MetricKind.API: Device.CPU}
_TABLE_NAMES = {
    "summary": "summary (Time(%) Time Calls Avg Min Max Name)",
    "um": "unified memory (Count Avg Size Min Size Max Size Total Size Total Time Name)",
    "metrics": "metric (Invocations Metric Name Description Min Max Avg)",
    "events": "event (Invocations Event Name Min Max Avg Total)",
    "trace": "trace (Start Duration ... Name)",
    "text_trace": "trace (Start Duration ... Name)",
}


@dataclass(slots=True)
class Table:
    """The table being read: its kind, where it started, and per-column units."""

    kind: str  # summary | um | metrics | events | trace | skip
    line: int
    group: str | None = None  # current Type group, for continuation rows
    units: tuple[str | None, ...] | None = None  # Time, Avg, Min, Max (``-u`` units row)
    columns: dict[str, int] | None = None  # CSV tables: column name → index
    csv_units: list[str] | None = None
    expect_units: bool = True
    rows: int = 0
    what: str = ""  # skipped tables: what the warning calls their rows
    text_summary: bool = False
    trace: TraceLayout | None = None  # text trace tables: where their columns end


@dataclass(slots=True)
class Run:
    """One ``Profiling result:`` block and what its later sections need from the summary."""

    profile: Profile
    ranges: list[tuple[str, float]] = field(default_factory=list)
    names: dict[MetricKind, set[str]] = field(
        default_factory=lambda: {kind: set() for kind in _SUMMARY_KINDS}
    )
    resolved: dict[tuple[MetricKind, str], str] = field(default_factory=dict)
    scopes: dict[str, int] = field(default_factory=dict)
    kernels: dict[tuple[str, str], Metric] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    um_names: set[str] = field(default_factory=set)
    traces: dict[tuple[MetricKind, str], TraceSeries] = field(default_factory=dict)


class RunReader:
    """The state of one log being read, and the metrics its rows add to the current run."""

    def __init__(self, source: str, *, format: str) -> None:
        self.source = source
        self.format = format
        self.runs: list[Run] = []
        self.run: Run | None = None
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
        self.table: Table | None = None
        self.cache: dict[Any, float | None] = {}
        self.cut_noted = False
        # Each metric made and each trace duration beyond a name's first (its samples_ns)
        # count within the caps of a service upload (issue 31).
        self.budget = budget(source, format)

    # --- runs ------------------------------------------------------------------------------

    def _skip(self, lineno: int, what: str) -> None:
        """Count the rows of a table perfci does not read, for a warning."""
        self._open(Table("skip", lineno, what=what))
        self._current(lineno).skipped[what] = 0

    def _open(self, table: Table) -> None:
        """Read the lines after ``table``'s header as its rows. A table before any ``Profiling
        result:`` line (a log cut at its top, a table pasted alone) starts a run here, not at
        its first row: starting a run ends the table being read."""
        self._current(table.line)
        self.table = table

    def _start_run(self, lineno: int, pid: str | None) -> None:
        command = self.command if pid is None or self.pid == pid else None
        command = command or self.commands.get(pid or "")
        metadata: dict[str, Any] = {
            "command": command,
            "pid": int(pid) if pid else None,
            "line": lineno,
        }
        profile = Profile(
            label=command or "nvprof",
            format=self.format,
            source=self.source,
            metadata=metadata,
            warnings=self.pending,
        )
        self.pending = []
        self.run = Run(profile)
        self.runs.append(self.run)
        self.table = None
        self.section = "summary"
        self.thread = self.domain = self.scope = self.device = None
        self.kernel = None
        self.command = self.pid = None

    def _current(self, lineno: int) -> Run:
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

    def _error(self, lineno: int, message: str) -> ParseError:
        return ParseError(message, source=self.source, line=lineno, format=self.format)

    # --- summary rows ----------------------------------------------------------------------

    def _add_summary(
        self,
        lineno: int,
        group: str,
        pct: float,
        calls: int,
        name: str,
        times: tuple[float | None, ...],
    ) -> None:
        run = self.run or self._current(lineno)
        if group == GPU:
            kind = (
                MetricKind.MEMORY
                if name.startswith("[CUDA ")
                else MetricKind.COMM
                if name.startswith(_NCCL)
                else MetricKind.KERNEL
            )
        else:
            found = _GROUP_KINDS.get(group)
            if found is None:
                key = f"rows of type {group!r} (no matching metric kind)"
                run.skipped[key] = run.skipped.get(key, 0) + 1
                return
            if found is MetricKind.RANGE:
                self._add_range(run, pct, calls, name, times)
                return
            kind = found
        scope = self.scope
        cut = None
        if scope is None:
            run.names[kind].add(name)
        elif name not in run.names[kind]:
            cut, name = name, self._full_name(run, kind, name)
        # Positional arguments: this runs for every row of logs that reach 100 MB.
        metric = Metric(
            kind, name, _DEVICES[kind], calls, times[0], None, times[1], times[2], times[3]
        )
        metric.scope = scope
        metric.attrs["time_pct"] = pct
        if cut is not None and cut != name:
            metric.attrs["nvtx_name"] = cut
        self.budget.metric()
        run.profile.metrics.append(metric)

    def _add_range(
        self, run: Run, pct: float, calls: int, name: str, times: tuple[float | None, ...]
    ) -> None:
        """A ``Range:`` row: the NVTX block's own time."""
        name = self.scope or name
        if times[0] is not None:
            run.ranges.append((name, times[0]))
        self.budget.metric()
        run.profile.metrics.append(
            Metric(
                kind=MetricKind.RANGE,
                name=name,
                device=Device.CPU,
                calls=calls,
                total_ns=times[0],
                avg_ns=times[1],
                min_ns=times[2],
                max_ns=times[3],
                attrs={"time_pct": pct, "thread": self.thread, "domain": self.domain},
            )
        )

    @staticmethod
    def _full_name(run: Run, kind: MetricKind, name: str) -> str:
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
            raise self._error(
                lineno,
                f"expected a duration such as 4.0922ms in column {column}, got {cell!r} ({exc})",
            ) from exc
        self.cache[key] = value
        return value

    # --- other tables ----------------------------------------------------------------------

    def _um_row(
        self,
        lineno: int,
        count: str,
        sized: list[tuple[str, str | None]],
        timed: tuple[str, str | None],
        name: str,
    ) -> None:
        """A unified memory row; sizes and time are ``(cell, unit for bare numbers)``."""
        run = self._current(lineno)
        sizes = [self._bytes(lineno, cell, unit) for cell, unit in sized]
        attrs = {
            "avg_size": sizes[0],
            "min_size": sizes[1],
            "max_size": sizes[2],
            "device": self.device,
        }
        self.budget.metric()
        run.profile.metrics.append(
            Metric(
                MetricKind.MEMORY,
                f"[Unified Memory] {name}",
                calls=int(count),
                total_ns=self._ns(lineno, *timed, "Total Time"),
                bytes=sizes[3],
                scope=self._um_scope(run, name),
                attrs=attrs,
            )
        )

    def _um_scope(self, run: Run, name: str) -> str | None:
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

    def _start_kernel(self, lineno: int, name: str) -> None:
        run = self._current(lineno)
        device = self.device or ""
        key = (device, name)
        if key not in run.kernels:
            clash = any(kernel == name for _, kernel in run.kernels)
            metric = Metric(
                MetricKind.KERNEL,
                name,
                scope=device if clash else None,
                attrs={"device": self.device},
            )
            run.kernels[key] = metric
            self.budget.metric()
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

    def _not_a_row(
        self, lineno: int, line: str, raw: str, table: Table, row_start: re.Pattern[str]
    ) -> bool:
        """A line a table cannot read: a cut last line, a broken row, or the table's end."""
        if not raw.endswith("\n"):
            self.cut_noted = True
            self._warning(
                f"line {lineno}: the file ends in the middle of a line, which was "
                f"not read: {line.strip()[:80]!r}"
            )
            return True
        if row_start.match(line):
            raise self._error(
                lineno, f"cannot read this {_TABLE_NAMES[table.kind]} row: {line.strip()[:120]!r}"
            )
        header = any(h.match(line) for h in _HEADERS)
        if table.text_summary and not header:
            # Output of the application (or of another process of the job) written while nvprof
            # printed its summary: the table goes on after it, as the next rows have no Type.
            self._warning(
                f"line {lineno}: not a row of the table at line {table.line} "
                f"(interleaved output?), skipped: {line.strip()[:80]!r}"
            )
            return True
        self.table = None
        # Unified memory tables end at their device and page-fault lines; other tables end at
        # a blank line or a header, so other text here is worth a word.
        if table.kind != "um" and not header:
            self._warning(f"line {lineno}: text after a table was not read: {line.strip()[:80]!r}")
        return False
