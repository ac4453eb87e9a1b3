"""github-action-benchmark's history file (``data.js`` on gh-pages): written here as the action
writes it (``'window.BENCHMARK_DATA = ' + JSON.stringify(data, null, 2)``, ``src/write.ts``),
with entries in the shape of public ones (pytest, googlecpp, cargo and custom tools)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from perfci.core.errors import ParseError
from perfci.core.model import Better, Device, MetricKind, Profile, SeriesKey
from perfci.formats import registry

K = MetricKind
REPO_URL = "https://github.com/acme/kernels"
PYTEST_SUITE = "Python Benchmark with pytest-benchmark"
TEST_ID = "tests/test_attention.py::test_flash_fwd[fp16-4096]"


def _commit(sha: str, timestamp: str) -> dict[str, Any]:
    return {
        "author": {"email": "dev@example.com", "name": "dev", "username": "dev"},
        "committer": {"email": "noreply@github.com", "name": "GitHub", "username": "web-flow"},
        "distinct": True,
        "id": sha,
        "message": "Merge pull request #17\n\nfaster attention",
        "timestamp": timestamp,
        "tree_id": "ec126c3a57e21d67d030cd4feff2119bf7efde8c",
        "url": f"{REPO_URL}/commit/{sha}",
    }


def _pytest_entry(sha: str, timestamp: str, ops: float) -> dict[str, Any]:
    return {
        "commit": _commit(sha, timestamp),
        "date": 1574693103475,
        "tool": "pytest",
        "benches": [
            {
                "name": TEST_ID,
                "value": ops,
                "unit": "iter/sec",
                "range": "stddev: 0.000013004106618637992",
                "extra": f"mean: {1000 / ops} msec\nrounds: 20",
            }
        ],
    }


def _history(entries: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {"lastUpdate": 1574702465351, "repoUrl": REPO_URL, "entries": entries}


def _write(tmp_path: Path, doc: object, *, script: bool = True, name: str = "data.js") -> Path:
    path = tmp_path / name
    text = json.dumps(doc, indent=2)
    path.write_text(f"window.BENCHMARK_DATA = {text}" if script else text)
    return path


def _parse(path: Path) -> list[Profile]:
    return registry.parse_file(path)


@pytest.fixture()
def pytest_history(tmp_path: Path) -> Path:
    entries = [
        _pytest_entry(
            "559f09efdf61544bb68ba047e3c378e354f5f222", "2019-11-25T22:40:49+08:00", 4000.0
        ),
        _pytest_entry(
            "4d2fae82e239fd650c136d8c0bec01ac27cc1fda", "2019-11-26T01:17:09+08:00", 3200.0
        ),
    ]
    return _write(tmp_path, _history({PYTEST_SUITE: entries}))


def test_each_entry_is_a_profile_of_its_commit(pytest_history: Path) -> None:
    assert registry.detect(pytest_history).name == "action_benchmark_history"
    first, second = _parse(pytest_history)
    assert first.label == f"{PYTEST_SUITE} @ 559f09efdf61"
    assert first.metadata == {
        "suite": PYTEST_SUITE,
        "entry": 1,
        "commit": "559f09efdf61544bb68ba047e3c378e354f5f222",
        "commit_time": "2019-11-25T22:40:49+08:00",
        "date": "2019-11-25T14:45:03.475000+00:00",
        "tool": "pytest",
        "commit_url": f"{REPO_URL}/commit/559f09efdf61544bb68ba047e3c378e354f5f222",
        "repository": REPO_URL,
    }
    assert second.metadata["commit"].startswith("4d2fae82") and second.metadata["entry"] == 2


def test_a_pytest_bench_is_its_mean_time_as_pytest_benchmark_reads_it(
    pytest_history: Path, tmp_path: Path
) -> None:
    first, second = _parse(pytest_history)
    [metric] = first.metrics
    assert (metric.kind, metric.name, metric.device) == (K.BENCH, TEST_ID, Device.CPU)
    # 4000 iter/sec is 1 / 4000 s = 250 µs per iteration; lower is better.
    assert metric.avg_ns == pytest.approx(250_000.0, rel=1e-12)
    assert metric.better is Better.LOWER and metric.unit == "ns"
    assert second.metrics[0].avg_ns == pytest.approx(312_500.0, rel=1e-12)
    assert metric.attrs["extra"].startswith("mean: 0.25 msec")

    # The same test as pytest-benchmark's own JSON is the same series: a history imported
    # from the action lines up with the runs perfci stores afterwards.
    native = tmp_path / "0001_run.json"
    stats = {"min": 2.4e-4, "max": 2.6e-4, "mean": 2.5e-4, "stddev": 1e-6, "rounds": 20}
    stats |= {"median": 2.5e-4, "iterations": 1, "ops": 4000.0, "total": 5e-3}
    benchmark = {"group": None, "name": "test_flash_fwd[fp16-4096]", "fullname": TEST_ID}
    benchmark |= {"params": None, "stats": stats}
    native.write_text(json.dumps({"machine_info": {}, "benchmarks": [benchmark]}))
    [own] = registry.parse_file(native)
    assert own.format == "pytest_benchmark"
    assert SeriesKey.of(own.metrics[0]) == SeriesKey.of(metric)
    assert own.metrics[0].avg_ns == pytest.approx(metric.avg_ns)


def test_units_and_tools_decide_the_direction(tmp_path: Path) -> None:
    def entry(sha: str, tool: str, benches: list[dict[str, Any]]) -> dict[str, Any]:
        return {"commit": _commit(sha, "2024-03-01T10:00:00Z"), "date": 1709287200000}.__or__(
            {"tool": tool, "benches": benches}
        )

    doc = _history(
        {
            "cargo": [
                entry(
                    "a1",
                    "cargo",
                    [{"name": "bench_fib", "value": 135, "unit": "ns/iter", "range": "± 24"}],
                )
            ],
            "cpp": [
                entry(
                    "a2", "googlecpp", [{"name": "BM_Sort/1024", "value": 2.5, "unit": "us/iter"}]
                )
            ],
            "js": [
                entry("a3", "benchmarkjs", [{"name": "fib(20)", "value": 31.6, "unit": "ops/sec"}])
            ],
            "jmh": [entry("a4", "jmh", [{"name": "Bench.thrpt", "value": 9.0, "unit": "ops/s"}])],
            "score": [
                entry(
                    "a5",
                    "customBiggerIsBetter",
                    [{"name": "BLEU", "value": 27.1, "unit": "points"}],
                )
            ],
            "odd": [
                entry("a6", "somethingElse", [{"name": "mystery", "value": 3.0, "unit": "widgets"}])
            ],
        }
    )
    profiles = {p.metadata["suite"]: p for p in _parse(_write(tmp_path, doc))}
    fib = profiles["cargo"].metrics[0]
    assert (fib.kind, fib.avg_ns, fib.better) == (K.BENCH, 135.0, Better.LOWER)
    assert fib.attrs["range_value"] == 24.0
    sort = profiles["cpp"].metrics[0]
    assert (sort.kind, sort.name, sort.avg_ns) == (K.BENCH, "BM_Sort/1024", 2500.0)
    js = profiles["js"].metrics[0]
    assert (js.kind, js.unit, js.value, js.better) == (K.MEASURE, "ops/sec", 31.6, Better.HIGHER)
    # The action's table says lower for jmh; the unit, a rate, says which way is good.
    assert profiles["jmh"].metrics[0].better is Better.HIGHER
    # A custom tool sets the direction of every bench, whatever the unit.
    assert profiles["score"].metrics[0].better is Better.HIGHER
    assert not profiles["score"].warnings
    odd = profiles["odd"]
    assert odd.metrics[0].better is Better.LOWER
    assert odd.warnings == [
        "tool 'somethingElse': direction assumed lower-is-better for 1 bench(es) whose unit "
        "does not say ('mystery')"
    ]


def test_the_external_json_file_is_the_same_history(tmp_path: Path, pytest_history: Path) -> None:
    doc = json.loads(pytest_history.read_text().removeprefix("window.BENCHMARK_DATA = "))
    plain = _write(tmp_path, doc, script=False, name="benchmark-data.json")
    assert registry.detect(plain).name == "action_benchmark_history"
    assert [p.metadata for p in _parse(plain)] == [p.metadata for p in _parse(pytest_history)]


def test_an_entry_without_benches_is_a_warning(tmp_path: Path) -> None:
    empty = {
        "commit": _commit("b1", "2024-01-01T00:00:00Z"),
        "date": 1,
        "tool": "go",
        "benches": [],
    }
    [profile] = _parse(_write(tmp_path, _history({"Go": [empty]})))
    assert profile.metrics == [] and profile.warnings == ["suite 'Go', entry 1 holds no benches"]


def test_a_cut_file_names_the_line(tmp_path: Path, pytest_history: Path) -> None:
    text = pytest_history.read_text()
    cut = tmp_path / "cut.js"
    cut.write_text(text[: text.rindex('"tool": "pytest"')])
    with pytest.raises(ParseError) as caught:
        registry.parse_file(cut)
    message = str(caught.value)
    assert "invalid JSON" in message and "cut.js" in message
    # The line of the file (the prefix shares line 1 with the JSON's "{"): the last whole one.
    assert caught.value.line is not None
    lines = cut.read_text().splitlines()
    assert caught.value.line == len(lines) - 1
    assert lines[caught.value.line - 1].strip() == '"date": 1574693103475,'


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        ({"S": {"commit": {}}}, "suite 'S': expected an array of entries, got an object"),
        ({"S": [[]]}, "suite 'S', entry 1: expected an object {commit, date, tool, benches}"),
        ({"S": [{"commit": {"id": 7}, "benches": []}]}, "suite 'S', entry 1: 'commit' must be"),
        ({"S": [{"commit": {"id": "c"}, "benches": {}}]}, "'benches' must be an array"),
        (
            {"S": [{"commit": {"id": "c", "timestamp": "yesterday"}, "benches": []}]},
            "commit 'timestamp' 'yesterday' is not an ISO 8601 time",
        ),
        (
            {"S": [{"commit": {"id": "c"}, "date": -5, "benches": []}]},
            "'date' must be milliseconds",
        ),
        (
            {
                "S": [
                    {
                        "commit": {"id": "c"},
                        "tool": "go",
                        "benches": [{"name": "x", "unit": "ns/op"}],
                    }
                ]
            },
            "suite 'S', entry 1: bench 1 ('x'): 'value' must be a finite number; it is missing",
        ),
    ],
)
def test_shapes_it_cannot_read_are_named(tmp_path: Path, entries: object, expected: str) -> None:
    path = _write(tmp_path, {"lastUpdate": 1, "repoUrl": REPO_URL, "entries": entries})
    with pytest.raises(ParseError, match=r"data\.js") as caught:
        registry.parse_file(path, format="action_benchmark_history")
    assert expected in str(caught.value)


@pytest.mark.parametrize(
    "text",
    [
        'window.OTHER_DATA = {"entries": {}}',
        '{"entries": {}, "name": "not the action"}',
        '[{"name": "a", "unit": "ms", "value": 1}]',
    ],
)
def test_sniff_refuses_look_alikes(tmp_path: Path, text: str) -> None:
    path = tmp_path / "look.js"
    path.write_text(text)
    head = registry.read_head(path)
    from perfci.formats.bench import action_benchmark_history

    assert not action_benchmark_history.sniff(head)


GO_HISTORY = Path(__file__).parent / "data" / "bench" / "action_benchmark_go_data.js"
AUX = "BenchmarkFib20WithAuxMetric"


def test_go_benches_with_a_reported_metric_are_split_into_one_series_each() -> None:
    """Issue 33: older actions kept ``"ns/op\t 4.000 auxMetricUnits"`` as the unit of a Go
    bench with ``b.ReportMetric``; that became a metric of its own whose unit was the raw
    string, beside the two benches newer actions write for the same line."""
    profiles = registry.parse_file(GO_HISTORY)
    assert registry.detect(GO_HISTORY).name == "action_benchmark_history"
    assert [p.metadata["commit"][:7] for p in profiles] == ["3f1e5c2", "8a2b4c6", "c4d6e8f"]
    for profile in profiles:
        names = [m.name for m in profile.metrics]
        # The same four series in every entry, whichever way the action wrote the line.
        assert names == [
            "BenchmarkFib10",
            "BenchmarkFib20",
            f"{AUX} - ns/op",
            f"{AUX} - auxMetricUnits",
        ], profile.label
        assert all("\t" not in m.unit and "auxMetricUnits " not in m.unit for m in profile.metrics)
        assert not profile.warnings
    old, both, new = profiles
    time = old.find(K.BENCH, f"{AUX} - ns/op")
    assert time is not None and time.avg_ns == 41_130 and time.better is Better.LOWER
    aux = old.find(K.MEASURE, f"{AUX} - auxMetricUnits")
    assert aux is not None and (aux.value, aux.unit) == (4.0, "auxMetricUnits")
    assert aux.attrs["extra"] == "29187 times\n2 procs"
    # Where the entry holds both forms, the split benches are kept and the combined one adds
    # nothing: no series counted twice.
    assert both.find(K.BENCH, f"{AUX} - ns/op").avg_ns == 39_662  # type: ignore[union-attr]
    assert new.find(K.BENCH, f"{AUX} - ns/op").avg_ns == 38_190  # type: ignore[union-attr]
