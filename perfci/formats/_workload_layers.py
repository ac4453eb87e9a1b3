"""Layer tables: one row per layer with forward / input-grad / weight-grad compute and comm.

Two layouts share the row model (FORMATS.md f1, f2):

* ASTRA-sim 1.0 / SimAI text workloads: a parallelism line (``HYBRID_TRANSFORMER
  model_parallel_NPU_group: 4 ...``), a row-count line, then whitespace-separated rows
  ``name reserved fwd_compute fwd_comm_type fwd_comm_bytes ig_compute ... wg_comm_bytes
  update_delay [per-layer parallelism]``. Tabs and runs of spaces are mixed and double tabs
  leave empty fields, so rows are split on any whitespace run (names never contain spaces).
* The header-row TSV of seed 002 (``name forward_compute_time forward_comm_type ...``),
  where columns are found by their header names.

Metric naming (stable, relied on by stored series): a ``layer`` metric named
``<layer>/<phase>`` for each phase with a non-zero compute time, and a ``comm`` metric with the
same name for each phase whose comm type is not ``NONE``, with ``bytes`` and
``attrs["comm_type"]``. Phases are ``forward``, ``input_grad`` and ``weight_grad`` (the TSV's
``backward`` is the input gradient). A layer name that occurs on several rows (SimAI's
``attention_layer`` per transformer layer) is indexed on every row, ``mlp_layer#3``, so rows are
never merged silently. Zero compute times are left out: they are "nothing to compute", and a
zero baseline has no relative change to report; the row count is kept in the metadata.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from perfci.errors import ParseError
from perfci.model import Metric, MetricKind
from perfci.units import MISSING, NS_PER_UNIT, to_decimal

PHASES = ("forward", "input_grad", "weight_grad")
NO_COMM = frozenset({"NONE", "None", "none", ""})
PARALLELISM = re.compile(r"^(DATA|MODEL|MICRO|HYBRID_[A-Z_]+)$")
_COUNT = re.compile(r"[0-9]{1,9}")  # ASCII only: str.isdigit() accepts "²", int() does not
_INTEGER = re.compile(r"-?[0-9]{1,18}")
_COMM_TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_SIMAI_KEYS = frozenset({"ep", "pp", "vpp", "ga", "all_gpus", "pp_comm"})
_SIMAI_COMM = re.compile(r"^(BROADCAST|.*_EP)$")
# AICB's Work_Item writes process_time=100 on every row; ASTRA-sim's own files use 5-16.
_AICB_PROCESS_TIME = Decimal(100)
MAX_EXPONENT = 30  # 1e30: far above any real time or size
# Header-row TSV column names: phase prefix and field, e.g. forward_compute_time, dp_comm.
_TSV_COLUMN = re.compile(
    r"^(?P<phase>forward|fwd|fwd_pass|backward|bwd|input_grad|ig|weight_grad|wg|dp)_"
    r"(?P<field>compute_time|comm_type|comm_size|comm)$")
_TSV_PHASE = {"forward": "forward", "fwd": "forward", "fwd_pass": "forward",
              "backward": "input_grad", "bwd": "input_grad", "input_grad": "input_grad",
              "ig": "input_grad", "weight_grad": "weight_grad", "wg": "weight_grad",
              "dp": "weight_grad"}
_TSV_FIELD = {"compute_time": "compute", "comm_type": "comm_type", "comm": "comm_type",
              "comm_size": "comm_size"}
_TSV_NAME = frozenset({"name", "layer", "layer_name"})
_TSV_DELAY = frozenset({"process_time", "update_time", "wg_update_time",
                        "delay_after_collectives"})


@dataclass(slots=True)
class Phase:
    """One phase of one row, as raw text cells."""

    compute: str
    comm_type: str
    comm_size: str


@dataclass(slots=True)
class LayerRow:
    name: str
    line: int
    phases: dict[str, Phase]
    update_delay: str = ""
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class LayerTable:
    """A parsed layer table before unit conversion."""

    rows: list[LayerRow]
    metadata: dict[str, Any]


class TableError(ValueError):
    """A table problem at a line; the caller turns it into a ``ParseError``."""

    def __init__(self, message: str, line: int) -> None:
        self.line = line
        super().__init__(message)


# --- ASTRA-sim / SimAI text workloads ---------------------------------------------------------


def read_astrasim(lines: list[str]) -> LayerTable:
    """Parallelism line, row-count line, then rows; ``lines`` are the file's lines."""
    numbered = [(n, text) for n, text in enumerate(lines, start=1) if text.strip()]
    if len(numbered) < 2:
        raise TableError("expected a parallelism line and a layer-count line", len(lines) or 1)
    (head_line, head), (count_line, count_text) = numbered[0], numbered[1]
    tokens = head.split()
    if not PARALLELISM.match(tokens[0]):
        raise TableError(f"expected a parallelism keyword (DATA, HYBRID_..., MICRO), "
                         f"found {tokens[0][:40]!r}", head_line)
    declared = _row_count(count_text, count_line)
    rows = [_astrasim_row(text, number) for number, text in numbered[2:]]
    if len(rows) < declared:
        raise TableError(f"line {count_line} declares {declared} layers but only "
                         f"{len(rows)} rows follow (file cut short?)", numbered[-1][0])
    metadata = {"parallelism": tokens[0], "header": header_params(tokens[1:]),
                "declared_layers": declared}
    return LayerTable(rows=rows, metadata=metadata)


