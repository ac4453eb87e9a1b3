"""Bencher Metric Format: Bencher's two BMF fixtures, and small BMF files written here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfci.core.errors import ParseError
from perfci.core.model import Better, Device, Metric, MetricKind, Profile
from perfci.formats import registry
from perfci.formats.bench import bmf

K = MetricKind
CORPUS = "bench_json"
MIXED = "bencher__report_bmf_mixed.json"
DHAT = "bencher__report_dhat.json"


def _one(path: Path) -> Profile:
    [profile] = registry.parse_file(path)
    return profile


def _get(profile: Profile, kind: MetricKind, name: str, scope: str | None = None) -> Metric:
    metric = profile.find(kind, name, scope=scope)
    assert metric is not None, f"no {kind.value} {name!r} in scope {scope!r}"
    return metric


def _write(tmp_path: Path, doc: object, name: str = "bmf.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=2))
    return path


# --- the corpus --------------------------------------------------------------------------------


def test_mixed_fixture_is_three_latency_benchmarks(corpus_dir: Path) -> None:
    path = corpus_dir / CORPUS / MIXED
    assert registry.detect(path).name == "bmf"
    profile = _one(path)
    assert profile.format == "bmf"
    assert profile.warnings == []
    assert [m.name for m in profile.metrics] == [
        "31aba8a9-977a-47d1-9fb6-e6b94b428471",
        "benchmark-b",
        "tests::benchmark_c",
    ]
    assert all(
        m.kind is K.BENCH and m.unit == "ns" and m.better is Better.LOWER for m in profile.metrics
    )
    assert all(m.device is Device.CPU and m.scope is None for m in profile.metrics)
    uuid = _get(profile, K.BENCH, "31aba8a9-977a-47d1-9fb6-e6b94b428471")
    assert (uuid.avg_ns, uuid.min_ns, uuid.max_ns) == (3247.0, 1044.0, 1044.0)
    second = _get(profile, K.BENCH, "benchmark-b")
    assert (second.avg_ns, second.min_ns, second.max_ns) == (3443.0, 2275.0, 2275.0)
    third = _get(profile, K.BENCH, "tests::benchmark_c")
    assert (third.avg_ns, third.min_ns, third.max_ns) == (3361.0, 1093.0, 1093.0)
    assert third.value is None and third.calls is None


def test_dhat_fixture_keeps_each_measure_with_its_name_as_unit(corpus_dir: Path) -> None:
    profile = _one(corpus_dir / CORPUS / DHAT)
    assert len(profile.metrics) == 6
    values = {m.name: m.value for m in profile.metrics}
    assert values == {
        "Final Blocks": 0.0,
        "Final Bytes": 0.0,
        "Max Blocks": 1.0,
        "Max Bytes": 9.0,
        "Total Blocks": 100.0,
        "Total Bytes": 662.0,
    }
    for metric in profile.metrics:
        assert metric.kind is K.MEASURE
        assert metric.scope == "bench_play_game"
        assert metric.unit == metric.name  # "Max Bytes" in "Max Bytes"
        assert metric.better is Better.LOWER
        assert metric.avg_ns is None and metric.attrs == {}


def test_series_keys_are_unique(corpus_dir: Path) -> None:
    for name in (MIXED, DHAT):
        keys = [m.key for m in _one(corpus_dir / CORPUS / name).metrics]
        assert len(keys) == len(set(keys))


def test_sniff_claims_only_the_bmf_files(corpus_dir: Path, seeds_dir: Path) -> None:
    files = [p for p in corpus_dir.glob("*/*") if p.name != "SOURCES.md"]
    files += list(seeds_dir.iterdir())
    claimed = {p.name for p in files if p.is_file() and bmf.sniff(registry.read_head(p))}
    assert claimed == {MIXED, DHAT}


# --- measures the corpus lacks -----------------------------------------------------------------


def test_latency_throughput_and_other_measures(tmp_path: Path) -> None:
    doc = {
        "parse::small": {
            "latency": {"value": 88.5, "lower_value": 80.0, "upper_value": 97.25},
            "throughput": {"value": 11299.4, "lower_value": 10300.0, "upper_value": 12500.0},
            "file-size": {"value": 4096},
        },
        "parse::large": {"Latency": {"value": 1500.0}},
    }
    path = _write(tmp_path, doc)
    profile = _one(path)
    assert [m.key for m in profile.metrics] == [
        "bench:cpu:parse::small",
        "measure:cpu:parse::small ▸ throughput",
        "measure:cpu:parse::small ▸ file-size",
        "bench:cpu:parse::large",
    ]
    latency = _get(profile, K.BENCH, "parse::small")
    assert (latency.avg_ns, latency.min_ns, latency.max_ns) == (88.5, 80.0, 97.25)
    throughput = _get(profile, K.MEASURE, "throughput", scope="parse::small")
    assert throughput.unit == "1/s"
    assert throughput.better is Better.HIGHER
    assert throughput.value == 11299.4
    assert throughput.attrs == {"lower_value": 10300.0, "upper_value": 12500.0}
    size = _get(profile, K.MEASURE, "file-size", scope="parse::small")
    assert (size.unit, size.better, size.value) == ("file-size", Better.LOWER, 4096.0)
    assert _get(profile, K.BENCH, "parse::large").avg_ns == 1500.0  # measure names any case


def test_null_bounds_are_no_bounds(tmp_path: Path) -> None:
    path = _write(tmp_path, {"b": {"latency": {"value": 5, "lower_value": None}}})
    metric = _get(_one(path), K.BENCH, "b")
    assert (metric.avg_ns, metric.min_ns, metric.max_ns) == (5.0, None, None)


def test_sniff_checks_the_first_entries_of_a_head_cut_short(tmp_path: Path) -> None:
    # 3,000 benchmarks: far more than the 256 KiB sniff head holds.
    doc = {f"bench_{i:05d}": {"latency": {"value": 1000.0 + i}} for i in range(3000)}
    doc |= {f"bench_x{i:05d}": {"latency": {"value": 1.0, "lower_value": 0.5}} for i in range(3000)}
    path = _write(tmp_path, doc)
    assert path.stat().st_size > registry.HEAD_BYTES
    assert registry.detect(path).name == "bmf"
    profile = _one(path)
    assert len(profile.metrics) == 6000
    assert _get(profile, K.BENCH, "bench_02999").avg_ns == 3999.0


@pytest.mark.parametrize(
    "doc",
    [
        {"forward": {"latency": {"unit": "s", "values": [1.0], "mean": 1.0}}},  # optimum-benchmark
        {"b": {"latency": {"value": "fast"}}},  # not a number
        {"b": {"latency": {"value": 1, "unit": "ns"}}},  # keys BMF does not have
        {"b": {"latency": 3}},  # a measure that is no object
        {"config": {"latency": {"value": 1}}},  # another format's marker key
        {"b": {}},
        {},
        [{"name": "x", "unit": "ns", "value": 1}],
    ],
)
def test_sniff_refuses_look_alikes(tmp_path: Path, doc: object) -> None:
    assert not bmf.sniff(registry.read_head(_write(tmp_path, doc)))


# --- bad input ---------------------------------------------------------------------------------


def test_truncated_json_names_the_line(tmp_path: Path, corpus_dir: Path) -> None:
    text = (corpus_dir / CORPUS / MIXED).read_text()
    path = tmp_path / "cut.json"
    path.write_text(text[:200])
    with pytest.raises(ParseError, match=r"invalid JSON") as info:
        registry.parse_file(path, format="bmf")
    assert info.value.line is not None and info.value.line > 1
    assert str(path) in str(info.value)


def test_non_numeric_value_names_benchmark_and_measure(tmp_path: Path) -> None:
    path = _write(
        tmp_path, {"ok": {"latency": {"value": 1}}, "bad": {"latency": {"value": "12ms"}}}
    )
    with pytest.raises(ParseError) as info:
        registry.parse_file(path, format="bmf")
    message = str(info.value)
    assert "benchmark 'bad', measure 'latency'" in message
    assert "'value' must be a finite number" in message and '"12ms"' in message


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"b": {"latency": {"lower_value": 1}}}, "'value' must be a finite number; it is missing"),
        ({"b": {"latency": {"value": 1, "upper_value": True}}}, "'upper_value' must be"),
        ({"b": {"latency": {"value": -3}}}, "a latency cannot be negative"),
        ({"b": [1, 2]}, "benchmark 'b': expected an object of measures, got an array"),
        ({"b": {"size": "big"}}, "measure 'size': expected an object"),
        ([1, 2], "expected a JSON object of benchmarks"),
        ({}, "got an empty object"),
        ({" ": {"latency": {"value": 1}}}, "empty name"),
        (
            {"b": {"latency": {"value": 1}, "Latency": {"value": 2}}},
            "benchmark 'b': measures 'latency' and 'Latency' are the same measure",
        ),
    ],
)
def test_shapes_it_cannot_read(tmp_path: Path, doc: object, expected: str) -> None:
    with pytest.raises(ParseError, match="bmf") as info:
        registry.parse_file(_write(tmp_path, doc), format="bmf")
    assert expected in str(info.value)


def test_a_benchmark_without_measures_is_a_warning(tmp_path: Path) -> None:
    path = _write(tmp_path, {"a": {"latency": {"value": 2}}, "empty": {}})
    [profile] = registry.parse_file(path, format="bmf")  # the sniff wants measures everywhere
    assert profile.warnings == ["benchmark 'empty' has no measures"]
    assert [m.name for m in profile.metrics] == ["a"]
