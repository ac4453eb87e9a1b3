"""Nsight Compute's default text report (``ncu`` without ``--csv``): the details page as text.

The report is the details page ``ncu --csv`` prints, laid out for a terminal, so it is read
into those rows and handed to ``ncu_csv``'s reader: one set of rules (kernel times per launch,
section metrics as per-kernel counters, units, locales, processes) for both. What the text adds
is only layout::

    ==PROF== Connected to process 307362 (/usr/bin/python3.12)      ncu's log lines, app output
    [307362] python3.12@127.0.0.1                                    a process: [pid] name@host
      void kernel<4>(int, T2, T3) (2048, 1, 1)x(128, 1, 1), Context 1, Stream 7, Device 0, CC 12.0
        NVTX Start/End Ranges:                                       optional, --nvtx
          <default domain>
            <0,convLayer>
        Section: GPU Speed Of Light Throughput
        ----------------------- ----------- ------------
        Metric Name             Metric Unit Metric Value             (absent under --metrics)
        ----------------------- ----------- ------------
        Duration                         us        12.13
        ----------------------- ----------- ------------
        INF   This workload is utilizing ...                         a rule's advice: skipped

A kernel line ends in ``, Context N, Stream N`` (newer releases add ``, Device N, CC X.Y`` and
put the grid and block before it; older ones a wall-clock time). The text prints no launch ID,
so launches are numbered in the order printed, per process. Columns are cut where the dash
runs of the table's rule line put them, never on spaces: metric names hold spaces.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING

from perfci.core.compat import compile_linear
from perfci.core.errors import ParseError
from perfci.core.model import Profile
from perfci.formats._text_lines import open_text
from perfci.formats._textio import gc_paused
from perfci.formats.ncu import ncu_csv

if TYPE_CHECKING:
    from perfci.formats.protocol import Head

NAME = "ncu_text"
DESCRIPTION = (
    "Nsight Compute's default text report (ncu without --csv): kernel times per launch, "
    "section metrics as per-kernel counters"
)

_PROCESS = re.compile(r"^\[(?P<pid>\d+)\] (?P<name>.*?)@(?P<host>[^@\s]*)\s*$")
_KERNEL = re.compile(
    r"^ {2}(?P<name>\S.*?)"
    r"(?: \((?P<grid>\d+, \d+, \d+)\)x\((?P<block>\d+, \d+, \d+)\))?"
    r"(?:, \d{4}-[A-Za-z]{3}-\d{2} \d{2}:\d{2}:\d{2})?"
    r", Context (?P<context>\d+), Stream (?P<stream>\d+)"
    r"(?:, Device (?P<device>\d+))?(?:, CC (?P<cc>\d+\.\d+))?\s*$"
)
# ``.*\S|.`` is what the lazy ``.+?\s*$`` took (up to the last non-blank, or one blank), in
# one pass: the lazy form tried ``\s*$`` from every character of a long blank run (issue 31).
_SECTION = re.compile(r"^ {4}Section: (?P<section>.*\S|.)\s*$")
_RULE_LINE = re.compile(r"^ {4}-{3,}(?: +-{3,})+ *$")
_NVTX = re.compile(r"^ {4}NVTX (?:Start/End Ranges|Push/Pop Stack[^:]*):\s*$")
_NVTX_RANGE = re.compile(r"^<(?P<id>\d+),(?P<name>.*)>$")
_TABLE_HEADER = ("Metric Name", "Metric Unit", "Metric Value")
#: A CSV report (``ncu --csv``) whose header lies beyond the part of the file sniffed.
_CSV_HEADER = re.compile(r'^\ufeff?"ID","Process ID"')

# A process line holding an "@" (a lookahead, then the line taken whole: ``[^\n]*@[^\n]*``
# re-read the rest of the line from every "@" of it, issue 31), a kernel line under it.
_SNIFF_PROCESS = compile_linear(
    r"(?m)^\[\d+\] (?=[^\n@]*+@)[^\n]*+\n {2}\S[^\n]*, Context \d+, Stream \d+"
)
_SNIFF_LOG = re.compile(r"(?m)^==PROF== (?:Connected to process|Profiling )")
_SNIFF_SECTION = re.compile(r"(?m)^ {4}Section: ")

#: The details page's columns, as ncu --csv names them (``NVTX Ranges`` is an NVTX column to
#: ncu_csv because it names a range).
_COLUMNS = (
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
    "NVTX Ranges",
    "Section Name",
    "Metric Name",
    "Metric Unit",
    "Metric Value",
)


def sniff(head: Head) -> bool:
    """A text report: a process line with a kernel line under it, or ncu's log lines with a
    ``Section:`` table (``ncu_csv`` comes first, so a CSV report never gets here)."""
    text = head.text
    if _SNIFF_PROCESS.search(text):
        return True
    return bool(_SNIFF_LOG.search(text) and _SNIFF_SECTION.search(text))


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """One profile per profiled process, as ``ncu_csv`` makes them from the same report."""
    reader = _TextReader(str(path))
    # settle: the values read stay alive until the end (see ncu_csv.parse).
    with gc_paused(settle=True), open_text(path, format=NAME) as handle:
        rows = reader.rows(handle)
        first = next(rows, None)
        if first is None:
            raise reader.nothing_found()
        profiles = ncu_csv.read_details_rows(
            chain([list(_COLUMNS), first], rows),
            source=str(path),
            options=options,
            format_name=NAME,
        )
    for profile in profiles:
        profile.warnings[:0] = reader.warnings  # found while the rows were read
    return profiles


@dataclass(slots=True)
class _Launch:
    """One kernel line: the identity cells every metric row of the launch repeats."""

    cells: list[str]
    nvtx: list[str] = field(default_factory=list)
    domain: str = ""

    def nvtx_line(self, text: str) -> None:
        """A domain (``<default domain>``) or a range in it (``<0,convLayer>``), kept as
        ``0:<default domain>:convLayer``, the start of the CSV's NVTX cells."""
        line = text.strip()
        if text.startswith("        ") and (match := _NVTX_RANGE.match(line)):
            self.nvtx.append(f"{match['id']}:{self.domain}:{match['name']}")
        elif line.startswith("<"):
            self.domain = line
        else:
            self.nvtx.append(line)


