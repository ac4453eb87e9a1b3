"""Alibaba AICB files that are not layer tables.

* The physical workload / post-run CSV: optional ``[rank0 ~ rank127]`` line, then
  ``comm_type,comm_group,comm_group_size,msg_size,stage,dst,src,additional,_elapsed_time,
  algbw,busbw,count``. ``_elapsed_time`` is ms (``None`` before a run), ``msg_size`` bytes.
  Rows become ``comm`` metrics named ``<comm_type>[<comm_group>]`` (``all_gather[tp_group]``)
  scoped to their ``stage`` (``forward.MoE``). ``CommType.epoch_end`` rows close an iteration
  and carry its wall time: they become the ``iteration`` step metric. The segment before the
  first ``epoch_end`` that holds only ``init.*`` stages is model setup, not an iteration; its
  time goes to ``metadata["setup_ns"]``.
* The AIOB compute file: ``train_iter:10`` then ``<op>:`` blocks of ``time_gpu_max/min/avg``
  (µs by default) → one ``layer`` metric per op with avg/min/max, ``calls`` = ``train_iter``.
"""

from __future__ import annotations

import csv
import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from itertools import chain
from typing import Any

from perfci.core.model import Metric, MetricKind
from perfci.core.units import MISSING, NS_PER_UNIT
from perfci.formats._steps import step_metric
from perfci.formats.caps import Budget, budget
from perfci.formats.workload._detectors import AIOB_FIRST, CSV_HEADER, RANK_RANGE
from perfci.formats.workload._layer_metrics import TableError, number_cell, unit_factor

_AIOB_OP = re.compile(r"^(\S.*?):\s*$")
_AIOB_STAT = re.compile(r"^\s+([A-Za-z_]\w*):\s*(\S+)\s*$")
_REQUIRED = ("comm_type", "msg_size")
_EPOCH_END = "epoch_end"
_SETUP_PREFIX = "init"


@dataclass(slots=True)
class CommGroup:
    """Calls of one collective in one stage."""

    calls: int = 0
    bytes: Decimal = Decimal(0)
    times_ns: list[float] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class CsvResult:
    metrics: list[Metric]
    steps: int | None
    metadata: dict[str, Any]


# --- post-run / physical CSV ------------------------------------------------------------------


def read_comm_csv(lines: Iterable[str]) -> CsvResult:
    """Comm metrics and iteration steps of an AICB communication log, read row by row."""
    metadata: dict[str, Any] = {}
    start = 0
    rest = iter(lines)
    first = next(rest, None)
    ranks = RANK_RANGE.match(first.strip()) if first is not None else None
    if ranks:
        metadata["ranks"] = f"{ranks.group(1)}-{ranks.group(2)}"
        start = 1
    elif first is not None:
        rest = chain([first], rest)
    rows = csv.reader(rest)
    try:
        header = _csv_header(next(rows, None), line=start + 1)
        groups, iterations = _scan_rows(
            rows, header, first_line=start + 2, metadata=metadata, counted=budget("", "")
        )
    except csv.Error as exc:
        raise TableError(f"malformed CSV: {exc}", start + 1) from exc
    metrics = [_comm_metric(key, group) for key, group in groups.items()]
    samples = [t for t in iterations if t is not None]
    if samples and len(samples) == len(iterations):
        metrics.append(step_metric("iteration", samples))
    return CsvResult(metrics=metrics, steps=len(iterations) or None, metadata=metadata)


def _csv_header(cells: list[str] | None, *, line: int) -> list[str]:
    if cells is None or not CSV_HEADER.match(",".join(cells)):
        raise TableError("expected the header comm_type,comm_group,...", line)
    header = [cell.strip() for cell in cells]
    missing = [name for name in _REQUIRED if name not in header]
    if missing:
        raise TableError(f"expected columns {', '.join(missing)} in the header", line)
    return header


def _scan_rows(
    rows: Iterable[list[str]],
    header: list[str],
    *,
    first_line: int,
    metadata: dict[str, Any],
    counted: Budget,
) -> tuple[dict[tuple[str | None, str], CommGroup], list[float | None]]:
    """Comm groups by (stage, name), and one (possibly unknown) time per iteration; a new
    group is a metric, counted within a service upload's caps (issue 31)."""
    groups: dict[tuple[str | None, str], CommGroup] = {}
    iterations: list[float | None] = []
    segment_stages: set[str] = set()
    for offset, cells in enumerate(rows):
        line = first_line + offset
        if not any(cell.strip() for cell in cells):
            continue
        if len(cells) != len(header):
            raise TableError(
                f"expected {len(header)} comma-separated fields, found {len(cells)}", line
            )
        row = dict(zip(header, (cell.strip() for cell in cells), strict=True))
        comm_type = enum_value(row["comm_type"])
        elapsed = _elapsed_ns(row.get("_elapsed_time", ""), line)
        if comm_type == _EPOCH_END:
            _close_segment(segment_stages, elapsed, iterations, metadata)
            segment_stages = set()
            continue
        segment_stages.add(row.get("stage", ""))
        _add_call(groups, row, comm_type, elapsed, line, counted)
    return groups, iterations


