"""Echo/AICB-style Megatron-LM rank trace logs: ``rank:N:op(key=value,...)`` (FORMATS.md f3).

One line per executed phase of the training schedule::

    rank:2:forward_step(stage_id=1,batch_id=0,mg_state=warmup,duration=207.16,...,
                        timestamp=4509232209.49,sub_operations=['comm_func=allreduce,...', ...])

What becomes which metric (all times converted from ms to ns):

* every phase (``get_batch``, ``forward_step``, ``loss_func`` ...) → one ``range`` metric with
  calls / total / avg / min / max and one sample per occurrence; phases that are themselves
  communication (``send_*``, ``recv_*``, ``dp_allreduce``, ``ep_allreduce`` ...) are ``comm``
  metrics instead, with ``bytes`` from ``input__shape`` × ``input__dtype``;
* each sub-operation → a ``comm`` metric scoped to its phase, named
  ``<comm_func>[<group>] <func_name>`` (e.g. ``allreduce[tp] linear_fwd``);
* ``forward_step`` / ``backward_step`` / ``optimizer_step`` → ``step`` metrics with one sample
  per occurrence, plus ``iteration`` (first phase start to ``optimizer_step`` end) when the
  records carry timestamps.

Warm-up: ``mg_state=warmup`` is the warm-up *phase of the 1F1B pipeline schedule* (the first
micro-batches before the steady 1F1B loop), which recurs in every iteration; it is not the
warm-up of the process. It is therefore kept as an attribute only, and warm-up iterations are
detected from the step samples themselves (``_steps.step_metric``: leading samples much slower
than the rest).

Several ranks in one file give one profile per rank (label ``rank<N>``); a file per rank gives
one profile whose rank comes from its lines. The ``scheduling_plan`` logs of the same fork use
the same record syntax (with extra phases such as ``loss_func`` and ``mg_state=help``) and are
read the same way.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfci.errors import ParseError
from perfci.formats._kv_tokenizer import (
    TokenizeError,
    parse_int_list,
    parse_kv,
    parse_string_list,
)
from perfci.formats._steps import step_metric
from perfci.formats._textio import read_text
from perfci.model import Metric, MetricKind, Profile
from perfci.units import parse_duration

if TYPE_CHECKING:
    from perfci.formats.registry import Head

NAME = "megatron_trace"
DESCRIPTION = "Megatron-LM / AICB rank trace log (rank:N:op(key=value,...), Echo CMD traces)"

_RECORD = re.compile(r"rank:(?P<rank>[0-9]{1,9}):(?P<op>[A-Za-z_]\w*)\((?P<body>.*)\)\s*$",
                     re.DOTALL)
_RECORD_START = re.compile(r"rank:\d+:")
_SNIFF = re.compile(r"(?m)^rank:\d+:[A-Za-z_]\w*\([A-Za-z_]\w*=")
_COMM_WORDS = ("allreduce", "all_reduce", "allgather", "all_gather", "reduce_scatter",
               "reducescatter", "all_to_all", "alltoall", "broadcast")
STEP_PHASES = ("forward_step", "backward_step", "optimizer_step")
ITERATION_END = "optimizer_step"

# Bytes per element of the torch dtypes these traces print (``torch.float32``).
_DTYPE_BYTES = {
    "float64": 8, "double": 8, "int64": 8, "long": 8, "complex64": 8,
    "float32": 4, "float": 4, "int32": 4, "int": 4,
    "float16": 2, "half": 2, "bfloat16": 2, "int16": 2, "short": 2,
    "int8": 1, "uint8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
}


@dataclass(slots=True)
class SubOperation:
    """One communication call inside a phase."""

    fields: dict[str, str]
    duration_ns: float | None


@dataclass(slots=True)
class Record:
    """One ``rank:N:op(...)`` line."""

    rank: int
    op: str
    line: int
    fields: dict[str, str]
    duration_ns: float
    sub_operations: list[SubOperation] = field(default_factory=list)

    def value(self, key: str) -> str | None:
        """The field's text, ``None`` when absent or the literal ``None``."""
        text = self.fields.get(key)
        return None if text is None or text.strip() == "None" else text.strip()

    def interval_ns(self) -> tuple[float, float] | None:
        """(start, end) in ns; ``timestamp`` (ms, ``perf_counter``) is taken at the end."""
        end = _duration_ns(self.value("timestamp"))
        if end is None:
            return None
        return end - self.duration_ns, end


