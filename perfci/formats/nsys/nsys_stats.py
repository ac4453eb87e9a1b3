"""Nsight Systems ``nsys stats`` / ``nsys profile --stats=true`` console text.

Every era is read: 2020 titles (``CUDA API Statistics (nanoseconds)``), 2021 ``Running
[.../cudaapisum.py x.sqlite]...``, 2022 ``Processing [x.sqlite] with [.../gpukernsum.py]...`` +
`` ** CUDA GPU Kernel Summary (gpukernsum):``, 2023+ ``[5/8] Executing 'cuda_api_sum' stats
report``. A table is a header line (wrapped onto a second line in some 2021 dumps), a line of
dashes that gives the column extents, and rows up to the next blank or non-row line. Column
units come from the titles (``Avg (ns)``, ``Total (MB)``); digit grouping from the ``Avg``
column (``_tables.Numbers``). What each report's rows become is ``_reports`` data:
nvtx → ``range`` (plus ``step`` for step-like ranges), osrt → ``os``, cuda_api → ``api``,
gpu_kern → ``kernel`` (NCCL kernels → ``comm``), gpu_mem_time + gpu_mem_size → ``memory``.

One file can hold several profiles (a driver that runs ``nsys profile --stats=true`` once per
phase logs forward / backward / train, labelled from their ``x.nsys-rep`` names); prose,
application output and line-number gutters around the tables yield nothing. The file is read
as a stream, one line at a time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING

from perfci.core.compat import compile_linear
from perfci.core.limits import MAX_VALUE
from perfci.core.model import Profile
from perfci.formats.nsys._reports import (
    MEMORY_TITLE_2020,
    TITLE_UNITS,
    TITLES_2020,
    Layout,
    processing,
)
from perfci.formats.nsys._tables import Numbers, TableReader

if TYPE_CHECKING:
    from perfci.formats.protocol import Head

NAME = "nsys_stats"
DESCRIPTION = "Nsight Systems 'nsys stats' / 'nsys profile --stats=true' console text (2020-2025)"

_EXECUTING = re.compile(r"^\[(\d+)/(\d+)\]\s+Executing '([\w.-]+)' stats report")
_PROGRESS = re.compile(r"^\[(\d+)/(\d+)\]\s+\[[=\s]*\d+%\]\s+(\S+\.(?:nsys-rep|qdrep|sqlite))")
_RUNNING = re.compile(r"^Running \[(?:.*[/\\])?([\w.-]+?)\.py\s+(.+?)\]")
_SQLITE = re.compile(r"^(?:Generating SQLite file|Using) (\S+\.sqlite)\b")
_REPORT_TITLE = re.compile(r"^\*\* .+ \(([\w.-]+)\):$")  # "** CUDA API Summary (cuda_api_sum):"
_TITLE_2020 = re.compile(r"^(.+? Statistics) \((\w+)\)$")
_HEADER_START = ("Time(%)", "Time (%)", "Total")
_DASHES = re.compile(r"^\s*-+(?:\s+-+)+\s*$")
_DASH_RUN = re.compile(r"-+")
_TITLES = re.compile(r"\s{2,}")
_WRAPPED_TITLES = re.compile(r"^[A-Za-z][A-Za-z ()%]*$")  # "Name" alone on the next line
# Linear on any head (issue 31): the first "] with [" or ".py " is taken for good (an atomic
# group: a later one leaves less room, so cannot match where the first did not), and blanks
# before a title stay on its line (``\s*`` after ``^`` ran on through every blank line below).
_SNIFF = compile_linear(
    r"(?m)^(?:\[\d+/\d+\] Executing '\w+' stats report|Processing \[(?>.+?\] with \[).+\.py\]"
    r"|Running \[(?>.+?\.py ).+\]|[^\S\n]*Time ?\(%\)\s+Total Time|CUDA API Statistics \(\w+\)"
    r"|[^\S\n]*\*\* .+ \((?:cuda|gpu|nvtx|osrt|cudaapi)\w*\):)"
)
_CSV_HEADER = re.compile(r"(?m)^\"?Time ?\(%\)\"?,")
_MAX_HEADER_LINES = 3
_DIGITS = frozenset("0123456789")
_ROW_START = frozenset("0123456789-.")


def sniff(head: Head) -> bool:
    """An nsys report marker or summary header, and not the CSV flavour."""
    text = head.text
    return bool(_SNIFF.search(text)) and not _CSV_HEADER.search(text)


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """The profiles of one console log: one per nsys run found in it."""
    return _Parser(path).read()


@dataclass(slots=True)
class _Table:
    layout: Layout
    spans: list[tuple[int, int]]
    numbers: Numbers | None = None  # decided by the first row
    split: bool = True  # rows split on whitespace (False: cut at the dash columns)
    rows: int = 0
    last: int = 0  # index of the last (name) cell
    fast: _FastRow | None = None

    def __post_init__(self) -> None:
        self.last = len(self.spans) - 1


@dataclass(frozen=True, slots=True)
class _FastRow:
    """The common row, read with a handful of C-level calls: the six ns columns and a count,
    ``,`` grouping, the name starting at its dash column. Anything unexpected sends the row
    through the checked path (``_Parser._row``), which gives the error message if any."""

    name_start: int
    cells: int  # cells before the name
    pick: Callable[[list[str]], tuple[str, ...]]  # the TIME_ORDER cells
    calls: int
    text: tuple[tuple[int, str], ...]

    @classmethod
    def of(cls, table: _Table) -> _FastRow | None:
        layout = table.layout
        numbers = table.numbers
        if (
            layout.ordered is None
            or layout.calls is None
            or not table.split
            or numbers is None
            or not numbers.fast
        ):
            return None
        return cls(
            name_start=table.spans[-1][0],
            cells=table.last,
            pick=itemgetter(*layout.ordered),
            calls=layout.calls,
            text=tuple(layout.text),
        )


class _Parser(TableReader):
    """A line-by-line state machine: scanning → header → table rows → scanning."""

    noun = "table"
    wanted = "nsys stats summary table"
    example = (
        "a header such as ' Time (%)  Total Time (ns)  Num Calls  Avg (ns) ...  Name' "
        "followed by a line of dashes and rows"
    )

    def __init__(self, path: Path) -> None:
        super().__init__(path, format=NAME)
        self.report: str | None = None  # the report whose table comes next
        self.unit: str | None = None  # a 2020 title's unit
        self.header: list[str] = []
        self.header_line = 0
        self.table: _Table | None = None
        self.grouping = ","  # the file's locale once a table has shown it
        self.last_newline = True

    # -- lines ---------------------------------------------------------------------------------

    def run(self, lines: Iterable[str]) -> None:
        raw = "\n"
        for self.line_no, raw in enumerate(lines, start=1):
            line = raw.rstrip("\r\n")
            if "\u00a0" in line:
                # Logs copied from web pages pad with NBSP; NBSP-grouped numbers
                # then read as space-grouped ones, which the dash columns still delimit.
                line = line.replace("\u00a0", " ")
            if "\u202f" in line:
                line = line.replace("\u202f", " ")  # narrow NBSP: French digit grouping
            table = self.table
            if table is None:
                if not self.header:
                    # Outside tables most lines are prose, gutters and blanks: skip them
                    # with as little work as possible.
                    stripped = line.strip()
                    if stripped and stripped[0] not in _DIGITS:
                        self._scan(stripped, line)
                    continue
            elif (table.fast is not None and self._fast_row(table, table.fast, line)) or self._row(
                line
            ):
                continue
            self._line(line)
        self.last_newline = raw.endswith(("\n", "\r"))

    def _fast_row(self, table: _Table, fast: _FastRow, line: str) -> bool:
        """The hot path: a row of a table whose layout is known (see ``_FastRow``)."""
        nums = line[: fast.name_start].replace(",", "").split()
        if len(nums) != fast.cells or nums[0][0] not in _ROW_START:
            return False
        name = line[fast.name_start :].strip()
        try:
            times = tuple(map(float, fast.pick(nums)))
            calls = int(nums[fast.calls])
        except ValueError:
            return False
        # A count beyond any float goes the checked way, whose error names its cell (issue 31).
        if not name or not math.isfinite(sum(times)) or not -MAX_VALUE <= calls <= MAX_VALUE:
            return False
        text = {key: nums[i] for i, key in fast.text} if fast.text else None
        self.set.current.add_times(table.layout, name, text, calls, times)
        table.rows += 1
        return True

    def _line(self, line: str) -> None:
        stripped = line.strip()
        if not stripped:
            self.header.clear()
            return
        if self.header:
            if _DASHES.match(line):
                self._open_table(line)
                return
            if len(self.header) < _MAX_HEADER_LINES and _WRAPPED_TITLES.match(stripped):
                self.header.append(line)  # a header wrapped onto the next line (2021)
                return
            self.header.clear()
        self._scan(stripped, line)

    def _scan(self, stripped: str, line: str) -> None:
        first = stripped[0]
        if first.isdigit():
            return  # no marker starts with a digit: line-number gutters, stray rows
        if first == "[":
            self._bracket(stripped)
        elif stripped.startswith(_HEADER_START) and "  " in stripped:
            self.header = [line]
            self.header_line = self.line_no
        elif first == "P":
            self._processing(stripped)
        elif first == "*":
            match = _REPORT_TITLE.match(stripped)
            if match and match.group(1) != self.report:
                self._announce(match.group(1))
        elif stripped.startswith("SKIPPED") or stripped.endswith("SKIPPED"):
            self._skipped()
        elif first in "RGU":
            self._running(stripped)
        elif stripped.endswith(")") and "Statistics (" in stripped:
            self._title_2020(stripped)

    def _bracket(self, stripped: str) -> None:
        match = _EXECUTING.match(stripped)
        if match:
            index = (int(match.group(1)), int(match.group(2)))
            self._announce(match.group(3), index)
            return
        match = _PROGRESS.match(stripped)
        if match:
            self.set.report_file(match.group(3))
            self.set.step((int(match.group(1)), int(match.group(2))))

    def _processing(self, stripped: str) -> None:
        if stripped.startswith("Profiling:"):
            self._profiling(stripped)
            return
        found = processing(stripped)
        if found:
            self.set.report_file(found[0])
            self._announce(found[1])

    def _running(self, stripped: str) -> None:
        # Matched up to the line's last "]" only, where every match ends anyway: the lazy
        # ``(.+?)\]`` then finds its "]" at once, instead of reading on to the end of the
        # line from every ".py" of it (issue 31).
        match = _RUNNING.match(stripped, 0, stripped.rfind("]") + 1)
        if match:
            self.set.report_file(match.group(2))
            self._announce(match.group(1))
            if "SKIPPED" in stripped:  # 2021: "Running [...]... SKIPPED: no CUDA data."
                self._skipped()
            return
        match = _SQLITE.match(stripped)
        if match:
            self.set.report_file(match.group(1))

    def _profiling(self, stripped: str) -> None:
        """A driver's label line: ``Profiling: size=2.7B, context_length=512, type=forward``."""
        text = stripped.removeprefix("Profiling:").strip()
        fields = dict(part.strip().split("=", 1) for part in text.split(",") if "=" in part)
        self.set.start(text, {"profiling": fields} if fields else {})

    def _title_2020(self, stripped: str) -> None:
        match = _TITLE_2020.match(stripped)
        if not match:
            return
        title, unit = match.groups()
        report = TITLES_2020.get(title)
        if title == MEMORY_TITLE_2020:
            report = (
                "gpumemtimesum"
                if TITLE_UNITS.get(unit) in ("ns", "us", "ms", "s")
                else "gpumemsizesum"
            )
        if report is not None:
            self._announce(report)
            self.unit = TITLE_UNITS.get(unit)

    def _announce(self, report: str, index: tuple[int, int] | None = None) -> None:
        self.set.announce(report, index)
        self.report = report
        self.unit = None

    def _skipped(self) -> None:
        if self.report is not None:
            self.set.current.metadata.setdefault("skipped_reports", []).append(self.report)
        self.report = None

    # -- tables --------------------------------------------------------------------------------

    def _open_table(self, dashes: str) -> None:
        spans = [(m.start(), m.end()) for m in _DASH_RUN.finditer(dashes)]
        titles = _titles(self.header, spans)
        self.header = []
        report, self.report = self.report, None
        layout = self.layout(report, titles, unit=self.unit, line=self.header_line)
        if layout is None:
            return
        if report is None:
            self.set.announce(layout.report.name)
        self.table = _Table(layout=layout, spans=spans)

    def _row(self, line: str) -> bool:
        """Consume ``line`` as a row of the open table; ``False`` when it ends the table."""
        table = self.table
        assert table is not None
        stripped = line.strip()
        if self.elided(stripped, table.layout):
            return True
        if not stripped or stripped[0] not in _ROW_START:
            return self._close_table()
        if table.numbers is None:
            self._first_row(table, line)
        cells = self._cells(table, line)
        if cells is None:
            self.warn(
                f"line ends the {table.layout.report.name} table but is not one of its "
                f"rows: {line.strip()[:80]!r}"
            )
            return self._close_table()
        self._add(table, cells)
        return True

    def _first_row(self, table: _Table, line: str) -> None:
        layout = table.layout
        sliced = _slice(line, table.spans)
        avg = sliced[layout.avg] if layout.avg is not None else ""
        self.grouping = Numbers.grouping_of(avg, self.grouping)
        # Rows are sorted by total time, so the first row holds the widest numbers: if they
        # are grouped with spaces (or GridXYZ cells hold spaces), every row must be cut at the
        # dash columns instead of split on whitespace.
        spaced = any(" " in sliced[i] for i, *_ in layout.numeric)
        table.numbers = Numbers(self.grouping, spaces=spaced)
        texts = any(name in ("grid", "block") for _, name in layout.text)
        table.split = not (spaced or texts or layout.name != len(table.spans) - 1)
        table.fast = _FastRow.of(table)

    def _cells(self, table: _Table, line: str) -> list[str] | None:
        count = len(table.spans)
        if table.split:
            cells = line.split(None, count - 1)
            if len(cells) < count:
                return None
            cells[-1] = cells[-1].rstrip()
            return cells
        cells = _slice(line, table.spans)
        return cells if cells[table.layout.name] else None

    def _add(self, table: _Table, cells: list[str]) -> None:
        assert table.numbers is not None
        self.add_row(table.layout, cells, table.numbers)
        table.rows += 1

    def _close_table(self) -> bool:
        self.table = None
        return False

    def close(self) -> list[Profile]:
        table = self.table
        if table is not None:
            tail = "" if self.last_newline else " in the middle of a line"
            self.warn(
                f"the file ends{tail} inside the {table.layout.report.name} table after "
                f"{table.rows} rows: the output may be cut short"
            )
        return self.set.profiles(self.stem)


def _slice(line: str, spans: list[tuple[int, int]]) -> list[str]:
    """Cells cut at the dash columns; the last one runs to the end of the line."""
    cells = [line[start:end].strip() for start, end in spans[:-1]]
    cells.append(line[spans[-1][0] :].strip())
    return cells


def _titles(header: list[str], spans: list[tuple[int, int]]) -> list[str]:
    """Column titles: split on runs of spaces, or cut at the dash columns when that disagrees
    with the number of columns (titles are centred, and 2021 wraps ``Name`` to a new line)."""
    titles = _TITLES.split("  ".join(line.strip() for line in header))
    if len(titles) == len(spans):
        return titles
    parts = [_slice(line, spans) for line in header]
    return [" ".join(p[i] for p in parts if p[i]) for i in range(len(spans))]
