"""Nsight Compute ``ncu --csv`` output: the details page (long) and the raw page (wide).

What becomes which metric:

* Every kernel name becomes ONE ``kernel`` metric per process: its launches are aggregated
  (``calls`` = launches, ``samples_ns`` = per-launch ``gpu__time_duration.sum`` in launch order,
  ``total_ns``/``avg_ns``/``min_ns``/``max_ns``/``median_ns``/``std_ns`` from them). Launch IDs
  are not series identities: they shift whenever a filter or an extra kernel changes what ncu
  profiled, while the kernel name stays. The duration comes from ``gpu__time_duration.sum`` or,
  in a section-based details page, the Speed Of Light ``Duration`` (the same metric).
* Every other numeric metric of a kernel becomes a ``counter`` with ``scope`` = the kernel name
  and ``name`` = the metric as ncu names it (details: ``Metric Name``, e.g. ``Achieved
  Occupancy``; raw: the metric id, e.g. ``sm__throughput.avg.pct_of_peak_sustained_elapsed``);
  a name two sections share (``Memory Throughput`` is a % in Speed Of Light and a byte rate in
  Memory Workload Analysis) is qualified as ``<section>: <name>``. Units become canonical
  (``_units``): a time counter keeps its per-launch values in ``samples_ns``, any other its
  mean over launches in ``value`` and the per-launch values in ``samples``. ``n/a`` and
  non-numeric values (``CachePreferNone``) are left out.
* The launch configuration (``Block Size``/``Grid Size`` columns or ``launch__block_size`` /
  ``launch__grid_size`` metrics), device, context, stream, CC and NVTX columns go to the kernel
  metric's ``attrs`` (one value, or the distinct values when launches differ), with the ID of
  its first launch.

Each process (``Process ID``; ncu numbers launches per process) is its own profile, labelled by
its process name, ``#2``... when names repeat: the pid changes with every run, and a profile's
label is part of its metrics' identity when a file holds several.

Layout: any application output, ``==PROF==`` / ``==WARNING==`` lines before, between and after
the CSV lines are skipped (only whole, quote-balanced lines starting with ``"`` are CSV).
A header row (``"ID",…,"Kernel Name",…``) starts a table: with ``Metric Name``/``Metric Value``
columns the details page, else the raw page, whose next row holds the units. Numbers are
locale-formatted (``"8,192"``, ``"1,215,000,000.00"``; ``"27.595.520"`` / ``"65,77"`` on a
European-locale machine): the decimal mark is decided once per file from the first value that
shows it, or by ``options["decimal_mark"]`` (``.`` or ``,``).
"""

from __future__ import annotations

import csv
import math
import re
import statistics
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfci.errors import ParseError
from perfci.formats._text_lines import open_text
from perfci.formats._textio import gc_paused, scaled_decimal
from perfci.formats.ncu._units import NS, UnitScale, better_for, scale
from perfci.model import Metric, MetricKind, Profile

if TYPE_CHECKING:
    from perfci.formats.protocol import Head

NAME = "ncu_csv"
DESCRIPTION = (
    "Nsight Compute ncu --csv, details or raw page (kernel times per launch, section metrics "
    "as per-kernel counters)"
)

_SNIFF = re.compile(
    r'(?m)^\ufeff?"ID",(?=[^\n]*"Kernel Name")'
    r'(?=[^\n]*(?:"Metric Name"|"[A-Za-z0-9_]+__[A-Za-z0-9_.]+"))'
)

#: The metrics that are the kernel's time: its KERNEL metric, never a counter.
_DURATIONS = ("gpu__time_duration.sum", "Duration")
#: Launch configuration metrics: attributes of the kernel, not measures.
_LAUNCH_CONFIG = {
    "launch__block_size": "block",
    "Block Size": "block",
    "launch__grid_size": "grid",
    "Grid Size": "grid",
}
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
_MAX_DISTINCT = 16
#: ``float`` reads ``nan``, ``inf``, ``1_0`` and blanks, which are not plain numbers.
_NOT_PLAIN = ("n", "N", "i", "I", "_", " ", "\t")
_MISSING = frozenset({"", "n/a", "N/A", "-", "--", "nan", "NaN"})
_NUMBER_CELL = re.compile(r"[+-]?[0-9][0-9.,]*(?:[eE][+-]?[0-9]+)?")


