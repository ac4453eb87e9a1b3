"""Nsight Systems ``nsys stats --format csv`` output.

Each report is a CSV block: a header row with the console titles (``Time (%),Total Time (ns),
Instances,Avg (ns),...,Name``), rows, and a blank line. Console output can interleave
``Processing [x.sqlite] with [.../cuda_api_sum.py]...`` lines, which name the report and the
profile; ``-o base`` writes one file per report, ``base_<report>.csv``, whose name says the
same. Without either, the report is inferred from the columns (``_reports.INFER_RULES``).
Rows become metrics exactly as in the console text (``nsys_stats``).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from perfci.core.errors import ParseError
from perfci.core.model import Profile
from perfci.formats.nsys._detectors import NSYS_STATS_CSV
from perfci.formats.nsys._reports import REPORTS, Layout, processing
from perfci.formats.nsys._tables import Numbers, TableReader

NAME = NSYS_STATS_CSV.name
DESCRIPTION = NSYS_STATS_CSV.description
sniff = NSYS_STATS_CSV.sniff

_HEADER = re.compile(r'^"?(?:Time ?\(%\)|Total(?: \(\w+\))?)"?,"?(?:Total Time|Count|Operations)')


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """The profiles of one CSV file: one per ``Processing [x.sqlite]`` or repeated report."""
    return _Parser(path).read()


@dataclass(slots=True)
class _Block:
    layout: Layout
    numbers: Numbers | None = None


class _Parser(TableReader):
    noun = "block"
    wanted = "nsys stats CSV block"
    example = (
        "a header row such as 'Time (%),Total Time (ns),Instances,Avg (ns),...,Name' "
        "followed by rows"
    )

    def __init__(self, path: Path) -> None:
        super().__init__(path, format=NAME)
        self.block: _Block | None = None
        # base_<report>.csv names the report of its first block (the longest name that fits:
        # "_cuda_gpu_kern_gb_sum", not a shorter one).
        names = [name for name in REPORTS if self.stem.endswith(f"_{name}")]
        self.report = max(names, key=len) if names else None
        if self.report is not None:
            self.set.report_file(self.stem.removesuffix(f"_{self.report}"))
        self.last_newline = True

    def run(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.feed(line)

    def feed(self, raw: str) -> None:
        self.line_no += 1
        line = raw.rstrip("\r\n")
        self.last_newline = len(line) != len(raw)
        if self.block is not None and self._row(line):
            return
        stripped = line.strip()
        if _HEADER.match(stripped):
            self._open(stripped)
            return
        found = processing(stripped)
        if found:
            self.set.report_file(found[0])
            self.set.announce(found[1])
            self.report = found[1]

    def _open(self, header: str) -> None:
        titles = _cells(header)
        report, self.report = self.report, None
        layout = self.layout(report, titles)
        if layout is None:
            return
        if report is None or report not in self.set.current.announced:
            self.set.announce(report or layout.report.name)
        self.block = _Block(layout=layout)

    def _row(self, line: str) -> bool:
        """Consume a data row of the open block; ``False`` when the line ends the block."""
        block = self.block
        assert block is not None
        stripped = line.strip()
        if self.elided(stripped, block.layout):
            return True
        if not stripped or not (stripped[0].isdigit() or stripped[0] in '-."'):
            self.block = None
            return False
        cells = _cells(stripped)
        if len(cells) != len(block.layout.titles):
            raise ParseError(
                f"{block.layout.report.name} block: expected "
                f"{len(block.layout.titles)} comma-separated cells as in the "
                f"header, got {len(cells)}",
                source=self.source,
                line=self.line_no,
                format=NAME,
            )
        self._add(block, cells)
        return True

    def _add(self, block: _Block, cells: list[str]) -> None:
        layout = block.layout
        if block.numbers is None:
            avg = cells[layout.avg] if layout.avg is not None else ""
            block.numbers = Numbers(Numbers.grouping_of(avg, ""))
        self.add_row(layout, cells, block.numbers)

    def close(self) -> list[Profile]:
        if self.block is not None and not self.last_newline:
            self.warn(
                f"the file ends in the middle of a line of the "
                f"{self.block.layout.report.name} block: its last row may be cut short"
            )
        return self.set.profiles(self.stem)


def _cells(line: str) -> list[str]:
    if '"' not in line:
        return line.split(",")
    return next(csv.reader([line]))