def _row_count(text: str, line: int) -> int:
    first = text.split()[0]
    if not _COUNT.fullmatch(first):
        raise TableError(f"expected the number of layers, found {first[:40]!r}", line)
    return int(first)


def _astrasim_row(text: str, line: int) -> LayerRow:
    """``name reserved (compute type bytes) x3 update_delay [parallelism]``."""
    cells = text.split()
    if len(cells) not in (12, 13):
        raise TableError(f"expected 12 fields (13 with per-layer parallelism), "
                         f"found {len(cells)}", line)
    phases = {phase: Phase(*cells[2 + 3 * i: 5 + 3 * i]) for i, phase in enumerate(PHASES)}
    extra = {"parallelism": cells[12]} if len(cells) == 13 else {}
    return LayerRow(name=cells[0], line=line, phases=phases, update_delay=cells[11],
                    extra=extra)


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
    numbers = {k: [int(x) if _INTEGER.fullmatch(x) else x for x in v]
               for k, v in params.items()}
    return {k: (v[0] if len(v) == 1 else v) for k, v in numbers.items()}


def _is_number(token: str) -> bool:
    try:
        to_decimal(token)
    except ValueError:
        return False
    return True


def simai_markers(table: LayerTable) -> bool:
    """Whether an ASTRA-sim-layout table was written by AICB for SimAI (compute in ns).

    A heuristic, overridable with the ``dialect`` option: SimAI-only header keys, SimAI-only
    comm types (``BROADCAST``, ``*_EP``), or AICB's constant ``process_time`` of 100.
    """
    header = table.metadata.get("header", {})
    if _SIMAI_KEYS & set(header):
        return True
    types = {p.comm_type for row in table.rows for p in row.phases.values()}
    if any(_SIMAI_COMM.match(t) for t in types):
        return True
    delays = {row.update_delay for row in table.rows}
    return bool(delays) and all(_is_number(d) and to_decimal(d) == _AICB_PROCESS_TIME
                                for d in delays)


# --- header-row TSV ---------------------------------------------------------------------------


def read_tsv(lines: list[str]) -> LayerTable:
    """A tab-separated table whose first line names the columns."""
    numbered = [(n, text) for n, text in enumerate(lines, start=1) if text.strip()]
    header_line, header = numbered[0]
    columns = [cell.strip() for cell in header.split("\t")]
    roles = _tsv_roles(columns, header_line)
    rows = [_tsv_row(text, number, columns, roles) for number, text in numbered[1:]]
    return LayerTable(rows=rows, metadata={"columns": columns})


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
        raise TableError("expected a header with a 'name' column and *_compute_time columns",
                         line)
    return roles


def _tsv_row(text: str, line: int, columns: list[str], roles: dict[str, int]) -> LayerRow:
    cells = [cell.strip() for cell in text.rstrip("\r\n").split("\t")]
    while len(cells) > len(columns) and cells[-1] == "":
        cells.pop()  # trailing tabs
    if len(cells) != len(columns):
        raise TableError(f"expected {len(columns)} tab-separated fields, found {len(cells)}",
                         line)

    def cell(role: str) -> str:
        return cells[roles[role]] if role in roles else ""

    phases = {phase: Phase(cell(f"{phase}.compute"), cell(f"{phase}.comm_type") or "NONE",
                           cell(f"{phase}.comm_size")) for phase in PHASES}
    if not cells[roles["name"]]:
        raise TableError("expected a layer name in the 'name' column", line)
    return LayerRow(name=cells[roles["name"]], line=line, phases=phases,
                    update_delay=cell("delay"))