def sniff(head: Head) -> bool:
    """An ncu CSV header line: ``"ID",…,"Kernel Name",…`` with ``"Metric Name"`` or metric ids."""
    return _SNIFF.search(head.text) is not None


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """One profile per profiled process, in the order the file first names them."""
    # settle: the cells read stay alive until the end; left young, the first collection
    # after the parse would walk them all for nothing.
    reader = _Reader(str(path), NAME)
    with gc_paused(settle=True), open_text(path, format=NAME) as handle:
        reader.read(handle)
        return reader.finish(options.get("decimal_mark") or None)


def read_details_rows(
    rows: Iterable[list[str]], *, source: str, options: Mapping[str, str], format_name: str
) -> list[Profile]:
    """The profiles of details-page ``rows`` (a header row, then one row per metric value),
    for ``ncu_text``, which renders its report as them: one reader, one set of rules for both.
    The rows are read as they come, so a generator keeps a large report out of memory."""
    reader = _Reader(source, format_name)
    reader.read_rows(rows)
    return reader.finish(options.get("decimal_mark") or None)


# --- accumulation ---------------------------------------------------------------------------


@dataclass(slots=True)
class _Series:
    """One metric of one kernel in launch order: the details page's value cells with their
    units, or a raw page's numbers (converted a table at a time) in one unit."""

    kernel: str
    section: str
    name: str
    values: list[str] = field(default_factory=list)
    units: list[str] = field(default_factory=list)
    numbers: list[float] | None = None


@dataclass(slots=True)
class _Kernel:
    name: str
    first_launch: str
    calls: int = 0
    series: dict[tuple[str, str], _Series] = field(default_factory=dict)
    attrs: dict[str, dict[str, None]] = field(default_factory=dict)  # ordered sets
    raw_rows: dict[int, list[list[str]]] = field(default_factory=dict)  # per raw table

    def note(self, key: str, value: str) -> None:
        if value:
            self.attrs.setdefault(key, {})[value] = None


@dataclass(slots=True)
class _Process:
    pid: str
    name: str
    host: str
    kernels: dict[str, _Kernel] = field(default_factory=dict)
    launches: int = 0
    pages: dict[str, None] = field(default_factory=dict)


@dataclass(slots=True)
class _Table:
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


