"""The rows of nvprof's text trace tables, added to the run as the ``--csv`` trace rows are.

``_text_trace.TraceLayout`` cuts a row into cells; here each cell becomes what the CSV path
makes of the same column (``_csv.CsvReader._csv_trace``): Duration (ns), Size (bytes),
Throughput (bytes/s), the launch shape and the device, summed per name by ``_trace``.
"""

from __future__ import annotations

from collections.abc import Callable

from perfci.core.compat import compile_linear
from perfci.core.units import parse_duration, parse_size
from perfci.formats.nvprof._runs import RunReader, Table
from perfci.formats.nvprof._text_trace import MisalignedRow, shape
from perfci.formats.nvprof._trace import TraceSeries, classify, parse_rate

#: A trace row starts with its Start time (``612.48ms``, ``1.00263s``).
TRACE_ROW_START = compile_linear(r"\s*+\d++(?:\.\d++)?+[a-zµ]*+\s")


class TextTraceReader(RunReader):
    """``RunReader`` with the rows of text trace tables."""

    def _text_trace_line(self, lineno: int, line: str, raw: str, table: Table) -> bool:
        """Read ``line`` as a row of the text trace ``table``; ``False`` when it ends it."""
        layout = table.trace
        assert layout is not None
        if not raw.endswith("\n") or not TRACE_ROW_START.match(line):
            # A cut last row may hold a cut name, which would start a series of its own.
            return self._not_a_row(lineno, line, raw, table, TRACE_ROW_START)
        try:
            cells, name = layout.cells(line)
        except MisalignedRow as exc:
            raise self._error(
                lineno,
                f"cannot read this trace row: {exc}, so its cells cannot be told apart "
                f"(the header is on line {table.line}): {line.strip()[:120]!r}",
            ) from exc
        device = cells.get("Device")
        if device is None and layout.gpu:
            device = "GPU"  # a GPU trace printed without its Device column (older nvprof)
        elif device == "-":
            device = ""  # an API call in a GPU and API trace printed as one table
        kind, name, group = classify(name, device)
        run = self.run or self._current(lineno)
        series = run.traces.get((kind, name))
        if series is None:
            self.budget.metric()  # a summary of the same group may leave it out later
            series = run.traces[kind, name] = TraceSeries(kind, name, group, table.line)
        duration = self._text_cell(lineno, cells, "Duration", parse_duration)
        size = self._text_cell(lineno, cells, "Size", parse_size)
        if size is not None:
            size = float(round(size))  # whole bytes, as the CSV path keeps them
        rate = self._text_cell(lineno, cells, "Throughput", parse_rate)
        launch = [
            (what, found)
            for what, column in (("grids", "Grid Size"), ("blocks", "Block Size"))
            if (found := shape(cells.get(column, ""))) is not None
        ]
        if device:
            launch.append(("devices", device))
        self._count_trace_values(series, duration, size, rate)
        series.add(duration, size, launch, rate)
        return True

    def _count_trace_values(
        self, series: TraceSeries, duration: float | None, size: float | None, rate: float | None
    ) -> None:
        """Charge the run's caps: a sample beyond a name's first, a counter's first value as
        a metric (``_trace.TraceSeries.counters``) and its later ones as samples."""
        if duration is not None and series.samples:
            self.budget.sample()
        for value, seen in ((size, series.sizes), (rate, series.rates)):
            if value is not None and series.kind.value == "memory":
                (self.budget.sample if seen else self.budget.metric)()

    def _text_cell(
        self,
        lineno: int,
        cells: dict[str, str],
        column: str,
        parse: Callable[[str], float | None],
    ) -> float | None:
        cell = cells.get(column)
        if cell is None:
            return None
        try:
            return parse(cell)
        except ValueError as exc:
            example = {"Duration": "1.0590ms", "Size": "4.0000MB"}.get(column, "3.6886GB/s")
            raise self._error(
                lineno, f"expected a value such as {example} in column {column}, got {cell!r}"
            ) from exc