@dataclass(slots=True)
class _Table:
    """A section's table: where its columns start, and whether rows have begun."""

    section: str
    starts: tuple[int, int]  # the unit and value columns
    identity: tuple[str, ...]  # the cells every row of the table starts with
    rows: int = 0
    underline_next: bool = False  # after the header row, whose underline is not the end


class _TextReader:
    """The report's lines → details-page rows (one per metric of a launch)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.warnings: list[str] = []
        self.kernel_lines = 0
        self.csv_header_line: int | None = None

    def rows(self, lines: Iterable[str]) -> Iterator[list[str]]:
        """One row per metric value, in the details page's columns (``_COLUMNS``), as read."""
        process = ["", "", ""]  # pid, name, host
        launches: dict[str, int] = {}  # launches so far, per pid
        launch: _Launch | None = None
        section: str | None = None
        table: _Table | None = None
        in_nvtx = False
        for number, line in enumerate(lines, 1):
            text = line.rstrip("\r\n")
            if table is not None:
                if text[4:5] == "-" and _RULE_LINE.match(text):
                    if table.underline_next:
                        table.underline_next = False  # the header's underline: rows follow
                    else:
                        table = None  # the closing rule
                    continue
                if not text.strip():
                    table = None
                    continue
                cells = _cut(text, table.starts)
                if cells == _TABLE_HEADER and not table.rows:
                    table.underline_next = True
                    continue
                if not line.endswith("\n"):
                    self.warnings.append(
                        f"line {number}, the file's last line, was cut short inside the "
                        f"'{table.section}' table and was left out"
                    )
                    break
                table.rows += 1
                yield [*table.identity, *cells]
                continue
            if match := _PROCESS.match(text):
                process = [match["pid"], match["name"].strip(), match["host"]]
                launch, section, in_nvtx = None, None, False
            elif match := _KERNEL.match(text):
                self.kernel_lines += 1
                pid = process[0]
                launch_id = launches.get(pid, 0)
                launches[pid] = launch_id + 1
                launch = _launch(match, process, launch_id)
                section, in_nvtx = None, False
            elif launch is not None and _NVTX.match(text):
                in_nvtx = True
            elif launch is not None and (match := _SECTION.match(text)):
                section, in_nvtx = match["section"], False
            elif launch is not None and section is not None and _RULE_LINE.match(text):
                identity = (*launch.cells, "; ".join(launch.nvtx), section)
                table = _Table(section, _starts(text), identity)
            elif in_nvtx and text.startswith("      ") and text.strip():
                assert launch is not None
                launch.nvtx_line(text)
            elif _CSV_HEADER.match(text) and self.csv_header_line is None:
                self.csv_header_line = number
            else:
                in_nvtx = False  # app output, ==PROF== lines, a rule's advice, blank lines

    def nothing_found(self) -> ParseError:
        if self.csv_header_line is not None:
            message = (
                f"this is ncu --csv output (its CSV header is at line {self.csv_header_line}), "
                "not the text report: read it with --format ncu_csv"
            )
        elif self.kernel_lines:
            message = (
                f"{self.kernel_lines} kernel line(s) but no metric table under them: the file "
                "was cut short, or ncu collected no section (check its ==PROF== lines)"
            )
        else:
            message = (
                "no ncu text report found: expected a '[pid] process@host' line, kernel lines "
                "ending in ', Context N, Stream N' and 'Section:' tables under them, as ncu "
                "prints without --csv"
            )
        return ParseError(message, source=self.source, format=NAME)


def _launch(kernel: re.Match[str], process: list[str], launch_id: int) -> _Launch:
    """The identity cells of a kernel line's launch, in ``_COLUMNS`` order."""
    block, grid = kernel["block"], kernel["grid"]
    return _Launch(
        [
            str(launch_id),
            *process,
            kernel["name"],
            kernel["context"],
            kernel["stream"],
            f"({block})" if block else "",
            f"({grid})" if grid else "",
            kernel["device"] or "",
            kernel["cc"] or "",
        ]
    )


def _starts(rule: str) -> tuple[int, int]:
    """Where the unit and value columns start, from the table's rule line: the last two
    dash runs (a --metrics table has the same three columns as a section's)."""
    runs = [match.start() for match in re.finditer(r"-+", rule)]
    return runs[-2], runs[-1]


def _cut(text: str, starts: tuple[int, int]) -> tuple[str, str, str]:
    unit, value = starts
    return (text[:unit].strip(), text[unit:value].strip(), text[value:].strip())
