"""PyTorch compiler benchmark CSVs (``benchmarks/dynamo``), written here with the column sets of
its performance and accuracy runs (no public result file is in ../shared/corpus)."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfci.core.errors import ParseError
from perfci.core.model import TIME_UNIT, Better, Device, Metric, MetricKind, Profile
from perfci.formats import registry
from perfci.formats.bench import dynamo_csv

K = MetricKind
PERF_HEADER = (
    "dev,name,batch_size,speedup,abs_latency,compilation_latency,compression_ratio,"
    "eager_peak_mem,dynamo_peak_mem,calls_captured,unique_graphs,graph_breaks,"
    "unique_graph_breaks,autograd_captures,autograd_compiles,cudagraph_skips"
)
PERF = [
    PERF_HEADER,
    "cuda,adv_inception_v3,128,1.494346,91.539981,63.716541,1.054436,9.615134,9.118641,"
    "1193,1,0,0,0,0,0",
    "cuda,beit_base_patch16_224,64,1.349271,82.286621,52.470113,1.239035,13.045546,"
    "10.528866,1160,1,2,1,0,0,0",
    # The same model again (a second run appended to the file), and one that failed.
    "cuda,adv_inception_v3,128,1.502111,90.875432,61.002345,1.054436,9.615134,9.118641,"
    "1193,1,0,0,0,0,0",
    "cuda,botnet26t_256,128,0.000000,0.000000,0.000000,0.000000,0.000000,0.000000,0,0,0,0,0,0,0",
]
ACCURACY = [
    "dev,name,batch_size,accuracy,calls_captured,unique_graphs,graph_breaks,unique_graph_breaks",
    "cuda,BERT_pytorch,16,pass,545,1,0,0",
    "cpu,hf_T5,8,fail_accuracy,1102,3,2,2",
]


def _write(tmp_path: Path, lines: list[str], name: str = "inductor_timm_training.csv") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def _one(path: Path) -> Profile:
    assert registry.detect(path).name == "dynamo_csv"
    [profile] = registry.parse_file(path)
    return profile


def _get(profile: Profile, kind: MetricKind, name: str, scope: str | None = None) -> Metric:
    metric = profile.find(kind, name, scope=scope)
    assert metric is not None, f"no {kind.value} {name!r} in scope {scope!r}"
    return metric


def test_performance_rows_become_benchmarks_ratios_times_and_memory(tmp_path: Path) -> None:
    profile = _one(_write(tmp_path, PERF))
    beit = _get(profile, K.BENCH, "beit_base_patch16_224")
    # abs_latency is milliseconds per iteration of the compiled model.
    assert beit.avg_ns == pytest.approx(82.286621e6)
    assert (beit.device, beit.attrs["batch_size"]) == (Device.GPU, "64")
    speedup = _get(profile, K.MEASURE, "speedup", scope="beit_base_patch16_224")
    assert (speedup.value, speedup.unit, speedup.better) == (1.349271, "x", Better.HIGHER)
    compile_time = _get(profile, K.MEASURE, "compilation_latency", "beit_base_patch16_224")
    assert (compile_time.unit, compile_time.better) == (TIME_UNIT, Better.LOWER)
    assert compile_time.avg_ns == pytest.approx(52.470113e9)
    memory = _get(profile, K.MEASURE, "dynamo_peak_mem", scope="beit_base_patch16_224")
    assert (memory.value, memory.unit) == (pytest.approx(10.528866e9), "bytes")
    captured = _get(profile, K.MEASURE, "calls_captured", scope="beit_base_patch16_224")
    assert (captured.value, captured.better) == (1160.0, Better.HIGHER)
    breaks = _get(profile, K.MEASURE, "graph_breaks", scope="beit_base_patch16_224")
    assert (breaks.value, breaks.unit, breaks.better) == (2.0, "count", Better.LOWER)


def test_a_model_in_two_rows_keeps_both_as_samples(tmp_path: Path) -> None:
    profile = _one(_write(tmp_path, PERF))
    inception = _get(profile, K.BENCH, "adv_inception_v3")
    assert inception.samples_ns == pytest.approx([91.539981e6, 90.875432e6])
    assert inception.calls == 2
    speedup = _get(profile, K.MEASURE, "speedup", scope="adv_inception_v3")
    assert speedup.samples == [1.494346, 1.502111]


def test_a_model_that_did_not_run_is_left_out_with_a_warning(tmp_path: Path) -> None:
    profile = _one(_write(tmp_path, PERF))
    assert profile.find(K.BENCH, "botnet26t_256") is None
    assert profile.find(K.MEASURE, "speedup", scope="botnet26t_256") is None
    assert any("did not run" in w and "botnet26t_256" in w for w in profile.warnings)


def test_accuracy_rows_keep_the_verdict_as_an_attribute(tmp_path: Path) -> None:
    profile = _one(_write(tmp_path, ACCURACY, "inductor_torchbench_accuracy.csv"))
    assert profile.find(K.BENCH, "BERT_pytorch") is None  # no latency in an accuracy run
    captured = _get(profile, K.MEASURE, "calls_captured", scope="BERT_pytorch")
    assert (captured.value, captured.device) == (545.0, Device.GPU)
    assert captured.attrs == {"batch_size": "16", "accuracy": "pass"}
    t5 = _get(profile, K.MEASURE, "graph_breaks", scope="hf_T5")
    assert (t5.value, t5.device) == (2.0, Device.CPU)


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        ([PERF_HEADER], "header but no model rows"),
        ([*PERF[:2], PERF[1] + ",7"], "more cells than the header"),
    ],
)
def test_files_it_cannot_read_are_named(tmp_path: Path, lines: list[str], expected: str) -> None:
    with pytest.raises(ParseError, match=expected) as caught:
        registry.parse_file(_write(tmp_path, lines))
    assert caught.value.format == "dynamo_csv"


def test_other_csv_is_not_taken_for_it(tmp_path: Path) -> None:
    path = _write(tmp_path, ["name,dev,batch_size,speedup", "a,cuda,1,1.0"], "other.csv")
    assert not dynamo_csv.sniff(registry.read_head(path))
    assert dynamo_csv.sniff(registry.read_head(_write(tmp_path, PERF)))
