"""Echo/AICB-style Megatron-LM rank trace logs: ``rank:N:op(key=value,...)``.

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

import functools
import math
import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfci.core.errors import ParseError
from perfci.core.model import Metric, MetricKind, Profile
from perfci.core.units import parse_duration
from perfci.formats._steps import step_metric
from perfci.formats._textio import gc_paused, iter_lines, scaled_decimal
from perfci.formats.caps import Budget, budget
from perfci.formats.workload._detectors import MEGATRON_TRACE
from perfci.formats.workload._kv_tokenizer import (
    TokenizeError,
    parse_int_list,
    parse_kv,
    parse_kv_list,
)

NAME = MEGATRON_TRACE.name
DESCRIPTION = MEGATRON_TRACE.description
sniff = MEGATRON_TRACE.sniff

_RECORD = re.compile(
    r"rank:(?P<rank>[0-9]{1,9}):(?P<op>[A-Za-z_]\w*)\((?P<body>.*)\)\s*$", re.DOTALL
)
_RECORD_START = re.compile(r"rank:\d+:")
_COMM_WORDS = (
    "allreduce",
    "all_reduce",
    "allgather",
    "all_gather",
    "reduce_scatter",
    "reducescatter",
    "all_to_all",
    "alltoall",
    "broadcast",
)
STEP_PHASES = ("forward_step", "backward_step", "optimizer_step")
ITERATION_END = "optimizer_step"
_PHASE_ATTRS = ("group_kind", "description", "input__dtype")
_SUB_ATTRS = ("comm_func", "group", "func_name", "trace_src_func", "input__dtype")
_MS_POWER = 6  # ns per ms = 10**6

# Bytes per element of the torch dtypes these traces print (``torch.float32``).
_DTYPE_BYTES = {
    "float64": 8,
    "double": 8,
    "int64": 8,
    "long": 8,
    "complex64": 8,
    "float32": 4,
    "float": 4,
    "int32": 4,
    "int": 4,
    "float16": 2,
    "half": 2,
    "bfloat16": 2,
    "int16": 2,
    "short": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}


@dataclass(slots=True)
class _Phase:
    """Every occurrence of one phase (``forward_step`` ...) of one rank."""

    durations: list[float] = field(default_factory=list)
    mg_states: dict[str, int] = field(default_factory=dict)
    values: dict[str, set[str]] = field(default_factory=dict)  # of _PHASE_ATTRS
    payload: int | None = 0  # bytes so far; None once a call has no shape or dtype


@dataclass(slots=True)
class _SubGroup:
    """The sub-operations of one name in one phase of one rank."""

    attrs: dict[str, str]
    calls: int = 0
    durations: list[float] = field(default_factory=list)  # of the calls that have one
    payload: int | None = 0


@dataclass(slots=True)
class _Rank:
    """What one rank's records add up to, gathered record by record."""

    records: int = 0
    phases: dict[str, _Phase] = field(default_factory=dict)
    subs: dict[tuple[str, str], _SubGroup] = field(default_factory=dict)
    # The group of a sub-operation by its raw naming fields: naming it once per distinct call.
    sub_groups: dict[tuple[str | None, ...], _SubGroup] = field(default_factory=dict)
    stage_ids: set[str] = field(default_factory=set)
    iterations: list[float] | None = field(default_factory=list)  # None: a timestamp lacks
    iteration_start: float | None = None

    def add(
        self,
        op: str,
        fields: dict[str, str],
        duration: float,
        subs: list[tuple[dict[str, str], float | None]],
        counted: Budget,
    ) -> None:
        """One record; a new phase or sub-operation group is a metric, a further duration of
        one a sample, counted within a service upload's caps (issue 31)."""
        self.records += 1
        self.stage_ids.add(_value(fields, "stage_id") or "")
        phase = self.phases.get(op)
        if phase is None:
            counted.metric()
            phase = self.phases[op] = _Phase(payload=0 if is_comm_phase(op) else None)
        else:
            counted.sample()
        phase.durations.append(duration)
        state = _value(fields, "mg_state") or "None"
        phase.mg_states[state] = phase.mg_states.get(state, 0) + 1
        for key in _PHASE_ATTRS:
            if (value := _value(fields, key)) is not None:
                phase.values.setdefault(key, set()).add(value)
        if phase.payload is not None:
            phase.payload = _add_payload(phase.payload, fields)
        sub_groups = self.sub_groups
        for sub, sub_duration in subs:  # a few to tens per record: the loop is inlined
            raw = (
                op,
                sub.get("comm_func"),
                sub.get("trace_src_func"),
                sub.get("group"),
                sub.get("func_name"),
            )
            group = sub_groups.get(raw) or self._sub_group(raw, sub, counted)
            group.calls += 1
            if sub_duration is not None:
                if group.durations:
                    counted.sample()
                group.durations.append(sub_duration)
            if group.payload is not None:
                size = _call_bytes(sub.get("input__shape", ""), sub.get("input__dtype", ""))
                group.payload = None if size is None else group.payload + size
        if self.iterations is not None:
            self._add_interval(op, fields, duration)

    def _sub_group(
        self, raw: tuple[str | None, ...], fields: dict[str, str], counted: Budget
    ) -> _SubGroup:
        """The group of a sub-operation seen for the first time with these naming fields."""
        key = (raw[0] or "", sub_operation_name(fields))
        group = self.subs.get(key)
        if group is None:
            counted.metric()
            group = self.subs[key] = _SubGroup(attrs=_sub_attrs(fields))
        self.sub_groups[raw] = group
        return group

    def _add_interval(self, op: str, fields: dict[str, str], duration: float) -> None:
        """Iteration wall time: from the start of the first phase after the previous
        ``optimizer_step`` to the end of the next one; ``timestamp`` (ms, ``perf_counter``)
        is taken at the end of a phase. No iterations at all when a timestamp is missing."""
        end = _duration_ns(fields.get("timestamp"))
        if end is None or self.iterations is None:
            self.iterations = None
            return
        begin = end - duration
        start = self.iteration_start
        start = begin if start is None else min(start, begin)
        if op == ITERATION_END:
            self.iterations.append(max(end - start, 0.0))
            self.iteration_start = None
        else:
            self.iteration_start = start


