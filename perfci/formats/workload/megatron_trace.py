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
import re
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfci.core.errors import ParseError
from perfci.core.model import Metric, MetricKind, Profile
from perfci.formats._steps import step_metric
from perfci.formats._textio import gc_paused, iter_lines
from perfci.formats.caps import budget
from perfci.formats.workload._detectors import MEGATRON_TRACE
from perfci.formats.workload._kv_tokenizer import TokenizeError, parse_kv, parse_kv_list
from perfci.formats.workload._megatron_ranks import (
    ITERATION_END,
    PHASE_ATTRS,
    STEP_PHASES,
    Phase,
    Rank,
    SubGroup,
    duration_ns,
    is_comm_phase,
    payload_float,
)

NAME = MEGATRON_TRACE.name
DESCRIPTION = MEGATRON_TRACE.description
sniff = MEGATRON_TRACE.sniff

_RECORD = re.compile(
    r"rank:(?P<rank>[0-9]{1,9}):(?P<op>[A-Za-z_]\w*)\((?P<body>.*)\)\s*$", re.DOTALL
)
_RECORD_START = re.compile(r"rank:\d+:")


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """One profile per rank found in ``path``, in rank order, read line by line."""
    source = str(path)
    ranks: dict[int, Rank] = {}
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
                state = ranks[rank] = Rank()
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


# Durations are printed with two decimals of a ms: a few hundred texts make most of a trace.
# (Timestamps are all different and skip this cache.)
_cached_duration_ns = functools.lru_cache(maxsize=4096)(duration_ns)


def _error(message: str, source: str, line: int) -> ParseError:
    return ParseError(message, source=source, line=line, format=NAME)


# --- metrics -------------------------------------------------------------------------------


def _profile(rank: int, state: Rank, *, source: str, warnings: list[str]) -> Profile:
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


def _phase_metric(op: str, phase: Phase) -> Metric:
    """A ``range`` (or ``comm``) metric for every occurrence of one phase."""
    kind = MetricKind.COMM if is_comm_phase(op) else MetricKind.RANGE
    metric = _timed_metric(kind, op, phase.durations)
    attrs: dict[str, Any] = {"mg_states": phase.mg_states}
    for key in PHASE_ATTRS:
        values = sorted(phase.values.get(key, ()))
        if values:
            attrs[key] = values[0] if len(values) == 1 else values
    metric.attrs = attrs
    if kind is MetricKind.COMM:
        metric.bytes = payload_float(phase.payload)
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


def _sub_metric(scope: str, name: str, group: SubGroup) -> Metric:
    metric = _timed_metric(MetricKind.COMM, name, group.durations, scope=scope)
    metric.calls = group.calls
    metric.attrs = group.attrs
    metric.bytes = payload_float(group.payload)
    return metric


def _step_metrics(state: Rank) -> list[Metric]:
    """``step`` metrics: the three step phases, and whole iterations when timestamps allow."""
    steps = [
        step_metric(op, state.phases[op].durations) for op in STEP_PHASES if op in state.phases
    ]
    if state.iterations:
        metric = step_metric("iteration", state.iterations)
        metric.attrs = {"definition": "first phase start to optimizer_step end, per rank"}
        steps.append(metric)
    return steps
