"""nvprof (CUDA ≤ 11 profiler) summary text and ``--csv`` output, ``--csv`` traces included.

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
* ``--csv`` GPU/API trace tables (``--print-gpu-trace`` / ``--print-api-trace``:
  ``"Start","Duration",…,"Name"``, one row per launch, copy or call) are summed per name into
  the metrics a summary row gives, with the same kind, name and device (``_trace``; a row
  without a Device in a GPU trace is an API call, ``[Unified Memory …]`` rows are ``memory``
  under their own name): ``calls``
  = rows, ``samples_ns`` = each row's Duration in file order, ``total_ns`` / ``avg_ns`` /
  ``min_ns`` / ``max_ns`` from them, ``bytes`` = the sum of Size (each row in whole bytes;
  KB = 1024 bytes, as in the summary's unified memory table), the first distinct grids /
  blocks / devices in ``attrs``. Rows without a Duration count as calls only. Kernel names
  lose the `` [123]`` correlation id older builds append. When the same result also has a
  summary table of a group (GPU activities, API calls, unified memory), the summary wins and a
  warning names the trace rows not read. A trace row cut by the end of the file is not read
  (a cut name would start a series of its own), with a warning.
* Text trace tables (``--print-gpu-trace`` / ``--print-api-trace`` without ``--csv``) are read
  by the positions of their header's titles (``_text_trace``: cells are right-aligned to
  their title's end, the name last), so spaces in device and kernel names are no ambiguity,
  and summed as the ``--csv`` traces are (``_text_rows``). A row whose cell runs past its
  column is read by its words when no cell but the name can hold a space; otherwise it is a
  ``ParseError`` naming the line. Copies' sizes and throughputs (both trace forms) become
  ``counter`` metrics ``size`` (bytes) and ``throughput`` (bytes/s, higher is better),
  scoped by the copy's name, one sample per copy.
* ``--csv`` tables are read by column name, bare numbers in the unit of the units row under
  the header (``,%,us,,us,us,us,``); a text table's ``-u`` units line works the same way.

Every ``Profiling result:`` block is its own profile, labelled by the profiled command (plus
``#N`` when one log holds several). Lines the tables do not explain (application output,
nvprof notes) are ignored outside tables and skipped with a warning inside a summary table,
which goes on after them; inside a table a line that starts like a row but
cannot be read is a ``ParseError``, except the file's unterminated last line, which a cut
file leaves behind and which gives a warning instead.

The file is streamed line by line; summary duration cells repeat a lot, so their conversions
are memoised (a trace's are not: nearly all differ). This module reads the text lines;
``_runs`` turns rows into metrics, ``_csv`` reads the ``--csv`` tables and ``_trace`` sums
trace rows per name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from perfci.core.compat import compile_linear
from perfci.core.errors import ParseError
from perfci.core.model import Profile
from perfci.formats._text_lines import open_text
from perfci.formats.nvprof._csv import CsvReader
from perfci.formats.nvprof._detectors import NVPROF
from perfci.formats.nvprof._run_end import finish_run
from perfci.formats.nvprof._runs import (
    API,
    COUNT_START,
    EVENT_HEADER,
    GPU,
    METRIC_HEADER,
    SUMMARY_HEADER,
    TIME_COLUMNS,
    TIME_UNITS,
    TRACE_HEADER,
    UM_HEADER,
    Table,
)
from perfci.formats.nvprof._text_trace import TraceLayout

NAME = NVPROF.name
DESCRIPTION = NVPROF.description
sniff = NVPROF.sniff

_BANNER = re.compile(r"(?:==(\d+)==|={8})\s*(.*)")
# Row patterns take each run of blanks or of cells whole (possessive ``*+``, ``++``): what
# follows a run can never start with what the run holds, so nothing a run gave back could
# match, and trying all the ways to split a long run was quadratic or worse (issue 31).
_ROW = compile_linear(
    r"\s*+(?:([A-Za-z][A-Za-z ()]*+):)?\s*+(\d++(?:\.\d++)?+)%\s++(\S++)\s++(\d++)\s++(\S++)"
    r"\s++(\S++)\s++(\S++)\s++(\S.*)"
)
_ROW_START = compile_linear(r"\s*+(?:[A-Za-z][A-Za-z ()]*+:)?\s*+\d++(?:\.\d++)?+%")
_UM_ROW = compile_linear(r"\s*+(\d++)\s++(\S++)\s++(\S++)\s++(\S++)\s++(\S++)\s++(\S++)\s++(\S.*)")
# Values are one token or a utilisation level with its number: ``Low (1)``, ``Idle (0)``.
_VALUE = r"([A-Za-z]++ \(\d++\)|\S++)"
# The description is the fewest whole words (lazily) before three values that end the row,
# else none (then two blanks at least after the name, as ``\s+(.*?)\s+`` had it); tried word
# by word, not from every character of a long blank run (issue 31).
_METRIC_ROW = compile_linear(
    r"\s*+(\d++)\s++(\S++)\s++((?:\S++(?:\s++\S++)*?)?)(?:(?<=\S)\s++|(?<=\s\s))"
    rf"{_VALUE}\s++{_VALUE}\s++{_VALUE}"
)
_EVENT_ROW = compile_linear(r"\s*+(\d++)\s++(\S++)\s++(\S++)\s++(\S++)\s++(\S++)\s++(\S++)")
_QUOTED = re.compile(r'(Thread|Domain|Range) "(.*)"(?:\s*\(id = (\d+)\))?')
_DEVICE = re.compile(r'Device "(.*)"')
_KERNEL = re.compile(r"\s*Kernel: (.*)")
_TOTAL = re.compile(r"(Total [A-Za-z ]+):\s*(\d+)")


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """One profile per ``Profiling result:`` block of the log."""
    reader = _Reader(str(path), format=NAME)
    feed = reader.feed
    with open_text(path, format=NAME) as handle:
        for lineno, line in enumerate(handle, 1):
            feed(lineno, line)
    return reader.finish()


class _Reader(CsvReader):
    """A line-driven state machine over one log; ``finish`` returns its profiles."""

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
            self._warning(
                f"line {lineno}, the file's last line, has no line break; it was "
                f"read but may have been cut short: {line.strip()[:80]!r}"
            )

    def _table_line(self, lineno: int, line: str, raw: str, table: Table) -> bool:
        """Read ``line`` as a row of ``table``; ``False`` when it ends the table."""
        if table.columns is not None:
            return self._csv_line(lineno, line, raw, table)
        if table.kind == "summary":  # not a row: ``feed`` tried that first
            return self._units_row(line, table) or self._not_a_row(
                lineno, line, raw, table, _ROW_START
            )
        if table.kind == "text_trace":
            return self._text_trace_line(lineno, line, raw, table)
        if table.kind == "metrics" or table.kind == "events":
            return self._metric_line(lineno, line, raw, table)
        if table.kind == "um":
            match = _UM_ROW.fullmatch(line)
            if match is not None:
                count, avg, low, high, total, time, name = match.groups()
                self._um_row(
                    lineno,
                    count,
                    [(avg, None), (low, None), (high, None), (total, None)],
                    (time, None),
                    name,
                )
                return True
            return self._not_a_row(lineno, line, raw, table, COUNT_START)
        table.rows += 1  # a skipped table: its rows are counted into a warning
        self._current(lineno).skipped[table.what] = table.rows
        return True

    @staticmethod
    def _units_row(line: str, table: Table) -> bool:
        """The units line under a ``-u/--normalized-time-unit`` header (``%  ms  ms  ms  ms``):
        from then on bare numbers in Time, Avg, Min and Max are in these units."""
        tokens = line.split()
        if not 4 <= len(tokens) <= 5 or not all(token in TIME_UNITS for token in tokens):
            return False
        table.units = tuple(tokens[-4:])
        return True

    def _free_line(self, lineno: int, line: str) -> None:
        """A line outside any table: a header, a section line, or application output."""
        stripped = line.strip()
        if header := SUMMARY_HEADER.match(line):
            group = None if header.group(1) else (API if self.section == "api" else GPU)
            self._open(Table("summary", lineno, group=group, text_summary=True))
        elif line.startswith('"') and '","' in line:
            self._csv_header(lineno, line)
        elif UM_HEADER.match(line):
            self._open(Table("um", lineno))
        elif METRIC_HEADER.match(line):
            self._open(Table("metrics", lineno))
        elif EVENT_HEADER.match(line):
            self._open(Table("events", lineno))
        elif TRACE_HEADER.match(line):
            layout = TraceLayout.of(line)
            if layout is None:
                self._skip(lineno, f"rows of the trace table at line {lineno} (no Name column)")
            else:
                self._open(Table("text_trace", lineno, group=GPU, trace=layout))
        elif self.run is not None and _ROW.fullmatch(line):
            raise self._error(
                lineno,
                "a summary row outside a table: expected the header "
                "'Type  Time(%)  Time  Calls  Avg  Min  Max  Name' before it",
            )
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
        sections = {
            "API calls:": "api",
            "NVTX result:": "nvtx",
            "Metric result:": "metrics",
            "Event result:": "events",
            "Unified Memory profiling result:": "um",
        }
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

    # --- summary rows ----------------------------------------------------------------------

    def _summary_row(self, lineno: int, table: Table, match: re.Match[str]) -> None:
        group, pct, time, calls, avg, low, high, name = match.groups()
        if group is None:
            group = table.group
            if group is None:
                raise self._error(
                    lineno,
                    "expected a Type (GPU activities:, API calls:) on the first row of a table",
                )
        else:
            table.group = group
        cache = self.cache
        times: tuple[float | None, ...]
        if (
            table.units is None
            and time in cache
            and avg in cache
            and low in cache
            and high in cache
        ):
            times = (cache[time], cache[avg], cache[low], cache[high])
        else:
            times = self._times(lineno, (time, avg, low, high), table.units)
        self._add_summary(lineno, group, float(pct), int(calls), name, times)

    def _times(
        self, lineno: int, cells: tuple[str, ...], units: tuple[str | None, ...] | None
    ) -> tuple[float | None, ...]:
        units = units or (None, None, None, None)
        return tuple(
            self._ns(lineno, cell, unit, column)
            for cell, unit, column in zip(cells, units, TIME_COLUMNS, strict=True)
        )

    # --- metric / event tables -------------------------------------------------------------

    def _metric_line(self, lineno: int, line: str, raw: str, table: Table) -> bool:
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
            return self._not_a_row(lineno, line, raw, table, COUNT_START)
        self._add_value(lineno, table.kind, match.groups())
        return True

    # --- the end ---------------------------------------------------------------------------

    def finish(self) -> list[Profile]:
        profiles = [profile for run in self.runs if (profile := finish_run(run)).metrics]
        if not profiles:
            raise ParseError(
                "no nvprof result found: expected a 'Profiling result:' block "
                "with GPU activities / API calls rows, or nvprof --csv tables (summary or trace)",
                source=self.source,
                format=NAME,
            )
        empty = len(self.runs) - len(profiles)
        if empty:
            profiles[0].warnings.append(
                f"{empty} 'Profiling result:' block(s) had no rows and were left out"
            )
        if self.pending:
            profiles[-1].warnings.extend(self.pending)
        if len(profiles) > 1:
            for index, profile in enumerate(profiles, 1):
                profile.label = f"{profile.label} #{index}"
                profile.metadata["index"] = index
        return profiles
