"""PyTorch profiler / Kineto Chrome-trace JSON, ``.json`` or ``.json.gz``.

Complete (``ph: "X"``) events are aggregated per (kind, name, device); ``ts``/``dur`` are
microseconds with ns precision and become integer nanoseconds. What each ``cat`` becomes is the
table ``_chrome_events.CATEGORIES`` (case-insensitive, legacy torch 1.8/1.9 names are aliases):

========================== ============================================== =============
``cat``                    metric kind                                    device
========================== ============================================== =============
cpu_op, Operator           ``op``                                         cpu
user_annotation            ``range`` (record_function)                    cpu
gpu_user_annotation        ``range`` (the same ranges on the GPU stream)  gpu
kernel, Kernel             ``kernel``; ``comm`` for NCCL/RCCL kernels     gpu
gpu_memcpy/memset, Memcpy  ``memory``, with the bytes of ``args.bytes``   gpu
cuda_runtime, cuda_driver  ``api``                                        cpu
========================== ============================================== =============

The legacy autograd profiler (torch ≤ 1.7) writes a bare JSON array without ``cat``; its
``pid: "CPU functions"`` / ``"CUDA functions"`` rows become ops and kernels. Other categories
(``cuda_sync``, ``python_function``, ``Trace`` ...) and other phases (flows, instants,
metadata) are not metrics; their counts are kept in ``metadata["ignored_events"]`` and
``metadata["events_by_phase"]`` so that nothing disappears unaccounted.

Steps: ``ProfilerStep#N`` ranges become one ``step`` metric with per-step samples in numeric
order (the same step written twice, as in an AMD sample, counts once). torch 1.8/1.9 wrote
them with ``cat: "Operator"`` (as operators, on the CPU thread): they are steps all the same.
A trace written by ``perfci.integrations.torch.profile_steps`` carries its own step timer under the
top-level ``"perfci"`` key (CUDA events, no profiler overhead); those samples are preferred
when present.

Per-step totals: with two or more host-side ``ProfilerStep#N`` ranges that do not overlap,
each host-side metric (operators, CPU ranges, API calls) that has events starting inside every
one of them gets ``step_totals_ns``, its summed time in each step, in step order. Same-runner
A/B compares such metrics on their fastest step (:mod:`perfci.analysis.values`). Kernels get
none: they run on the GPU's clock, after the step that launched them.

Peak memory (``measure`` metrics in bytes, lower is better):

* ``[memory]`` instants (``profile_memory=True``, torch ≥ 1.10) carry the allocator's
  ``Total Allocated`` (and ``Total Reserved``) after each allocation or free, per
  ``Device Type`` / ``Device Id``: their maximum is the device's "peak allocated memory"
  (device cpu for device type 0, gpu otherwise), and "peak reserved memory" for the
  caching allocators of devices. With several devices of one side the name says which
  (``peak allocated memory (cuda:1)``). Older traces carry only ``Bytes``: no peak.
* ``perfci.integrations.torch.profile_steps`` on CUDA writes per-step peaks
  (``torch.cuda.max_memory_allocated`` / ``max_memory_reserved``, reset each step) into
  its ``"perfci"`` block: "peak allocated memory" / "peak reserved memory" on the gpu with
  the per-step peaks as ``samples`` and their maximum as ``value``. These win over the
  ``[memory]`` instants' metric of the same name.

Reading is streamed (``_chrome_stream``) and aggregated batch by batch (``_chrome_events``):
memory stays at a few MiB whatever the trace size. A file of up to 256 KiB is read whole with
the standard library (``_chrome_small``), and one under 2 MiB on disk is reduced without numpy
(``_chrome_events.columns_for``), so that a short command on it starts at once; either way it
gives the same profile, or the same error, as the streaming reader with numpy.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfci.core.model import Better, Device, Metric, MetricKind, Profile
from perfci.formats._steps import step_metric
from perfci.formats.caps import budget
from perfci.formats.pytorch._chrome_events import Aggregate, Peak, columns_for, is_number
from perfci.formats.pytorch._chrome_small import read_small_trace
from perfci.formats.pytorch._chrome_types import EventError
from perfci.formats.pytorch._detectors import CHROME_TRACE

NAME = CHROME_TRACE.name
DESCRIPTION = CHROME_TRACE.description
sniff = CHROME_TRACE.sniff

STEP_KEY = (
    "perfci"  # perfci.integrations.torch.STEP_KEY; not imported so that parsing never needs torch
)

PEAK_ALLOCATED = "peak allocated memory"
PEAK_RESERVED = "peak reserved memory"
# c10::DeviceType codes of ``[memory]`` events (0 is the CPU), for the names of per-device
# metrics; ROCm builds report their GPUs as CUDA (1).
DEVICE_TYPES: dict[int, str] = {
    0: "cpu",
    1: "cuda",
    6: "hip",
    8: "maia",
    9: "xla",
    12: "xpu",
    13: "mps",
    14: "meta",
    15: "hpu",
    18: "ipu",
    19: "mtia",
    20: "privateuse1",
}


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """The one profile of a trace file (one rank)."""
    small = read_small_trace(path, format=NAME)
    if small is not None:
        aggregate = Aggregate(counted=budget(str(path), NAME))
        try:
            aggregate.add(small.events)
        except EventError:
            pass  # the streaming reader names the event's line
        else:
            return _profile(path, aggregate, small.top, bare=small.bare, warnings=[])
    from perfci.formats.pytorch._chrome_stream import read_trace  # lazy: msgspec, for large files

    aggregate = Aggregate(counted=budget(str(path), NAME), columns=columns_for(path))
    read_warnings: list[str] = []
    top, bare = read_trace(path, aggregate.add, format=NAME, warnings=read_warnings)
    return _profile(path, aggregate, top, bare=bare, warnings=read_warnings)


def _profile(
    path: Path, aggregate: Aggregate, top: dict[str, Any], *, bare: bool, warnings: list[str]
) -> list[Profile]:
    profile = Profile(label=_label(path, top), format=NAME, source=str(path))
    profile.warnings.extend(warnings)
    profile.metadata = {"layout": "legacy array" if bare else "object", **_metadata(top)}
    aggregate.build(profile)
    _add_steps(profile, aggregate, top)
    _add_memory(profile, aggregate.memory, top)
    if not profile.metrics:
        profile.warnings.append("no complete (ph X) events of a known category")
    return [profile]


def _add_steps(profile: Profile, aggregate: Aggregate, top: Mapping[str, Any]) -> None:
    """The step metric: perfci's own step timer when present, else ``ProfilerStep#N``."""
    # CPU ranges are the iterations as the host ran them; the GPU copies only when alone.
    numbered = aggregate.steps.get("cpu") or aggregate.steps.get("gpu") or {}
    device = Device.CPU if aggregate.steps.get("cpu") else Device.GPU
    duplicated = sorted(number for number, samples in numbered.items() if len(samples) > 1)
    if duplicated:
        profile.warnings.append(
            f"ProfilerStep# written more than once, counted once: {', '.join(map(str, duplicated))}"
        )
    if numbered:
        profile.metadata["profiler_steps"] = sorted(numbered)
    own = _perfci_steps(top.get(STEP_KEY), profile)
    if own is not None:
        name, own_device, samples = own
        # perfci.integrations.torch ran its warm-up steps before profiling: every sample here is
        # steady, # and guessing warm-up on them would only drop noisy steps.
        metric = step_metric(name, samples, device=own_device, warmup=0)
        metric.attrs["source"] = "perfci step timer"
    elif numbered:
        samples = [numbered[number][0] for number in sorted(numbered)]
        metric = step_metric("ProfilerStep", samples, device=device)
        metric.attrs["source"] = "ProfilerStep ranges"
    else:
        return
    profile.metrics.insert(0, metric)
    profile.steps = metric.calls


