"""The reader behind ``ncu_csv`` (and ``ncu_text``): CSV rows into processes → kernels → series.

It finds the tables (a header row, a raw page's units row, the rows under them), groups rows
into launches per process and launches into kernels by name, and keeps each metric's cells as
they are: the numbers need the file's decimal mark, known only once every cell has been seen,
so ``ncu_csv`` converts them and builds the metrics after the last row.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from perfci.core.errors import ParseError
from perfci.formats.caps import budget

__all__ = ["DURATIONS", "LAUNCH_CONFIG", "Kernel", "Process", "Reader", "Series", "Table"]

#: The metrics that are the kernel's time: its KERNEL metric, never a counter.
DURATIONS = ("gpu__time_duration.sum", "Duration")
#: Launch configuration metrics: attributes of the kernel, not measures.
LAUNCH_CONFIG = {
    "launch__block_size": "block",
    "Block Size": "block",
    "launch__grid_size": "grid",
    "Grid Size": "grid",
}
_NOT_COUNTERS = frozenset((*DURATIONS, *LAUNCH_CONFIG))
_NUMBER_START = frozenset("0123456789+-.")

#: Identity columns kept in the kernel's attrs (raw page: every other column is a metric).
_ATTR_COLUMNS = {
    "Block Size": "block",
    "Grid Size": "grid",
    "Device": "device",
    "Context": "context",
    "Stream": "stream",
    "CC": "cc",
}
_IDENTITY_COLUMNS = frozenset(
    {
        "ID",
        "Process ID",
        "Process Name",
        "Host Name",
        "Kernel Name",
        "Kernel Time",
        "Section Name",
        "Metric Name",
        "Metric Unit",
        "Metric Value",
        "Rule Name",
        "Rule Type",
        "Rule Description",
        "Estimated Speedup Type",
        "Estimated Speedup",
        *_ATTR_COLUMNS,
    }
)


@dataclass(slots=True)
class Series:
    """One metric of one kernel in launch order: the details page's value cells with their
    units, or a raw page's numbers (converted a table at a time) in one unit."""

    kernel: str
    section: str
    name: str
    values: list[str] = field(default_factory=list)
    units: list[str] = field(default_factory=list)
    numbers: list[float] | None = None


@dataclass(slots=True)
class Kernel:
    name: str
    first_launch: str
    calls: int = 0
    series: dict[tuple[str, str], Series] = field(default_factory=dict)
    attrs: dict[str, dict[str, None]] = field(default_factory=dict)  # ordered sets
    raw_rows: dict[int, list[list[str]]] = field(default_factory=dict)  # per raw table
    raw_names: set[str] = field(default_factory=set)  # raw-page columns counted as metrics

    def note(self, key: str, value: str) -> None:
        if value:
            self.attrs.setdefault(key, {})[value] = None


@dataclass(slots=True)
class Process:
    pid: str
    name: str
    host: str
    kernels: dict[str, Kernel] = field(default_factory=dict)
    launches: int = 0
    pages: dict[str, None] = field(default_factory=dict)


@dataclass(slots=True)
class Table:
    """One header row's columns: where each wanted cell is."""

    number: int
    line: int
    raw: bool
    header: list[str]
    need: int  # a row must have at least this many cells
    pid: int | None
    pname: int | None
    host: int | None
    kernel: int
    section: int | None = None
    metric: int = 0
    unit: int = 0
    value: int = 0
    attrs: tuple[tuple[int, str], ...] = ()
    metric_columns: tuple[int, ...] = ()
    units: list[str] | None = None
    expect_units: bool = False
    rows: int = 0
    width: int = 0  # the first row's cells: a shorter last line was cut


