"""The aggregation of a Chrome trace's streamed events, batch by batch.

``CATEGORIES`` maps each ``cat`` to a metric kind and device; ``Aggregate`` takes the batches
of a reader (``_chrome_types``' events) and reduces them to per-(cat, name) durations,
memcpy/memset bytes, event counts per phase, the ``ProfilerStep#N`` ranges (set aside as steps)
and the allocator peaks of ``[memory]`` instants (``Peak``), then builds the duration metrics of
a profile.
"""

from __future__ import annotations

import math
import re
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from operator import attrgetter
from pathlib import Path
from typing import Any, Protocol, cast

from perfci.core.model import Device, Metric, MetricKind, Profile
from perfci.formats._steps import step_number
from perfci.formats.caps import Budget, budget
from perfci.formats.pytorch import _chrome_plain
from perfci.formats.pytorch._chrome_plain import is_number
from perfci.formats.pytorch._chrome_types import EventError, TraceEvent

__all__ = ["CATEGORIES", "LEGACY_PIDS", "Aggregate", "Category", "Peak", "is_number"]

#: From this size on disk (about 10,000 events plain, five times that gzipped), a trace's
#: columns are kept and reduced with numpy (``_chrome_numpy``); below, in plain Python
#: (``_chrome_plain``), which then takes less time than importing numpy. Both give the same
#: figures to the bit.
NUMPY_FROM_BYTES = 2 << 20


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
Events = Sequence[TraceEvent]
_PHASE = attrgetter("ph")


@dataclass
class Aggregate:
    """Per-(cat, name) durations, filled batch by batch while reading.

    Each batch's complete events are reduced with list comprehensions to three columns, kept as
    compact arrays: a key id (int32), the duration and the start (float64 µs; NaN when
    unknown). Only these per event are kept, so memory grows with the event count, never with
    the file size.
    """

    keys: dict[Key, int] = field(default_factory=dict)  # (cat, name) → id, first-seen order
    # Per complete event its key id, duration and start: in plain arrays, or numpy's for a
    # large trace (``columns_for``).
    columns: Columns = field(default_factory=_chrome_plain.Columns)
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

    def add(self, events: Events) -> None:
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
        ids = self._ids(pairs)
        micros = cast(list[float], durations)
        if not max(map(abs, micros)) < _MAX_DUR_US:
            index = next(i for i, value in enumerate(micros) if not abs(value) < _MAX_DUR_US)
            raise EventError(
                f"implausible dur {micros[index]!r} µs", _index(events, complete[index])
            )
        self.columns.add(ids, micros, [event.ts for event in complete])
        memory = {cat for cat in set(cats) if _carries_bytes(cat)}
        if memory:
            for index in [index for index, cat in enumerate(cats) if cat in memory]:
                self._add_bytes(pairs[index], complete[index], events)

    def _add_memory(self, events: Events) -> None:
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

    def _add_bytes(self, key: Key, event: TraceEvent, events: Events) -> None:
        value = event.args.bytes if event.args is not None else None
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise EventError(
                f"{key[0]} event with non-numeric args.bytes {value!r}", _index(events, event)
            )
        self.byte_sums[key] = self.byte_sums.get(key, 0.0) + value

    def build(self, profile: Profile) -> None:
        """Metrics per (kind, name, device); ``ProfilerStep#N`` ranges are set aside as steps."""
        columns = self.columns
        merged: dict[tuple[MetricKind, str, Device], list[tuple[Any, Any]]] = {}
        byte_sums: dict[tuple[MetricKind, str, Device], float] = {}
        ignored: Counter[str] = Counter()
        samples = columns.grouped(len(self.keys))
        for key, (durations, starts) in zip(self.keys, samples, strict=True):
            cat, name = key
            category = _category(cat)
            if category is None:
                ignored[cat or "(none)"] += len(durations)
            elif category.kind in _STEP_KINDS and _PROFILER_STEP.fullmatch(name):
                self._keep_step(category.device, name, durations, starts)
            else:
                kind = category.kind
                if kind is MetricKind.KERNEL and _COMM_KERNEL.search(name):
                    kind = MetricKind.COMM
                ident = (kind, name, category.device)
                merged.setdefault(ident, []).append((durations, starts))
                if key in self.byte_sums:
                    byte_sums[ident] = byte_sums.get(ident, 0.0) + self.byte_sums[key]
        spans = _step_spans(self.step_spans)
        profile.metrics = []
        for ident, parts in merged.items():
            durations = columns.concat([part[0] for part in parts])
            metric = _metric(ident, columns.summary(durations), byte_sums.get(ident))
            # Host-side events only: a kernel runs on the GPU's clock, after its step's launch.
            if spans is not None and ident[2] is Device.CPU:
                metric.step_totals_ns = columns.step_totals(
                    spans, durations, columns.concat([part[1] for part in parts])
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
        self, device: Device, name: str, samples: Sequence[int], starts: Sequence[float]
    ) -> None:
        parsed = step_number(name)
        if parsed is not None:
            by_number = self.steps.setdefault(device.value, {})
            by_number.setdefault(parsed[1], []).extend(float(value) for value in samples)
            if device is Device.CPU and parsed[1] not in self.step_spans and len(samples) == 1:
                start = float(starts[0])
                self.step_spans[parsed[1]] = (start, start + float(samples[0]) / 1000.0)


