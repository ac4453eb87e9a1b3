"""perfci.torch on the CPU with a real torch.profiler (no GPU here: the CUDA-event path is the
only part not exercised)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from perfci.torch import STEP_KEY, profile_steps  # noqa: E402


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


def test_profile_steps_rejects_bad_counts() -> None:
    with pytest.raises(ValueError, match="active"):
        profile_steps(active=0)
