"""nvprof's text trace tables (``--print-gpu-trace`` / ``--print-api-trace`` without ``--csv``),
read by the positions of their header's column titles.

nvprof lays a trace out as a fixed-width table (columns left out here)::

       Start  Duration            Grid Size  ...           Device   Stream  Name
    612.48ms  1.0590ms                    -  ...  Tesla V100-SXM2        7  [CUDA memcpy HtoD]
    614.73ms  101.41us           (4096 1 1)  ...  Tesla V100-SXM2        7  vectorAdd(...) [118]

Every cell but the name is right-aligned to the end of its column's title (nvprof sizes each
column to its widest cell, and cuts device names to the ``Device`` column); the ``Name``
column is last and left-aligned. A title is a run of words separated by single spaces
(``Grid Size``); columns are separated by two spaces at least. So a row is cut at the title
ends, whatever spaces the device (``Tesla K80 (0)``) and kernel names hold.

A row whose cut falls inside a cell (a cell wider than its column) is read by its words
instead when the table has no free-text column but the name (each cell one word, or a
``(x y z)`` launch shape); with a free-text column (``Device``, ``Src Dev``...) the cells of
such a row could be split in more than one way, and the row is refused, naming its line.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfci.core.compat import compile_linear

#: Columns whose cells may hold spaces: device names (``Tesla K80 (0)``) in any of them.
_FREE_TEXT = frozenset({"Device", "Src Dev", "Dst Dev", "Unified Memory"})
#: Columns whose cells are ``(x y z)`` or ``-``.
_SHAPES = frozenset({"Grid Size", "Block Size"})
_TITLE = compile_linear(r"\S+(?: \S+)*+")


class MisalignedRow(ValueError):
    """A row whose cells cannot be told apart: the message says which column and why."""


@dataclass(frozen=True, slots=True)
class TraceLayout:
    """The columns of one text trace table: each title and where its cells end."""

    titles: tuple[str, ...]  # every column but Name
    ends: tuple[int, ...]  # the end of each title in the header line
    name_start: int  # where the Name column starts

    @classmethod
    def of(cls, header: str) -> TraceLayout | None:
        """The layout of a header line ending in ``Name``; ``None`` for any other line."""
        found = [(m.group(), m.start(), m.end()) for m in _TITLE.finditer(header)]
        # Titles are single words or words joined by single spaces; two spaces part columns.
        if len(found) < 3 or found[-1][0] != "Name" or found[0][0] != "Start":
            return None
        titles = tuple(title for title, _, _ in found[:-1])
        ends = tuple(end for _, _, end in found[:-1])
        return cls(titles=titles, ends=ends, name_start=found[-1][1])

    @property
    def gpu(self) -> bool:
        """A GPU trace (launches and copies) rather than an API trace (calls on the host)."""
        return "Grid Size" in self.titles or "Device" in self.titles

    def cells(self, line: str) -> tuple[dict[str, str], str]:
        """The cells of a row by column title, and its name.

        Raises ``MisalignedRow`` when the row cannot be cut at the columns and cannot be read
        by its words either.
        """
        try:
            return self._cut(line)
        except MisalignedRow:
            if any(title in _FREE_TEXT for title in self.titles):
                raise
            return self._words(line)

    def _cut(self, line: str) -> tuple[dict[str, str], str]:
        cells: dict[str, str] = {}
        start = 0
        for title, end in zip(self.titles, self.ends, strict=True):
            # Right-aligned cells end at their title's end: the character there is the blank
            # between two columns, and the one before the cell's start too.
            if end < len(line) and line[end] != " ":
                raise MisalignedRow(f"the {title} cell runs across its column's edge")
            cells[title] = line[start:end].strip()
            start = end
        if len(line) <= self.name_start or line[self.name_start - 1] != " ":
            raise MisalignedRow("the row does not reach the Name column")
        name = line[self.name_start :].strip()
        if not name:
            raise MisalignedRow("the row has no name")
        return cells, name

    def _words(self, line: str) -> tuple[dict[str, str], str]:
        """A row read by its words: each cell one word (or a ``(x y z)`` shape), the name the
        rest; only for tables whose cells hold no spaces but the name's."""
        rest = line.strip()
        cells: dict[str, str] = {}
        for title in self.titles:
            if title in _SHAPES and rest.startswith("("):
                close = rest.find(")")
                if close < 0:
                    raise MisalignedRow(f"the {title} cell has no closing parenthesis")
                cells[title], rest = rest[: close + 1], rest[close + 1 :].lstrip()
                continue
            word, _, rest = rest.partition(" ")
            if not word:
                raise MisalignedRow(f"the row ends before its {title} cell")
            cells[title], rest = word, rest.lstrip()
        if not rest:
            raise MisalignedRow("the row has no name")
        return cells, rest


def shape(cell: str) -> str | None:
    """``(4096 1 1)`` → ``4096x1x1``; ``None`` for ``-`` or an empty cell."""
    if not cell.startswith("(") or not cell.endswith(")"):
        return None
    return "x".join(cell[1:-1].split())
