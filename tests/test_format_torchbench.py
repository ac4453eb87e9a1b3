"""TorchBench userbenchmark results (``metrics-*.json``), written here in the two key styles
TorchBench's own userbenchmarks use (no public result file exists to copy: ../shared/FORMATS.md,
"Gaps"), with its non-numeric values (failed, not implemented, accuracy) among them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfci.core.errors import ParseError
from perfci.core.model import Better, Device, Metric, MetricKind, Profile
from perfci.formats import registry
from perfci.formats.bench import torchbench

K = MetricKind
RESNET = "model=resnet50, test=eval, device=cuda, bs=None, extra_args=[]"
VIT = "model=timm_vit, test=eval, device=cpu, bs=8, extra_args=['--accuracy']"
REGNET = "test_eval[timm_regnet-cuda-eager]"
GIB = 2**30

TEST_BENCH = {
    "name": "test_bench",
    "environ": {
        "pytorch_git_version": "a1b2c3d4e5",
        "pytorch_version": "2.4.0.dev20240501+cu121",
        "device": "NVIDIA A100-SXM4-40GB",
    },
    "metrics": {
        f"{RESNET}, metric=latencies": 7.25,
        f"{RESNET}, metric=cpu_peak_mem": 2.5,
        f"{RESNET}, metric=gpu_peak_mem": 1.25,
        "model=BERT_pytorch, test=train, device=cuda, bs=None, extra_args=[], "
        "metric=latencies": "not_implemented",
        f"{VIT}, metric=accuracy": "pass",
        "model=timm_vit, test=eval, device=cpu, bs=8, extra_args=[], metric=latencies": 41.0,
    },
}
NIGHTLY = {
    "name": "torch-nightly",
    "environ": {"pytorch_git_version": "0f1e2d3c4b"},
    "metrics": {
        f"{REGNET}_latency": 12.5,
        f"{REGNET}_cmem": 0.75,
        f"{REGNET}_gmem": 3.0,
        "v3_score": 1042.5,
    },
}


def _write(tmp_path: Path, doc: object, name: str = "metrics-20240501093000.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=4))
    return path


def _one(path: Path) -> Profile:
    assert registry.detect(path).name == "torchbench"
    [profile] = registry.parse_file(path)
    return profile


def _get(profile: Profile, kind: MetricKind, name: str, scope: str | None = None) -> Metric:
    metric = profile.find(kind, name, scope=scope)
    assert metric is not None, f"no {kind.value} {name!r} in scope {scope!r}"
    return metric


def test_test_bench_keys_become_benchmarks_and_their_peak_memory(tmp_path: Path) -> None:
    profile = _one(_write(tmp_path, TEST_BENCH))
    assert (profile.label, profile.format) == ("test_bench", "torchbench")
    assert profile.metadata["pytorch_git_version"] == "a1b2c3d4e5"
    assert profile.metadata["device"] == "NVIDIA A100-SXM4-40GB"
    resnet = _get(profile, K.BENCH, RESNET)
    # TorchBench's latencies are milliseconds (the median of its timed iterations).
    assert (resnet.avg_ns, resnet.device, resnet.unit) == (7.25e6, Device.GPU, "ns")
    vit = _get(profile, K.BENCH, "model=timm_vit, test=eval, device=cpu, bs=8, extra_args=[]")
    assert (vit.avg_ns, vit.device) == (41e6, Device.CPU)
    cpu = _get(profile, K.MEASURE, "cpu_peak_mem", scope=RESNET)
    assert (cpu.value, cpu.unit, cpu.device, cpu.better) == (
        2.5 * GIB,
        "bytes",
        Device.CPU,
        Better.LOWER,
    )
    gpu = _get(profile, K.MEASURE, "gpu_peak_mem", scope=RESNET)
    assert (gpu.value, gpu.device) == (1.25 * GIB, Device.GPU)
    assert len(profile.metrics) == 4
    [warning] = profile.warnings
    assert warning.startswith("2 metric(s) hold no number")
    assert "BERT_pytorch" in warning


def test_nightly_keys_and_the_score(tmp_path: Path) -> None:
    profile = _one(_write(tmp_path, NIGHTLY))
    regnet = _get(profile, K.BENCH, REGNET)
    assert (regnet.avg_ns, regnet.device) == (12.5e6, Device.GPU)
    assert _get(profile, K.MEASURE, "cmem", scope=REGNET).value == 0.75 * GIB
    assert _get(profile, K.MEASURE, "gmem", scope=REGNET).device is Device.GPU
    score = _get(profile, K.MEASURE, "v3_score")
    assert (score.value, score.better, score.unit) == (1042.5, Better.HIGHER, "count")
    assert profile.warnings == []


def test_other_keys_are_measures_named_by_the_key_and_nested_ones_flattened(
    tmp_path: Path,
) -> None:
    doc = {
        "name": "my_userbenchmark",
        "environ": {"pytorch_git_version": "abc"},
        "metrics": {
            "resnet18, widgets, cuda": 0.0123,
            "summary": {"iterations_total_duration": 4.5, "note": "text"},
            "throughputs": 250.0,
        },
    }
    profile = _one(_write(tmp_path, doc))
    other = _get(profile, K.MEASURE, "resnet18, widgets, cuda")
    assert (other.value, other.better, other.device) == (0.0123, Better.LOWER, Device.GPU)
    assert other.unit == "count"
    assert _get(profile, K.MEASURE, "summary.iterations_total_duration").value == 4.5
    throughput = _get(profile, K.MEASURE, "throughputs")
    assert (throughput.unit, throughput.better) == ("1/s", Better.HIGHER)
    assert profile.warnings[0].startswith("1 metric(s) hold no number")


def test_flat_keys_as_the_field_guide_gives_them(tmp_path: Path) -> None:
    # FORMATS.md: "metrics": {"<model>-<test>-<device>_latency": float, ...}
    doc = {
        "name": "torch-nightly",
        "environ": {"pytorch_git_version": "abc"},
        "metrics": {
            "resnet50-eval-cuda_latency": 12.5,
            "resnet50-eval-cuda_gmem": 1.5,
            "BERT_pytorch-train-cpu_latency": 300.0,
            "hf_T5-eval-cuda_throughput": 55.0,
            "v3_score": 1000.0,
        },
    }
    profile = _one(_write(tmp_path, doc))
    resnet = _get(profile, K.BENCH, "resnet50-eval-cuda")
    assert (resnet.avg_ns, resnet.device) == (12_500_000.0, Device.GPU)
    # The model's own underscore stays in its name: the split is at the known suffix only.
    bert = _get(profile, K.BENCH, "BERT_pytorch-train-cpu")
    assert (bert.avg_ns, bert.device) == (300_000_000.0, Device.CPU)
    memory = _get(profile, K.MEASURE, "gmem", scope="resnet50-eval-cuda")
    assert (memory.value, memory.unit) == (1.5 * 2**30, "bytes")
    rate = _get(profile, K.MEASURE, "throughput", scope="hf_T5-eval-cuda")
    assert (rate.value, rate.unit, rate.better) == (55.0, "1/s", Better.HIGHER)
    assert _get(profile, K.MEASURE, "v3_score").better is Better.HIGHER


def test_the_optim_userbenchmark_keys_are_step_times_in_seconds(tmp_path: Path) -> None:
    # userbenchmark/optim/run.py: f"{sub_label}, {description}" -> Measurement.mean (s), and
    # "compile_time, ..." (the first pt2 step less the mean of three later ones) under pt2_.
    doc = {
        "name": "optim",
        "environ": {"pytorch_git_version": "abc"},
        "metrics": {
            "resnet18, Adam, cuda, (foreach=True)": 0.0123,
            "mt5-small, SGD, cpu, default": 0.25,
            "compile_time, resnet18, Adam, cuda, pt2_ (foreach=True)": 3.5,
            "compile_time, resnet18, SGD, cuda, pt2_ default": -0.002,
        },
    }
    profile = _one(_write(tmp_path, doc))
    adam = _get(profile, K.BENCH, "resnet18, Adam, cuda, (foreach=True)")
    assert (adam.avg_ns, adam.unit, adam.better) == (12_300_000.0, "ns", Better.LOWER)
    assert adam.device is Device.GPU
    assert _get(profile, K.BENCH, "mt5-small, SGD, cpu, default").device is Device.CPU
    compile_time = _get(profile, K.BENCH, "compile_time, resnet18, Adam, cuda, pt2_ (foreach=True)")
    assert compile_time.avg_ns == 3.5e9
    # A negative compile time (nothing to compile, and noise) is no time to store.
    assert len(profile.metrics) == 3
    assert profile.warnings == [
        "1 metric(s) hold no number (failed, not implemented, an error or a pass/fail) or a "
        "negative time, and were left out, first 'compile_time, resnet18, SGD, cuda, pt2_ default'"
    ]


def test_sniff_claims_torchbench_results_only(tmp_path: Path) -> None:
    def claims(doc: object) -> bool:
        return torchbench.sniff(registry.read_head(_write(tmp_path, doc, "x.json")))

    assert claims(TEST_BENCH) and claims(NIGHTLY)
    assert not claims({"name": "x", "metrics": {}})  # no environ
    assert not claims({"name": "x", "environ": {}, "benchmarks": []})  # another tool's key
    assert not claims({"bench": {"latency": {"value": 1.0}}})  # BMF


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"name": "x", "environ": {}, "metrics": [1, 2]}, "got metrics as an array"),
        ({"name": "x", "environ": {}}, "got metrics as null"),
        (
            {"name": "x", "environ": {}, "metrics": {"a, metric=latencies": -1.0}},
            "a latency cannot be negative",
        ),
    ],
)
def test_shapes_it_cannot_read_are_named(tmp_path: Path, doc: object, expected: str) -> None:
    path = _write(tmp_path, doc)
    with pytest.raises(ParseError, match=expected) as caught:
        registry.parse_file(path, format="torchbench")
    assert caught.value.format == "torchbench"


def test_a_cut_file_is_a_parse_error_naming_the_line(tmp_path: Path) -> None:
    text = json.dumps(TEST_BENCH, indent=4)
    path = tmp_path / "metrics-cut.json"
    path.write_text(text[: len(text) // 2])
    assert registry.detect(path).name == "torchbench"
    with pytest.raises(ParseError, match="invalid JSON") as caught:
        registry.parse_file(path)
    assert caught.value.line is not None
