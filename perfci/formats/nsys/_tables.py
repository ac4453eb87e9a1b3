"""Reading ``nsys stats`` tables, shared by the console (``nsys_stats``) and CSV
(``nsys_stats_csv``) parsers: the file as a stream of lines, a table's layout from its header,
its cells as numbers in the table's locale, its rows into profiles, and the warnings and errors
that name the line.
"""

from __future__ import annotations

import io
import math
import zlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from perfci.core.errors import ParseError
from perfci.core.limits import MAX_VALUE
from perfci.core.model import Profile
from perfci.core.units import in_range, to_decimal
from perfci.formats._textio import gc_paused, open_capped
from perfci.formats.nsys._profile_set import ProfileSet, file_stem
from perfci.formats.nsys._reports import ELISION, REPORTS, Layout, LayoutError, layout_for


class TableReader(ABC):
    """A parser of one file: its profiles, the line it is at, and what both flavours do with a
    table. ``noun`` is what a table is called in messages, ``wanted`` what a file without one
    lacks (for the error) and ``example`` the header that such a table starts with."""

    noun: str
    wanted: str
    example: str

    def __init__(self, path: Path, *, format: str) -> None:
        self.path = path
        self.format = format
        self.source = str(path)
        self.stem = file_stem(path)
        self.set = ProfileSet(format=format, source=self.source)
        self.line_no = 0

    @abstractmethod
    def run(self, lines: Iterable[str]) -> None:
        """Read every line (newline kept) into ``set``."""

    @abstractmethod
    def close(self) -> list[Profile]:
        """The profiles read, with warnings for a file that ends inside a table."""

    def read(self) -> list[Profile]:
        """The profiles of the file; a ``ParseError`` when it holds no table."""
        with open_lines(self.path, format=self.format) as lines:
            self.run(lines)
            profiles = self.close()
        if not profiles:
            raise ParseError(
                f"no {self.wanted} in {self.line_no} lines: expected {self.example}",
                source=self.source,
                line=self.line_no or None,
                format=self.format,
            )
        return profiles

    def layout(
        self,
        report: str | None,
        titles: list[str],
        *,
        unit: str | None = None,
        line: int | None = None,
    ) -> Layout | None:
        """The layout of a table of ``report`` (inferred from ``titles`` when ``None``);
        ``None``, with a warning at ``line``, for a table that perfci does not read."""
        spec = None
        if report is not None:
            spec = REPORTS.get(report)
            if spec is None or not spec.read:
                self.warn(
                    f"report {report!r} is not read by perfci; its {self.noun} was skipped", line
                )
                return None
        try:
            return layout_for(titles, spec, unit)
        except LayoutError as exc:
            self.warn(f"{self.noun} skipped: {exc}", line)
            return None

    def elided(self, stripped: str, layout: Layout) -> bool:
        """Whether a row is ``...``, where an author cut rows out (warned about)."""
        if stripped not in ELISION:
            return False
        self.warn(f"rows elided ({stripped!r}) in the {layout.report.name} {self.noun}")
        return True

    def add_row(self, layout: Layout, cells: list[str], numbers: Numbers) -> None:
        """One row's metrics into the current profile; a bad number is a ``ParseError``."""
        try:
            values = row_values(layout, cells, numbers)
        except ValueError as exc:
            raise ParseError(
                f"{layout.report.name} {self.noun}: {exc}",
                source=self.source,
                line=self.line_no,
                format=self.format,
            ) from exc
        text = {name: cells[index] for index, name in layout.text} if layout.text else None
        self.set.current.add(layout, cells[layout.name], values, text)

    def warn(self, message: str, line: int | None = None) -> None:
        """A warning at ``line`` (the current line by default)."""
        where = self.line_no if line is None else line
        self.set.current.warnings.append(f"line {where}: {message}")