def _value(fields: Mapping[str, str], key: str) -> str | None:
    """The field's text, ``None`` when absent or the literal ``None``."""
    text = fields.get(key)
    if text is None:
        return None
    text = text.strip()
    return None if text == "None" else text


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """One profile per rank found in ``path``, in rank order, read line by line."""
    source = str(path)
    ranks: dict[int, _Rank] = {}
    skipped = 0
    counted = budget(source, NAME)
    with gc_paused():
        for number, line in enumerate(iter_lines(path, format=NAME), start=1):
            stripped = line.strip()
            if not stripped:
                continue
            if not _RECORD_START.match(stripped):
                skipped += 1  # interleaved application output: not ours to judge
                continue
            rank, op, fields, duration, subs = _parse_line(stripped, number=number, source=source)
            state = ranks.get(rank)
            if state is None:
                state = ranks[rank] = _Rank()
            state.add(op, fields, duration, subs, counted)
    if not ranks:
        raise ParseError("no rank:N:op(key=value,...) records found", source=source, format=NAME)
    warnings = (
        [f"{skipped} lines that are not rank:N:op(...) records were skipped"] if skipped else []
    )
    return [_profile(rank, ranks[rank], source=source, warnings=warnings) for rank in sorted(ranks)]


SubOperations = list[tuple[dict[str, str], float | None]]


def _parse_line(
    line: str, *, number: int, source: str
) -> tuple[int, str, dict[str, str], float, SubOperations]:
    """Rank, phase, fields, duration (ns) and sub-operations (fields, duration) of one
    record; a ``ParseError`` naming the line for anything malformed."""
    match = _RECORD.fullmatch(line)
    if not match:
        raise _error("expected rank:N:op(key=value,...) with a closing ')'", source, number)
    try:
        fields = parse_kv(match.group("body"))
        subs = [
            (sub, _cached_duration_ns(sub.get("duration")))
            for sub in parse_kv_list(fields.get("sub_operations", "[]"))
        ]
    except TokenizeError as exc:
        raise _error(f"malformed record: {exc}", source, number) from exc
    duration = _cached_duration_ns(fields.get("duration"))
    if duration is None:
        raise _error("expected duration=<milliseconds>", source, number)
    return int(match.group("rank")), match.group("op"), fields, duration, subs


def _duration_ns(text: str | None) -> float | None:
    """A ``duration=`` value (ms, from CUDA events) in ns; ``None`` when absent or ``None``."""
    if text is None:
        return None
    value = scaled_decimal(text, _MS_POWER)  # the plain "28.93" of nearly every field
    if value is None:
        if text.strip() == "None":
            return None
        try:
            value = parse_duration(text, unit="ms")
        except (ValueError, ArithmeticError):  # decimal.Overflow for exponents like 1e999999
            return None
    if value is None or not math.isfinite(value) or value < 0:
        return None
    return value


# Durations are printed with two decimals of a ms: a few hundred texts make most of a trace.
# (Timestamps are all different and skip this cache.)
_cached_duration_ns = functools.lru_cache(maxsize=4096)(_duration_ns)


def _error(message: str, source: str, line: int) -> ParseError:
    return ParseError(message, source=source, line=line, format=NAME)


# --- metrics -------------------------------------------------------------------------------


