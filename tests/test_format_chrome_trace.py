"""The Chrome-trace (PyTorch profiler / Kineto) parser: real corpus traces, traces made here
with torch.profiler on the CPU, and the ways a streamed reader can go wrong (chunk edges inside
strings and nested objects, keys around ``traceEvents`` in any order, truncation).

Every test runs twice: as a user's small file is read (whole, with ``json``, when it is plain)
and with the streaming reader alone, so that both give the same profile and the same error."""

from __future__ import annotations

import contextlib
import gzip
import json
import re
import statistics
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import SHARED, shared_path

from perfci.core.errors import ParseError
from perfci.core.model import Device, Metric, MetricKind, Profile
from perfci.formats import registry
from perfci.formats.pytorch import _chrome_stream, chrome_trace

K = MetricKind
CORPUS = SHARED / "corpus" / "kineto_chrome_trace"


def _corpus_names() -> list[str]:
    if not CORPUS.is_dir():
        return ["corpus-absent"]
    return sorted(p.name for p in CORPUS.glob("*.json*"))


def _corpus(name: str) -> Path:
    return shared_path("corpus", "kineto_chrome_trace", name)


@pytest.fixture(autouse=True, params=["whole", "streamed"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "streamed":
        monkeypatch.setattr(chrome_trace, "read_small_trace", lambda path, *, format: None)
    return str(request.param)


def parse(path: Path) -> Profile:
    [profile] = registry.parse_file(path, format="chrome_trace")
    return profile


# --- an independent reference: json.load and a plain loop ----------------------------------

_REF_KINDS = {
    "cpu_op": (K.OP, Device.CPU),
    "operator": (K.OP, Device.CPU),
    "user_annotation": (K.RANGE, Device.CPU),
    "gpu_user_annotation": (K.RANGE, Device.GPU),
    "kernel": (K.KERNEL, Device.GPU),
    "gpu_memcpy": (K.MEMORY, Device.GPU),
    "memcpy": (K.MEMORY, Device.GPU),
    "gpu_memset": (K.MEMORY, Device.GPU),
    "memset": (K.MEMORY, Device.GPU),
    "cuda_runtime": (K.API, Device.CPU),
    "runtime": (K.API, Device.CPU),
    "cuda_driver": (K.API, Device.CPU),
}


@dataclass
class Reference:
    durations: dict[tuple[K, str, Device], list[int]] = field(default_factory=dict)
    byte_sums: dict[tuple[K, str, Device], float] = field(default_factory=dict)
    steps: dict[str, dict[int, int]] = field(default_factory=dict)
    # (Device Type, Device Id) → [max Total Allocated, max Total Reserved or None]
    memory: dict[tuple[int, int], list[Any]] = field(default_factory=dict)


def reference(path: Path) -> Reference:
    """What the parser must produce, computed the slow, obvious way."""
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    ref = Reference()
    for event in events:
        args = event.get("args") or {}
        if event.get("name") == "[memory]" and "Total Allocated" in args:
            peak = ref.memory.setdefault((args["Device Type"], args["Device Id"]), [0, None])
            peak[0] = max(peak[0], args["Total Allocated"])
            if "Total Reserved" in args:
                peak[1] = max(peak[1] or 0, args["Total Reserved"])
        if event.get("ph") != "X":
            continue
        cat = event.get("cat")
        if cat is None:
            cat = {"CPU functions": "cpu_op", "CUDA functions": "kernel"}.get(event.get("pid"))
        if cat is None or cat.lower() not in _REF_KINDS:
            continue
        kind, device = _REF_KINDS[cat.lower()]
        name, ns = event["name"], round(event["dur"] * 1000)
        step = re.fullmatch(r"ProfilerStep#(\d+)", name)
        if kind in (K.RANGE, K.OP) and step:  # torch 1.8/1.9: cat "Operator"
            ref.steps.setdefault(device.value, {}).setdefault(int(step.group(1)), ns)
            continue
        if kind is K.KERNEL and ("nccl" in name.lower() or "rccl" in name.lower()):
            kind = K.COMM
        key = (kind, name, device)
        ref.durations.setdefault(key, []).append(ns)
        size = (event.get("args") or {}).get("bytes")
        if kind is K.MEMORY and size is not None:
            ref.byte_sums[key] = ref.byte_sums.get(key, 0) + size
    return ref


def assert_matches_reference(profile: Profile, ref: Reference) -> None:
    got: dict[tuple[K, str, Device], Metric] = {
        (m.kind, m.name, m.device): m for m in profile.metrics if m.kind not in (K.STEP, K.MEASURE)
    }
    assert sorted(got, key=str) == sorted(ref.durations, key=str)
    for key, values in ref.durations.items():
        metric = got[key]
        assert metric.calls == len(values), key
        assert metric.total_ns == sum(values), key
        assert (metric.min_ns, metric.max_ns) == (min(values), max(values)), key
        assert metric.median_ns == statistics.median(values), key
        if len(values) > 1:
            assert metric.std_ns == pytest.approx(statistics.stdev(values), rel=1e-9), key
        assert metric.bytes == ref.byte_sums.get(key), key
    assert_memory_matches(profile, ref)
    numbered = ref.steps.get("cpu") or ref.steps.get("gpu") or {}
    steps = profile.find(K.STEP, "ProfilerStep")
    if not numbered:
        assert steps is None and profile.steps is None
        return
    assert steps is not None
    assert steps.samples_ns == [float(numbered[n]) for n in sorted(numbered)]
    assert profile.steps == len(numbered)


def assert_memory_matches(profile: Profile, ref: Reference) -> None:
    """The peak memory measures: one per device (and reserved on the GPU), named by id when a
    side has several devices."""
    expected: dict[tuple[str, Device], float] = {}
    sides = Counter(device_type == 0 for device_type, _ in ref.memory)
    for (device_type, device_id), (allocated, reserved) in ref.memory.items():
        device = Device.CPU if device_type == 0 else Device.GPU
        label = {0: "cpu", 1: "cuda"}[device_type]
        suffix = f" ({label}:{device_id})" if sides[device_type == 0] > 1 else ""
        expected[(f"peak allocated memory{suffix}", device)] = allocated
        if device is Device.GPU and reserved is not None:
            expected[(f"peak reserved memory{suffix}", device)] = reserved
    measures = profile.by_kind(K.MEASURE)
    assert {(m.name, m.device): m.value for m in measures} == expected
    assert all(m.unit == "bytes" and m.better == "lower" for m in measures)


# --- the real corpus ------------------------------------------------------------------------


@pytest.mark.parametrize("name", _corpus_names())
def test_corpus_trace_equals_json_load_reference(name: str) -> None:
    path = _corpus(name)
    assert registry.detect(path).name == "chrome_trace"
    assert_matches_reference(parse(path), reference(path))


@pytest.mark.parametrize("name", _corpus_names())
def test_corpus_trace_with_tiny_chunks_equals_reference(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunk edges everywhere: inside names, numbers, nested args and the metadata keys."""
    path = _corpus(name)
    monkeypatch.setattr(_chrome_stream, "CHUNK_BYTES", 1009)
    monkeypatch.setattr(_chrome_stream, "_WINDOWS", (211,))
    assert_matches_reference(parse(path), reference(path))


def test_torch_baseline_trace_values() -> None:
    profile = parse(_corpus("duoan_playground-cuda__torch_baseline__msi_279961.pt.trace.json"))
    assert profile.label == "duoan_playground-cuda__torch_baseline__msi_279961.pt.trace"
    assert profile.steps == 6
    step = profile.find(K.STEP, "ProfilerStep", device=Device.CPU)
    assert step is not None
    assert step.samples_ns == [3328704.0, 4269108.0, 3789993.0, 3292374.0, 3639483.0, 3425547.0]
    assert profile.metadata["profiler_steps"] == [2, 3, 4, 5, 6, 7]
    launch = profile.find(K.API, "cudaLaunchKernel", device=Device.CPU)
    assert launch is not None
    assert (launch.calls, launch.total_ns, launch.min_ns, launch.max_ns) == (
        144,
        2228226.0,
        3498.0,
        52526.0,
    )
    memcpy = profile.find(K.MEMORY, "Memcpy HtoD (Pinned -> Device)")
    assert memcpy is not None
    assert (memcpy.calls, memcpy.total_ns, memcpy.bytes) == (12, 253244.0, 6303744.0)
    assert profile.find(K.RANGE, "data_loader", device=Device.CPU).calls == 6  # type: ignore[union-attr]
    assert profile.metadata["gpu"] == "NVIDIA GeForce RTX 5080"
    assert profile.metadata["cuda_runtime_version"] == "12.8"
    assert profile.metadata["cuda_driver_version"] == "13.2"
    assert profile.metadata["ignored_events"] == {"Trace": 1}
    assert profile.metadata["events_by_phase"] == {"M": 60, "X": 1960, "f": 392, "i": 362, "s": 307}
    # 360 [memory] instants: 348 on cuda:0 (Device Type 1), 12 on the CPU (Device Type 0, id -1)
    allocated = profile.find(K.MEASURE, "peak allocated memory", device=Device.GPU)
    assert allocated is not None
    assert (allocated.value, allocated.unit, allocated.better) == (187_251_200.0, "bytes", "lower")
    assert allocated.attrs["events"] == 348 and allocated.attrs["device_id"] == 0
    reserved = profile.find(K.MEASURE, "peak reserved memory", device=Device.GPU)
    assert reserved is not None and reserved.value == 216_006_656.0
    cpu = profile.find(K.MEASURE, "peak allocated memory", device=Device.CPU)
    assert cpu is not None and (cpu.value, cpu.attrs["events"]) == (4.0, 12)
    assert profile.find(K.MEASURE, "peak reserved memory", device=Device.CPU) is None


def test_hta_rank0_trace_values() -> None:
    profile = parse(_corpus("hta__trace_filter__sampled_rank-0.json.gz"))
    assert profile.label == "rank0"
    assert (profile.metadata["rank"], profile.metadata["world_size"]) == (0, 128)
    assert profile.steps == 2
    step = profile.find(K.STEP, "ProfilerStep")
    assert step is not None and step.samples_ns == [607312000.0, 622928000.0]
    nccl = profile.find(
        K.COMM,
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
        device=Device.GPU,
    )
    assert nccl is not None
    assert (nccl.calls, nccl.total_ns, nccl.median_ns) == (10, 396199000.0, 39327000.0)
    assert profile.find(K.KERNEL, nccl.name) is None
    assert profile.find(K.API, "cudaLaunchKernel").calls == 1154  # type: ignore[union-attr]


def test_cpu_only_trace_has_ranges_and_no_gpu() -> None:
    profile = parse(_corpus("hta__cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"))
    assert profile.label == "rank34"
    gloo = profile.find(K.RANGE, "gloo:all_reduce", device=Device.CPU)
    assert gloo is not None and (gloo.calls, gloo.total_ns) == (10, 2135455918.0)
    assert {m.device for m in profile.metrics} == {Device.CPU}
    assert profile.find(K.STEP, "ProfilerStep").samples_ns == [210109162.0]  # type: ignore[union-attr]


def test_triton_trace_counts_driver_launches_as_api() -> None:
    profile = parse(_corpus("hta__triton_example__triton_example.json.gz"))
    assert profile.find(K.API, "cuLaunchKernel", device=Device.CPU).total_ns == 47768.0  # type: ignore[union-attr]
    assert profile.find(K.KERNEL, "triton_poi_fused_add_cos_sin_0").total_ns == 1760.0  # type: ignore[union-attr]
    assert profile.metadata["cuda_runtime_version"] == "12.0"


def test_kineto_docs_trace_and_ignored_categories() -> None:
    profile = parse(_corpus("kineto__docs_traces__before_fix_trace.json"))
    assert profile.find(K.KERNEL, "Kernel").total_ns == 20.0  # type: ignore[union-attr]
    assert profile.metadata["ignored_events"] == {"Trace": 1, "cuda_sync": 2}
    assert profile.metadata["gpu"] == "NVIDIA H100" and profile.metadata["gpu_count"] == 8
    assert profile.steps is None
    cupti = parse(_corpus("hta__cupti_profiler__benchmark_result_924719_1679055439_trace.json.gz"))
    assert cupti.metadata["ignored_events"] == {"Trace": 2, "cuda_profiler_range": 77}


# --- synthetic traces: layouts and edge cases -----------------------------------------------


def _event(name: str, cat: str | None, dur: float, **extra: Any) -> dict[str, Any]:
    event: dict[str, Any] = {"ph": "X", "name": name, "pid": 1, "tid": 1, "ts": 1.5, "dur": dur}
    if cat is not None:
        event["cat"] = cat
    return {**event, **extra}


TRICKY = [
    _event(
        "void k<{lambda(float)#1}>(), {x}",
        "kernel",
        63.813,
        args={"grid": [1, 2, 3], "note": '}, {"ph": "X"}, {'},
    ),
    {
        "args": {"nested": [{"a": 1}, {"b": {"c": [{}, {}]}}]},
        "dur": 2.0006,
        "name": "op,1",
        "cat": "cpu_op",
        "ph": "X",
        "ts": 3,
    },
    _event("Memcpy HtoD", "gpu_memcpy", 1.25, args={"bytes": 4096}),
    _event("Memcpy HtoD", "Memcpy", 0.75, args={"bytes": 1024}),  # legacy alias, same metric
    _event(
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "kernel", 10
    ),
    _event("ProfilerStep#10", "user_annotation", 1000),
    _event("ProfilerStep#9", "user_annotation", 900),
    _event("ProfilerStep#9", "user_annotation", 900),  # written twice (AMD sample): once
    _event("ProfilerStep#9", "gpu_user_annotation", 800),
    _event("forward", "user_annotation", 5),
    _event("forward", "gpu_user_annotation", 4),
    _event("cudaLaunchKernel", "cuda_runtime", 3.0),
    _event("cudaLaunchKernel", "Runtime", 1.0),
    _event("python frame", "python_function", 9),
    {"ph": "s", "name": "ac2g", "cat": "ac2g", "id": 1, "ts": 1},
    {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
    {"ph": "i", "name": "[memory]", "s": "t", "ts": 2, "args": {"Bytes": 12}},
]


def _write(path: Path, doc: Any, *, indent: int | None = None) -> Path:
    text = json.dumps(doc, indent=indent)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("chunk", [3, 17, 64, 4096])
@pytest.mark.parametrize("indent", [None, 2])
def test_tricky_events_at_every_chunk_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int, indent: int | None
) -> None:
    """Metadata after the events (Kineto writes traceName etc. last), nested args lists of
    objects and '}, {' inside strings: every chunk size gives the reference aggregation."""
    monkeypatch.setattr(_chrome_stream, "CHUNK_BYTES", chunk)
    monkeypatch.setattr(_chrome_stream, "_WINDOWS", (max(chunk // 2, 1),))
    doc = {
        "schemaVersion": 1,
        "traceEvents": TRICKY * 3,
        "distributedInfo": {"rank": 3, "pg_config": [{"ranks": [0, 1]}, {"ranks": [2]}]},
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}, {"id": 1, "name": "X"}],
        "traceName": "t.json",
    }
    path = _write(tmp_path / "t.pt.trace.json", doc, indent=indent)
    profile = parse(path)
    assert_matches_reference(profile, reference(path))
    assert profile.label == "rank3"
    assert profile.metadata["gpu_names"] == ["NVIDIA H100", "X"]
    kernel = profile.find(K.KERNEL, "void k<{lambda(float)#1}>(), {x}")
    assert kernel is not None and (kernel.calls, kernel.total_ns) == (3, 3 * 63813.0)
    op = profile.find(K.OP, "op,1", device=Device.CPU)
    assert op is not None and op.total_ns == 3 * 2001.0  # sub-ns digits round to the nearest ns
    memcpy = profile.find(K.MEMORY, "Memcpy HtoD")
    assert memcpy is not None and (memcpy.calls, memcpy.bytes) == (6, 3 * 5120.0)
    assert profile.find(K.COMM, TRICKY[4]["name"]).calls == 3  # type: ignore[union-attr]
    assert profile.find(K.API, "cudaLaunchKernel").calls == 6  # type: ignore[union-attr]
    assert profile.find(K.RANGE, "forward", device=Device.GPU).calls == 3  # type: ignore[union-attr]
    step = profile.find(K.STEP, "ProfilerStep", device=Device.CPU)
    assert step is not None and step.samples_ns == [900000.0, 1000000.0]  # #9 before #10
    assert profile.steps == 2
    assert profile.warnings == ["ProfilerStep# written more than once, counted once: 9, 10"]
    assert profile.metadata["ignored_events"] == {"python_function": 3}
    assert profile.metadata["events_by_phase"] == {"M": 3, "X": 42, "i": 3, "s": 3}


def test_legacy_bare_array(tmp_path: Path) -> None:
    """torch ≤ 1.7 export_chrome_trace: a bare array, no cat, pid "CPU functions"."""
    events = [
        {
            "name": "aten::mm",
            "ph": "X",
            "ts": 1.0,
            "dur": 12.5,
            "tid": 0,
            "pid": "CPU functions",
            "args": {},
        },
        {
            "name": "aten::mm",
            "ph": "X",
            "ts": 20.0,
            "dur": 7.5,
            "tid": 0,
            "pid": "CPU functions",
            "args": {},
        },
        {
            "name": "sgemm",
            "ph": "X",
            "ts": 2.0,
            "dur": 4,
            "tid": 0,
            "pid": "CUDA functions",
            "args": {},
        },
        {
            "name": "aten::mm",
            "ph": "s",
            "id": 0,
            "pid": "CPU functions",
            "tid": 0,
            "ts": 1,
            "cat": "cpu_to_cuda",
            "args": {},
        },
    ]
    path = _write(tmp_path / "legacy.json", events)
    assert registry.detect(path).name == "chrome_trace"
    profile = parse(path)
    assert_matches_reference(profile, reference(path))
    assert profile.metadata["layout"] == "legacy array"
    assert profile.find(K.OP, "aten::mm", device=Device.CPU).total_ns == 20000.0  # type: ignore[union-attr]
    assert profile.find(K.KERNEL, "sgemm").calls == 1  # type: ignore[union-attr]
    assert profile.label == "legacy"


def test_legacy_categories_are_aliases(tmp_path: Path) -> None:
    events = [
        _event("aten::add", "Operator", 2),
        _event("aten::add", "cpu_op", 3),
        _event("add_kernel", "Kernel", 1),
        _event("Memset", "Memset", 1, args={"bytes": 8}),
    ]
    profile = parse(_write(tmp_path / "old.json", {"traceEvents": events}))
    add = profile.find(K.OP, "aten::add")
    assert add is not None and (add.calls, add.total_ns) == (2, 5000.0)
    assert profile.find(K.MEMORY, "Memset").bytes == 8.0  # type: ignore[union-attr]


def _kineto_1_9(name: str, cat: str, ts: int, dur: int, **args: Any) -> dict[str, Any]:
    """An event as libkineto of torch 1.8/1.9 wrote it: integer µs, string tids."""
    tid = "stream 7" if cat == "Kernel" else "24572"
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 0 if cat == "Kernel" else 24572,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def test_torch_1_9_profiler_steps_are_operators_and_still_steps(tmp_path: Path) -> None:
    """torch 1.8/1.9 traces (cat ``Operator``, ``Runtime``, ``Kernel``) write each
    ``ProfilerStep#N`` as an Operator: they are the steps, not operators."""
    span = {"Trace name": "PyTorch Profiler", "Trace iteration": 0}
    events = [
        _kineto_1_9("ProfilerStep#9", "Operator", 1621401187223000, 292460, **span),
        _kineto_1_9("aten::mm", "Operator", 1621401187225112, 197, **{"External id": 41}),
        _kineto_1_9("cudaLaunchKernel", "Runtime", 1621401187225300, 18, cbid=211),
        _kineto_1_9("volta_sgemm_128x32_nt", "Kernel", 1621401187235025, 3, stream=7),
        _kineto_1_9("ProfilerStep#10", "Operator", 1621401187515500, 288001, **span),
        _kineto_1_9("aten::mm", "Operator", 1621401187516000, 201, **{"External id": 90}),
        _kineto_1_9("ProfilerStep#11", "Operator", 1621401187803600, 290117, **span),
    ]
    path = _write(tmp_path / "worker0.pt.trace.json", {"schemaVersion": 1, "traceEvents": events})
    profile = parse(path)
    assert_matches_reference(profile, reference(path))
    assert profile.steps == 3
    assert profile.metadata["profiler_steps"] == [9, 10, 11]
    step = profile.find(K.STEP, "ProfilerStep", device=Device.CPU)
    assert step is not None and step.attrs["source"] == "ProfilerStep ranges"
    assert step.samples_ns == [292_460_000.0, 288_001_000.0, 290_117_000.0]
    assert [m.name for m in profile.by_kind(K.OP)] == ["aten::mm"]
    mm = profile.find(K.OP, "aten::mm", device=Device.CPU)
    assert mm is not None and (mm.calls, mm.total_ns) == (2, 398_000.0)
    assert profile.find(K.KERNEL, "volta_sgemm_128x32_nt").total_ns == 3_000.0  # type: ignore[union-attr]


def _memory(total: int | str, device_type: int, device_id: int, **more: Any) -> dict[str, Any]:
    args = {
        "Total Allocated": total,
        "Bytes": 1,
        "Device Type": device_type,
        "Device Id": device_id,
    }
    return {
        "ph": "i",
        "cat": "cpu_instant_event",
        "s": "t",
        "name": "[memory]",
        "pid": 1,
        "tid": 1,
        "ts": 5.0,
        "args": {**args, **more},
    }


def test_memory_events_give_peaks_per_device(tmp_path: Path) -> None:
    events = [
        _memory(100, 0, -1, **{"Total Reserved": 0}),
        _memory(300, 0, -1, **{"Total Reserved": 0}),
        _memory(200, 0, -1, **{"Total Reserved": 0}),
        _memory(1_000, 1, 0, **{"Total Reserved": 2_097_152}),
        _memory(5_000, 1, 0, **{"Total Reserved": 4_194_304}),
        _memory(4_000, 1, 0, **{"Total Reserved": 2_097_152}),
        _memory(7_000, 1, 1, **{"Total Reserved": 8_388_608}),
        # torch < 1.10: only Bytes, no running total: no peak from it
        {"ph": "i", "name": "[memory]", "s": "t", "ts": 6, "args": {"Bytes": 1 << 40}},
        _event("aten::empty", "cpu_op", 2),
    ]
    profile = parse(_write(tmp_path / "mem.json", {"traceEvents": events}))
    measures = {(m.name, m.device): m for m in profile.by_kind(K.MEASURE)}
    assert {key: m.value for key, m in measures.items()} == {
        ("peak allocated memory", Device.CPU): 300.0,
        ("peak allocated memory (cuda:0)", Device.GPU): 5_000.0,
        ("peak reserved memory (cuda:0)", Device.GPU): 4_194_304.0,
        ("peak allocated memory (cuda:1)", Device.GPU): 7_000.0,
        ("peak reserved memory (cuda:1)", Device.GPU): 8_388_608.0,
    }
    cuda1 = measures[("peak allocated memory (cuda:1)", Device.GPU)]
    assert (cuda1.kind, cuda1.unit, cuda1.better, cuda1.samples) == (
        K.MEASURE,
        "bytes",
        "lower",
        None,
    )
    assert cuda1.attrs == {
        "source": "[memory] events (Total Allocated)",
        "device_type": "cuda",
        "device_id": 1,
        "events": 1,
    }
    assert measures[("peak allocated memory", Device.CPU)].attrs["events"] == 3


def test_memory_event_with_a_bad_total_is_a_parse_error(tmp_path: Path) -> None:
    events = [_event("aten::empty", "cpu_op", 2), _memory("lots", 1, 0)]
    path = _write(tmp_path / "bad.json", {"traceEvents": events}, indent=1)
    with pytest.raises(ParseError, match="non-numeric 'Total Allocated' 'lots'") as info:
        parse(path)
    assert info.value.line == 12  # where the event opens
    events = [_memory(10, "cuda", 0)]  # type: ignore[arg-type]
    with pytest.raises(ParseError, match="'Device Type' 'cuda', expected an integer"):
        parse(_write(tmp_path / "bad2.json", {"traceEvents": events}))


def test_perfci_block_peak_memory_wins_over_memory_events(tmp_path: Path) -> None:
    """perfci.integrations.torch on CUDA writes per-step peaks; an instant's peak of the same
    name yields."""
    doc = {
        "traceEvents": [
            _event("ProfilerStep#0", "user_annotation", 3),
            _memory(999_999, 1, 0, **{"Total Reserved": 1 << 30}),
            _memory(64, 0, -1),
        ],
        "perfci": {
            "device": "gpu",
            "samples_ns": [3000.0, 3100.0, 2900.0],
            "peak_allocated_bytes": [1_048_576, 1_572_864, 1_310_720],
            "peak_reserved_bytes": [2_097_152, 2_097_152, 4_194_304],
        },
    }
    profile = parse(_write(tmp_path / "p.json", doc))
    allocated = profile.find(K.MEASURE, "peak allocated memory", device=Device.GPU)
    assert allocated is not None
    assert allocated.samples == [1_048_576.0, 1_572_864.0, 1_310_720.0]
    assert (allocated.value, allocated.warmup, allocated.unit) == (1_572_864.0, 0, "bytes")
    assert allocated.attrs["source"] == (
        "perfci step timer (torch.cuda.max_memory_allocated per step)"
    )
    reserved = profile.find(K.MEASURE, "peak reserved memory", device=Device.GPU)
    assert reserved is not None and reserved.value == 4_194_304.0
    names = [(m.name, m.device.value, m.value) for m in profile.by_kind(K.MEASURE)]
    assert names == [
        ("peak allocated memory", "gpu", 1_572_864.0),
        ("peak reserved memory", "gpu", 4_194_304.0),
        ("peak allocated memory", "cpu", 64.0),
    ]
    doc["perfci"]["peak_allocated_bytes"] = [1, -5]  # type: ignore[index]
    del doc["perfci"]["peak_reserved_bytes"]  # type: ignore[attr-defined]
    profile = parse(_write(tmp_path / "bad.json", doc))
    assert profile.warnings == [
        'the "perfci" block\'s peak_allocated_bytes is not a list of byte counts: '
        "no peak allocated memory metric from it"
    ]
    # the block gave nothing, so the [memory] instants' peak stands
    fallback = profile.find(K.MEASURE, "peak allocated memory", device=Device.GPU)
    assert fallback is not None and fallback.value == 999_999.0


def test_empty_trace_gives_a_warning(tmp_path: Path) -> None:
    profile = parse(_write(tmp_path / "empty.json", {"traceEvents": [], "traceName": "x"}))
    assert profile.metrics == []
    assert profile.warnings == ["no complete (ph X) events of a known category"]


# --- bad input --------------------------------------------------------------------------------


def _error(path: Path) -> ParseError:
    with pytest.raises(ParseError) as info:
        registry.parse_file(path, format="chrome_trace")
    assert str(path) in str(info.value)
    return info.value


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.93, 0.999])
def test_truncated_json_is_a_parse_error(tmp_path: Path, cut: float) -> None:
    source = _corpus("duoan_playground-cuda__torch_baseline__msi_279961.pt.trace.json")
    data = source.read_bytes()
    path = tmp_path / "cut.pt.trace.json"
    path.write_bytes(data[: int(len(data) * cut)])
    error = _error(path)
    assert "truncated" in error.message
    assert error.line == data[: int(len(data) * cut)].count(b"\n") + 1


@pytest.mark.parametrize("cut", [0.3, 0.8])
def test_truncated_gzip_is_a_parse_error(tmp_path: Path, cut: float) -> None:
    data = _corpus("hta__trace_filter__sampled_rank-0.json.gz").read_bytes()
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: int(len(data) * cut)])
    assert "truncated" in _error(path).message