# --- metrics ----------------------------------------------------------------------------------


def layer_metrics(rows: list[LayerRow], *, unit: str) -> list[Metric]:
    """``layer`` and ``comm`` metrics of every row, compute times converted from ``unit``.

    ``unit`` is a key of ``units.NS_PER_UNIT`` or ``cycles`` (kept 1:1 as ns).
    """
    names = indexed_names([row.name for row in rows])
    metrics: list[Metric] = []
    for row, name in zip(rows, names, strict=True):
        for phase, cells in row.phases.items():
            metrics += _phase_metrics(row, name, phase, cells, unit)
    return metrics


def indexed_names(names: list[str]) -> list[str]:
    """Names with ``#k`` (1-based occurrence) appended to every name that repeats."""
    totals: dict[str, int] = {}
    for name in names:
        totals[name] = totals.get(name, 0) + 1
    seen: dict[str, int] = {}
    out = []
    for name in names:
        if totals[name] == 1:
            out.append(name)
            continue
        seen[name] = seen.get(name, 0) + 1
        out.append(f"{name}#{seen[name]}")
    return out


def _phase_metrics(row: LayerRow, name: str, phase: str, cells: Phase,
                   unit: str) -> list[Metric]:
    metrics = []
    attrs: dict[str, Any] = {"layer": row.name, "phase": phase, **row.extra}
    compute_ns = _compute_ns(cells.compute, unit, row.line, phase)
    if compute_ns:
        metrics.append(Metric(kind=MetricKind.LAYER, name=f"{name}/{phase}", calls=1,
                              total_ns=compute_ns, avg_ns=compute_ns, min_ns=compute_ns,
                              max_ns=compute_ns, attrs=dict(attrs)))
    comm_type = cells.comm_type.strip()
    if comm_type not in NO_COMM:
        if not _COMM_TYPE.match(comm_type):
            raise TableError(f"expected a {phase} communication type (NONE, ALLREDUCE, ...), "
                             f"found {comm_type[:40]!r}", row.line)
        size = _number(cells.comm_size, row.line, f"{phase} communication size")
        metrics.append(Metric(kind=MetricKind.COMM, name=f"{name}/{phase}", calls=1,
                              bytes=float(size) if size is not None else None,
                              attrs={**attrs, "comm_type": comm_type}))
    return metrics


def _compute_ns(text: str, unit: str, line: int, phase: str) -> float | None:
    value = _number(text, line, f"{phase} compute time")
    if value is None:
        return None
    if value < 0:
        raise TableError(f"expected a non-negative {phase} compute time, found {text!r}", line)
    return float(value * unit_factor(unit))


def unit_factor(unit: str) -> int:
    """ns per ``unit``; ``cycles`` count as 1 ns each (the file gives no clock rate)."""
    return 1 if unit == "cycles" else NS_PER_UNIT[unit]


def _number(text: str, line: int, what: str) -> Decimal | None:
    return number_cell(text, line, f"the {what}")


def number_cell(text: str, line: int, what: str) -> Decimal | None:
    """A table cell as a Decimal; ``None`` for placeholders (``None``, ``-``, empty).

    Magnitudes of 1e31 and above are rejected: no real time or size is that large,
    and converting them would overflow Decimal arithmetic or become an infinite float.
    """
    cleaned = text.strip()
    if cleaned in MISSING:
        return None
    try:
        value = to_decimal(cleaned, grouping="")
    except ValueError as exc:
        raise TableError(f"expected a number for {what}, found {cleaned[:40]!r}",
                         line) from exc
    if value.adjusted() > MAX_EXPONENT:  # adjusted(): no context arithmetic, cannot overflow
        raise TableError(f"number out of range for {what}: {cleaned[:40]!r}", line)
    return value


def parse_error(exc: TableError, *, source: str, format: str) -> ParseError:
    return ParseError(str(exc), source=source, line=exc.line, format=format)