class _Reader:
    """Reads the CSV lines of one file into processes → kernels → metric series."""

    def __init__(self, source: str, format_name: str) -> None:
        self.source = source
        self.format_name = format_name
        self.processes: dict[str, _Process] = {}
        self.tables: list[_Table] = []
        self.warnings: list[str] = []
        self.lineno = 0
        self.complete = True  # whether the current line ended with a line break
        self.skipped_lines = 0
        self.first_skipped: int | None = None

    # --- lines ------------------------------------------------------------------------------

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
        table: _Table | None = None
        process: _Process | None = None
        kernel: _Kernel | None = None
        last_launch: tuple[str, str] | None = None
        # A launch is a run of rows with one (pid, ID); per pid, the ID and kernel of its
        # latest launch, so that rows of processes printed in turn still find their launch.
        current: dict[str, tuple[str, _Kernel]] = {}
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
                    kept.append(row)
                    continue
                name = row[table.metric]
                if not name:
                    continue  # a rule's row (Rule Name/Description) carries no metric
                section = row[table.section] if table.section is not None else ""
                key = (section, name)
                series = kernel.series.get(key)
                if series is None:
                    series = kernel.series[key] = _Series(kernel.name, section, name)
                series.values.append(row[table.value])
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
            raise ParseError(
                "the ncu CSV table has a header but no rows: the file was cut short, or ncu "
                "profiled no kernels (check its ==PROF== / ==WARNING== lines)",
                source=self.source,
                line=first_table.line,
                format=self.format_name,
            )

    def _short_row(self, row: list[str], table: _Table) -> bool:
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
        raise ParseError(
            f"a row with {len(row)} cells under the header at line {table.line}, which has "
            f"{len(table.header)} columns (at least {table.need} are needed)",
            source=self.source,
            line=self.lineno,
            format=self.format_name,
        )

    # --- headers ----------------------------------------------------------------------------

    def _header(self, row: list[str]) -> _Table:
        columns = {name.strip(): index for index, name in enumerate(row)}
        if "Kernel Name" not in columns:
            raise ParseError(
                "an ncu CSV header without a 'Kernel Name' column",
                source=self.source,
                line=self.lineno,
                format=self.format_name,
            )
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
        number = len(self.tables)
        if details:
            if "Metric Unit" not in columns:
                raise ParseError(
                    "an ncu details-page header without a 'Metric Unit' column",
                    source=self.source,
                    line=self.lineno,
                    format=self.format_name,
                )
            section = columns.get("Section Name")
            metric, unit, value = (
                columns[n] for n in ("Metric Name", "Metric Unit", "Metric Value")
            )
            wanted = [*common, metric, value, unit, *([section] if section is not None else [])]
            table = _Table(
                number=number,
                line=self.lineno,
                raw=False,
                header=row,
                need=max(wanted) + 1,
                pid=pid,
                pname=pname,
                host=host,
                kernel=columns["Kernel Name"],
                section=section,
                metric=metric,
                unit=unit,
                value=value,
                attrs=tuple(attrs),
            )
        else:
            nvtx = {index for index, key in attrs if key == "nvtx"}
            metric_columns = tuple(
                index
                for index, name in enumerate(row)
                if name.strip() not in _IDENTITY_COLUMNS and index not in nvtx
            )
            if not metric_columns:
                raise ParseError(
                    "an ncu CSV header with neither 'Metric Name'/'Metric Value' columns "
                    "(details page) nor metric columns (raw page)",
                    source=self.source,
                    line=self.lineno,
                    format=self.format_name,
                )
            table = _Table(
                number=number,
                line=self.lineno,
                raw=True,
                header=row,
                need=len(row),
                pid=pid,
                pname=pname,
                host=host,
                kernel=columns["Kernel Name"],
                attrs=tuple(attrs),
                metric_columns=metric_columns,
                expect_units=True,
            )
        self.tables.append(table)
        return table

    # --- launches ---------------------------------------------------------------------------

    def _process(self, row: list[str], table: _Table, pid: str) -> _Process:
        process = self.processes.get(pid)
        if process is None:
            name = row[table.pname].strip() if table.pname is not None else ""
            host = row[table.host].strip() if table.host is not None else ""
            process = self.processes[pid] = _Process(pid, name, host)
        process.pages["raw" if table.raw else "details"] = None
        return process

    def _launch(self, row: list[str], table: _Table, process: _Process, launch_id: str) -> _Kernel:
        process.launches += 1
        name = row[table.kernel]
        kernel = process.kernels.get(name)
        if kernel is None:
            kernel = process.kernels[name] = _Kernel(name, first_launch=launch_id)
        kernel.calls += 1
        for index, key in table.attrs:
            value = row[index].strip()
            if key == "nvtx":
                value = value.replace('"', "").strip()
            kernel.note(key, value)
        return kernel

    # --- the end ----------------------------------------------------------------------------

    def finish(self, decimal_mark: str | None) -> list[Profile]:
        if not self.tables:
            raise ParseError(
                'no ncu CSV table found: expected a header line "ID","Process ID",…,'
                '"Kernel Name",… with "Metric Name"/"Metric Value" columns (details page) '
                "or metric-id columns (raw page), as ncu --csv prints it",
                source=self.source,
                format=self.format_name,
            )
        mark = _decimal_mark(decimal_mark, self._value_cells())
        convert = _Converter(mark)
        for process in self.processes.values():
            for kernel in process.kernels.values():
                self._raw_series(kernel, convert)
        if self.skipped_lines:
            self.warnings.append(
                f"{self.skipped_lines} line(s) starting with a quote were not CSV rows of a "
                f"table and were skipped (first at line {self.first_skipped})"
            )
        labels = _labels(list(self.processes.values()))
        profiles = []
        for process, label in zip(self.processes.values(), labels, strict=True):
            profiles.append(self._profile(process, label, convert, mark))
        return profiles

    def _raw_series(self, kernel: _Kernel, convert: _Converter) -> None:
        """A raw-page kernel's rows as one series of numbers per metric column."""
        for number, rows in kernel.raw_rows.items():
            table = self.tables[number]
            units = table.units or []
            cols = table.metric_columns
            scales = [scale(units[index] if index < len(units) else "") for index in cols]
            columns = convert.table(rows, cols, [s.power for s in scales])
            for index, scaled, numbers in zip(cols, scales, columns, strict=True):
                name = table.header[index].strip()
                series = kernel.series.get(("", name))
                if series is None:
                    unit = units[index] if index < len(units) else ""
                    kernel.series[("", name)] = _Series(
                        kernel.name, "", name, units=[unit], numbers=numbers
                    )
                elif series.numbers is not None and scale(series.units[0]).unit == scaled.unit:
                    series.numbers.extend(numbers)
                else:
                    self.warnings.append(
                        f"{name} of {kernel.name[:80]}: the raw table at line {table.line} "
                        f"gives it in {scaled.unit}, an earlier table in another unit; "
                        "its values there were left out"
                    )
        kernel.raw_rows.clear()

    def _value_cells(self) -> Iterator[str]:
        """Every value cell, the details page's then the raw page's, for ``_decimal_mark``."""
        for process in self.processes.values():
            for kernel in process.kernels.values():
                for series in kernel.series.values():
                    yield from series.values
                for number, rows in kernel.raw_rows.items():
                    cols = self.tables[number].metric_columns
                    for row in rows:
                        yield from (row[index] for index in cols)

    def _profile(self, process: _Process, label: str, convert: _Converter, mark: str) -> Profile:
        metrics: list[Metric] = []
        warnings = list(self.warnings)
        for kernel in process.kernels.values():
            metrics.extend(_kernel_metrics(kernel, convert, warnings))
        untimed = [m.name for m in metrics if m.kind is MetricKind.KERNEL and m.total_ns is None]
        if untimed:
            warnings.append(
                f"{len(untimed)} kernel(s) have no gpu__time_duration.sum / Duration metric, "
                f"so no time (first: {untimed[0][:80]}); profile with --metrics "
                "gpu__time_duration.sum or the SpeedOfLight section"
            )
        metadata: dict[str, Any] = {
            "process": process.name,
            "host": process.host,
            "page": ", ".join(process.pages),
            "decimal_mark": mark,
            "launches": process.launches,
            "kernels": len(process.kernels),
        }
        if process.pid.isdigit():
            metadata["pid"] = int(process.pid)
        return Profile(
            label=label,
            format=self.format_name,
            source=self.source,
            metrics=metrics,
            metadata=metadata,
            warnings=warnings,
        )