def test_truncated_after_the_events_array(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [{"ph": "X", "name": "a", "cat": "cpu_op", "dur": 1}]')
    assert "truncated" in _error(path).message


@pytest.mark.parametrize("chunk", [40, 4096])
def test_torch_1_8_bare_inf_bandwidth_is_read_as_null(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """libkineto of torch 1.8 wrote a zero-length memcpy's bandwidth with fmt: a bare ``inf``
    (pytorch/kineto#105), which no JSON parser takes; the trace is read, and says so."""
    monkeypatch.setattr(_chrome_stream, "CHUNK_BYTES", chunk)
    memcpy = _kineto_1_9(
        "Memcpy HtoD (Pageable -> Device)", "Memcpy", 1621401187225400, 0, bytes=4, **{"x": 0}
    )
    events = [
        _kineto_1_9("aten::copy_", "Operator", 1621401187225112, 197),
        memcpy,
        _kineto_1_9("volta_sgemm_128x32_nt", "Kernel", 1621401187235025, 3, stream=7),
    ]
    text = json.dumps({"schemaVersion": 1, "traceEvents": events}, indent=1)
    text = text.replace('"x": 0', '"memory bandwidth (GB/s)": inf')
    path = tmp_path / "worker0.pt.trace.json"
    path.write_text(text)
    profile = parse(path)
    copy = profile.find(K.MEMORY, "Memcpy HtoD (Pageable -> Device)")
    assert copy is not None and (copy.calls, copy.bytes, copy.total_ns) == (1, 4.0, 0.0)
    assert profile.find(K.KERNEL, "volta_sgemm_128x32_nt").total_ns == 3_000.0  # type: ignore[union-attr]
    assert profile.find(K.OP, "aten::copy_").total_ns == 197_000.0  # type: ignore[union-attr]
    assert any("bare inf or nan" in warning for warning in profile.warnings)

    # Not a licence for any bad text: a bare word that is no number is still an error.
    path.write_text(text.replace("inf", "infinite"))
    assert "invalid JSON" in _error(path).message


def test_syntax_error_names_the_line(tmp_path: Path) -> None:
    lines = ['{"traceEvents": ['] + [
        json.dumps(_event(f"op{i}", "cpu_op", 1)) + "," for i in range(50)
    ]
    lines[30] = '{"ph": "X", "name": "broken" "dur": 1},'
    lines.append(json.dumps(_event("last", "cpu_op", 1)) + "]}")
    path = tmp_path / "bad.json"
    path.write_text("\n".join(lines))
    error = _error(path)
    assert error.line == 31
    assert "expected ':'" in error.message or "expected ','" in error.message


def test_complete_event_without_dur_names_its_line(tmp_path: Path) -> None:
    events = [_event("a", "cpu_op", 1), {"ph": "X", "name": "no_dur", "cat": "kernel"}]
    path = _write(tmp_path / "nodur.json", {"traceEvents": events}, indent=1)
    error = _error(path)
    assert error.message == "complete event (ph X) without 'dur'"
    assert path.read_text().splitlines()[error.line - 1].strip() == "{"  # type: ignore[operator]
    assert '"no_dur"' in path.read_text().splitlines()[error.line + 1]  # type: ignore[operator]


def test_wrongly_typed_field_is_a_parse_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "str.json", {"traceEvents": [_event("a", "cpu_op", "12")]})
    error = _error(path)
    assert "dur" in error.message and error.line == 1


def test_non_numeric_memcpy_bytes_is_a_parse_error(tmp_path: Path) -> None:
    events = [_event("Memcpy", "gpu_memcpy", 1, args={"bytes": "many"})]
    assert "args.bytes" in _error(_write(tmp_path / "b.json", {"traceEvents": events})).message


@pytest.mark.parametrize("chunk", [61, 4096])
def test_damaged_trace_is_an_error_or_exactly_what_json_load_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """A piece cut out anywhere: a ParseError exactly when json.load rejects the rest too,
    and otherwise (e.g. a cut through whitespace or between two events) exactly the events
    json.load sees; never a guess."""
    monkeypatch.setattr(_chrome_stream, "CHUNK_BYTES", chunk)
    data = _corpus("kineto__docs_traces__before_fix_trace.json").read_bytes()
    path = tmp_path / "damaged.json"
    outcomes = {"error": 0, "bad event": 0, "parsed": 0}
    for start in range(0, len(data), 97):
        for length in (1, 13, 400):
            damaged = data[:start] + data[start + length :]
            path.write_bytes(damaged)
            try:
                json.loads(damaged)
            except ValueError:
                with pytest.raises(ParseError) as info:
                    parse(path)
                assert info.value.source == str(path)
                outcomes["error"] += 1
                continue
            try:
                profile = parse(path)
            except ParseError as exc:  # valid JSON, but e.g. "ph" merged into a number
                assert exc.message.startswith(("bad trace event", "complete event")), exc
                outcomes["bad event"] += 1
                continue
            assert_matches_reference(profile, reference(path))
            outcomes["parsed"] += 1
    assert outcomes == {"error": 288, "bad event": 4, "parsed": 197}


@pytest.mark.parametrize(
    "text", ['{"traceEvents": {}}', "[1, 2]", '"trace"', "", '{"schemaVersion": 1}']
)
def test_not_a_trace_is_a_parse_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(text)
    _error(path)


@pytest.mark.parametrize(
    "doc",
    [
        {"a": [1, 2]},
        [1, 2, 3],
        {"perfci_version": 1, "profiles": []},
        [{"name": "x", "value": 1}],
        {"events": [{"ph": "X"}]},
    ],
)
def test_other_json_is_not_sniffed(tmp_path: Path, doc: Any) -> None:
    path = _write(tmp_path / "other.json", doc)
    assert not chrome_trace.sniff(registry.read_head(path))


# --- traces made here with torch.profiler ------------------------------------------------------


@pytest.mark.torch
def test_torch_profiler_trace(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    path = tmp_path / "cpu.pt.trace.json"
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
        on_trace_ready=lambda prof: prof.export_chrome_trace(str(path)),
    ) as prof:
        for _ in range(6):
            with record_function("forward_pass"):
                loss = model(torch.randn(8, 16)).sum()
            with record_function("backward_pass"):
                loss.backward()
            prof.step()
    profile_ = parse(path)
    assert_matches_reference(profile_, reference(path))
    assert profile_.steps == 3
    assert profile_.metadata["profiler_steps"] == [2, 3, 4]
    assert profile_.find(K.RANGE, "forward_pass", device=Device.CPU).calls == 3  # type: ignore[union-attr]
    assert profile_.find(K.RANGE, "backward_pass", device=Device.CPU).calls == 3  # type: ignore[union-attr]
    assert profile_.find(K.OP, "aten::linear", device=Device.CPU).calls == 6  # type: ignore[union-attr]
    assert profile_.find(K.OP, "aten::relu", device=Device.CPU).calls == 3  # type: ignore[union-attr]
    assert profile_.by_kind(K.KERNEL) == []


@pytest.mark.torch
def test_torch_profile_memory_trace(tmp_path: Path) -> None:
    """profile_memory=True on the CPU: [memory] instants of Device Type 0 give the peak."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    path = tmp_path / "memory.pt.trace.json"
    layer = torch.nn.Linear(64, 64)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for _ in range(2):
            layer(torch.randn(256, 64)).sum().backward()
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    totals = [e["args"]["Total Allocated"] for e in events if e.get("name") == "[memory]"]
    assert totals and {e["args"]["Device Type"] for e in events if e.get("name") == "[memory]"} == {
        0
    }
    # 256 x 64 float32 inputs and outputs alone are 64 KiB each
    assert max(totals) >= 65_536
    profile_ = parse(path)
    assert_matches_reference(profile_, reference(path))
    [peak] = profile_.by_kind(K.MEASURE)
    assert (peak.name, peak.device, peak.value) == (
        "peak allocated memory",
        Device.CPU,
        max(totals),
    )
    assert (peak.unit, peak.better, peak.attrs["events"]) == ("bytes", "lower", len(totals))


@pytest.mark.torch
def test_perfci_step_timer_is_preferred(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from perfci.integrations.torch import profile_steps

    monkeypatch.setenv("PERFCI_OUTPUT_DIR", str(tmp_path))
    layer = torch.nn.Linear(32, 32)
    with profile_steps(warmup=1, active=4, label="bench") as run:
        for _ in run:
            with torch.profiler.record_function("my_range"):
                layer(torch.randn(8, 32)).sum().backward()
    path = tmp_path / "bench.pt.trace.json"
    recorded = json.loads(path.read_text())["perfci"]["samples_ns"]
    profile = parse(path)
    step = profile.find(K.STEP, "step", device=Device.CPU)
    assert step is not None
    assert step.samples_ns == recorded and len(recorded) == 4
    assert step.attrs["source"] == "perfci step timer"
    assert profile.find(K.STEP, "ProfilerStep") is None
    assert profile.steps == 4
    assert len(profile.metadata["profiler_steps"]) == 4
    assert profile.metadata["warmup_skipped"] == 1
    assert profile.metadata["torch_version"] == torch.__version__
    assert profile.find(K.RANGE, "my_range", device=Device.CPU).calls == 4  # type: ignore[union-attr]


def test_perfci_block_without_samples_falls_back(tmp_path: Path) -> None:
    doc = {
        "traceEvents": [_event("ProfilerStep#0", "user_annotation", 3)],
        "perfci": {"samples_ns": "oops"},
    }
    profile = parse(_write(tmp_path / "p.json", doc))
    assert profile.find(K.STEP, "ProfilerStep").samples_ns == [3000.0]  # type: ignore[union-attr]
    assert profile.warnings == [
        'the "perfci" block has no list of step times (samples_ns); '
        "ProfilerStep ranges are used instead"
    ]


# --- per-step totals of host-side events ---------------------------------------------------

EXAMPLE_TRACE = (
    Path(__file__).resolve().parents[1] / "examples/gpt/profiles/main-1/r1.pt.trace.json.gz"
)


def _span(name: str, cat: str, ts: float, dur: float) -> dict[str, Any]:
    return _event(name, cat, dur, ts=ts)


def test_host_events_get_their_total_in_each_profiler_step(tmp_path: Path) -> None:
    events = [
        _span("ProfilerStep#2", "user_annotation", 200, 40),  # out of order on purpose
        _span("ProfilerStep#1", "user_annotation", 100, 50),
        _span("ProfilerStep#1", "gpu_user_annotation", 130, 50),
        _span("aten::mm", "cpu_op", 110, 10),
        _span("aten::mm", "cpu_op", 120, 5),
        _span("aten::mm", "cpu_op", 210, 7),
        _span("aten::mm", "cpu_op", 160, 100),  # between the steps: in neither
        _span("aten::copy_", "cpu_op", 111, 3),  # step 1 only
        _span("forward", "user_annotation", 101, 30),
        _span("forward", "user_annotation", 201, 20),
        _span("cudaLaunchKernel", "cuda_runtime", 112, 1),
        _span("cudaLaunchKernel", "cuda_runtime", 212, 2),
        _span("gemm_kernel", "kernel", 140, 20),
        _span("gemm_kernel", "kernel", 230, 20),
    ]
    profile = parse(_write(tmp_path / "t.json", {"traceEvents": events}))
    totals = {m.name: m.step_totals_ns for m in profile.metrics}
    assert totals["aten::mm"] == [15_000.0, 7_000.0]
    assert totals["forward"] == [30_000.0, 20_000.0]
    assert totals["cudaLaunchKernel"] == [1_000.0, 2_000.0]
    assert totals["aten::copy_"] is None  # not part of every step's work
    assert totals["gemm_kernel"] is None  # the GPU's clock: its step is not its start time
    mm = next(m for m in profile.metrics if m.name == "aten::mm")
    assert mm.total_ns == 122_000.0  # the totals leave the metric's own numbers alone
    # perfci's own document carries them (perfci parse --json, then perfci ingest).
    from perfci.core.jsondoc import metric_from_dict, metric_to_dict

    assert metric_from_dict(metric_to_dict(mm), "m").step_totals_ns == [15_000.0, 7_000.0]


def test_overlapping_or_single_steps_give_no_per_step_totals(tmp_path: Path) -> None:
    overlapping = [
        _span("ProfilerStep#1", "user_annotation", 100, 50),
        _span("ProfilerStep#2", "user_annotation", 120, 50),  # another thread's step
        _span("aten::mm", "cpu_op", 110, 10),
        _span("aten::mm", "cpu_op", 160, 10),
    ]
    single = [
        _span("ProfilerStep#1", "user_annotation", 100, 50),
        _span("aten::mm", "cpu_op", 110, 10),
    ]
    no_ts = [
        {"ph": "X", "name": "ProfilerStep#1", "cat": "user_annotation", "dur": 5},
        {"ph": "X", "name": "ProfilerStep#2", "cat": "user_annotation", "ts": 9, "dur": 5},
        _span("aten::mm", "cpu_op", 10, 1),
    ]
    for name, events in (("o", overlapping), ("s", single), ("n", no_ts)):
        profile = parse(_write(tmp_path / f"{name}.json", {"traceEvents": events}))
        mm = next(m for m in profile.metrics if m.name == "aten::mm")
        assert mm.step_totals_ns is None, name
        assert mm.total_ns is not None


def test_example_profile_per_step_totals_equal_a_plain_loop_over_its_events() -> None:
    """Real torch profiler output (the shipped example, 4 profiled steps on a CPU)."""
    doc = json.loads(gzip.decompress(EXAMPLE_TRACE.read_bytes()))
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") == "user_annotation" and re.fullmatch(r"ProfilerStep#\d+", e["name"])
    )
    expected: dict[str, list[float]] = {}
    for event in events:
        if event.get("cat") not in ("cpu_op", "user_annotation") or event["name"].startswith(
            "ProfilerStep#"
        ):
            continue
        row = expected.setdefault(event["name"], [0.0] * len(steps))
        for index, (start, end) in enumerate(steps):
            if start <= event["ts"] < end:
                row[index] += round(event["dur"] * 1000)
    profile = parse(EXAMPLE_TRACE)
    assert len(steps) == profile.steps == 4
    host = [m for m in profile.metrics if m.kind in (MetricKind.OP, MetricKind.RANGE)]
    with_totals = [m for m in host if m.step_totals_ns is not None]
    assert len(with_totals) >= 80
    for metric in host:
        want = expected[metric.name]
        if all(want):
            assert metric.step_totals_ns == pytest.approx(want), metric.name
        else:
            assert metric.step_totals_ns is None, metric.name
    addmm = next(m for m in host if m.name == "aten::addmm")
    assert [round(t / 1000) for t in addmm.step_totals_ns or []] == [3466, 3429, 3446, 3456]


def test_a_large_header_or_event_is_read_in_growing_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads are small while events stream, but a header or an event larger than a read is
    read in reads that double: a few reads, not one per chunk, each searching the buffer."""
    big = "x" * (3 << 20)
    events = [_event(f"op{i}", "cpu_op", i + 1) for i in range(200)]
    events.insert(100, _event("huge", "kernel", 7, args={"note": big}))
    path = _write(
        tmp_path / "big.json", {"deviceProperties": [{"name": big}], "traceEvents": events}
    )
    reads: list[int] = []
    opened = _chrome_stream._open

    class Counted:
        def __init__(self, handle: Any) -> None:
            self.handle = handle

        def read(self, size: int = -1) -> bytes:
            data: bytes = self.handle.read(size)
            reads.append(len(data))
            return data

    @contextlib.contextmanager
    def counting(path: Path, format: str | None = None) -> Iterator[Counted]:
        with opened(path, format) as handle:
            yield Counted(handle)

    monkeypatch.setattr(_chrome_stream, "_open", counting)
    profile = parse(path)
    assert profile.find(K.KERNEL, "huge").total_ns == 7_000.0  # type: ignore[union-attr]
    assert profile.find(K.OP, "op199").total_ns == 200_000.0  # type: ignore[union-attr]
    assert profile.metadata["gpu"] == big
    assert sum(reads) == path.stat().st_size
    # 6 MiB in 64 KiB reads would be about 100; doubling takes about 8 for each large part.
    assert len(reads) <= 30, reads
    assert max(reads) <= 4 << 20
