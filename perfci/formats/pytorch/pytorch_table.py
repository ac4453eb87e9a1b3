"""PyTorch profiler ``key_averages().table()`` text.

A table is a dashed separator line, a header row whose first cell is ``Name``, the same
separator, the rows, the separator again, then optional footers (``Self CPU time total: ...``).
Column positions come from the dash runs of the separator, never from splitting on spaces:
names hold spaces and commas. Header cells may be wider than their column (``CUDA time avg``
is 13 characters in a 12-wide column), so the header alone is split on runs of 2+ spaces.
The device columns are read generically (``Self XPU``, ``NPU total`` ...), as are the legacy
torch <= 1.7 headers (left-aligned, ``Self CPU total``, ``Number of Calls``).

What becomes which metric:

* each row gives a CPU metric (``Self CPU`` → ``self_ns``, ``CPU total`` → ``total_ns``,
  ``CPU time avg`` → ``avg_ns``, calls) and, in tables with device columns, a GPU metric from
  the device columns. A side whose times and memory are all zero is left out when the other
  side has data (kernels have no CPU time, CUDA API calls no device time), so every row gives
  at least one metric. Memory columns go to ``attrs`` (``mem_bytes``, ``self_mem_bytes``), as
  do FLOPs, input shapes, node id, overload name and the stack of ``Source Location`` rows;
* each non-negative memory cell (``CPU Mem``, ``Self CPU Mem``, ``CUDA Mem``, ``Self CUDA
  Mem``, 1024-based: ``1.50 Mb`` = 1,572,864 bytes) is also a ``counter`` metric: scope = the
  row's metric name, name = the column, unit bytes, lower is better. Negative cells are net
  frees and give no counter (``_table_finish.memory_counters``);
* the kind comes from the name (``_table_rows.kind_of``); unknown names are
  ``record_function`` ranges, except in legacy tables where unprefixed names (``to``,
  ``matmul``) are operators;
* numbered step ranges (``train_step-0``, ``ProfilerStep#3``) become ``step`` metrics through
  ``_steps.collect_steps`` (one from CPU totals, one from device totals when present), and the
  merged ``ProfilerStep*`` row becomes a step metric with its call count.

Names are not unique within a table: names cut to 52 characters + ``...`` collide, as do rows
grouped by input shape or stack, legacy per-call rows, and the GPU projection of a
``record_function`` range. Rows are kept apart, never merged: on a collision the input shapes
(or ``@ first stack frame``) are appended where they tell the rows apart, then `` (2)``,
`` (3)`` ... in table order; ``attrs["table_name"]`` keeps the printed name, ``attrs["row"]``
the row's position and ``attrs["truncated"]`` marks cut names.

Each table is its own profile (logs print the same table per step or per rank), labelled by
its heading (``Top operators by CUDA time:``, the ``header=`` text after a ``=`` rule) or
``key_averages``, with `` (2)`` ... for repeats. Lines inside a table that do not fit its
columns (interleaved log lines) are skipped with a warning; a file that ends inside a table
keeps its complete rows and says so in ``Profile.warnings``.

The file is streamed line by line and a table becomes its profile as soon as it ends. Per row
the work is a few precomputed slices: each distinct cell text is parsed once (by
``perfci.core.units``), layouts are built once per distinct header, and the cyclic garbage collector
is paused while reading (see ``benchmarks/parse_speed.py`` for the speed this keeps).
"""

from __future__ import annotations

import re
from collections import Counter, deque
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

from perfci.core.errors import ParseError
from perfci.core.model import Device, Profile
from perfci.core.units import parse_duration
from perfci.formats._fixed_width import SEPARATOR, Layout, build_layout
from perfci.formats._text_lines import open_text
from perfci.formats.caps import budget
from perfci.formats.pytorch._detectors import PYTORCH_TABLE
from perfci.formats.pytorch._table_finish import memory_counters, name_rows, table_steps
from perfci.formats.pytorch._table_rows import CellError, Table, Values, add_row, continuation

NAME = PYTORCH_TABLE.name
DESCRIPTION = PYTORCH_TABLE.description
sniff = PYTORCH_TABLE.sniff

