"""optimum-benchmark reports: the real benchmark.json in the corpus (py-txi BERT on CPU), and
benchmark_report.json files written here with the sections the corpus sample leaves null."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from perfci.core.errors import ConfigError, ParseError
from perfci.core.model import Better, Device, Metric, MetricKind, Profile
from perfci.formats import registry
from perfci.formats.bench import optimum_benchmark

K = MetricKind
CORPUS = "bench_json"
SAMPLE = "huggingface_optimum-benchmark__benchmark.json"

#: A text-generation report on a GPU, as ``benchmark_report.json`` holds it (no config).
REPORT: dict[str, Any] = {
    "load": {
        "memory": {
            "unit": "MB",
            "max_ram": 1234.5,
            "max_global_vram": 2048.0,
            "max_process_vram": 1900.25,
            "max_reserved": 1536.0,
            "max_allocated": 1024.5,
        },
        "latency": {
            "unit": "s",
            "values": [2.5],
            "count": 1,
            "total": 2.5,
            "mean": 2.5,
            "p50": 2.5,
            "p90": 2.5,
            "p95": 2.5,
            "p99": 2.5,
            "stdev": 0,
            "stdev_": 0,
        },
        "throughput": None,
        "energy": {"unit": "kWh", "cpu": 0.0001, "ram": 2e-05, "gpu": 0.0003, "total": 0.00042},
        "efficiency": None,
    },
    "prefill": {
        "memory": None,
        "latency": {
            "unit": "s",
            "values": [0.0125, 0.0135],
            "count": 2,
            "total": 0.026,
            "mean": 0.013,
            "p50": 0.013,
            "p90": 0.0134,
            "p95": 0.01345,
            "p99": 0.01349,
            "stdev": 0.0005,
            "stdev_": 3.8461538461538463,
        },
        "throughput": {"unit": "tokens/s", "value": 9846.15},
        "energy": None,
        "efficiency": {"unit": "tokens/kWh", "value": 123456789.0},
    },
    "per_token": None,
}


def _one(path: Path, **options: str) -> Profile:
    [profile] = registry.parse_file(path, options=options)
    return profile


def _get(profile: Profile, kind: MetricKind, name: str, scope: str | None = None) -> Metric:
    metric = profile.find(kind, name, scope=scope)
    assert metric is not None, f"no {kind.value} {name!r} in scope {scope!r}"
    return metric


def _write(tmp_path: Path, doc: object, name: str = "benchmark_report.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=4))
    return path


@pytest.fixture(scope="module")
def sample(corpus_dir: Path) -> Profile:
    path = corpus_dir / CORPUS / SAMPLE
    assert registry.detect(path).name == "optimum_benchmark"
    return _one(path)


# --- the corpus: benchmark.json = {config, report} ---------------------------------------------


def test_sample_metrics_by_target(sample: Profile) -> None:
    assert sample.format == "optimum_benchmark"
    assert sample.label == "tei_bert"
    assert sample.warnings == []
    # load: latency only; forward: latency and throughput; memory/energy/efficiency all null.
    assert [m.key for m in sample.metrics] == [
        "bench:cpu:load",
        "bench:cpu:forward",
        "measure:cpu:forward ▸ throughput",
    ]


def test_sample_load_latency_in_ns(sample: Profile) -> None:
    load = _get(sample, K.BENCH, "load")
    assert load.unit == "ns" and load.better is Better.LOWER
    assert load.device is Device.CPU  # config.backend.device = "cpu"
    assert load.calls == 1
    assert load.samples_ns == [15_598_862_323.09509]  # 15.59886232309509 s
    assert load.avg_ns == load.total_ns == load.median_ns == 15_598_862_323.09509
    assert load.std_ns == 0.0


def test_sample_forward_latency_samples_and_statistics(sample: Profile) -> None:
    forward = _get(sample, K.BENCH, "forward")
    assert forward.calls == 10
    assert forward.samples_ns is not None and len(forward.samples_ns) == 10
    assert forward.samples_ns[0] == 11_477_741_526.905447  # 11.477741526905447 s
    assert forward.samples_ns[-1] == 11_333_256_351.063028  # 11.333256351063028 s
    assert forward.avg_ns == 11_329_571_039.485746  # mean
    assert forward.median_ns == 11_300_766_840.518918  # p50
    assert forward.std_ns == 125_009_556.26540203  # stdev 0.12500955626540203 s
    assert forward.total_ns == 113_295_710_394.85745
    assert forward.min_ns == 11_163_343_374.966644
    assert forward.max_ns == 11_554_612_639.942206
    assert forward.warmup == 0  # the 10 warm-up runs are not in the file
    assert forward.attrs == {
        "p90_ns": 11_485_428_638.209124,
        "p95_ns": 11_520_020_639.075664,
        "p99_ns": 11_547_694_239.768898,
        "stdev_pct": 1.1033917862355032,
    }


def test_sample_forward_throughput(sample: Profile) -> None:
    throughput = _get(sample, K.MEASURE, "throughput", scope="forward")
    assert throughput.unit == "samples/s"
    assert throughput.better is Better.HIGHER
    assert throughput.value == 5.648934083819028
    assert throughput.avg_ns is None


def test_sample_config_becomes_small_metadata(sample: Profile) -> None:
    meta = sample.metadata
    assert meta["name"] == "tei_bert"
    backend = meta["backend"]
    assert backend["name"] == "py-txi" and backend["model"] == "BAAI/bge-base-en-v1.5"
    assert backend["device"] == "cpu" and backend["max_concurrent_requests"] == 512
    # No class paths, nulls, empty or nested objects (ports, volumes).
    assert not {"_target_", "device_ids", "model_kwargs", "ports", "volumes"} & backend.keys()
    scenario = meta["scenario"]
    assert scenario["name"] == "inference" and scenario["iterations"] == 10
    assert scenario["input_shapes"] == {"batch_size": 64, "num_choices": 2, "sequence_length": 128}
    assert meta["launcher"] == {"name": "inline", "device_isolation": False, "numactl": False}
    environment = meta["environment"]
    assert environment["gpu"] == ["Tesla T4"] and environment["cpu_count"] == 8
    assert environment["transformers_version"] == "4.45.2"
    assert "diffusers_version" not in environment  # null
    assert set(meta) == {"name", "backend", "scenario", "launcher", "environment"}


def test_sniff_claims_only_the_optimum_file(corpus_dir: Path, seeds_dir: Path) -> None:
    files = [p for p in corpus_dir.glob("*/*") if p.name != "SOURCES.md"]
    files += list(seeds_dir.iterdir())
    head = registry.read_head
    claimed = {p.name for p in files if p.is_file() and optimum_benchmark.sniff(head(p))}
    assert claimed == {SAMPLE}


# --- benchmark_report.json: no config, every section ---------------------------------------------


def test_report_without_config(tmp_path: Path) -> None:
    path = _write(tmp_path, REPORT)
    assert registry.detect(path).name == "optimum_benchmark"
    profile = _one(path)
    assert profile.label == "optimum-benchmark" and profile.metadata == {}
    assert all(m.device is Device.GPU for m in profile.metrics)  # no config: GPU by default
    assert [m.key for m in profile.metrics] == [
        "measure:gpu:load ▸ max_ram",
        "measure:gpu:load ▸ max_global_vram",
        "measure:gpu:load ▸ max_process_vram",
        "measure:gpu:load ▸ max_reserved",
        "measure:gpu:load ▸ max_allocated",
        "bench:gpu:load",
        "measure:gpu:load ▸ cpu_energy",
        "measure:gpu:load ▸ ram_energy",
        "measure:gpu:load ▸ gpu_energy",
        "measure:gpu:load ▸ total_energy",
        "bench:gpu:prefill",
        "measure:gpu:prefill ▸ throughput",
        "measure:gpu:prefill ▸ efficiency",
    ]


def test_memory_in_decimal_megabytes(tmp_path: Path) -> None:
    profile = _one(_write(tmp_path, REPORT))
    # optimum-benchmark's MB: bytes / 1e6 (trackers/memory.py).
    expected = {
        "max_ram": 1_234_500_000.0,
        "max_global_vram": 2_048_000_000.0,
        "max_process_vram": 1_900_250_000.0,
        "max_reserved": 1_536_000_000.0,
        "max_allocated": 1_024_500_000.0,
    }
    for name, value in expected.items():
        metric = _get(profile, K.MEASURE, name, scope="load")
        assert (metric.unit, metric.value, metric.better) == ("bytes", value, Better.LOWER)


def test_energy_efficiency_and_token_throughput(tmp_path: Path) -> None:
    profile = _one(_write(tmp_path, REPORT))
    total = _get(profile, K.MEASURE, "total_energy", scope="load")
    assert (total.unit, total.value, total.better) == ("kWh", 0.00042, Better.LOWER)
    assert _get(profile, K.MEASURE, "ram_energy", scope="load").value == 2e-05
    efficiency = _get(profile, K.MEASURE, "efficiency", scope="prefill")
    assert (efficiency.unit, efficiency.value) == ("tokens/kWh", 123_456_789.0)
    assert efficiency.better is Better.HIGHER
    throughput = _get(profile, K.MEASURE, "throughput", scope="prefill")
    assert (throughput.unit, throughput.value) == ("tokens/s", 9846.15)
    assert throughput.better is Better.HIGHER


def test_prefill_latency(tmp_path: Path) -> None:
    prefill = _get(_one(_write(tmp_path, REPORT)), K.BENCH, "prefill")
    assert prefill.samples_ns == [12_500_000.0, 13_500_000.0]
    assert (prefill.calls, prefill.avg_ns, prefill.total_ns) == (2, 13_000_000.0, 26_000_000.0)
    assert (prefill.std_ns, prefill.min_ns, prefill.max_ns) == (
        500_000.0,
        12_500_000.0,
        13_500_000.0,
    )


def test_device_option_and_config_device(tmp_path: Path) -> None:
    path = _write(tmp_path, REPORT)
    assert {m.device for m in _one(path, device="cpu").metrics} == {Device.CPU}
    wrapped = {"config": {"name": "gpt2", "backend": {"device": "cuda"}}, "report": REPORT}
    profile = _one(_write(tmp_path, wrapped, "benchmark.json"))
    assert profile.label == "gpt2"
    assert {m.device for m in profile.metrics} == {Device.GPU}
    with pytest.raises(ConfigError, match="device='tpu': expected cpu or gpu"):
        _one(path, device="tpu")


def test_a_report_of_null_targets_is_a_warning(tmp_path: Path) -> None:
    doc = {"config": {"name": "x"}, "report": {"forward": None}}
    [profile] = registry.parse_file(_write(tmp_path, doc), format="optimum_benchmark")
    assert profile.metrics == []
    assert profile.warnings == [
        "no target held a latency, throughput, memory, energy or efficiency measurement"
    ]


@pytest.mark.parametrize("wrapped", [False, True])
def test_sniff_reads_a_head_cut_inside_the_first_target(tmp_path: Path, wrapped: bool) -> None:
    values = [0.020_000_000_001 + i * 1e-9 for i in range(30_000)]
    report = {
        "per_token": {
            "memory": None,
            "latency": {"unit": "s", "values": values, "count": len(values), "mean": 0.02},
            "throughput": None,
        },
        "load": copy.deepcopy(REPORT["load"]),
    }
    doc = {"config": {"name": "long"}, "report": report} if wrapped else report
    path = _write(tmp_path, doc)
    assert path.stat().st_size > registry.HEAD_BYTES
    assert registry.detect(path).name == "optimum_benchmark"
    per_token = _get(_one(path), K.BENCH, "per_token")
    assert per_token.calls == 30_000 and per_token.avg_ns == 20_000_000.0


@pytest.mark.parametrize(
    "doc",
    [
        {"forward": {"latency": {"value": 3.5}}},  # BMF with a measure named latency
        {"forward": {"latency": None, "memory": None}},  # nothing measured
        {"config": {"name": "x"}, "report": "none"},
        {"config": {"name": "x"}},
        {"forward": [1, 2]},
        [{"forward": {"latency": {"unit": "s"}}}],
    ],
)
def test_sniff_refuses_look_alikes(tmp_path: Path, doc: object) -> None:
    assert not optimum_benchmark.sniff(registry.read_head(_write(tmp_path, doc)))


# --- bad input ---------------------------------------------------------------------------------


def test_truncated_json_names_the_line(tmp_path: Path, corpus_dir: Path) -> None:
    path = tmp_path / "benchmark.json"
    path.write_text((corpus_dir / CORPUS / SAMPLE).read_text()[:4000])
    with pytest.raises(ParseError, match="invalid JSON") as info:
        registry.parse_file(path, format="optimum_benchmark")
    assert info.value.line is not None and info.value.line > 100


def _with(target: str, section: str, value: object) -> dict[str, Any]:
    doc = copy.deepcopy(REPORT)
    doc[target][section] = value
    return doc


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (
            _with("prefill", "latency", {"unit": "s", "values": [0.1, "n/a"]}),
            "target 'prefill', latency values[1] must be a finite number, got a string \"n/a\"",
        ),
        (_with("prefill", "latency", {"unit": "fortnight", "mean": 1}), "unknown time unit"),
        (_with("prefill", "latency", {"unit": "s", "values": [-0.1]}), "cannot be negative"),
        (_with("load", "memory", {"unit": "furlongs", "max_ram": 1}), "unknown size unit"),
        (_with("load", "memory", {"unit": "MB", "max_ram": "1 GB"}), "memory 'max_ram' must be"),
        (_with("load", "throughput", [1]), "'throughput' must be an object, got an array"),
        ({"config": {}, "report": [1]}, "'report' must be an object of targets"),
        ({"forward": 3}, "target 'forward': expected an object of memory/latency/"),
        ([REPORT], "expected a JSON object"),
    ],
)
def test_shapes_it_cannot_read(tmp_path: Path, doc: object, expected: str) -> None:
    with pytest.raises(ParseError, match="optimum_benchmark") as info:
        registry.parse_file(_write(tmp_path, doc), format="optimum_benchmark")
    assert expected in str(info.value)