@contextmanager
def open_lines(path: Path, *, format: str) -> Iterator[Iterable[str]]:
    """The lines of ``path`` (gunzipped when gzip) as a stream, newlines kept, BOM dropped.

    Undecodable bytes become U+FFFD: a stray byte in application output must not lose a file.
    Read errors, also those met while iterating, become a ``ParseError``. The cyclic garbage
    collector is paused meanwhile (``_textio.gc_paused``): a parser keeps one Metric and one
    dict per row, none in cycles, and CPython 3.11 re-scans that growing heap so often that it
    would dominate the parse of a large log.
    """
    try:
        with path.open("rb") as raw:
            gzipped = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            # Within _textio's inflation caps: a gzip bomb stops with InputTooLarge (issue 13).
            binary: Any = open_capped(raw, source=str(path), format=format) if gzipped else raw
            with gc_paused(settle=True):
                yield io.TextIOWrapper(binary, encoding="utf-8-sig", errors="replace", newline="")
    except (OSError, EOFError, zlib.error) as exc:
        raise ParseError(f"cannot read file: {exc}", source=str(path), format=format) from exc


class Numbers:
    """Cell → number in the table's locale: ``3,509,732,403.0``, ``2.176,0``, ``12 373 190``.

    The decimal mark is read from an ``Avg`` cell (nsys always prints it with decimals: one
    for times, three for MB), so that ``.`` can be told from a thousands separator.
    """

    __slots__ = ("fast", "grouping")

    def __init__(self, grouping: str = ",", *, spaces: bool = False) -> None:
        self.grouping = grouping
        # Spaces (or NBSP) inside numbers leave them to units.to_decimal, which strips them.
        self.fast = grouping == "," and not spaces

    @staticmethod
    def grouping_of(avg_cell: str, default: str = ",") -> str:
        """``"."`` when ``,`` is the decimal mark, ``","`` when ``.`` is, else ``default``."""
        comma, dot = avg_cell.rfind(","), avg_cell.rfind(".")
        if comma < 0 and dot < 0:
            return default
        return "." if comma > dot else ","

    def value(self, cell: str, factor: int = 1) -> float | None:
        """A time (ns) or size (bytes) from a cell in units of ``factor``."""
        if not cell or cell.isspace():
            return None  # CSV leaves a cell empty where nsys has no value
        if self.fast and factor == 1:
            # Same result as units.to_decimal for "," grouping, at a fifth of the cost: a
            # 100 MB log has millions of cells.
            return in_range(float(cell.replace(",", "")), cell)
        return in_range(float(to_decimal(cell, grouping=self.grouping) * factor), cell)

    def count(self, cell: str) -> int | None:
        if not cell or cell.isspace():
            return None
        if self.fast:
            return int(in_range(int(cell.replace(",", "")), cell))
        value = to_decimal(cell, grouping=self.grouping)
        if value != value.to_integral_value():
            raise ValueError(f"not an integer: {cell!r}")
        return int(in_range(int(value), cell))


def row_values(layout: Layout, cells: list[str], numbers: Numbers) -> dict[str, Any]:
    """The numeric cells of one row under their target keys; ``ValueError`` names the column."""
    if numbers.fast and layout.plain is not None:
        # The common case (ns columns, "," grouping) in one pass: a 100 MB log has millions
        # of cells. Anything odd (empty or bad cells) falls through to the checked path.
        try:
            values: dict[str, Any] = {
                target: float(cells[index].replace(",", "")) for index, target in layout.plain
            }
            if layout.calls is not None:
                values["calls"] = int(cells[layout.calls].replace(",", ""))
            # Finite and within ±MAX_VALUE, else the checked path names the cell (issue 31).
            found = values.values()
            if math.isfinite(sum(found)) and -MAX_VALUE <= min(found) <= max(found) <= MAX_VALUE:
                return values
        except (ValueError, OverflowError):  # OverflowError: a count beyond any float
            pass
    values = {}
    for index, target, factor, title in layout.numeric:
        try:
            values[target] = numbers.value(cells[index], factor)
        except (ValueError, ArithmeticError) as exc:
            raise ValueError(
                f"expected a number in column {title!r}, got {cells[index].strip()!r}"
            ) from exc
    if layout.calls is not None:
        try:
            values["calls"] = numbers.count(cells[layout.calls])
        except (ValueError, ArithmeticError) as exc:
            raise ValueError(
                f"expected a count in column {layout.titles[layout.calls]!r}, "
                f"got {cells[layout.calls].strip()!r}"
            ) from exc
    return values
