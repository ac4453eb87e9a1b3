"""pytest-benchmark JSON: the 2015 saved run (schema 2.5), the github-action-benchmark fixture
(schema 3.2, ``data`` elided), a real 5.3.1 run (tests/data/bench) and small broken files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import shared_path

from perfci.core.errors import ParseError
from perfci.core.model import Better, Device, Metric, MetricKind, Profile
from perfci.formats import registry
from perfci.formats.bench import pytest_benchmark

DATA = Path(__file__).parent / "data" / "bench"
REAL = DATA / "pytest_benchmark_5.3.1.json"
OLD = "pytest-benchmark__test_storage_0030.json"
ACTION = "github-action-benchmark__pytest_output.json"
REL = 1e-12  # float noise of the seconds -> ns product, nothing more


def _corpus(name: str) -> Path:
    return shared_path("corpus", "bench_json", name)


def _one(path: Path) -> Profile:
    assert registry.detect(path).name == "pytest_benchmark"
    [profile] = registry.parse_file(path)
    assert profile.format == "pytest_benchmark"
    return profile


def _bench(profile: Profile, name: str) -> Metric:
    metric = profile.find(MetricKind.BENCH, name)
    assert metric is not None, f"no benchmark {name!r}"
    return metric


def _write(tmp_path: Path, doc: Any, name: str = "bench.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


# --- the 2015 saved run: schema 2.5, no ops / total / data ------------------------------------


def test_old_schema_run_reads_its_one_benchmark_in_ns() -> None:
    profile = _one(_corpus(OLD))
    assert profile.label == "pytest-benchmark"
    assert profile.warnings == []
    [metric] = profile.metrics
    assert metric.kind is MetricKind.BENCH and metric.device is Device.CPU
    assert metric.name == "tests/test_normal.py::test_xfast_parametrized[0]"
    assert metric.unit == "ns" and metric.better is Better.LOWER
    # stats are seconds per iteration: mean 2.61205074138546e-07 s, min 2.1795109087242604e-07 ...
    assert metric.avg_ns == pytest.approx(261.205074138546, rel=REL)
    assert metric.min_ns == pytest.approx(217.95109087242604, rel=REL)
    assert metric.max_ns == pytest.approx(13290.03796500009, rel=REL)
    assert metric.median_ns == pytest.approx(220.16379230260297, rel=REL)
    assert metric.std_ns == pytest.approx(263.9842188231226, rel=REL)
    assert metric.calls == 9710  # rounds
    assert metric.total_ns is None and metric.samples_ns is None  # not in schema 2.5
    assert metric.attrs == {"name": "test_xfast_parametrized[0]", "iterations": 431}


def test_old_schema_run_keeps_machine_and_commit_as_metadata() -> None:
    profile = _one(_corpus(OLD))
    assert profile.metadata["version"] == "2.5.0"
    assert profile.metadata["datetime"] == "2015-08-15T00:04:18.687119+00:00"
    assert profile.metadata["commit_info"] == {
        "id": "5b78858eb718649a31fb93d8dc96ca2cee41a4cd",
        "dirty": True,
    }
    assert profile.metadata["machine_info"]["node"] == "minibox"
    assert profile.metadata["machine_info"]["python_version"] == "2.7.3"


# --- the github-action-benchmark fixture: data elided by a string -----------------------------


def test_action_fixture_reads_both_benchmarks_with_total() -> None:
    profile = _one(_corpus(ACTION))
    assert [m.name for m in profile.metrics] == ["bench.py::test_fib_10", "bench.py::test_fib_20"]
    fib10 = _bench(profile, "bench.py::test_fib_10")
    assert fib10.avg_ns == pytest.approx(24088.68133322941, rel=REL)
    assert fib10.min_ns == pytest.approx(22067.000000181025, rel=REL)
    assert fib10.max_ns == pytest.approx(312599.9999999962, rel=REL)
    assert fib10.median_ns == pytest.approx(22300.000000363696, rel=REL)
    assert fib10.std_ns == pytest.approx(6175.090189861328, rel=REL)
    assert fib10.total_ns == pytest.approx(927968270.9999966, rel=REL)
    assert fib10.calls == 38523
    fib20 = _bench(profile, "bench.py::test_fib_20")
    assert fib20.avg_ns == pytest.approx(2985030.672661863, rel=REL)
    assert fib20.calls == 278
    assert fib20.total_ns == pytest.approx(829838526.9999979, rel=REL)


def test_elided_data_is_not_taken_for_the_samples_and_says_so() -> None:
    # 4 numbers and "... omitted to keep this file small" for 38523 rounds: a mean of 4 rounds
    # would replace the benchmark's mean in comparisons, so the summary stats stand alone.
    profile = _one(_corpus(ACTION))
    assert all(m.samples_ns is None for m in profile.metrics)
    assert len(profile.warnings) == 2
    assert profile.warnings[0].startswith("bench.py::test_fib_10: 1 of 5 entries of 'stats.data'")
    assert "'... omitted to keep this file small'" in profile.warnings[0]
    assert profile.metadata["commit_info"]["branch"] == "pytest"
    assert profile.metadata["version"] == "3.2.2"
    assert profile.metadata["machine_info"]["cpu"]["vendor_id"] == "GenuineIntel"


# --- a real 5.3.1 run: data, group, params, extra_info ----------------------------------------


def test_real_run_reads_per_round_samples() -> None:
    profile = _one(REAL)
    assert profile.warnings == []
    assert len(profile.metrics) == 3
    fib5 = _bench(profile, "test_bench.py::test_fib[5]")
    assert fib5.calls == 5
    assert fib5.samples_ns == pytest.approx(
        [494.2499998605853, 481.2500009165888, 479.2499993300226, 483.7500000576256,
         478.2500013789104],
        rel=REL,
    )  # fmt: skip
    assert fib5.avg_ns == pytest.approx(483.3500003087466, rel=REL)
    assert fib5.total_ns == pytest.approx(2416.7500015437326, rel=REL)
    assert fib5.attrs == {"name": "test_fib[5]", "param": "5", "params": {"n": 5}, "iterations": 20}


def test_real_run_keeps_group_and_extra_info() -> None:
    profile = _one(REAL)
    sort = _bench(profile, "test_bench.py::test_sort")
    assert sort.attrs["group"] == "sorting"
    assert sort.attrs["extra_info"] == {"size": 100}
    assert sort.attrs["iterations"] == 10
    assert profile.metadata["version"] == "5.3.1"
    assert profile.metadata["commit_info"]["project"] == "pb"


# --- synthetic files ---------------------------------------------------------------------------


def _entry(name: str, **stats: Any) -> dict[str, Any]:
    return {"name": name.split("::")[-1], "fullname": name, "group": None, "stats": stats}


def test_data_count_other_than_rounds_is_not_taken(tmp_path: Path) -> None:
    doc = {
        "machine_info": {},
        "benchmarks": [_entry("t.py::test_a", mean=2e-06, rounds=3, data=[1e-06, 3e-06])],
    }
    [profile] = pytest_benchmark.parse(_write(tmp_path, doc), options={})
    [metric] = profile.metrics
    assert metric.samples_ns is None and metric.avg_ns == 2000.0
    assert profile.warnings == [
        "t.py::test_a: 'stats.data' holds 2 times for 3 rounds; the per-round times were left "
        "out, the summary stats are kept"
    ]


def test_name_without_fullname_and_a_duplicate(tmp_path: Path) -> None:
    doc = {
        "commit_info": {"id": "abc"},
        "benchmarks": [
            {"name": "test_x", "stats": {"mean": 1.5, "rounds": 2, "data": [1.0, 2.0]}},
            {"name": "test_x", "stats": {"mean": 9.0, "rounds": 1}},
        ],
    }
    [profile] = pytest_benchmark.parse(_write(tmp_path, doc), options={})
    [metric] = profile.metrics
    assert metric.name == "test_x" and metric.avg_ns == 1.5e9
    assert metric.samples_ns == [1e9, 2e9]
    assert profile.warnings == ["test_x: a second benchmark of this name was left out"]


def test_truncated_file_is_a_parse_error_with_its_line(tmp_path: Path) -> None:
    text = _corpus(ACTION).read_text()
    path = tmp_path / "cut.json"
    path.write_text(text[: len(text) // 2])
    with pytest.raises(ParseError) as caught:
        registry.parse_file(path, format="pytest_benchmark")
    assert caught.value.source == str(path) and caught.value.line is not None
    assert "invalid JSON" in str(caught.value)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([1, 2], "expected a JSON object with a 'benchmarks' array"),
        ({"benchmarks": [3]}, "benchmarks[0] is not an object"),
        ({"benchmarks": [{"stats": {"mean": 1}}]}, "benchmarks[0] has no 'fullname' or 'name'"),
        ({"benchmarks": [{"name": "t"}]}, "benchmark 't' has no 'stats' object"),
        ({"benchmarks": [{"name": "t", "stats": {"mean": "x"}}]}, "'stats.mean' is not a number"),
    ],
)
def test_malformed_documents_name_the_problem(tmp_path: Path, doc: Any, message: str) -> None:
    with pytest.raises(ParseError, match=message.replace("[", r"\[").replace("]", r"\]")):
        pytest_benchmark.parse(_write(tmp_path, doc), options={})


def test_sniff_claims_no_other_corpus_file(corpus_dir: Path) -> None:
    claimed = {
        path.name
        for path in sorted(corpus_dir.glob("*/*"))
        if path.is_file() and pytest_benchmark.sniff(registry.read_head(path))
    }
    assert claimed == {OLD, ACTION}


@pytest.mark.parametrize(
    ("info", "saved", "expected"),
    [
        (
            {
                "id": "9d55ab0434c9088746ae2d134702d782bf088644",
                "time": "2019-11-16T12:10:30+09:00",
                "author_time": "2019-11-16T12:10:30+09:00",
                "dirty": True,
                "project": "github-action-benchmark",
                "branch": "pytest",
            },
            "2019-11-17T02:22:16.817862",
            {
                "commit": "9d55ab0434c9088746ae2d134702d782bf088644",
                "commit_time": "2019-11-16T12:10:30+09:00",
                "branch": "pytest",
                "dirty": True,
                "date": "2019-11-17T02:22:16.817862+00:00",
            },
        ),
        (  # the 2.x schema: id and dirty only; a detached checkout names no branch
            {
                "id": "5b78858eb718649a31fb93d8dc96ca2cee41a4cd",
                "dirty": False,
                "branch": "(detached head)",
            },
            "2015-08-15T00:04:18.687119+00:00",
            {
                "commit": "5b78858eb718649a31fb93d8dc96ca2cee41a4cd",
                "dirty": False,
                "date": "2015-08-15T00:04:18.687119+00:00",
            },
        ),
        ({"id": "unversioned", "dirty": False, "branch": "(unknown)"}, None, {}),
    ],
)
def test_the_commit_a_saved_run_measured(
    tmp_path: Path, info: dict[str, Any], saved: str | None, expected: dict[str, Any]
) -> None:
    """``commit_info`` (pytest-benchmark's ``get_commit_info``) as the keys every format uses
    to say which commit a run measured (``perfci import-history`` reads them)."""
    bench = {"name": "test_a", "fullname": "t.py::test_a", "stats": {"mean": 0.5, "rounds": 3}}
    doc: dict[str, Any] = {"machine_info": {}, "commit_info": info, "benchmarks": [bench]}
    if saved:
        doc["datetime"] = saved
    path = tmp_path / "0001_run.json"
    path.write_text(json.dumps(doc))
    [profile] = registry.parse_file(path)
    keys = ("commit", "commit_time", "branch", "dirty", "date")
    assert {k: profile.metadata[k] for k in keys if k in profile.metadata} == expected
    assert profile.metadata["commit_info"] == info  # the source's own block, kept as it is