def _close_segment(
    stages: set[str],
    elapsed: float | None,
    iterations: list[float | None],
    metadata: dict[str, Any],
) -> None:
    """File an ``epoch_end`` time as model setup or as one iteration."""
    is_setup = bool(stages) and all(s.split(".")[0] == _SETUP_PREFIX for s in stages)
    if is_setup and not iterations:
        if elapsed is not None:
            metadata["setup_ns"] = elapsed
    else:
        iterations.append(elapsed)


def _add_call(
    groups: dict[tuple[str | None, str], CommGroup],
    row: dict[str, str],
    comm_type: str,
    elapsed: float | None,
    line: int,
    counted: Budget,
) -> None:
    group_name = enum_value(row.get("comm_group", ""))
    name = f"{comm_type}[{group_name}]" if group_name else comm_type
    stage = row.get("stage") or None
    size = row.get("comm_group_size", "")
    attrs: dict[str, Any] = {"comm_type": comm_type, "comm_group": group_name}
    if re.fullmatch(r"[0-9]{1,9}", size):
        attrs["comm_group_size"] = int(size)  # "None" for some groups (ep_group)
    group = groups.get((stage, name))
    if group is None:
        counted.metric()
        group = groups[(stage, name)] = CommGroup(attrs=attrs)
    group.calls += 1
    group.bytes += _decimal(row["msg_size"], line, "msg_size") or 0
    if elapsed is not None:
        group.times_ns.append(elapsed)


def _comm_metric(key: tuple[str | None, str], group: CommGroup) -> Metric:
    stage, name = key
    times = group.times_ns
    return Metric(
        kind=MetricKind.COMM,
        name=name,
        scope=stage,
        calls=group.calls,
        bytes=float(group.bytes),
        total_ns=float(sum(times)) if times else None,
        avg_ns=statistics.fmean(times) if times else None,
        min_ns=min(times) if times else None,
        max_ns=max(times) if times else None,
        attrs={**group.attrs, "timed_calls": len(times)},
    )


def enum_value(text: str) -> str:
    """``CommType.all_reduce`` → ``all_reduce``; ``None`` → ``""``."""
    cleaned = text.strip()
    return "" if cleaned in MISSING else cleaned.rpartition(".")[2]


def _elapsed_ns(text: str, line: int) -> float | None:
    value = _decimal(text, line, "_elapsed_time")
    if value is not None and value < 0:
        raise TableError(f"expected a non-negative _elapsed_time, found {text!r}", line)
    return None if value is None else float(value * NS_PER_UNIT["ms"])


def _decimal(text: str, line: int, column: str) -> Decimal | None:
    return number_cell(text, line, f"column {column}")


# --- AIOB compute file ------------------------------------------------------------------------


@dataclass(slots=True)
class AiobOp:
    name: str
    line: int
    stats: dict[str, str] = field(default_factory=dict)


def read_aiob(lines: Iterable[str], *, unit: str) -> tuple[list[Metric], int]:
    """``layer`` metrics of an AIOB compute file, and its ``train_iter``."""
    numbered = enumerate(lines, start=1)
    _, head = next(numbered, (1, ""))
    first = AIOB_FIRST.match(head.strip())
    if not first:
        raise TableError("expected 'train_iter:<N>' on the first line", 1)
    iterations = int(first.group(1))
    ops = _aiob_blocks(numbered)
    names = indexed_names([op.name for op in ops])
    return [
        _aiob_metric(op, name, iterations, unit) for op, name in zip(ops, names, strict=True)
    ], iterations


def _aiob_blocks(numbered: Iterable[tuple[int, str]]) -> list[AiobOp]:
    """The ``<op>:`` blocks after the first line (an op per few lines: small, kept whole)."""
    ops: list[AiobOp] = []
    counted = budget("", "")  # an op is a metric (a service upload's caps, issue 31)
    for number, text in numbered:
        if not text.strip():
            continue
        stat = _AIOB_STAT.match(text)
        op = _AIOB_OP.match(text)
        if stat and ops:
            ops[-1].stats[stat.group(1)] = stat.group(2)
        elif op and not text[0].isspace():
            counted.metric()
            ops.append(AiobOp(name=op.group(1), line=number))
        else:
            raise TableError(
                f"expected '<op>:' or an indented 'time_gpu_avg: <n>' line, "
                f"found {text.strip()[:40]!r}",
                number,
            )
    if not ops:
        raise TableError("expected at least one '<op>:' block after train_iter", 1)
    return ops


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


def _aiob_metric(op: AiobOp, name: str, iterations: int, unit: str) -> Metric:
    def ns(key: str) -> float | None:
        value = _decimal(op.stats[key], op.line, key) if key in op.stats else None
        return None if value is None else float(value * unit_factor(unit))

    avg = ns("time_gpu_avg")
    if avg is None:
        raise TableError(f"expected time_gpu_avg for {op.name!r}", op.line)
    extra = {k: v for k, v in op.stats.items() if not k.startswith("time_gpu_")}
    return Metric(
        kind=MetricKind.LAYER,
        name=name,
        calls=iterations or None,
        total_ns=avg * iterations if iterations else avg,
        avg_ns=avg,
        min_ns=ns("time_gpu_min"),
        max_ns=ns("time_gpu_max"),
        attrs={"op": op.name, **extra},
    )