def _profile(rank: int, state: _Rank, *, source: str, warnings: list[str]) -> Profile:
    """The metrics of one rank."""
    metrics = [_phase_metric(op, phase) for op, phase in state.phases.items()]
    metrics += [_sub_metric(scope, name, group) for (scope, name), group in state.subs.items()]
    metrics += _step_metrics(state)
    iteration_end = state.phases.get(ITERATION_END)
    iterations = len(iteration_end.durations) if iteration_end else 0
    return Profile(
        label=f"rank{rank}",
        format=NAME,
        source=source,
        metrics=metrics,
        steps=iterations or None,
        warnings=list(warnings),
        metadata={
            "rank": rank,
            "records": state.records,
            "stage_ids": sorted(state.stage_ids - {""}),
            "time_unit": "ms (converted to ns)",
        },
    )


def is_comm_phase(op: str) -> bool:
    """Whether a phase is itself a communication (pipeline send/recv, DP/EP all-reduce)."""
    lowered = op.lower()
    return lowered.startswith(("send_", "recv_")) or any(w in lowered for w in _COMM_WORDS)


def _phase_metric(op: str, phase: _Phase) -> Metric:
    """A ``range`` (or ``comm``) metric for every occurrence of one phase."""
    kind = MetricKind.COMM if is_comm_phase(op) else MetricKind.RANGE
    metric = _timed_metric(kind, op, phase.durations)
    attrs: dict[str, Any] = {"mg_states": phase.mg_states}
    for key in _PHASE_ATTRS:
        values = sorted(phase.values.get(key, ()))
        if values:
            attrs[key] = values[0] if len(values) == 1 else values
    metric.attrs = attrs
    if kind is MetricKind.COMM:
        metric.bytes = _payload_float(phase.payload)
    return metric


def _timed_metric(
    kind: MetricKind, name: str, samples: list[float], *, scope: str | None = None
) -> Metric:
    """A metric summarising per-call durations (ns), samples kept in order."""
    return Metric(
        kind=kind,
        name=name,
        scope=scope,
        calls=len(samples),
        total_ns=float(sum(samples)) if samples else None,
        avg_ns=float(statistics.fmean(samples)) if samples else None,
        min_ns=min(samples) if samples else None,
        max_ns=max(samples) if samples else None,
        median_ns=float(statistics.median(samples)) if samples else None,
        std_ns=float(statistics.stdev(samples)) if len(samples) > 1 else None,
        samples_ns=samples or None,  # our own list: no copy of a million samples
    )


def _add_payload(total: int | None, fields: Mapping[str, str]) -> int | None:
    """``total`` plus the bytes of one call; ``None`` once a call's size is unknown."""
    size = _call_bytes(fields.get("input__shape", ""), fields.get("input__dtype", ""))
    return None if total is None or size is None else total + size


@functools.lru_cache(maxsize=4096)
def _call_bytes(shape: str, dtype: str) -> int | None:
    """Bytes of one call's ``input__shape`` and ``input__dtype`` (the same few recur on
    every record); ``None`` when either is missing or unreadable."""
    dims = parse_int_list(shape)
    size = _dtype_bytes(dtype.strip())
    return None if dims is None or size is None else math.prod(dims) * size


def _payload_float(total: int | None) -> float | None:
    # Shapes are copied from the log verbatim; an absurd one must not overflow float().
    return float(total) if total is not None and total < 10**30 else None


def _dtype_bytes(dtype: str) -> int | None:
    return _DTYPE_BYTES.get(dtype.removeprefix("torch."))


def sub_operation_name(fields: Mapping[str, str]) -> str:
    """``allreduce[tp] linear_fwd``: the collective, its group, and what it carries."""
    func = _value(fields, "comm_func") or _value(fields, "trace_src_func") or "comm"
    group = _value(fields, "group")
    label = _value(fields, "func_name")
    name = f"{func}[{group}]" if group else func
    return f"{name} {label}" if label else name


def _sub_attrs(first: Mapping[str, str]) -> dict[str, str]:
    """A sub-operation metric's attributes, from its first call."""
    return {
        key: first[key].strip()
        for key in _SUB_ATTRS
        if key in first and first[key].strip() != "None"
    }


def _sub_metric(scope: str, name: str, group: _SubGroup) -> Metric:
    metric = _timed_metric(MetricKind.COMM, name, group.durations, scope=scope)
    metric.calls = group.calls
    metric.attrs = group.attrs
    metric.bytes = _payload_float(group.payload)
    return metric


def _step_metrics(state: _Rank) -> list[Metric]:
    """``step`` metrics: the three step phases, and whole iterations when timestamps allow."""
    steps = [
        step_metric(op, state.phases[op].durations) for op in STEP_PHASES if op in state.phases
    ]
    if state.iterations:
        metric = step_metric("iteration", state.iterations)
        metric.attrs = {"definition": "first phase start to optimizer_step end, per rank"}
        steps.append(metric)
    return steps
