"""The aggregation of a Chrome trace's streamed events, batch by batch.

``CATEGORIES`` maps each ``cat`` to a metric kind and device; ``Aggregate`` takes the batches
of ``_chrome_stream`` (``_chrome_types``' events) and reduces them to per-(cat, name)
durations, memcpy/memset bytes, event counts per phase, the ``ProfilerStep#N`` ranges (set
aside as steps) and the allocator peaks of ``[memory]`` instants (``Peak``), then builds the
duration metrics of a profile.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, cast

import numpy as np

from perfci.core.model import Device, Metric, MetricKind, Profile
from perfci.formats._steps import step_number
from perfci.formats.caps import Budget, budget
from perfci.formats.pytorch._chrome_types import Event, EventError

__all__ = ["CATEGORIES", "LEGACY_PIDS", "Aggregate", "Category", "Peak", "is_number"]


@dataclass(frozen=True, slots=True)
class Category:
    kind: MetricKind
    device: Device
    carries_bytes: bool = False


_OP = Category(MetricKind.OP, Device.CPU)
_API = Category(MetricKind.API, Device.CPU)
_KERNEL = Category(MetricKind.KERNEL, Device.GPU)
_MEMORY = Category(MetricKind.MEMORY, Device.GPU, carries_bytes=True)

# Lower-cased ``cat`` → metric. Legacy names (torch 1.8/1.9) alias the current ones.
CATEGORIES: dict[str, Category] = {
    "cpu_op": _OP,
    "operator": _OP,
    "user_annotation": Category(MetricKind.RANGE, Device.CPU),
    "gpu_user_annotation": Category(MetricKind.RANGE, Device.GPU),
    "kernel": _KERNEL,
    "gpu_memcpy": _MEMORY,
    "memcpy": _MEMORY,
    "gpu_memset": _MEMORY,
    "memset": _MEMORY,
    "cuda_runtime": _API,
    "runtime": _API,
    "cuda_driver": _API,
}

# The legacy autograd profiler has no ``cat``: its rows are told apart by ``pid``.
LEGACY_PIDS: dict[str, str] = {"cpu functions": "cpu_op", "cuda functions": "kernel"}

_COMM_KERNEL = re.compile(r"nccl|rccl", re.IGNORECASE)
_PROFILER_STEP = re.compile(r"ProfilerStep#\d+")
# ProfilerStep#N is a record_function range; torch 1.8/1.9 wrote it as an ``Operator``.
_STEP_KINDS = frozenset({MetricKind.RANGE, MetricKind.OP})

MEMORY_EVENT = "[memory]"

Key = tuple[str | None, str]
_PHASE = attrgetter("ph")


@dataclass
class Aggregate:
    """Per-(cat, name) durations in ns, filled batch by batch while streaming.

    Each batch is reduced with list comprehensions and numpy rather than a per-event Python
    loop, which is much faster: its complete events become an array of key ids and one of durations.
    Only these two numbers per event are kept, so memory grows with the event count, never
    with the file size.
    """

    keys: dict[Key, int] = field(default_factory=dict)  # (cat, name) → id, first-seen order
    id_chunks: list[np.ndarray] = field(default_factory=list)
    ns_chunks: list[np.ndarray] = field(default_factory=list)
    ts_chunks: list[np.ndarray] = field(default_factory=list)  # starts in µs, NaN if unknown
    byte_sums: dict[Key, float] = field(default_factory=dict)
    phases: Counter[str | None] = field(default_factory=Counter)
    steps: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    # The host's ProfilerStep#N ranges as (start, end) in µs: the steps that per-step totals of
    # CPU-side events are counted in.
    step_spans: dict[int, tuple[float, float]] = field(default_factory=dict)
    memory: dict[tuple[int, Any], Peak] = field(default_factory=dict)  # (type, id) → peaks
    # A new (cat, name) of a known category is a metric, counted within a service upload's
    # caps (issue 31).
    counted: Budget = field(default_factory=lambda: budget("", ""))

    def add(self, events: list[Event]) -> None:
        phases = Counter(map(_PHASE, events))
        self.phases.update(phases)
        if phases.get("i"):
            self._add_memory(events)
        complete = [event for event in events if event.ph == "X"]
        if not complete:
            return
        durations = [event.dur for event in complete]
        names = [event.name for event in complete]
        if None in durations or None in names:
            raise _missing_field(complete, events)
        cats = [event.cat for event in complete]
        if None in cats:
            cats = [
                cat if cat is not None else _legacy_cat(event.pid)
                for cat, event in zip(cats, complete, strict=True)
            ]
        pairs = cast(list[Key], list(zip(cats, names, strict=True)))
        self.id_chunks.append(np.array(self._ids(pairs), dtype=np.int32))
        micros = np.array(durations, dtype=np.float64)
        if not np.all(np.abs(micros) < _MAX_DUR_US):
            index = int(np.argmax(np.abs(micros) >= _MAX_DUR_US))
            raise EventError(
                f"implausible dur {durations[index]!r} µs", _index(events, complete[index])
            )
        self.ns_chunks.append(np.rint(micros * 1000.0).astype(np.int64))
        self.ts_chunks.append(_starts([event.ts for event in complete]))
        memory = {cat for cat in set(cats) if _carries_bytes(cat)}
        if memory:
            for index in [index for index, cat in enumerate(cats) if cat in memory]:
                self._add_bytes(pairs[index], complete[index], events)

    def _add_memory(self, events: list[Event]) -> None:
        """The running maximum of the allocator totals of ``[memory]`` instants, per device."""
        for event in [event for event in events if event.ph == "i"]:
            args = event.args
            if event.name != MEMORY_EVENT or args is None or args.total_allocated is None:
                continue  # torch < 1.10 wrote only Bytes: no total, no peak
            device_type = args.device_type
            if not _is_int(device_type):
                raise EventError(
                    f"[memory] event with 'Device Type' {device_type!r}, expected an integer",
                    _index(events, event),
                )
            allocated, reserved = args.total_allocated, args.total_reserved
            for label, value in (("Total Allocated", allocated), ("Total Reserved", reserved)):
                if value is not None and not is_number(value):
                    raise EventError(
                        f"[memory] event with non-numeric {label!r} {value!r}",
                        _index(events, event),
                    )
            key = (device_type, args.device_id if _is_int(args.device_id) else None)
            peak = self.memory.get(key)
            if peak is None:
                peak = self.memory[key] = Peak()
            peak.events += 1
            peak.allocated = max(peak.allocated, allocated)
            if reserved is not None:
                peak.reserved = reserved if peak.reserved is None else max(peak.reserved, reserved)

    def _ids(self, pairs: list[Key]) -> list[int]:
        ids = list(map(self.keys.get, pairs))
        if None in ids:
            for index, value in enumerate(ids):
                if value is None:
                    key = pairs[index]
                    if key not in self.keys and _counts_as_metric(key):
                        self.counted.metric()
                    ids[index] = self.keys.setdefault(key, len(self.keys))
        return cast(list[int], ids)

    def _add_bytes(self, key: Key, event: Event, events: list[Event]) -> None:
        value = event.args.bytes if event.args is not None else None
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise EventError(
                f"{key[0]} event with non-numeric args.bytes {value!r}", _index(events, event)
            )
        self.byte_sums[key] = self.byte_sums.get(key, 0.0) + value

    def samples(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per key id, its durations in ns and its starts in µs, in trace order."""
        if not self.id_chunks:
            return []
        ids = np.concatenate(self.id_chunks)
        durations = np.concatenate(self.ns_chunks)
        starts = np.concatenate(self.ts_chunks)
        self.id_chunks, self.ns_chunks, self.ts_chunks = [], [], []
        order = np.argsort(ids, kind="stable")
        bounds = np.cumsum(np.bincount(ids, minlength=len(self.keys)))[:-1]
        return list(
            zip(np.split(durations[order], bounds), np.split(starts[order], bounds), strict=True)
        )

    def build(self, profile: Profile) -> None:
        """Metrics per (kind, name, device); ``ProfilerStep#N`` ranges are set aside as steps."""
        merged: dict[tuple[MetricKind, str, Device], list[tuple[np.ndarray, np.ndarray]]] = {}
        byte_sums: dict[tuple[MetricKind, str, Device], float] = {}
        ignored: Counter[str] = Counter()
        for key, (samples, starts) in zip(self.keys, self.samples(), strict=True):
            cat, name = key
            category = _category(cat)
            if category is None:
                ignored[cat or "(none)"] += len(samples)
            elif category.kind in _STEP_KINDS and _PROFILER_STEP.fullmatch(name):
                self._keep_step(category.device, name, samples, starts)
            else:
                kind = category.kind
                if kind is MetricKind.KERNEL and _COMM_KERNEL.search(name):
                    kind = MetricKind.COMM
                ident = (kind, name, category.device)
                merged.setdefault(ident, []).append((samples, starts))
                if key in self.byte_sums:
                    byte_sums[ident] = byte_sums.get(ident, 0.0) + self.byte_sums[key]
        spans = StepSpans.of(self.step_spans)
        profile.metrics = []
        for ident, parts in merged.items():
            durations = np.concatenate([part[0] for part in parts])
            metric = _metric(ident, durations, byte_sums.get(ident))
            # Host-side events only: a kernel runs on the GPU's clock, after its step's launch.
            if spans is not None and ident[2] is Device.CPU:
                metric.step_totals_ns = spans.totals(
                    durations, np.concatenate([part[1] for part in parts])
                )
            profile.metrics.append(metric)
        phases = {phase or "(none)": count for phase, count in self.phases.items()}
        profile.metadata["events_by_phase"] = dict(sorted(phases.items()))
        if ignored:
            profile.metadata["ignored_events"] = dict(sorted(ignored.items()))
        begin_end = phases.get("B", 0) + phases.get("E", 0)
        if begin_end:
            profile.warnings.append(
                f"{begin_end} begin/end (ph B/E) events were not "
                "aggregated: only complete (X) events are"
            )

    def _keep_step(
        self, device: Device, name: str, samples: np.ndarray, starts: np.ndarray
    ) -> None:
        parsed = step_number(name)
        if parsed is not None:
            by_number = self.steps.setdefault(device.value, {})
            by_number.setdefault(parsed[1], []).extend(float(value) for value in samples)
            if device is Device.CPU and parsed[1] not in self.step_spans and len(samples) == 1:
                start = float(starts[0])
                self.step_spans[parsed[1]] = (start, start + float(samples[0]) / 1000.0)


