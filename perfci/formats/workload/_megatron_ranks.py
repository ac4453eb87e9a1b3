"""What one rank's records of a Megatron-LM rank trace log (``megatron_trace``) add up to,
gathered record by record: its phases, sub-operations, payload bytes and iteration times (ns).

``megatron_trace`` reads the records and turns each rank's totals into its profile."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from perfci.core.units import parse_duration
from perfci.formats._textio import scaled_decimal
from perfci.formats.caps import Budget
from perfci.formats.workload._kv_tokenizer import parse_int_list

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
PHASE_ATTRS = ("group_kind", "description", "input__dtype")
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
class Phase:
    """Every occurrence of one phase (``forward_step`` ...) of one rank."""

    durations: list[float] = field(default_factory=list)
    mg_states: dict[str, int] = field(default_factory=dict)
    values: dict[str, set[str]] = field(default_factory=dict)  # of PHASE_ATTRS
    payload: int | None = 0  # bytes so far; None once a call has no shape or dtype


@dataclass(slots=True)
class SubGroup:
    """The sub-operations of one name in one phase of one rank."""

    attrs: dict[str, str]
    calls: int = 0
    durations: list[float] = field(default_factory=list)  # of the calls that have one
    payload: int | None = 0


@dataclass(slots=True)
class Rank:
    """What one rank's records add up to, gathered record by record."""

    records: int = 0
    phases: dict[str, Phase] = field(default_factory=dict)
    subs: dict[tuple[str, str], SubGroup] = field(default_factory=dict)
    # The group of a sub-operation by its raw naming fields: naming it once per distinct call.
    sub_groups: dict[tuple[str | None, ...], SubGroup] = field(default_factory=dict)
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
            phase = self.phases[op] = Phase(payload=0 if is_comm_phase(op) else None)
        else:
            counted.sample()
        phase.durations.append(duration)
        state = _value(fields, "mg_state") or "None"
        phase.mg_states[state] = phase.mg_states.get(state, 0) + 1
        for key in PHASE_ATTRS:
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
    ) -> SubGroup:
        """The group of a sub-operation seen for the first time with these naming fields."""
        key = (raw[0] or "", sub_operation_name(fields))
        group = self.subs.get(key)
        if group is None:
            counted.metric()
            group = self.subs[key] = SubGroup(attrs=_sub_attrs(fields))
        self.sub_groups[raw] = group
        return group

    def _add_interval(self, op: str, fields: dict[str, str], duration: float) -> None:
        """Iteration wall time: from the start of the first phase after the previous
        ``optimizer_step`` to the end of the next one; ``timestamp`` (ms, ``perf_counter``)
        is taken at the end of a phase. No iterations at all when a timestamp is missing."""
        end = duration_ns(fields.get("timestamp"))
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


def duration_ns(text: str | None) -> float | None:
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


def is_comm_phase(op: str) -> bool:
    """Whether a phase is itself a communication (pipeline send/recv, DP/EP all-reduce)."""
    lowered = op.lower()
    return lowered.startswith(("send_", "recv_")) or any(w in lowered for w in _COMM_WORDS)


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


def payload_float(total: int | None) -> float | None:
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