def sniff(head: Head) -> bool:
    """A line starting ``rank:N:op(key=`` near the top of the file."""
    return _SNIFF.search(head.text[:65536]) is not None


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """One profile per rank found in ``path``, in rank order."""
    text = read_text(path, format=NAME)
    records, skipped = _read_records(text, source=str(path))
    if not records:
        raise ParseError("no rank:N:op(key=value,...) records found", source=str(path),
                         format=NAME)
    by_rank: dict[int, list[Record]] = {}
    for record in records:
        by_rank.setdefault(record.rank, []).append(record)
    warnings = [f"{skipped} lines that are not rank:N:op(...) records were skipped"] \
        if skipped else []
    return [_profile(rank, by_rank[rank], source=str(path), warnings=warnings)
            for rank in sorted(by_rank)]


def _read_records(text: str, *, source: str) -> tuple[list[Record], int]:
    """The records of the file and the number of non-empty lines that were not records."""
    records: list[Record] = []
    skipped = 0
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if not _RECORD_START.match(stripped):
            skipped += 1  # interleaved application output: not ours to judge
            continue
        records.append(_parse_line(stripped, number=number, source=source))
    return records, skipped


def _parse_line(line: str, *, number: int, source: str) -> Record:
    """One record; a ``ParseError`` naming the line for anything malformed."""
    match = _RECORD.fullmatch(line)
    if not match:
        raise _error("expected rank:N:op(key=value,...) with a closing ')'", source, number)
    try:
        fields = parse_kv(match.group("body"))
        subs = [_sub_operation(item) for item in
                parse_string_list(fields.get("sub_operations", "[]"))]
    except TokenizeError as exc:
        raise _error(f"malformed record: {exc}", source, number) from exc
    duration = _duration_ns(fields.get("duration"))
    if duration is None:
        raise _error("expected duration=<milliseconds>", source, number)
    return Record(rank=int(match.group("rank")), op=match.group("op"), line=number,
                  fields=fields, duration_ns=duration, sub_operations=subs)


def _sub_operation(text: str) -> SubOperation:
    fields = parse_kv(text)
    return SubOperation(fields=fields, duration_ns=_duration_ns(fields.get("duration")))


def _duration_ns(text: str | None) -> float | None:
    """A ``duration=`` value (ms, from CUDA events) in ns; ``None`` when absent or ``None``."""
    if text is None or text.strip() == "None":
        return None
    try:
        value = parse_duration(text, unit="ms")
    except (ValueError, ArithmeticError):  # decimal.Overflow for exponents like 1e999999
        return None
    if value is None or not math.isfinite(value) or value < 0:
        return None
    return value


def _error(message: str, source: str, line: int) -> ParseError:
    return ParseError(message, source=source, line=line, format=NAME)


# --- metrics -------------------------------------------------------------------------------


def _profile(rank: int, records: list[Record], *, source: str,
             warnings: list[str]) -> Profile:
    """The metrics of one rank."""
    phases = _group(records, key=lambda record: record.op)
    metrics = [_phase_metric(op, group) for op, group in phases.items()]
    metrics += _sub_operation_metrics(records)
    metrics += _step_metrics(phases, records)
    iterations = len(phases.get(ITERATION_END, []))
    return Profile(
        label=f"rank{rank}", format=NAME, source=source, metrics=metrics,
        steps=iterations or None, warnings=list(warnings),
        metadata={"rank": rank, "records": len(records),
                  "stage_ids": sorted({r.value("stage_id") or "" for r in records} - {""}),
                  "time_unit": "ms (converted to ns)"},
    )


def _group(records: Iterable[Record], *,
           key: Callable[[Record], str]) -> dict[str, list[Record]]:
    groups: dict[str, list[Record]] = {}
    for record in records:
        groups.setdefault(key(record), []).append(record)
    return groups


def is_comm_phase(op: str) -> bool:
    """Whether a phase is itself a communication (pipeline send/recv, DP/EP all-reduce)."""
    lowered = op.lower()
    return lowered.startswith(("send_", "recv_")) or any(w in lowered for w in _COMM_WORDS)


def _phase_metric(op: str, records: list[Record]) -> Metric:
    """A ``range`` (or ``comm``) metric for every occurrence of one phase."""
    kind = MetricKind.COMM if is_comm_phase(op) else MetricKind.RANGE
    metric = _timed_metric(kind, op, [r.duration_ns for r in records])
    metric.attrs = _phase_attrs(records)
    if kind is MetricKind.COMM:
        metric.bytes = payload_bytes(r.fields for r in records)
    return metric