class Columns(Protocol):
    """``_chrome_plain.Columns`` or ``_chrome_numpy.Columns``: the same figures, to the bit."""

    def add(self, ids: list[int], micros: list[float], starts: list[Any]) -> None: ...
    def grouped(self, keys: int) -> Sequence[tuple[Any, Any]]: ...
    def concat(self, parts: Any) -> Any: ...
    def summary(self, values: Any) -> _chrome_plain.Summary: ...
    def step_totals(
        self, spans: Sequence[tuple[float, float]], durations_ns: Any, starts_us: Any
    ) -> list[float] | None: ...


def columns_for(path: Path) -> Columns:
    """numpy's columns for a file of ``NUMPY_FROM_BYTES`` or more on disk, or when numpy is
    loaded already; else plain ones, which then take less time than importing numpy."""
    if path.stat().st_size < NUMPY_FROM_BYTES and "numpy" not in sys.modules:
        return _chrome_plain.Columns()
    from perfci.formats.pytorch import _chrome_numpy  # lazy: numpy, for large traces only

    return _chrome_numpy.Columns()


#: Fewest steps worth a per-step total: with one, the total is the metric's own.
MIN_STEPS = 2


def _step_spans(spans: dict[int, tuple[float, float]]) -> list[tuple[float, float]] | None:
    """The host's profiled steps as (start, end) µs in time order, for per-step totals of its
    events; ``None`` when they cannot be used: too few, an unknown start, or overlapping (two
    threads' steps)."""
    if len(spans) < MIN_STEPS:
        return None
    ordered = sorted(spans.values())
    if not all(math.isfinite(start) and math.isfinite(end) for start, end in ordered):
        return None
    if any(later[0] < earlier[1] for earlier, later in pairwise(ordered)):
        return None
    return ordered


@dataclass(slots=True)
class Peak:
    """The largest allocator totals seen for one device, in bytes."""

    allocated: float = 0.0
    reserved: float | None = None
    events: int = 0


# Durations beyond ~31 years are corrupt values, and would overflow int64 nanoseconds.
_MAX_DUR_US = 1e15


def _metric(
    ident: tuple[MetricKind, str, Device], values: _chrome_plain.Summary, byte_sum: float | None
) -> Metric:
    kind, name, device = ident
    return Metric(
        kind=kind,
        name=name,
        device=device,
        calls=values.count,
        total_ns=float(values.total),
        avg_ns=values.total / values.count,
        min_ns=values.minimum,
        max_ns=values.maximum,
        median_ns=values.median,
        std_ns=values.std,
        bytes=byte_sum,
    )


def _index(events: Events, event: TraceEvent) -> int:
    """Position of ``event`` in its batch (error path only)."""
    return next(index for index, candidate in enumerate(events) if candidate is event)


def _missing_field(complete: list[TraceEvent], events: Events) -> EventError:
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


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _legacy_cat(pid: Any) -> str | None:
    return LEGACY_PIDS.get(pid.lower()) if isinstance(pid, str) else None