def _labels(processes: list[_Process]) -> list[str]:
    """Process names, ``#2``, ``#3`` on repeats; ``pid N`` for a nameless process."""
    bases = [p.name or (f"pid {p.pid}" if p.pid else "ncu") for p in processes]
    seen: dict[str, int] = {}
    labels = []
    for base in bases:
        seen[base] = seen.get(base, 0) + 1
        labels.append(base if seen[base] == 1 else f"{base} #{seen[base]}")
    return labels


# --- numbers --------------------------------------------------------------------------------


def _decimal_mark(option: str | None, cells: Iterable[str]) -> str:
    """``.`` or ``,``: the option, else the first number cell that shows which, else ``.``.

    ``6.52``, ``1,234.5``, ``1,215,000`` or ``0.125`` show ``.``; ``65,77``, ``27.595.520`` or
    ``1.234,5`` show ``,``. One separator before exactly three digits (``8,192``, ``117.344``)
    shows nothing: it groups thousands in one locale and is the decimal mark in the other.
    """
    if option is not None:
        if option not in (".", ","):
            raise ParseError(f"decimal_mark must be '.' or ',', not {option!r}", format=NAME)
        return option
    for cell in cells:
        if ("," not in cell and "." not in cell) or not _NUMBER_CELL.fullmatch(cell):
            continue
        dots, commas = cell.count("."), cell.count(",")
        if dots and commas:
            return "." if cell.rfind(".") > cell.rfind(",") else ","
        if dots > 1 or commas > 1:
            return "," if dots else "."
        mark = "." if dots else ","
        whole, _, tail = cell.lstrip("+-").partition(mark)
        if "e" in tail or "E" in tail or len(tail) != 3 or whole == "0":
            return mark
    return "."


