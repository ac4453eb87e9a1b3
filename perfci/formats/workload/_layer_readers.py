"""The two layouts of layer tables, read row by row into ``_layer_metrics.LayerMetrics``.

* ASTRA-sim 1.0 / SimAI text workloads (``read_astrasim``): a parallelism line, a row-count
  line, then whitespace-separated rows; whether the file is SimAI's dialect is told from its
  header keys, comm types and AICB's constant update delay.
* Header-row TSV tables (``read_tsv``), whose columns are found by their header names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from perfci.core.units import to_decimal
from perfci.formats.workload._detectors import PARALLELISM
from perfci.formats.workload._layer_metrics import PHASES, LayerMetrics, LayerTable, TableError

_COUNT = re.compile(r"[0-9]{1,9}")  # ASCII only: str.isdigit() accepts "²", int() does not
_INTEGER = re.compile(r"-?[0-9]{1,18}")
_SIMAI_KEYS = frozenset({"ep", "pp", "vpp", "ga", "all_gpus", "pp_comm"})
_SIMAI_COMM = re.compile(r"^(BROADCAST|.*_EP)$")
# AICB's Work_Item writes process_time=100 on every row; ASTRA-sim's own files use 5-16.
_AICB_PROCESS_TIME = Decimal(100)
# Header-row TSV column names: phase prefix and field, e.g. forward_compute_time, dp_comm.
_TSV_COLUMN = re.compile(
    r"^(?P<phase>forward|fwd|fwd_pass|backward|bwd|input_grad|ig|weight_grad|wg|dp)_"
    r"(?P<field>compute_time|comm_type|comm_size|comm)$"
)
_TSV_PHASE = {
    "forward": "forward",
    "fwd": "forward",
    "fwd_pass": "forward",
    "backward": "input_grad",
    "bwd": "input_grad",
    "input_grad": "input_grad",
    "ig": "input_grad",
    "weight_grad": "weight_grad",
    "wg": "weight_grad",
    "dp": "weight_grad",
}
_TSV_FIELD = {
    "compute_time": "compute",
    "comm_type": "comm_type",
    "comm": "comm_type",
    "comm_size": "comm_size",
}
_TSV_NAME = frozenset({"name", "layer", "layer_name"})
_TSV_DELAY = frozenset({"process_time", "update_time", "wg_update_time", "delay_after_collectives"})
# Any whitespace but the tab: a TSV line without it has no cell that needs strip().
_NEEDS_STRIP = re.compile(r"[^\S\t]")
_NO_EXTRA: dict[str, str] = {}  # the attributes a TSV row adds (read, never written)
# (phase, compute, comm type, comm size) cell indices of an ASTRA-sim row.
_ASTRASIM_LAYOUT = tuple((phase, 2 + 3 * i, 3 + 3 * i, 4 + 3 * i) for i, phase in enumerate(PHASES))


def _nonblank(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """(1-based line number, text) of the lines with something besides whitespace."""
    return _nonblank_numbered(enumerate(lines, start=1))


def _nonblank_numbered(numbered: Iterable[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    return ((number, text) for number, text in numbered if text and not text.isspace())


# --- ASTRA-sim / SimAI text workloads ---------------------------------------------------------


@dataclass(slots=True)
class _Markers:
    """What tells a SimAI file from an ASTRA-sim one, gathered row by row."""

    comm_types: set[str] = field(default_factory=set)
    simai_comm: bool = False
    aicb_delays: bool = True  # every update_delay so far is AICB's 100

    def add(self, cells: list[str]) -> None:
        for index in (3, 6, 9):
            kind = cells[index]
            if kind not in self.comm_types:
                self.comm_types.add(kind)
                self.simai_comm = self.simai_comm or bool(_SIMAI_COMM.match(kind))
        delay = cells[11]
        if self.aicb_delays and delay != "100":
            self.aicb_delays = _is_number(delay) and to_decimal(delay) == _AICB_PROCESS_TIME


def read_astrasim(lines: Iterable[str], *, unit: str) -> LayerTable:
    """Parallelism line, row-count line, then rows; ``lines`` are the file's lines.

    ``unit`` converts the compute times; the caller decides from ``simai`` which unit the
    file is in only for the metadata (both dialects' default units are 1 ns per number).
    """
    counted = _Counted(lines)
    numbered = _nonblank(counted)
    head, count = next(numbered, None), next(numbered, None)
    if head is None or count is None:
        raise TableError("expected a parallelism line and a layer-count line", counted.count or 1)
    tokens = head[1].split()
    if not PARALLELISM.match(tokens[0]):
        raise TableError(
            f"expected a parallelism keyword (DATA, HYBRID_..., MICRO), found {tokens[0][:40]!r}",
            head[0],
        )
    declared = _row_count(count[1], count[0])
    sink, markers, last = LayerMetrics(unit), _Markers(), count[0]
    for last, text in numbered:
        cells = _astrasim_cells(text, last)
        markers.add(cells)
        extra = {"parallelism": cells[12]} if len(cells) == 13 else _NO_EXTRA
        # The plan key: the cells that _ASTRASIM_LAYOUT reads.
        sink.add(cells[0], last, cells, _ASTRASIM_LAYOUT, extra, tuple(cells[2:11]))
    rows = sink.rows
    if rows < declared:
        raise TableError(
            f"line {count[0]} declares {declared} layers but only "
            f"{rows} rows follow (file cut short?)",
            last,
        )
    header = header_params(tokens[1:])
    simai = (
        bool(_SIMAI_KEYS & set(header)) or markers.simai_comm or (rows > 0 and markers.aicb_delays)
    )
    metadata = {"parallelism": tokens[0], "header": header, "declared_layers": declared}
    return LayerTable(metrics=sink.finish(), metadata=metadata, rows=rows, simai=simai)


class _Counted:
    """An iterable of lines that counts what it has given."""

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = lines
        self.count = 0

    def __iter__(self) -> Iterator[str]:
        for line in self._lines:
            self.count += 1
            yield line


def _row_count(text: str, line: int) -> int:
    first = text.split()[0]
    if not _COUNT.fullmatch(first):
        raise TableError(f"expected the number of layers, found {first[:40]!r}", line)
    return int(first)


def _astrasim_cells(text: str, line: int) -> list[str]:
    """``name reserved (compute type bytes) x3 update_delay [parallelism]``."""
    cells = text.split()
    if len(cells) not in (12, 13):
        raise TableError(
            f"expected 12 fields (13 with per-layer parallelism), found {len(cells)}", line
        )
    return cells


def header_params(tokens: list[str]) -> dict[str, Any]:
    """``model_parallel_NPU_group: 4 checkpoints: 2 2 11 pp_comm 50331648`` as a dict.

    A key is a token ending in ``:`` or any non-numeric token (SimAI writes ``pp_comm``
    without a colon); the numbers after it are its value (a list when several).
    """
    params: dict[str, list[str]] = {}
    key = "_"
    for token in tokens:
        if _is_number(token):
            params.setdefault(key, []).append(token)
            continue
        name, _, glued = token.partition(":")
        key = name or key
        params.setdefault(key, [])
        if glued:
            params[key].append(glued)  # "ep:16" written without a space
    numbers = {k: [int(x) if _INTEGER.fullmatch(x) else x for x in v] for k, v in params.items()}
    return {k: (v[0] if len(v) == 1 else v) for k, v in numbers.items()}


def _is_number(token: str) -> bool:
    try:
        to_decimal(token)
    except ValueError:
        return False
    return True


# --- header-row TSV ---------------------------------------------------------------------------


def read_tsv(lines: Iterable[str], *, unit: str) -> LayerTable:
    """A tab-separated table whose first line names the columns."""
    numbered = enumerate(lines, start=1)
    first = next(_nonblank_numbered(numbered), None)
    if first is None:
        raise TableError("expected a header with a 'name' column and *_compute_time columns", 1)
    columns = [cell.strip() for cell in first[1].split("\t")]
    roles = _tsv_roles(columns, first[0])
    # A column the table lacks reads the empty cell that _tsv_cells appends after the last.
    empty = len(columns)
    layout = [
        (
            phase,
            roles.get(f"{phase}.compute", empty),
            roles.get(f"{phase}.comm_type", empty),
            roles.get(f"{phase}.comm_size", empty),
        )
        for phase in PHASES
    ]
    sink = LayerMetrics(unit)
    plans = sink.plans
    name_index = roles["name"]
    name_first = name_index == 0
    width = len(columns)
    for number, text in numbered:
        # Plans are kept by the text after the name (when the name comes first) of rows that
        # needed no strip(): a row that repeats one of them with a name that needs none either
        # is that row's cells again, so it skips the split and the conversions.
        name, _, rest = text.partition("\t")
        plan = plans.get(rest)
        if plan is not None and name and not name[0].isspace() and not name[-1].isspace():
            sink.emit(name, plan, _NO_EXTRA)
            continue
        cells = text.split("\t")
        key = None
        if (
            len(cells) == width
            and cells[name_index]
            and text.isascii()
            and " " not in text
            and "\x1f" not in text
        ):
            cells.append("")  # the common row (not blank: it has a name), without the checks
            key = rest if name_first else None
        elif not text or text.isspace():
            continue
        else:
            cells = _tsv_cells(text, number, width)
        name = cells[name_index]
        if not name:
            raise TableError("expected a layer name in the 'name' column", number)
        sink.add(name, number, cells, layout, _NO_EXTRA, key)
    return LayerTable(metrics=sink.finish(), metadata={"columns": columns}, rows=sink.rows)


def _tsv_roles(columns: list[str], line: int) -> dict[str, int]:
    """Column index by role: ``name``, ``delay``, and ``<phase>.<field>``."""
    roles: dict[str, int] = {}
    for index, column in enumerate(columns):
        match = _TSV_COLUMN.match(column)
        if column in _TSV_NAME:
            roles["name"] = index
        elif column in _TSV_DELAY:
            roles["delay"] = index
        elif match:
            role = f"{_TSV_PHASE[match['phase']]}.{_TSV_FIELD[match['field']]}"
            roles[role] = index
    if "name" not in roles or not any(r.endswith(".compute") for r in roles):
        raise TableError("expected a header with a 'name' column and *_compute_time columns", line)
    return roles


def _tsv_cells(text: str, line: int, width: int) -> list[str]:
    """The cells of a line (from ``splitlines``, so its only ASCII blanks are tab, space and
    \\x1f), stripped, with an empty cell appended for the columns the table lacks."""
    cells = text.split("\t")
    if " " in text or "\x1f" in text or (not text.isascii() and _NEEDS_STRIP.search(text)):
        cells = [cell.strip() for cell in cells]
    while len(cells) > width and cells[-1] == "":
        cells.pop()  # trailing tabs
    if len(cells) != width:
        raise TableError(f"expected {width} tab-separated fields, found {len(cells)}", line)
    cells.append("")
    return cells