def _phase_attrs(records: list[Record]) -> dict[str, Any]:
    attrs: dict[str, Any] = {"mg_states": _counts(r.value("mg_state") for r in records)}
    for key in ("group_kind", "description", "input__dtype"):
        values = sorted({v for r in records if (v := r.value(key)) is not None})
        if values:
            attrs[key] = values[0] if len(values) == 1 else values
    return attrs


def _counts(values: Iterable[str | None]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        name = value or "None"
        counts[name] = counts.get(name, 0) + 1
    return counts


def _timed_metric(kind: MetricKind, name: str, samples: list[float], *,
                  scope: str | None = None) -> Metric:
    """A metric summarising per-call durations (ns), samples kept in order."""
    return Metric(
        kind=kind, name=name, scope=scope, calls=len(samples),
        total_ns=float(sum(samples)) if samples else None,
        avg_ns=float(statistics.fmean(samples)) if samples else None,
        min_ns=min(samples) if samples else None,
        max_ns=max(samples) if samples else None,
        median_ns=float(statistics.median(samples)) if samples else None,
        std_ns=float(statistics.stdev(samples)) if len(samples) > 1 else None,
        samples_ns=list(samples) if samples else None,
    )


def payload_bytes(calls: Iterable[Mapping[str, str]]) -> float | None:
    """Total bytes moved by calls with ``input__shape`` and ``input__dtype`` fields.

    ``None`` when any call lacks a readable shape or a known dtype: a partial sum would
    understate the traffic.
    """
    total = 0
    for fields in calls:
        dims = parse_int_list(fields.get("input__shape", ""))
        size = _dtype_bytes(fields.get("input__dtype", "").strip())
        if dims is None or size is None:
            return None
        total += math.prod(dims) * size
    # Shapes are copied from the log verbatim; an absurd one must not overflow float().
    return float(total) if total < 10**30 else None


def _dtype_bytes(dtype: str) -> int | None:
    return _DTYPE_BYTES.get(dtype.removeprefix("torch."))


def sub_operation_name(fields: Mapping[str, str]) -> str:
    """``allreduce[tp] linear_fwd``: the collective, its group, and what it carries."""
    def get(key: str) -> str | None:
        value = fields.get(key, "").strip()
        return value if value and value != "None" else None

    func = get("comm_func") or get("trace_src_func") or "comm"
    group = get("group")
    label = get("func_name")
    name = f"{func}[{group}]" if group else func
    return f"{name} {label}" if label else name


def _sub_operation_metrics(records: list[Record]) -> list[Metric]:
    """One ``comm`` metric per (phase, collective, group, payload name)."""
    groups: dict[tuple[str, str], list[SubOperation]] = {}
    for record in records:
        for sub in record.sub_operations:
            groups.setdefault((record.op, sub_operation_name(sub.fields)), []).append(sub)
    return [_sub_metric(scope, name, subs) for (scope, name), subs in groups.items()]


def _sub_metric(scope: str, name: str, subs: list[SubOperation]) -> Metric:
    samples = [s.duration_ns for s in subs if s.duration_ns is not None]
    metric = _timed_metric(MetricKind.COMM, name, samples, scope=scope)
    metric.calls = len(subs)
    first = subs[0].fields
    metric.attrs = {key: first[key].strip() for key in
                    ("comm_func", "group", "func_name", "trace_src_func", "input__dtype")
                    if key in first and first[key].strip() != "None"}
    metric.bytes = payload_bytes(s.fields for s in subs)
    return metric


def _step_metrics(phases: Mapping[str, list[Record]], records: list[Record]) -> list[Metric]:
    """``step`` metrics: the three step phases, and whole iterations when timestamps allow."""
    steps = [step_metric(op, [r.duration_ns for r in phases[op]])
             for op in STEP_PHASES if op in phases]
    iterations = iteration_durations_ns(records)
    if iterations:
        metric = step_metric("iteration", iterations)
        metric.attrs = {"definition": "first phase start to optimizer_step end, per rank"}
        steps.append(metric)
    return steps


def iteration_durations_ns(records: list[Record]) -> list[float]:
    """Per-iteration wall time: from the start of the first phase after the previous
    ``optimizer_step`` to the end of the next one. Empty when any timestamp is missing."""
    durations: list[float] = []
    start: float | None = None
    for record in records:
        interval = record.interval_ns()
        if interval is None:
            return []
        start = interval[0] if start is None else min(start, interval[0])
        if record.op == ITERATION_END:
            durations.append(max(interval[1] - start, 0.0))
            start = None
    return durations