class _Converter:
    """Value cells as floats in a canonical unit (``10**power`` times the cell's number).

    Many cells at a time: one ``replace`` over the joined cells drops the grouping, one more
    appends the power as an exponent (``12.5`` → ``12.5e3``, so that ``float`` rounds the exact
    product once, as ``perfci.units`` does), and ``map(float, …)`` reads them all. Cells that
    are not all plain numbers (``n/a``, ``nan``, ``4.0e-05`` with a power, a string) take the
    cell-by-cell path, memoised per power, which gives the same numbers.
    """

    def __init__(self, mark: str) -> None:
        self.mark = mark
        self.caches: dict[int, dict[str, float | None]] = {}

    def clean(self, text: str) -> str:
        """``text`` without its thousands grouping, with ``.`` as the decimal mark."""
        if self.mark == ",":
            return text.replace(".", "").replace(",", ".")
        return text.replace(",", "")

    def many(self, cells: list[str], power: int) -> list[float]:
        """The numbers among ``cells``; ``n/a`` and strings left out."""
        return self._cleaned(self.clean("\n".join(cells)), power)

    def one(self, cell: str, power: int) -> float | None:
        """One cell's number, ``None`` for ``n/a`` or a string."""
        return self._cleaned_cell(self.clean(cell), power)

    def table(
        self, rows: list[list[str]], cols: tuple[int, ...], powers: list[int]
    ) -> list[list[float]]:
        """The numbers of columns ``cols`` of ``rows`` (a raw page's), a list per column.

        The columns whose first cell is a number are read together, row by row, in the order
        the cells were made: a column at a time would jump between rows, and on a wide page
        the cache misses cost more than the parsing. The others (strings such as a device's
        name, ``n/a``) are read a column at a time.
        """
        if not rows:
            return [[] for _ in cols]
        first = rows[0]
        columns: list[list[float] | None] = [None] * len(cols)
        together = [j for j, col in enumerate(cols) if self.one(first[col], 0) is not None]
        if len(together) > 1:
            block = self._block(rows, [cols[j] for j in together], [powers[j] for j in together])
            for j, values in zip(together, block, strict=True):
                columns[j] = values
        return [
            values if values is not None else self.many([row[col] for row in rows], power)
            for values, col, power in zip(columns, cols, powers, strict=True)
        ]

    def _block(
        self, rows: list[list[str]], cols: list[int], powers: list[int]
    ) -> list[list[float]]:
        width = len(cols)
        pick = itemgetter(*cols)
        text = self.clean("\n".join(chain.from_iterable(pick(row) for row in rows)))
        numbers: list[float] | None = None
        if _plain(text):
            try:
                numbers = list(map(float, text.split("\n")))
            except ValueError:
                numbers = None  # an empty cell, a lone sign
        parts = text.split("\n") if numbers is None or any(powers) else []
        columns = []
        for offset, power in enumerate(powers):
            if numbers is not None and not power:
                columns.append(numbers[offset::width])
            else:
                columns.append(self._cleaned("\n".join(parts[offset::width]), power))
        return columns

    def _cleaned(self, text: str, power: int) -> list[float]:
        """The numbers of ``text``: cleaned cells joined by line breaks."""
        if _plain(text):
            suffixed = text
            if power:
                suffix = f"e{power}"
                suffixed = text.replace("\n", suffix + "\n") + suffix
            try:
                return list(map(float, suffixed.split("\n")))
            except ValueError:
                pass  # an empty cell, a lone sign, an exponent already there
        cells = text.split("\n")
        cache = self.caches.get(power)
        if cache is None:
            cache = self.caches[power] = {}
        for cell in set(cells).difference(cache):
            cache[cell] = self._cleaned_cell(cell, power)
        values = [cache[cell] for cell in cells]
        return [value for value in values if value is not None]

    @staticmethod
    def _cleaned_cell(cell: str, power: int) -> float | None:
        text = cell.strip().replace("\u00a0", "").replace(" ", "")
        if text in _MISSING:
            return None
        value = scaled_decimal(text, power)
        if value is not None:
            return value
        try:
            number = Decimal(text)
        except InvalidOperation:
            return None  # a string metric: CachePreferNone, Hopper, (256, 1, 1)
        if not number.is_finite():
            return None
        return float(number.scaleb(power))


def _plain(text: str) -> bool:
    """Whether ``float`` reads every line of ``text`` as the number it spells, or fails:
    it also reads ``nan``, ``inf``, ``1_0``, blanks and non-ASCII digits."""
    return text.isascii() and not any(char in text for char in _NOT_PLAIN)


def _numbers(
    series: _Series, convert: _Converter, warnings: list[str]
) -> tuple[UnitScale, list[float]]:
    """The series' numbers in the canonical unit of its first unit, in launch order.

    ncu scales units per value (one launch ``usecond``, the next ``msecond``): each value is
    converted with its own unit; one whose unit has another canonical unit is left out.
    """
    units = series.units
    first = scale(units[0])
    if series.numbers is not None:
        return first, series.numbers
    if units.count(units[0]) == len(units):
        return first, convert.many(series.values, first.power)
    values: list[float] = []
    mixed = 0
    for cell, unit in zip(series.values, units, strict=True):
        scaled = scale(unit)
        if scaled.unit != first.unit:
            mixed += 1
            continue
        value = convert.one(cell, scaled.power)
        if value is not None:
            values.append(value)
    if mixed:
        warnings.append(
            f"{series.name} of {series.kernel[:80]}: {mixed} value(s) in units that do not "
            f"convert to {first.unit} were left out"
        )
    return first, values