def _perfci_steps(block: Any, profile: Profile) -> tuple[str, Device, list[float]] | None:
    """``(name, device, samples)`` from the ``"perfci"`` block that
    :mod:`perfci.integrations.torch` wrote."""
    if block is None:
        return None
    samples = block.get("samples_ns") if isinstance(block, dict) else None
    if (
        not isinstance(samples, list)
        or not samples
        or not all(
            isinstance(value, int | float) and not isinstance(value, bool) for value in samples
        )
    ):
        profile.warnings.append(
            f'the "{STEP_KEY}" block has no list of step times '
            "(samples_ns); ProfilerStep ranges are used instead"
        )
        return None
    device = Device.GPU if block.get("device") == "gpu" else Device.CPU
    name = block.get("step_name") if isinstance(block.get("step_name"), str) else "step"
    if isinstance(block.get("torch_version"), str):
        profile.metadata["torch_version"] = block["torch_version"]
    if isinstance(block.get("warmup_skipped"), int):
        profile.metadata["warmup_skipped"] = block["warmup_skipped"]
    return name, device, [float(value) for value in samples]


def _add_memory(
    profile: Profile, peaks: Mapping[tuple[int, Any], Peak], top: Mapping[str, Any]
) -> None:
    """Peak memory: perfci's per-step peaks first, then the ``[memory]`` instants' maxima."""
    metrics = _perfci_memory(top.get(STEP_KEY), profile)
    taken = {(metric.device, metric.name) for metric in metrics}
    for metric in _event_memory(peaks):
        if (metric.device, metric.name) not in taken:
            metrics.append(metric)
    profile.metrics.extend(metrics)


