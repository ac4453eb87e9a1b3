"""What an NVBench state becomes, shared by the JSON (``nvbench_json``) and markdown
(``nvbench_md``) readers, so that both outputs of one run give the same series.

NVBench (NVIDIA/nvbench: CCCL, Thrust, CUB and RAPIDS benchmarks) runs each benchmark over the
cartesian product of its axes (types, sizes); each point on each device is a *state*. A state
``copy_sweep_grid_shape`` with ``BlockSize=2^8 NumBlocks=2^6`` becomes the case
``copy_sweep_grid_shape [BlockSize=2^8 NumBlocks=2^6]`` (NVBench's own notation: a power-of-two
axis as ``2^N``, a float axis with 5 significant digits; the name alone without axes) with:

* ``bench`` ``<case>``: the mean GPU time of the isolated ("cold") runs in ns, lower is
  better, ``calls`` = their samples (with ``min`` / ``max`` / ``median`` / ``std`` where the
  JSON has them); the CPU time, its noise and the axis values in ``attrs``;
* ``bench`` ``<case> (batch)``: the mean GPU time of the back-to-back ("batch") runs;
* ``counter`` ``noise`` (scope ``<case>``): the relative standard deviation of the cold GPU
  times, in %, lower is better (reported, not gated: it says how far to trust the time);
* ``measure`` ``global memory bandwidth`` (scope ``<case>``): bytes/s, higher is better, the
  share of the device's peak in ``attrs["utilization_pct"]``;
* ``measure`` ``element throughput`` (scope ``<case>``): elements/s, higher is better.

One profile per device, labelled as NVBench heads its tables (``[0] Quadro GV100``), the device's
properties in ``metadata["device"]``: two GPUs of one run are two environments, never one series.
Skipped states are named in a warning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perfci.core.model import Better, Device, Metric, MetricKind, Profile
from perfci.formats.caps import Budget

BATCH_SUFFIX = " (batch)"
NOISE = "noise"
BANDWIDTH = "global memory bandwidth"
THROUGHPUT = "element throughput"
_SKIPPED_LISTED = 3


@dataclass(slots=True)
class State:
    """The measures of one state, in perfci's units (ns, %, bytes/s, elements/s)."""

    bench: str
    axes: list[tuple[str, str]]  # (axis, value as NVBench prints it: "2^8", "I32", "0.0001")
    device: int | None
    gpu_ns: float | None = None
    samples: int | None = None
    noise_pct: float | None = None
    batch_ns: float | None = None
    batch_samples: int | None = None
    cpu_ns: float | None = None
    cpu_noise_pct: float | None = None
    bandwidth: float | None = None
    utilization_pct: float | None = None
    items_per_s: float | None = None
    times: dict[str, float] = field(default_factory=dict)  # min_ns / max_ns / median_ns / std_ns
    other: dict[str, Any] = field(default_factory=dict)  # the benchmark's own columns

    @property
    def case(self) -> str:
        if not self.axes:
            return self.bench
        return f"{self.bench} [{' '.join(f'{axis}={value}' for axis, value in self.axes)}]"

    def metrics(self, budget: Budget) -> list[Metric]:
        """This state's metrics (see the module docstring); none without a GPU time."""
        if self.gpu_ns is None:
            return []
        case = self.case
        attrs: dict[str, Any] = {"axes": dict(self.axes), "benchmark": self.bench}
        if self.device is not None:
            attrs["device"] = self.device
        for key, value in (("cpu_time_ns", self.cpu_ns), ("cpu_noise_pct", self.cpu_noise_pct)):
            if value is not None:
                attrs[key] = value
        if self.other:
            attrs["columns"] = dict(self.other)
        times = self.times
        found = [
            Metric(
                MetricKind.BENCH,
                case,
                Device.GPU,
                calls=self.samples,
                avg_ns=self.gpu_ns,
                min_ns=times.get("min_ns"),
                max_ns=times.get("max_ns"),
                median_ns=times.get("median_ns"),
                std_ns=times.get("std_ns"),
                attrs=attrs,
            )
        ]
        if self.batch_ns is not None:
            found.append(
                Metric(
                    MetricKind.BENCH,
                    case + BATCH_SUFFIX,
                    Device.GPU,
                    calls=self.batch_samples,
                    avg_ns=self.batch_ns,
                    attrs={"benchmark": self.bench, "measurement": "batch"},
                )
            )
        for name, kind, value, unit, better in (
            (NOISE, MetricKind.COUNTER, self.noise_pct, "%", Better.LOWER),
            (BANDWIDTH, MetricKind.MEASURE, self.bandwidth, "bytes/s", Better.HIGHER),
            (THROUGHPUT, MetricKind.MEASURE, self.items_per_s, "elements/s", Better.HIGHER),
        ):
            if value is None:
                continue
            metric = Metric(
                kind, name, Device.GPU, scope=case, unit=unit, better=better, value=value
            )
            if name == BANDWIDTH and self.utilization_pct is not None:
                metric.attrs["utilization_pct"] = self.utilization_pct
            found.append(metric)
        budget.metric(len(found))
        return found


@dataclass(slots=True)
class Results:
    """The states of one file, by device, as they are read."""

    source: str
    format: str
    devices: dict[int | None, dict[str, Any]] = field(default_factory=dict)
    metrics: dict[int | None, list[Metric]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    def add(self, state: State, budget: Budget) -> None:
        self.metrics.setdefault(state.device, []).extend(state.metrics(budget))

    def skip(self, what: str) -> None:
        self.skipped.append(what)

    def profiles(self) -> list[Profile]:
        profiles = []
        for device in sorted(self.metrics, key=lambda d: -1 if d is None else d):
            info = self.devices.get(device, {})
            name = info.get("name")
            label = "cpu" if device is None else f"[{device}] {name or 'device'}"
            profile = Profile(
                label=label,
                format=self.format,
                source=self.source,
                metrics=self.metrics[device],
                metadata={**self.metadata, "device": dict(info) or {"id": device}},
            )
            profiles.append(profile)
        if profiles and self.skipped:
            shown = "; ".join(self.skipped[:_SKIPPED_LISTED])
            more = len(self.skipped) - _SKIPPED_LISTED
            profiles[0].warnings.append(
                f"{len(self.skipped)} skipped state(s) have no measurement: {shown}"
                + (f" and {more} more" if more > 0 else "")
            )
        return profiles