@dataclass(frozen=True, slots=True)
class StepSpans:
    """The host's profiled steps, in time order, for per-step totals of its events."""

    starts: np.ndarray  # µs
    ends: np.ndarray  # µs

    #: Fewest steps worth a per-step total: with one, the total is the metric's own.
    MIN_STEPS = 2

    @classmethod
    def of(cls, spans: dict[int, tuple[float, float]]) -> StepSpans | None:
        """The spans of ``spans`` (step number → (start, end)), or ``None`` when they cannot
        be used: too few, an unknown start, or overlapping (two threads' steps)."""
        if len(spans) < cls.MIN_STEPS:
            return None
        ordered = np.array(sorted(spans.values()), dtype=np.float64)
        starts, ends = ordered[:, 0], ordered[:, 1]
        if not np.all(np.isfinite(ordered)) or np.any(starts[1:] < ends[:-1]):
            return None
        return cls(starts, ends)

    def totals(self, durations_ns: np.ndarray, starts_us: np.ndarray) -> list[float] | None:
        """The summed duration of the events that start inside each step, in step order;
        ``None`` when some step has none (the metric is not part of every step's work)."""
        index = np.searchsorted(self.starts, starts_us, side="right") - 1
        clipped = np.clip(index, 0, None)
        inside = (index >= 0) & (starts_us < self.ends[clipped])  # NaN starts compare False
        totals = np.bincount(
            index[inside],
            weights=durations_ns[inside].astype(np.float64),
            minlength=self.starts.size,
        )
        if not np.all(totals > 0):
            return None
        return [float(total) for total in totals]


