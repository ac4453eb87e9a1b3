"""Google Benchmark JSON: the github-action-benchmark fixture, real 1.9.5 output with
repetitions, counters, errors and complexity rows (tests/data/bench), and small files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import shared_path

from perfci.core.errors import ParseError
from perfci.core.model import Better, Device, Metric, MetricKind, Profile
from perfci.formats import registry
from perfci.formats.bench import google_benchmark

DATA = Path(__file__).parent / "data" / "bench"
REPETITIONS = DATA / "google_benchmark_repetitions.json"
COMPLEXITY = DATA / "google_benchmark_complexity.json"
FIXTURE = "github-action-benchmark__googlecpp_output.json"
REL = 1e-12  # float noise of the seconds -> ns product, nothing more


def _one(path: Path, **options: str) -> Profile:
    assert registry.detect(path).name == "google_benchmark"
    [profile] = registry.parse_file(path, options=options)
    assert profile.format == "google_benchmark"
    return profile


def _get(profile: Profile, kind: MetricKind, name: str, scope: str | None = None) -> Metric:
    metric = profile.find(kind, name, scope=scope)
    assert metric is not None, f"no {kind.value} {name!r} in scope {scope!r}"
    return metric


def _write(tmp_path: Path, benchmarks: list[dict[str, Any]], **context: Any) -> Path:
    path = tmp_path / "gbench.json"
    path.write_text(json.dumps({"context": context, "benchmarks": benchmarks}))
    return path


def _run(name: str, real: float, cpu: float, unit: str = "ns", **extra: Any) -> dict[str, Any]:
    row = {"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1}
    row.update(threads=1, iterations=100, real_time=real, cpu_time=cpu, time_unit=unit)
    row.update(extra)
    return row


def _aggregate(name: str, aggregate: str, real: float, cpu: float, **extra: Any) -> dict[str, Any]:
    unit = "percentage" if aggregate == "cv" else "time"
    row = _run(f"{name}_{aggregate}", real, cpu, "us", run_type="aggregate", repetitions=3)
    row.update(run_name=name, aggregate_name=aggregate, aggregate_unit=unit, iterations=3)
    row.update(extra)
    return row


# --- the github-action-benchmark fixture ---------------------------------------------------------


def test_fixture_reads_real_and_cpu_time_per_iteration() -> None:
    profile = _one(shared_path("corpus", "bench_json", FIXTURE))
    assert profile.label == "a.out"  # context.executable "./a.out"
    assert profile.warnings == []
    assert [m.name for m in profile.metrics] == ["fib_10", "fib_10 (cpu)", "fib_20", "fib_20 (cpu)"]
    fib10 = _get(profile, MetricKind.BENCH, "fib_10")
    assert fib10.device is Device.CPU and fib10.unit == "ns" and fib10.better is Better.LOWER
    assert fib10.avg_ns == pytest.approx(214.98980114547953, rel=REL)
    assert fib10.calls == 3070566
    assert fib10.samples_ns is None  # one repetition: no samples to speak of
    assert _get(profile, MetricKind.BENCH, "fib_10 (cpu)").avg_ns == pytest.approx(
        213.65507206163295, rel=REL
    )
    fib20 = _get(profile, MetricKind.BENCH, "fib_20")
    assert fib20.avg_ns == pytest.approx(27455.600415007055, rel=REL)
    assert fib20.calls == 23968
    assert _get(profile, MetricKind.BENCH, "fib_20 (cpu)").avg_ns == pytest.approx(
        27364.903204272359, rel=REL
    )


def test_fixture_context_is_metadata() -> None:
    profile = _one(shared_path("corpus", "bench_json", FIXTURE))
    context = profile.metadata["context"]
    assert context["host_name"] == "Corgi.local"
    assert context["num_cpus"] == 4
    assert context["load_avg"] == [1.68408, 1.73779, 2.02783]


# --- real 1.9.5 output: 3 repetitions, aggregates, counters, an erroring benchmark ------------


def test_repetitions_are_the_samples_and_aggregates_stay_apart() -> None:
    profile = _one(REPETITIONS)
    small = _get(profile, MetricKind.BENCH, "sort_list/64")
    assert small.samples_ns == pytest.approx(
        [689.30470741558167, 550.09704284771635, 316.19068026721993], rel=REL
    )
    assert small.calls == 20607  # iterations of each repetition
    assert small.min_ns == pytest.approx(316.19068026721993, rel=REL)
    assert small.max_ns == pytest.approx(689.30470741558167, rel=REL)
    assert small.median_ns == pytest.approx(550.09704284771635, rel=REL)
    # Google Benchmark's own mean and (n - 1) stddev of the same three repetitions:
    assert small.avg_ns == pytest.approx(518.53081017683928, rel=REL)
    assert small.std_ns == pytest.approx(188.54930282950161, rel=1e-9)
    aggregates = small.attrs["aggregates"]
    assert set(aggregates) == {"mean", "median", "stddev", "cv"}
    assert aggregates["cv"] == pytest.approx(0.36362217852628453, rel=REL)  # a fraction
    assert small.attrs["repetitions"] == 3


def test_cpu_time_is_its_own_bench_series() -> None:
    profile = _one(REPETITIONS)
    cpu = _get(profile, MetricKind.BENCH, "sort_list/512 (cpu)")
    assert cpu.samples_ns == pytest.approx(
        [1752.8141403993468, 1785.8926284063803, 1877.8972748963961], rel=REL
    )
    assert cpu.attrs["aggregates"]["mean"] == pytest.approx(1805.5346812340410, rel=REL)


def test_counters_are_measures_scoped_by_their_benchmark() -> None:
    profile = _one(REPETITIONS)
    items = _get(profile, MetricKind.MEASURE, "items_per_second", scope="sort_list/64")
    assert items.unit == "items/s" and items.better is Better.HIGHER
    assert items.samples == pytest.approx(
        [9.3166650124560297e07, 1.1631416062781960e08, 2.0240911489291957e08], rel=REL
    )
    assert items.value == pytest.approx(1.3729664188176647e08, rel=REL)
    assert items.avg_ns is None and items.samples_ns is None
    nbytes = _get(profile, MetricKind.MEASURE, "bytes_per_second", scope="sort_list/512")
    assert nbytes.unit == "bytes/s" and nbytes.better is Better.HIGHER
    swaps = _get(profile, MetricKind.MEASURE, "swaps", scope="sort_list/512")
    assert swaps.unit == "count" and swaps.better is Better.LOWER and swaps.value == 512.0
    kinds = [(m.kind, m.scope) for m in profile.metrics]
    assert len(kinds) == 12  # per benchmark: 2 times, 4 counters


def test_a_counter_the_json_does_not_mark_as_a_rate_takes_the_higher_option() -> None:
    # "rate" is Counter(n, kIsRate) in the program, but the JSON carries no flags.
    assert _get(_one(REPETITIONS), MetricKind.MEASURE, "rate", "sort_list/64").better is (
        Better.LOWER
    )
    told = _one(REPETITIONS, higher="rate, other")
    assert _get(told, MetricKind.MEASURE, "rate", scope="sort_list/64").better is Better.HIGHER


def test_erroring_benchmark_is_left_out_with_its_message() -> None:
    profile = _one(REPETITIONS)
    assert profile.warnings == ["failing: left out, the benchmark reported an error: no input file"]
    assert all(m.name != "failing" and m.scope != "failing" for m in profile.metrics)
    assert profile.label == "bm.py"


def test_complexity_rows_go_to_metadata_and_ms_becomes_ns() -> None:
    profile = _one(COMPLEXITY)
    assert profile.metadata["complexity"] == {
        "scan": {
            "big_o": "N",
            "real_coefficient_ns": pytest.approx(3.5486749870937673, rel=REL),
            "cpu_coefficient_ns": pytest.approx(3.54226887470878, rel=REL),
            "rms": pytest.approx(0.01899946221876098, rel=REL),
        }
    }
    assert _get(profile, MetricKind.BENCH, "scan/2048").avg_ns == pytest.approx(
        7232.556275097756, rel=REL
    )
    threaded = _get(profile, MetricKind.BENCH, "threaded/real_time")  # time_unit "ms"
    assert threaded.avg_ns == pytest.approx(10012.562164632451, rel=REL)
    assert threaded.calls == 1405
    assert len(profile.metrics) == 10  # 5 benchmarks x (real, cpu); nothing for "scan" itself


# --- synthetic files -----------------------------------------------------------------------------


def test_three_repetitions_in_us_with_aggregates(tmp_path: Path) -> None:
    rows = [
        _run("BM_Copy/8", 1.5, 1.25, "us", repetitions=3, repetition_index=i, items_per_second=v)
        for i, v in enumerate((10.0, 20.0, 30.0))
    ]
    rows[2]["real_time"] = 2.5
    rows += [
        _aggregate("BM_Copy/8", "mean", 9.0, 8.0, items_per_second=21.0),
        _aggregate("BM_Copy/8", "median", 1.5, 1.25, items_per_second=20.0),
        _aggregate("BM_Copy/8", "stddev", 0.5, 0.0, items_per_second=10.0),
        _aggregate("BM_Copy/8", "cv", 0.29, 0.0, items_per_second=0.5),
    ]
    [profile] = google_benchmark.parse(_write(tmp_path, rows), options={})
    assert profile.label == "google-benchmark"  # no executable in the context
    real = _get(profile, MetricKind.BENCH, "BM_Copy/8")
    assert real.samples_ns == [1500.0, 1500.0, 2500.0]  # the raw repetitions, never aggregates
    assert real.avg_ns == pytest.approx(5500.0 / 3, rel=REL)
    assert real.calls == 100
    assert real.attrs["aggregates"] == {
        "mean": 9000.0,
        "median": 1500.0,
        "stddev": 500.0,
        "cv": 0.29,
    }
    items = _get(profile, MetricKind.MEASURE, "items_per_second", scope="BM_Copy/8")
    assert items.samples == [10.0, 20.0, 30.0] and items.value == 20.0
    assert items.attrs["aggregates"]["cv"] == 0.5


def test_aggregates_only_fill_mean_median_and_stddev(tmp_path: Path) -> None:
    rows = [
        _aggregate("BM_Hash", "mean", 2.0, 1.0, bytes_per_second=4e9),
        _aggregate("BM_Hash", "median", 1.5, 1.0, bytes_per_second=3e9),
        _aggregate("BM_Hash", "stddev", 0.25, 0.0, bytes_per_second=1e8),
    ]
    [profile] = google_benchmark.parse(
        _write(tmp_path, rows, executable="/b/hash_bench"), options={}
    )
    assert profile.label == "hash_bench"
    real = _get(profile, MetricKind.BENCH, "BM_Hash")
    assert (real.avg_ns, real.median_ns, real.std_ns) == (2000.0, 1500.0, 250.0)
    assert real.samples_ns is None and real.calls is None  # an aggregate's "iterations" is 3 reps
    assert real.attrs["repetitions"] == 3
    nbytes = _get(profile, MetricKind.MEASURE, "bytes_per_second", scope="BM_Hash")
    assert nbytes.value == 4e9 and nbytes.samples is None


def test_old_rows_without_run_type_and_a_partial_failure(tmp_path: Path) -> None:
    old = {"name": "BM_A", "iterations": 10, "real_time": 5, "cpu_time": 4, "time_unit": "s"}
    rows = [
        old,
        dict(old, real_time=7),
        dict(old, name="BM_A_mean", real_time=99, cpu_time=99),
        dict(old, error_occurred=True, error_message="out of memory"),
        {"name": "BM_Render", "real_time": 1, "cpu_time": 1, "time_unit": "ns",
         "iterations": 1, "frames_per_second": 60, "GB/s": 3.5, "label": "fast"},
    ]  # fmt: skip
    [profile] = google_benchmark.parse(_write(tmp_path, rows), options={})
    real = _get(profile, MetricKind.BENCH, "BM_A")
    assert real.samples_ns == [5e9, 7e9]
    assert real.attrs["aggregates"] == {"mean": 99e9}
    assert profile.warnings == [
        "BM_A: 1 of 3 repetitions failed (out of memory); the others are kept"
    ]
    frames = _get(profile, MetricKind.MEASURE, "frames_per_second", "BM_Render")
    assert frames.unit == "frames/s" and frames.better is Better.HIGHER
    gbs = _get(profile, MetricKind.MEASURE, "GB/s", "BM_Render")
    assert gbs.unit == "GB/s" and gbs.better is Better.HIGHER and gbs.value == 3.5
    assert _get(profile, MetricKind.BENCH, "BM_Render").attrs["label"] == "fast"


def test_truncated_file_is_a_parse_error_with_its_line(tmp_path: Path) -> None:
    text = REPETITIONS.read_text()
    path = tmp_path / "cut.json"
    path.write_text(text[: len(text) // 3])
    with pytest.raises(ParseError) as caught:
        registry.parse_file(path)  # detected by its head, then refused by the parser
    assert caught.value.source == str(path) and caught.value.format == "google_benchmark"
    assert caught.value.line is not None and "invalid JSON" in str(caught.value)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([7], r"benchmarks\[0\] is not an object with a 'name'"),
        ([_run("BM_X", 1.0, 1.0, "min")], "benchmark 'BM_X': unknown time_unit 'min'"),
        ([_run("BM_X", 1.0, 1.0, real_time="fast")], "'real_time' is not a number: 'fast'"),
    ],
)
def test_malformed_rows_name_the_problem(tmp_path: Path, rows: list[Any], message: str) -> None:
    with pytest.raises(ParseError, match=message):
        google_benchmark.parse(_write(tmp_path, rows), options={})


def test_not_an_object_with_benchmarks(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"context": {}, "benchmarks": {}}')
    with pytest.raises(ParseError, match="expected a JSON object with a 'benchmarks' array"):
        google_benchmark.parse(path, options={})


def test_sniff_claims_no_other_corpus_file(corpus_dir: Path) -> None:
    claimed = {
        path.name
        for path in sorted(corpus_dir.glob("*/*"))
        if path.is_file() and google_benchmark.sniff(registry.read_head(path))
    }
    assert claimed == {FIXTURE}
