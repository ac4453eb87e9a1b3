"""nvprof ``--csv`` tables, read by column name.

Each table is a quoted header row, an optional units row under it (``,%,us,,us,us,us,``:
bare numbers in a column are in that unit), then one row per line. The rows go to the same
metric builders as the text tables (``RunReader``): summary, unified memory, and the values
of ``--metrics`` / ``--events`` kernels. Trace tables (``"Start","Duration",…,"Name"``) are
summed per name by ``_trace``; their units row also names sizes and rates (``KB``, ``GB/s``).
"""

from __future__ import annotations

import csv
from collections.abc import Callable

from perfci.core.units import parse_duration, parse_int, parse_size
from perfci.formats.nvprof._runs import COUNT_START, GPU, TIME_COLUMNS, TIME_UNITS, Table
from perfci.formats.nvprof._text_rows import TextTraceReader
from perfci.formats.nvprof._trace import TraceSeries, classify, parse_rate

_CSV_HEADER_FIRST = frozenset({"Type", "Time(%)", "Device", "Start", "Invocations", "Count"})
_SIZE_UNITS = ("B", "KB", "MB", "GB", "TB")
#: The cells a units row may hold: times, %, sizes and (trace tables) rates such as GB/s.
_UNIT_CELLS = TIME_UNITS | {"", *_SIZE_UNITS} | {f"{unit}/s" for unit in _SIZE_UNITS}
_LAUNCH = (("grids", ("Grid X", "Grid Y", "Grid Z")), ("blocks", ("Block X", "Block Y", "Block Z")))


