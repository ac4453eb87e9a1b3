"""The column layout of a PyTorch ``key_averages()`` table, from its dashed separator.

Column positions come from the dash runs of the separator, never from splitting on spaces:
names hold spaces and commas. Header cells may be wider than their column (``CUDA time avg``
is 13 characters in a 12-wide column), so the header alone is split on runs of 2+ spaces.
``build_layout`` turns a separator and header into precomputed slices (``Layout``), built once
per distinct header, so that reading a row is a few ``itemgetter`` calls.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from perfci.core.errors import ParseError
from perfci.core.model import Device

SEPARATOR = re.compile(r"^(?P<prefix>[ \t]*(?:#+ ?)?)(?P<sep>-{3,}(?: {2}-{3,})*) *$")
_HEADER_SPLIT = re.compile(r" {2,}")

# (header pattern, role). The device-qualified patterns capture the device name.
_COLUMN_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), role)
    for pattern, role in (
        (r"Name", "name"),
        (r"Overload Name", "overload"),
        (r"(?:Self )?(\S+)(?: total)? %", "percent"),
        (r"Self (\S+) Mem", "self_mem"),
        (r"(\S+) Mem", "mem"),
        (r"Self (\S+)(?: total)?", "self"),
        (r"(\S+) total", "total"),
        (r"(\S+) time avg", "avg"),
        (r"# of Calls|Number of Calls", "calls"),
        (r"Node ID", "node_id"),
        (r"Input Shapes", "shapes"),
        (r"Source Location", "stack"),
        (r"Total ([KMGTP]?)FLOPs", "flops"),
    )
)
_FLOPS_SCALE = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15}
_TIME_ROLES = ("self", "total", "avg")
_ATTR_ROLES = frozenset({"flops", "node_id", "shapes", "overload", "stack", "extra"})
_MEM_ROLES = ("mem", "self_mem")
# Cells that must hold a value in every data row (text columns may be empty or cut). Not the
# name: torch prints names that end in a space (``torch/profiler/_cupti_monitor.py(0): ``), whose
# right-aligned cell then ends in a blank, and ``record_function("")`` prints an empty name.
_REQUIRED = frozenset(
    {"percent", "self", "total", "avg", "mem", "self_mem", "calls", "node_id", "flops"}
)


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a table: its header, what it holds, and its character span."""

    header: str
    role: str
    device: str | None
    start: int
    end: int | None  # None: the last column, read to the end of the line
    scale: int = 1
    probe: bool = True  # whether a row's value sits flush against the column's edge


@dataclass(frozen=True, slots=True)
class Side:
    """The columns of one device. Absent columns read index -1: the blank cell
    ``pytorch._table_rows.add_row`` appends, which parses to ``None``."""

    name: str  # CPU, CUDA, XPU, NPU ...
    device: Device
    times: Callable[[list[str]], tuple[str, ...]]  # self, total, avg cells
    mems: Callable[[list[str]], tuple[str, ...]] | None  # memory, self memory cells
    label: str | None  # attrs["device_name"] for devices other than CUDA


@dataclass(slots=True)
class Layout:
    """Precomputed slicing for the rows of one table (``build_layout`` builds it)."""

    prefix: str
    separator: str
    headers: list[str]
    columns: list[Column]  # the columns that are read: all but the percentages
    legacy: bool
    width: int
    cells: Callable[[str], tuple[str, ...]]
    gaps: Callable[[str], tuple[str, ...]]
    probes: Callable[[str], tuple[str, ...]]
    gap_ok: tuple[str, ...]
    sides: tuple[Side, ...]  # CPU first, then the device (if the table has device columns)
    calls: int | None  # index of the calls column
    extras: tuple[tuple[int, Column], ...]  # columns that go to attrs
    stack: int | None  # the column whose cell holds the Source Location frame
    blank_before: int | None  # a continuation row is blank up to the stack column (or all)