# --- metrics --------------------------------------------------------------------------------


def _duration(kernel: _Kernel) -> _Series | None:
    """The series that is the kernel's time: ``gpu__time_duration.sum``, else ``Duration``."""
    for wanted in _DURATIONS:
        for (_, name), series in kernel.series.items():
            if name == wanted and _is_time(series):
                return series
    return None


def _is_time(series: _Series) -> bool:
    return scale(series.units[0]).unit == NS


def _kernel_metrics(kernel: _Kernel, convert: _Converter, warnings: list[str]) -> list[Metric]:
    """The kernel's ``kernel`` metric, then its counters."""
    shared: dict[str, int] = {}
    for _, name in kernel.series:
        shared[name] = shared.get(name, 0) + 1
    duration = _duration(kernel)
    counters: list[Metric] = []
    for (section, name), series in kernel.series.items():
        if name in _DURATIONS and _is_time(series):
            continue  # the kernel's own time (or its duplicate under the other name)
        if name in _LAUNCH_CONFIG:
            key = _LAUNCH_CONFIG[name]
            if key not in kernel.attrs:  # the Block Size / Grid Size columns win
                for value in _numbers(series, convert, warnings)[1]:
                    kernel.note(key, _int_text(value))
            continue
        qualified = f"{section}: {name}" if shared[name] > 1 and section else name
        counter = _counter(kernel.name, qualified, series, convert, warnings)
        if counter is not None:
            if section:
                counter.attrs["section"] = section
            counters.append(counter)
    times = _numbers(duration, convert, warnings)[1] if duration is not None else []
    if times and len(times) < kernel.calls:
        warnings.append(
            f"kernel {kernel.name[:80]}: {kernel.calls - len(times)} of its {kernel.calls} "
            "launches have no duration (n/a); its total covers the others"
        )
    return [_kernel_metric(kernel, times), *counters]


def _kernel_attrs(kernel: _Kernel) -> dict[str, Any]:
    attrs: dict[str, Any] = {"first_launch": _int_or_text(kernel.first_launch)}
    for key, values in kernel.attrs.items():
        distinct = list(values)
        if key == "nvtx" or len(distinct) > 1:
            attrs[key] = [_int_or_text(value) for value in distinct[:_MAX_DISTINCT]]
        else:
            attrs[key] = _int_or_text(distinct[0])
    return attrs


def _kernel_metric(kernel: _Kernel, times: list[float]) -> Metric:
    attrs = _kernel_attrs(kernel)
    if not times:
        return Metric(kind=MetricKind.KERNEL, name=kernel.name, calls=kernel.calls, attrs=attrs)
    total = math.fsum(times)
    return Metric(
        kind=MetricKind.KERNEL,
        name=kernel.name,
        calls=kernel.calls,
        total_ns=total,
        avg_ns=total / len(times),
        min_ns=min(times),
        max_ns=max(times),
        median_ns=statistics.median(times),
        std_ns=statistics.stdev(times) if len(times) > 1 else None,
        samples_ns=times,
        attrs=attrs,
    )


def _counter(
    scope: str, name: str, series: _Series, convert: _Converter, warnings: list[str]
) -> Metric | None:
    """A ``counter`` for one metric of one kernel; ``None`` when it has no number."""
    unit_scale, values = _numbers(series, convert, warnings)
    if not values:
        return None  # n/a everywhere, or a string metric
    better = better_for(name, unit_scale)
    mean = math.fsum(values) / len(values)  # fsum: no drift over many launches
    if unit_scale.unit == NS:
        return Metric(
            kind=MetricKind.COUNTER,
            name=name,
            scope=scope,
            calls=len(values),
            avg_ns=mean,
            min_ns=min(values),
            max_ns=max(values),
            samples_ns=values,
            better=better,
        )
    return Metric(
        kind=MetricKind.COUNTER,
        name=name,
        scope=scope,
        calls=len(values),
        unit=unit_scale.unit,
        better=better,
        value=mean,
        samples=values,
    )


def _int_text(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


def _int_or_text(text: str) -> int | str:
    return int(text) if text.isdigit() else text