class Reader:
    """Reads the CSV lines of one file into processes → kernels → metric series; a raw
    page's rows are kept per kernel (``Kernel.raw_rows``), to be converted a table at a time."""

    def __init__(self, source: str, format_name: str) -> None:
        self.source = source
        self.format_name = format_name
        self.processes: dict[str, Process] = {}
        self.tables: list[Table] = []
        self.warnings: list[str] = []
        self.lineno = 0
        self.complete = True  # whether the current line ended with a line break
        self.skipped_lines = 0
        self.first_skipped: int | None = None
        # A kernel is a metric, a (kernel, numeric series) another, a launch's time beyond
        # the first a sample: counted within the caps of a service upload (issue 31).
        self.budget = budget(source, format_name)

    # --- lines ------------------------------------------------------------------------------

    def _error(self, message: str, line: int | None = None) -> ParseError:
        """An error at ``line`` (the current line when None)."""
        line = self.lineno if line is None else line
        return ParseError(message, source=self.source, line=line, format=self.format_name)

    def _csv_lines(self, handle: Iterable[str]) -> Iterator[str]:
        """The lines that can be CSV rows: starting with a quote, quotes balanced."""
        for number, line in enumerate(handle, 1):
            if not line.startswith('"') and not line.startswith('\ufeff"'):
                continue  # application output, ==PROF== / ==WARNING== lines, blank lines
            self.lineno = number
            self.complete = line.endswith("\n")
            if line.count('"') % 2:
                if not self.complete:
                    self.warnings.append(
                        f"line {number}, the file's last line, was cut short in a quoted cell "
                        "and was left out"
                    )
                else:
                    self._skip_line(number)
                continue
            yield line.lstrip("\ufeff")

    def _skip_line(self, number: int) -> None:
        self.skipped_lines += 1
        if self.first_skipped is None:
            self.first_skipped = number

    def read(self, handle: Iterable[str]) -> None:
        """Read every table of ``handle``."""
        self.read_rows(csv.reader(self._csv_lines(handle)))

    def read_rows(self, rows: Iterable[list[str]]) -> None:
        """Read every table of ``rows``, lines already split into cells."""
        table: Table | None = None
        process: Process | None = None
        kernel: Kernel | None = None
        last_launch: tuple[str, str] | None = None
        # A launch is a run of rows with one (pid, ID); per pid, the ID and kernel of its
        # latest launch, so that rows of processes printed in turn still find their launch.
        current: dict[str, tuple[str, Kernel]] = {}
        for row in rows:
            first = row[0] if row else ""
            if table is not None and first.isdigit():
                cells = len(row)
                if (cells < table.width or cells < table.need) and self._short_row(row, table):
                    continue
                if not table.width:
                    table.width = cells
                pid = row[table.pid] if table.pid is not None else ""
                launch = (pid, first)
                if launch != last_launch:
                    last_launch = launch
                    ongoing = current.get(pid)
                    if ongoing is not None and ongoing[0] == first:
                        kernel = ongoing[1]
                    else:
                        process = self._process(row, table, pid)
                        kernel = self._launch(row, table, process, first)
                        current[pid] = (first, kernel)
                assert kernel is not None
                table.rows += 1
                if table.raw:
                    kept = kernel.raw_rows.get(table.number)
                    if kept is None:
                        kept = kernel.raw_rows[table.number] = []
                        self._raw_metrics(kernel, table)
                    kept.append(row)
                    continue
                name = row[table.metric]
                if not name:
                    continue  # a rule's row (Rule Name/Description) carries no metric
                section = row[table.section] if table.section is not None else ""
                key = (section, name)
                series = kernel.series.get(key)
                value = row[table.value]
                if series is None:
                    if name not in _NOT_COUNTERS and value[:1] in _NUMBER_START:
                        self.budget.metric()  # a counter (a text metric is none)
                    series = kernel.series[key] = Series(kernel.name, section, name)
                elif name in DURATIONS:
                    self.budget.sample()  # a launch's time: the kernel's samples_ns
                series.values.append(value)
                series.units.append(row[table.unit])
            elif first == "ID":
                table = self._header(row)
                last_launch = None
                current.clear()
            elif table is not None and table.expect_units and first == "":
                table.units = row
                table.expect_units = False
            else:
                self._skip_line(self.lineno)  # quoted application output
        if self.tables and not any(t.rows for t in self.tables):
            first_table = self.tables[0]
            raise self._error(
                "the ncu CSV table has a header but no rows: the file was cut short, or ncu "
                "profiled no kernels (check its ==PROF== / ==WARNING== lines)",
                line=first_table.line,
            )

    def _short_row(self, row: list[str], table: Table) -> bool:
        """Whether to leave out ``row``, shorter than the table's rows so far: yes when it is
        the file's cut last line; an error when it lacks cells the table needs."""
        if not self.complete:
            self.warnings.append(
                f"line {self.lineno}, the file's last line, has {len(row)} of the "
                f"{table.width or len(table.header)} cells of the rows above it and was left "
                "out (a cut file?)"
            )
            return True
        if len(row) >= table.need:
            return False  # the rule columns of a newer ncu may be left off
        raise self._error(
            f"a row with {len(row)} cells under the header at line {table.line}, which has "
            f"{len(table.header)} columns (at least {table.need} are needed)"
        )

    # --- headers ----------------------------------------------------------------------------

    def _header(self, row: list[str]) -> Table:
        columns = {name.strip(): index for index, name in enumerate(row)}
        if "Kernel Name" not in columns:
            raise self._error("an ncu CSV header without a 'Kernel Name' column")
        pid, pname, host = (columns.get(n) for n in ("Process ID", "Process Name", "Host Name"))
        attrs = [(columns[name], key) for name, key in _ATTR_COLUMNS.items() if name in columns]
        attrs += [
            (index, "nvtx")
            for name, index in columns.items()
            if name not in _IDENTITY_COLUMNS and ("Range" in name or "Domain" in name)
        ]
        common = [columns["Kernel Name"], *(i for i in (pid, pname, host) if i is not None)]
        common += [index for index, _ in attrs]
        details = {"Metric Name", "Metric Value"} <= columns.keys()
        table = Table(
            number=len(self.tables),
            line=self.lineno,
            raw=not details,
            header=row,
            need=len(row),
            pid=pid,
            pname=pname,
            host=host,
            kernel=columns["Kernel Name"],
            attrs=tuple(attrs),
        )
        if details:
            if "Metric Unit" not in columns:
                raise self._error("an ncu details-page header without a 'Metric Unit' column")
            table.section = columns.get("Section Name")
            table.metric, table.unit, table.value = (
                columns[n] for n in ("Metric Name", "Metric Unit", "Metric Value")
            )
            wanted = [*common, table.metric, table.value, table.unit]
            if table.section is not None:
                wanted.append(table.section)
            table.need = max(wanted) + 1
        else:
            nvtx = {index for index, key in attrs if key == "nvtx"}
            table.metric_columns = tuple(
                index
                for index, name in enumerate(row)
                if name.strip() not in _IDENTITY_COLUMNS and index not in nvtx
            )
            if not table.metric_columns:
                raise self._error(
                    "an ncu CSV header with neither 'Metric Name'/'Metric Value' columns "
                    "(details page) nor metric columns (raw page)"
                )
            table.expect_units = True
        self.tables.append(table)
        return table

    # --- launches ---------------------------------------------------------------------------

    def _process(self, row: list[str], table: Table, pid: str) -> Process:
        process = self.processes.get(pid)
        if process is None:
            name = row[table.pname].strip() if table.pname is not None else ""
            host = row[table.host].strip() if table.host is not None else ""
            process = self.processes[pid] = Process(pid, name, host)
        process.pages["raw" if table.raw else "details"] = None
        return process

    def _raw_metrics(self, kernel: Kernel, table: Table) -> None:
        """Count the raw page's columns a kernel has not had yet as its metrics."""
        names = {table.header[index].strip() for index in table.metric_columns} - _NOT_COUNTERS
        new = names - kernel.raw_names
        kernel.raw_names |= new
        self.budget.metric(len(new))

    def _launch(self, row: list[str], table: Table, process: Process, launch_id: str) -> Kernel:
        process.launches += 1
        name = row[table.kernel]
        kernel = process.kernels.get(name)
        if kernel is None:
            self.budget.metric()  # the kernel's own metric
            kernel = process.kernels[name] = Kernel(name, first_launch=launch_id)
        kernel.calls += 1
        for index, key in table.attrs:
            value = row[index].strip()
            if key == "nvtx":
                value = value.replace('"', "").strip()
            kernel.note(key, value)
        return kernel