def build_layout(
    prefix: str, separator: str, header: str, *, source: str, line: int, format: str
) -> Layout:
    """Column spans from the separator's dash runs, roles from the header's names."""
    spans = [(m.start(), m.end()) for m in re.finditer(r"-+", separator)]
    names = _HEADER_SPLIT.split(header.strip())
    if len(names) != len(spans) or names[0] != "Name":
        raise ParseError(
            f"header has {len(names)} column names for {len(spans)} dashed "
            f"columns; expected one name per column, starting with 'Name'",
            source=source,
            line=line,
            format=format,
        )
    legacy = header.startswith("Name")
    columns = [
        _column(name, start, end if index < len(spans) - 1 else None)
        for index, (name, (start, end)) in enumerate(zip(names, spans, strict=True))
    ]
    columns = _swap_stack_and_flops(columns)
    required = [i for i, c in enumerate(columns) if c.role in _REQUIRED and c.probe]
    # A right-aligned value ends at its column's end, a left-aligned one starts at its start:
    # a blank there means a cut or foreign line, not a row.
    probe_at = [columns[i].start if legacy else _end(columns[i], spans[i]) - 1 for i in required]
    gap_at = [end + offset for _, end in spans[:-1] for offset in (0, 1)]
    headers = [column.header for column in columns]
    columns = [column for column in columns if column.role != "percent"]  # probed, not read
    return Layout(
        prefix=prefix,
        separator=separator,
        headers=headers,
        columns=columns,
        legacy=legacy,
        width=spans[-1][1] + 2,
        cells=_getter([slice(c.start, c.end) for c in columns]),
        gaps=_getter(gap_at),
        probes=_getter(probe_at),
        gap_ok=(" ",) * len(gap_at),
        sides=_sides(columns),
        calls=next((i for i, c in enumerate(columns) if c.role == "calls"), None),
        extras=tuple((i, c) for i, c in enumerate(columns) if c.role in _ATTR_ROLES),
        stack=next((i for i, c in enumerate(columns) if c.role == "stack"), None),
        blank_before=next((c.start for c in columns if c.role == "stack"), None),
    )


def _end(column: Column, span: tuple[int, int]) -> int:
    return column.end if column.end is not None else span[1]


def _getter(items: list[Any]) -> Callable[[str], tuple[str, ...]]:
    """``itemgetter`` that always returns a tuple, even for one item."""
    if len(items) == 1:
        single = items[0]
        return lambda text: (text[single],)
    return itemgetter(*items)


def _column(header: str, start: int, end: int | None) -> Column:
    for pattern, role in _COLUMN_RULES:
        match = pattern.fullmatch(header)
        if match is None:
            continue
        if role == "flops":
            return Column(header, role, None, start, end, _FLOPS_SCALE[match.group(1)])
        device = match.group(1) if match.groups() else None
        return Column(header, role, device, start, end)
    return Column(header, "extra", None, start, end)


def _swap_stack_and_flops(columns: list[Column]) -> list[Column]:
    """torch prints the FLOPs value under ``Source Location`` and the frame under FLOPs.

    ``_build_table`` appends the headers as shapes, stack, FLOPs but the row values as shapes,
    FLOPs, stack; the columns keep the headers' widths. Reading by header would take a path
    for a number, so the two roles swap. The FLOPs value then sits left-aligned and padded
    (``{:8.3f}``), flush with neither edge, so it is not probed.
    """
    roles = [column.role for column in columns]
    if roles[-2:] != ["stack", "flops"]:
        return columns
    stack, flops = columns[-2], columns[-1]
    return [
        *columns[:-2],
        Column(flops.header, "flops", None, stack.start, stack.end, flops.scale, False),
        Column(stack.header, "stack", None, flops.start, flops.end),
    ]


def _sides(columns: list[Column]) -> tuple[Side, ...]:
    roles: dict[str, dict[str, int]] = {}
    for index, column in enumerate(columns):
        if column.device is not None and column.role in (*_TIME_ROLES, *_MEM_ROLES):
            roles.setdefault(column.device, {})[column.role] = index
    sides = []
    for name, found in sorted(roles.items(), key=lambda item: item[0] != "CPU"):
        mems = [found.get(role, -1) for role in _MEM_ROLES]
        sides.append(
            Side(
                name,
                Device.CPU if name == "CPU" else Device.GPU,
                itemgetter(*(found.get(role, -1) for role in _TIME_ROLES)),
                itemgetter(*mems) if mems != [-1, -1] else None,
                None if name in ("CPU", "CUDA") else name,
            )
        )
    return tuple(sides)
