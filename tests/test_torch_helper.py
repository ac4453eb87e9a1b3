"""perfci.integrations.torch on the CPU with a real torch.profiler (no GPU here: the CUDA-event path
is not
exercised, and the CUDA peak-memory path runs against scripted allocator statistics)."""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import perfci.integrations.torch  # noqa: E402
from perfci.core.model import Better, Device, MetricKind  # noqa: E402
from perfci.formats import registry  # noqa: E402
from perfci.integrations.torch import STEP_KEY, _memory_recorder, profile_steps  # noqa: E402


def test_profile_steps_writes_trace_with_step_times(tmp_path: Path) -> None:
    layer = torch.nn.Linear(32, 32)
    iterations = []
    with profile_steps(warmup=2, active=3, label="unit", out_dir=tmp_path) as run:
        for index in run:
            iterations.append(index)
            with torch.profiler.record_function("my_range"):
                layer(torch.randn(8, 32)).sum().backward()
    assert iterations == [0, 1, 2, 3, 4]
    trace = json.loads((tmp_path / "unit.pt.trace.json").read_text())
    steps = trace[STEP_KEY]
    assert steps["device"] == "cpu"
    assert steps["warmup_skipped"] == 2
    assert len(steps["samples_ns"]) == 3
    assert all(s > 0 for s in steps["samples_ns"])
    names = {e.get("name") for e in trace["traceEvents"]}
    assert "my_range" in names
    profiler_steps = sorted(n for n in names if str(n).startswith("ProfilerStep#"))
    assert len(profiler_steps) == 3  # warm-up iterations were not profiled
    assert any(str(n).startswith("aten::") for n in names)