_FOOTER = re.compile(r"^(Self )?(\S+) time total: *(\S*)")
_RULE = re.compile(r"^=+$")
_LEGACY_CAVEAT = re.compile(
    r"autograd profiler uses the CUDA event API|CUDA time column "
    r"reports|Please ignore this output"
)
_LABEL = "key_averages"


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """One profile per ``key_averages()`` table in ``path``, in file order."""
    source = str(path)
    reader = _Reader(source)
    with open_text(path, format=NAME) as handle:
        reader.feed(handle)
    if not reader.profiles:
        raise ParseError(
            "no key_averages() table found: expected a dashed separator line, "
            "a header row starting with 'Name', and the separator again",
            source=source,
            line=1,
            format=NAME,
        )
    return reader.profiles


# --- reading tables -----------------------------------------------------------------------


class _Reader:
    """A line-at-a-time state machine: look for a table, read its rows, read its footer."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.profiles: list[Profile] = []
        self.labels: Counter[str] = Counter()
        self.values = Values()
        self.layouts: dict[tuple[str, str, str], Layout] = {}
        self.recent: deque[str] = deque(maxlen=3)  # last non-blank lines, for headings
        self.pending: tuple[int, re.Match[str]] | None = None  # a separator line
        self.header: tuple[int, str] | None = None  # a header row after it
        self.table: Table | None = None
        self.budget = budget(source, NAME)  # the caps of a service upload (issue 31)

    def feed(self, lines: Iterator[str] | TextIO) -> None:
        number, line = 0, ""
        for number, line in enumerate(lines, 1):
            if self.table is not None:
                self._in_table(number, line)
            else:
                self._seek(number, line.rstrip("\r\n"))
        if self.table is not None:
            self._cut_short(number)

    def _seek(self, number: int, text: str) -> None:
        if self.header is not None and self.pending is not None:
            start, match = self.pending
            if text.rstrip() == match.group(0).rstrip():
                self._begin(start, match, self.header[1])
                return
            self.pending = self.header = None
        if self.pending is not None:
            prefix = self.pending[1].group("prefix")
            if (
                text.startswith(prefix)
                and text[len(prefix) :].lstrip().startswith("Name  ")
                and ("CPU" in text or "Calls" in text)
            ):
                self.header = (number, text)
                return
            self.pending = None
        if "---" in text:
            separator = SEPARATOR.match(text)
            if separator is not None:
                self.pending = (number, separator)
                return
        self._outside(text)

    def _outside(self, text: str) -> None:
        """A line outside any table: a footer of the last table, or a possible heading."""
        stripped = text.strip().lstrip("#").strip()
        if not stripped:
            return
        if "time total:" in stripped and self.profiles and not self.recent:
            footer = _FOOTER.match(stripped)
            if footer is not None:
                self._footer(footer)
                return
        self.recent.append(stripped)

    def _footer(self, match: re.Match[str]) -> None:
        last = self.profiles[-1]
        key = f"{'self_' if match.group(1) else ''}{match.group(2).lower()}_time_total"
        try:
            value = parse_duration(match.group(3))
        except ValueError:
            last.warnings.append(f"footer {match.group(0)!r}: unreadable time, kept as text")
            last.metadata[key] = match.group(3)
            return
        last.metadata[f"{key}_ns"] = value

    def _begin(self, start: int, match: re.Match[str], header: str) -> None:
        prefix = match.group("prefix")
        key = (prefix, match.group("sep"), header[len(prefix) :])
        layout = self.layouts.get(key)
        if layout is None:  # logs print the same table layout over and over
            layout = self.layouts[key] = build_layout(
                *key, source=self.source, line=start + 1, format=NAME
            )
        heading = _heading(list(self.recent))
        self.recent.clear()
        self.pending = self.header = None
        self.table = Table(layout=layout, line=start, heading=heading)

    def _finish(self, table: Table) -> None:
        """Turn a table into its profile as soon as it ends: only one table is held at a time."""
        label = table.heading or _LABEL
        self.labels[label] += 1
        if self.labels[label] > 1:
            label = f"{label} ({self.labels[label]})"
        self.profiles.append(_profile(table, label, self.source))
        self.table = None

    def _in_table(self, number: int, line: str) -> None:
        table = self.table
        assert table is not None
        layout = table.layout
        complete = line.endswith("\n")
        text = line.rstrip("\r\n")
        if layout.prefix:
            if not text.startswith(layout.prefix):
                self._foreign(table, number, text, complete)
                return
            text = text[len(layout.prefix) :]
        if text[:1] == "-" and text.rstrip() == layout.separator:
            self._finish(table)
            # The same line may open the next table: a doc excerpt that left out the closing
            # separator, or tables printed back to back.
            reopened = SEPARATOR.match(line.rstrip("\r\n"))
            self.pending = (number, reopened) if reopened else None
            return
        if len(text) < layout.width:
            text = text.ljust(layout.width)
        if layout.gaps(text) != layout.gap_ok:
            self._foreign(table, number, text, complete)
            return
        probes = layout.probes(text)
        if " " not in probes and (complete or not layout.legacy):
            try:
                add_row(table, layout.cells(text), self.values, self.budget)
            except CellError as exc:
                raise _cell_error(exc, layout, text, self.source, number) from exc
        elif not text[: layout.blank_before].strip():
            continuation(table, layout, layout.cells(text))
        else:
            self._foreign(table, number, text, complete)

    def _foreign(self, table: Table, number: int, text: str, complete: bool) -> None:
        """A line inside a table that is not one of its rows: a log line, or a cut row."""
        shown = text.strip()
        if not shown.lstrip("#").strip():
            return
        if not complete:
            table.warnings.append(
                f"line {number}: the file ends inside a row of the table "
                f"(cut short?); the incomplete row was not read"
            )
            return
        if shown.lstrip("# ").startswith("Self CPU time total:") or (
            "  -" in shown and SEPARATOR.match(shown)
        ):
            # The closing separator was left out (a doc excerpt): the table ends here.
            table.warnings.append(
                f"line {number}: the table started at line {table.line} "
                f"ends without its closing separator"
            )
            self._finish(table)
            self._seek(number, text.rstrip())
            return
        table.warnings.append(
            f"line {number}: not a row of the table started at line "
            f"{table.line} (interleaved output?), skipped: {shown[:80]!r}"
        )

    def _cut_short(self, number: int) -> None:
        table = self.table
        assert table is not None
        table.warnings.append(
            f"the table started at line {table.line} has no closing "
            f"separator: the file ends at line {number} (cut short?)"
        )
        self._finish(table)


def _cell_error(error: CellError, layout: Layout, text: str, source: str, line: int) -> ParseError:
    """The ParseError for a bad cell, naming its column."""
    cells = [cell.strip() for cell in layout.cells(text)]
    header = next(
        (c.header for c, cell in zip(layout.columns, cells, strict=True) if cell == error.text), "?"
    )
    return ParseError(f"column {header!r}: {error}", source=source, line=line, format=NAME)


def _heading(recent: list[str]) -> str | None:
    """The table's title: the ``header=`` text around a ``=`` rule, or a line ending in ``:``.

    Log lines just before a table (``step=007 loss=7.79``) must not become labels: they
    change from run to run, and labels identify series across runs.
    """
    lines = [line for line in recent if not _LEGACY_CAVEAT.search(line)]
    if not lines:
        return None
    if _RULE.match(lines[-1]):
        return lines[-2] if len(lines) > 1 and not _RULE.match(lines[-2]) else None
    if len(lines) > 1 and _RULE.match(lines[-2]):
        return lines[-1]
    if lines[-1].endswith(":") and len(lines[-1]) <= 100:
        return lines[-1].rstrip(":").strip() or None
    return None


# --- profiles -----------------------------------------------------------------------------


def _profile(table: Table, label: str, source: str) -> Profile:
    layout = table.layout
    name_rows(table.rows)
    steps, count = table_steps(table)
    metrics = [metric for row in table.rows for metric in row.metrics]
    if any(side.mems is not None for side in layout.sides):
        metrics += memory_counters(table.rows)
    devices = [side.name for side in layout.sides if side.device is Device.GPU]
    metadata: dict[str, Any] = {
        "columns": layout.headers,
        "rows": len(table.rows) + len(table.step_rows),
        "line": table.line,
        "legacy": layout.legacy,
        "device": devices[0] if devices else None,
    }
    if table.heading:
        metadata["heading"] = table.heading
    if layout.legacy and devices:
        metadata["note"] = (
            "legacy profiler: the device total is about max(device, CPU) time "
            "and is not comparable with torch >= 1.8 device times"
        )
    return Profile(
        label=label,
        format=NAME,
        source=source,
        metrics=steps + metrics,
        steps=count,
        metadata=metadata,
        warnings=list(table.warnings),
    )