class CsvReader(TextTraceReader):
    """``RunReader`` with the ``--csv`` tables (their header and their rows), and the text
    trace tables' rows."""

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
        elif {"Start", "Duration", "Name"} <= columns.keys():
            kind = "trace"
        else:
            self._skip(lineno, f"rows of the CSV table at line {lineno} with columns {line[:80]}")
            return
        self._open(Table(kind, lineno, group=GPU, columns=columns))

    def _csv_line(self, lineno: int, line: str, raw: str, table: Table) -> bool:
        cells = _csv(line)
        if line.startswith('"') and cells and cells[0] in _CSV_HEADER_FIRST:
            return False  # the next table's header
        if table.expect_units:
            table.expect_units = False
            # A trace's units row may name a unit perfci has no use for (its Unified Memory
            # column); any row without a digit is its units row, as data rows have a Start.
            if not line.startswith('"') and (
                all(c.strip() in _UNIT_CELLS for c in cells)
                or (table.kind == "trace" and not any(c.isdigit() for c in line))
            ):
                table.csv_units = [c.strip() or "" for c in cells]
                return True
        if table.kind == "trace" and not raw.endswith("\n"):
            # A cut trace row may hold a cut name, which would start a series of its own.
            return self._not_a_row(lineno, line, raw, table, COUNT_START)
        if len(cells) != len(table.columns or {}):
            if not raw.endswith("\n"):
                return self._not_a_row(lineno, line, raw, table, COUNT_START)
            raise self._error(
                lineno,
                f"expected {len(table.columns or {})} CSV cells like the "
                f"header on line {table.line}, got {len(cells)}",
            )
        getattr(self, f"_csv_{table.kind}")(lineno, table, cells)
        return True

    def _cell(self, table: Table, cells: list[str], column: str) -> tuple[str, str | None]:
        """A CSV cell and its unit from the units row."""
        index = (table.columns or {}).get(column)
        if index is None:
            return "", None
        units = table.csv_units
        unit = units[index] if units and index < len(units) and units[index] else None
        return cells[index], unit

    def _csv_summary(self, lineno: int, table: Table, cells: list[str]) -> None:
        group = self._cell(table, cells, "Type")[0].strip() or table.group or GPU
        table.group = group
        pct = self._cell(table, cells, "Time(%)")[0]
        calls = self._cell(table, cells, "Calls")[0]
        name = self._cell(table, cells, "Name")[0]
        try:
            pct_value = float(pct) if pct.strip() else 0.0
            count = parse_int(calls) or 0
        except ValueError as exc:
            raise self._error(
                lineno, f"expected numbers in Time(%) and Calls, got {pct!r} and {calls!r}"
            ) from exc
        times = tuple(
            self._ns(lineno, *self._cell(table, cells, column), column) for column in TIME_COLUMNS
        )
        self._add_summary(lineno, group, pct_value, count, name, times)

    def _csv_trace(self, lineno: int, table: Table, cells: list[str]) -> None:
        """One launch, copy or API call of a trace table, added to its name's series."""
        columns = table.columns or {}
        device = columns.get("Device")
        kind, name, group = classify(
            cells[columns["Name"]], None if device is None else cells[device].strip()
        )
        run = self.run or self._current(lineno)
        series = run.traces.get((kind, name))
        if series is None:
            self.budget.metric()  # a summary of the same group may leave it out later
            series = run.traces[kind, name] = TraceSeries(kind, name, group, table.line)
        duration = self._trace_value(lineno, table, cells, "Duration", parse_duration)
        size = (
            self._trace_value(lineno, table, cells, "Size", parse_size)
            if "Size" in columns
            else None
        )
        if size is not None:
            size = float(round(size))  # whole bytes: 1.003906 KB is 1028, not 1027.999744
        launch = [
            (what, "x".join(dims))
            for what, axes in _LAUNCH
            if all(dims := tuple(self._cell(table, cells, axis)[0].strip() for axis in axes))
        ]
        if device is not None and cells[device].strip():
            launch.append(("devices", cells[device].strip()))
        rate = self._rate(table, cells) if "Throughput" in columns else None
        self._count_trace_values(series, duration, size, rate)
        series.add(duration, size, launch, rate)

    def _rate(self, table: Table, cells: list[str]) -> float | None:
        """A copy's Throughput in bytes/s; ``None`` when its units row names a unit perfci
        does not know (``Gbit/s``): a value derived from Size and Duration, never worth
        refusing the file for."""
        cell, unit = self._cell(table, cells, "Throughput")
        try:
            return parse_rate(cell, unit=unit)
        except ValueError:
            return None

    def _trace_value(
        self,
        lineno: int,
        table: Table,
        cells: list[str],
        column: str,
        parse: Callable[..., float | None],
    ) -> float | None:
        """A Duration (ns) or Size (bytes) cell in the unit of the units row; not memoised, as
        nearly every duration of a trace differs."""
        cell, unit = self._cell(table, cells, column)
        try:
            return parse(cell, unit=unit)
        except ValueError as exc:
            noun, example = (
                ("duration", "1.888000") if parse is parse_duration else ("size", "0.125000")
            )
            raise self._error(
                lineno,
                f"expected a {noun} such as {example} (in the units row's unit) in column "
                f"{column}, got {cell!r} ({exc})",
            ) from exc

    def _csv_um(self, lineno: int, table: Table, cells: list[str]) -> None:
        if device := self._cell(table, cells, "Device")[0]:
            self.device = device
        count = self._cell(table, cells, "Count")[0]
        if not count.strip().isdigit():
            raise self._error(lineno, f"expected a count in column Count, got {count!r}")
        sizes = [
            self._cell(table, cells, c) for c in ("Avg Size", "Min Size", "Max Size", "Total Size")
        ]
        time, unit = self._cell(table, cells, "Total Time")
        self._um_row(
            lineno, count.strip(), sizes, (time, unit), self._cell(table, cells, "Name")[0]
        )

    def _csv_metrics(self, lineno: int, table: Table, cells: list[str]) -> None:
        self._csv_values(
            lineno, table, cells, ("Metric Name", "Metric Description", "Min", "Max", "Avg")
        )

    def _csv_events(self, lineno: int, table: Table, cells: list[str]) -> None:
        self._csv_values(lineno, table, cells, ("Event Name", "Min", "Max", "Avg", "Total"))

    def _csv_values(
        self, lineno: int, table: Table, cells: list[str], columns: tuple[str, ...]
    ) -> None:
        self.device = self._cell(table, cells, "Device")[0] or self.device
        self._start_kernel(lineno, self._cell(table, cells, "Kernel")[0])
        invocations = self._cell(table, cells, "Invocations")[0].strip()
        if not invocations.isdigit():
            raise self._error(
                lineno, f"expected a count in column Invocations, got {invocations!r}"
            )
        values = tuple(self._cell(table, cells, column)[0] for column in columns)
        self._add_value(lineno, table.kind, (invocations, *values))


def _csv(line: str) -> list[str]:
    return next(csv.reader([line]), [])