def _perfci_memory(block: Any, profile: Profile) -> list[Metric]:
    """The per-step CUDA peaks ``perfci.integrations.torch.profile_steps`` wrote (none on the
    CPU)."""
    if not isinstance(block, dict):
        return []
    metrics = []
    for key, name, call in (
        ("peak_allocated_bytes", PEAK_ALLOCATED, "max_memory_allocated"),
        ("peak_reserved_bytes", PEAK_RESERVED, "max_memory_reserved"),
    ):
        samples = block.get(key)
        if samples is None:
            continue
        if (
            not isinstance(samples, list)
            or not samples
            or not all(is_number(value) and value >= 0 for value in samples)
        ):
            profile.warnings.append(
                f'the "{STEP_KEY}" block\'s {key} is not a list of byte counts: '
                f"no {name} metric from it"
            )
            continue
        values = [float(value) for value in samples]
        metrics.append(
            _memory_metric(
                name,
                Device.GPU,
                max(values),
                samples=values,
                source=f"perfci step timer (torch.cuda.{call} per step)",
            )
        )
    return metrics


def _event_memory(peaks: Mapping[tuple[int, Any], Peak]) -> list[Metric]:
    """Per device, the largest ``Total Allocated`` (and ``Total Reserved``) of its instants."""
    by_device: dict[Device, list[tuple[int, Any]]] = {}
    for key in peaks:
        by_device.setdefault(Device.CPU if key[0] == 0 else Device.GPU, []).append(key)
    metrics = []
    for device, keys in by_device.items():
        for key in sorted(keys, key=lambda key: (key[0], -2 if key[1] is None else key[1])):
            peak = peaks[key]
            device_type, device_id = key
            label = DEVICE_TYPES.get(device_type, f"device type {device_type}")
            # One device of its side keeps the plain name, comparable across ranks and hosts.
            suffix = "" if len(keys) == 1 else f" ({label}:{device_id})"
            attrs = {"device_type": label, "device_id": device_id, "events": peak.events}
            source = "[memory] events (Total Allocated)"
            metrics.append(
                _memory_metric(PEAK_ALLOCATED + suffix, device, peak.allocated, source=source)
            )
            metrics[-1].attrs.update(attrs)
            # The CPU allocator caches nothing: its Total Reserved is always 0.
            if device is Device.GPU and peak.reserved is not None:
                source = "[memory] events (Total Reserved)"
                metrics.append(
                    _memory_metric(PEAK_RESERVED + suffix, device, peak.reserved, source=source)
                )
                metrics[-1].attrs.update(attrs)
    return metrics


def _memory_metric(
    name: str, device: Device, value: float, *, samples: list[float] | None = None, source: str
) -> Metric:
    return Metric(
        kind=MetricKind.MEASURE,
        name=name,
        device=device,
        unit="bytes",
        better=Better.LOWER,
        value=float(value),
        samples=samples,
        attrs={"source": source},
    )


def _label(path: Path, top: Mapping[str, Any]) -> str:
    info = top.get("distributedInfo")
    rank = info.get("rank") if isinstance(info, dict) else None
    if isinstance(rank, int) and not isinstance(rank, bool):
        return f"rank{rank}"
    name = path.name
    for suffix in (".gz", ".json"):
        name = name.removesuffix(suffix)
    return name


def _metadata(top: Mapping[str, Any]) -> dict[str, Any]:
    """GPU, rank and CUDA versions from the keys around ``traceEvents``."""
    meta: dict[str, Any] = {}
    devices = top.get("deviceProperties")
    if isinstance(devices, list):
        names = [
            d.get("name") for d in devices if isinstance(d, dict) and isinstance(d.get("name"), str)
        ]
        if names:
            meta["gpu"] = names[0]
            meta["gpu_count"] = len(names)
            if len(set(names)) > 1:
                meta["gpu_names"] = sorted(set(names))
    info = top.get("distributedInfo")
    if isinstance(info, dict):
        for key in ("rank", "world_size", "backend", "nccl_version"):
            if isinstance(info.get(key), int | str):
                meta[key] = info[key]
    for key in ("cuda_runtime_version", "cuda_driver_version"):
        if isinstance(top.get(key), int):
            meta[key] = _cuda_version(top[key])
    for source, target in (
        ("cupti_version", "cupti_version"),
        ("schemaVersion", "schema_version"),
        ("traceName", "trace_name"),
        ("baseTimeNanoseconds", "base_time_ns"),
    ):
        if isinstance(top.get(source), int | str):
            meta[target] = top[source]
    return meta


def _cuda_version(code: int) -> str:
    """CUDA's integer encoding: ``12080`` → ``"12.8"``."""
    return f"{code // 1000}.{code % 1000 // 10}"