@dataclass(slots=True)
class Peak:
    """The largest allocator totals seen for one device, in bytes."""

    allocated: float = 0.0
    reserved: float | None = None
    events: int = 0


# Durations beyond ~31 years are corrupt values, and would overflow int64 nanoseconds.
_MAX_DUR_US = 1e15


def _metric(
    ident: tuple[MetricKind, str, Device], values: np.ndarray, byte_sum: float | None
) -> Metric:
    kind, name, device = ident
    count = int(values.size)
    total = int(values.sum())
    return Metric(
        kind=kind,
        name=name,
        device=device,
        calls=count,
        total_ns=float(total),
        avg_ns=total / count,
        min_ns=float(values.min()),
        max_ns=float(values.max()),
        median_ns=float(np.median(values)),
        std_ns=float(np.std(values, ddof=1)) if count > 1 else None,
        bytes=byte_sum,
    )


def _index(events: list[Event], event: Event) -> int:
    """Position of ``event`` in its batch (error path only)."""
    return next(index for index, candidate in enumerate(events) if candidate is event)


def _missing_field(complete: list[Event], events: list[Event]) -> EventError:
    for event in complete:
        for field_name in ("name", "dur"):
            if getattr(event, field_name) is None:
                return EventError(
                    f"complete event (ph X) without {field_name!r}", _index(events, event)
                )
    raise AssertionError("no event is missing a field")  # pragma: no cover


def _counts_as_metric(key: Key) -> bool:
    category = _category(key[0])
    return category is not None and not (
        category.kind in _STEP_KINDS and _PROFILER_STEP.fullmatch(key[1])
    )


def _category(cat: str | None) -> Category | None:
    return CATEGORIES.get(cat.lower()) if cat is not None else None


def _carries_bytes(cat: str | None) -> bool:
    category = _category(cat)
    return category is not None and category.carries_bytes


def _starts(values: list[Any]) -> np.ndarray:
    """Events' ``ts`` as float µs; a missing one is NaN (in no step), as is any other value
    numpy cannot read as a number (a numeric string it reads as its number)."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.array(
            [float(value) if is_number(value) else np.nan for value in values], dtype=np.float64
        )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _legacy_cat(pid: Any) -> str | None:
    return LEGACY_PIDS.get(pid.lower()) if isinstance(pid, str) else None