def test_under_nsys_the_steps_run_without_torch_profiler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nsys records the process; a torch.profiler beside it would be a second CUPTI client."""
    monkeypatch.setenv("PERFCI_PROFILER", "nsys")
    started = []
    monkeypatch.setattr(torch.profiler.profile, "__enter__", lambda self: started.append(self))
    layer = torch.nn.Linear(32, 32)
    iterations = []
    with profile_steps(warmup=1, active=3, label="unit", out_dir=tmp_path) as run:
        for index in run:
            iterations.append(index)
            layer(torch.randn(8, 32)).sum().backward()
    assert iterations == [0, 1, 2, 3]
    assert started == [] and run.trace_path is None
    assert list(tmp_path.iterdir()) == []  # nsys's report is the repeat's profile


def test_profile_steps_rejects_bad_counts() -> None:
    with pytest.raises(ValueError, match="active"):
        profile_steps(active=0)


def _run(tmp_path: Path, log: list[str] | None = None) -> None:
    layer = torch.nn.Linear(32, 32)
    with profile_steps(warmup=2, active=3, label="unit", out_dir=tmp_path) as run:
        for index in run:
            if log is not None:
                log.append(f"step {index}")
            layer(torch.randn(8, 32)).sum().backward()


def test_profile_steps_records_no_memory_on_the_cpu(tmp_path: Path) -> None:
    """The CPU allocator keeps no peak statistics: no peak lists, no memory metric."""
    assert _memory_recorder(torch.cuda) is None  # this torch has no CUDA
    _run(tmp_path)
    block = json.loads((tmp_path / "unit.pt.trace.json").read_text())[STEP_KEY]
    assert "peak_allocated_bytes" not in block and "peak_reserved_bytes" not in block
    sidecar = json.loads((tmp_path / "unit.steps.json").read_text())
    assert set(sidecar) == {"step_times_ns", "device"}
    [profile] = registry.parse_file(tmp_path / "unit.pt.trace.json", format="chrome_trace")
    assert profile.by_kind(MetricKind.MEASURE) == []


class FakeCudaMemory:
    """The CUDA caching allocator's peak statistics, scripted per step.

    This mocks only what cannot run here, a GPU: ``torch.cuda``'s ``is_available``,
    ``reset_peak_memory_stats``, ``max_memory_allocated`` and ``max_memory_reserved``. The
    profiler, the step loop and the trace are real (on the CPU).
    """

    def __init__(self, log: list[str], allocated: list[int], reserved: list[int]) -> None:
        self.log = log
        self.allocated = allocated
        self.reserved = reserved
        self.resets = 0

    def is_available(self) -> bool:
        return True

    def reset_peak_memory_stats(self) -> None:
        self.resets += 1
        self.log.append("reset")

    def max_memory_allocated(self) -> int:
        self.log.append("allocated")
        return self.allocated[self.resets - 1]

    def max_memory_reserved(self) -> int:
        self.log.append("reserved")
        return self.reserved[self.resets - 1]


def test_profile_steps_records_per_step_cuda_peaks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log: list[str] = []
    allocated = [50_331_648, 52_428_800, 51_380_224]  # 48, 50 and 49 MiB
    reserved = [67_108_864, 67_108_864, 83_886_080]  # 64, 64 and 80 MiB
    fake = FakeCudaMemory(log, allocated, reserved)
    monkeypatch.setattr(
        perfci.integrations.torch, "_memory_recorder", lambda cuda: _memory_recorder(fake)
    )
    _run(tmp_path, log)
    # warm-up steps are not measured; each profiled step starts from a fresh peak
    assert log == [
        "step 0",
        "step 1",
        *[item for i in (2, 3, 4) for item in ("reset", f"step {i}", "allocated", "reserved")],
    ]
    path = tmp_path / "unit.pt.trace.json"
    block = json.loads(path.read_text())[STEP_KEY]
    assert (block["peak_allocated_bytes"], block["peak_reserved_bytes"]) == (allocated, reserved)
    sidecar = json.loads((tmp_path / "unit.steps.json").read_text())
    assert sidecar["peak_allocated_bytes"] == allocated
    [profile] = registry.parse_file(path, format="chrome_trace")
    peak = profile.find(MetricKind.MEASURE, "peak allocated memory", device=Device.GPU)
    assert peak is not None
    assert (peak.samples, peak.value) == ([float(v) for v in allocated], 52_428_800.0)
    assert (peak.unit, peak.better, peak.warmup) == ("bytes", Better.LOWER, 0)
    peak = profile.find(MetricKind.MEASURE, "peak reserved memory", device=Device.GPU)
    assert peak is not None and peak.value == 83_886_080.0
    assert peak.samples == [67_108_864.0, 67_108_864.0, 83_886_080.0]


_CHURN = """
import resource, sys
import torch
from perfci.integrations.torch import steady_cpu_memory
steady = sys.argv[1] == "steady"
if steady:
    assert steady_cpu_memory(prefault_bytes=128 << 20)
def churn():
    live = []
    for _ in range(16):  # 64 MiB of 4 MiB tensors, touched, then all freed: a step's activations
        tensor = torch.empty(4 << 20, dtype=torch.uint8)
        tensor.fill_(1)
        live.append(tensor)
    del live
churn()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):
    churn()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _page_faults(mode: str) -> int:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _CHURN, mode], capture_output=True, text=True, check=True
    )
    return int(done.stdout.split()[-1])


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="the allocator settings are glibc's",
)
def test_steady_cpu_memory_serves_steps_from_pages_already_in() -> None:
    """Each step's tensors reuse memory paged in once: no page faults per step, unlike glibc's
    defaults, which hand big blocks back to the kernel and fault them in again (a fresh
    process each, so this pytest process keeps its own allocator settings)."""
    plain = _page_faults("plain")
    steady = _page_faults("steady")
    assert plain > 4 * 1024  # 3 × 64 MiB of fresh 4 KiB pages would be 49,152
    assert steady < plain / 20


def test_profile_steps_steadies_cpu_memory_unless_told_not_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(
        perfci.integrations.torch, "steady_cpu_memory", lambda: calls.append(1) or True
    )
    _run(tmp_path)
    assert calls == [1]
    layer = torch.nn.Linear(8, 8)
    with profile_steps(warmup=0, active=1, out_dir=tmp_path, steady_memory=False) as run:
        for _ in run:
            layer(torch.randn(2, 8)).sum().backward()
    assert calls == [1]
