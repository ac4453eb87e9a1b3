"""github-action-benchmark custom JSON: the action's customSmallerIsBetter fixture, and small
entry lists written here for the directions and units the fixture lacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfci.core.errors import ConfigError, ParseError
from perfci.core.model import Better, Device, Metric, MetricKind, Profile
from perfci.formats import registry
from perfci.formats.bench import action_benchmark

K = MetricKind
CORPUS = "bench_json"
CUSTOM = "github-action-benchmark__customSmallerIsBetter_output.json"
CPU_LOAD = "My Custom Smaller Is Better Benchmark - CPU Load"
MEMORY = "My Custom Smaller Is Better Benchmark - Memory Used"


def _one(path: Path, **options: str) -> Profile:
    [profile] = registry.parse_file(path, options=options)
    return profile


def _get(profile: Profile, kind: MetricKind, name: str) -> Metric:
    metric = profile.find(kind, name)
    assert metric is not None, f"no {kind.value} {name!r}"
    return metric


def _write(tmp_path: Path, doc: object, name: str = "custom.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=4))
    return path


@pytest.fixture()
def custom(corpus_dir: Path) -> Path:
    path = corpus_dir / CORPUS / CUSTOM
    assert registry.detect(path).name == "action_benchmark"
    return path


# --- the corpus --------------------------------------------------------------------------------


def test_fixture_entries_values_units_and_attrs(custom: Path) -> None:
    profile = _one(custom)
    assert profile.format == "action_benchmark"
    assert [m.name for m in profile.metrics] == [CPU_LOAD, MEMORY]
    load = _get(profile, K.MEASURE, CPU_LOAD)
    assert (load.unit, load.value, load.better) == ("Percent", 50.0, Better.LOWER)
    assert load.device is Device.CPU and load.scope is None
    assert load.attrs == {
        "range": "5%",
        "range_pct": 5.0,
        "extra": "My Optional Information for the tooltip",
    }
    memory = _get(profile, K.MEASURE, MEMORY)
    # "Megabytes" read as perfci's MB (units.BYTES_PER_UNIT): 100 * 1024**2 bytes.
    assert (memory.unit, memory.value, memory.better) == ("bytes", 104_857_600.0, Better.LOWER)
    assert memory.attrs == {"source_unit": "Megabytes", "source_value": 100.0}


def test_unknown_direction_is_assumed_lower_with_a_warning_naming_the_flag(custom: Path) -> None:
    profile = _one(custom)
    [warning] = profile.warnings
    assert "direction assumed lower-is-better for 1 entry" in warning
    assert CPU_LOAD in warning and "(Percent)" in warning
    assert "--option better=higher" in warning
    assert MEMORY not in warning  # a size says lower-is-better by itself
    assert profile.metadata == {"better": "by unit"}


@pytest.mark.parametrize("options", [{"better": "lower"}, {"tool": "customSmallerIsBetter"}])
def test_option_lower_confirms_and_silences(custom: Path, options: dict[str, str]) -> None:
    profile = _one(custom, **options)
    assert profile.warnings == []
    assert all(m.better is Better.LOWER for m in profile.metrics)
    assert profile.metadata == {"better": "lower"}


@pytest.mark.parametrize("options", [{"better": "higher"}, {"tool": "CustomBiggerIsBetter"}])
def test_bigger_is_better_by_option(custom: Path, options: dict[str, str]) -> None:
    profile = _one(custom, **options)
    assert all(m.better is Better.HIGHER for m in profile.metrics)
    # The option wins, but a size said otherwise: the profile says so.
    assert profile.warnings == [
        f"{MEMORY!r}: its unit 'Megabytes' reads lower-is-better, kept higher-is-better as the "
        "option says"
    ]


def test_sniff_claims_only_the_custom_file(corpus_dir: Path, seeds_dir: Path) -> None:
    files = [p for p in corpus_dir.glob("*/*") if p.name != "SOURCES.md"]
    files += list(seeds_dir.iterdir())
    head = registry.read_head
    claimed = {p.name for p in files if p.is_file() and action_benchmark.sniff(head(p))}
    assert claimed == {CUSTOM}


# --- units the fixture lacks -------------------------------------------------------------------


def test_direction_and_kind_from_the_unit(tmp_path: Path) -> None:
    entries = [
        {"name": "fib(20)", "unit": "ops/sec", "value": 1234.5, "range": "± 2.3"},
        {"name": "parse", "unit": "ms", "value": 1.25, "range": "+/- 5%", "extra": "n=100"},
        {"name": "sort", "unit": "ns/iter", "value": 811},
        {"name": "jit", "unit": "x faster", "value": 2},
        {"name": "decode", "unit": "tokens/s", "value": 97.5},
        {"name": "binary", "unit": "KB", "value": 1.5},
    ]
    profile = _one(_write(tmp_path, entries))
    assert profile.warnings == []
    assert [m.key for m in profile.metrics] == [
        "measure:cpu:fib(20)",
        "bench:cpu:parse",
        "bench:cpu:sort",
        "measure:cpu:jit",
        "measure:cpu:decode",
        "measure:cpu:binary",
    ]
    fib = _get(profile, K.MEASURE, "fib(20)")
    assert (fib.unit, fib.value, fib.better) == ("ops/sec", 1234.5, Better.HIGHER)
    assert fib.attrs == {"range": "± 2.3", "range_value": 2.3}
    parse = _get(profile, K.BENCH, "parse")
    assert (parse.unit, parse.avg_ns, parse.better) == ("ns", 1_250_000.0, Better.LOWER)
    assert parse.value is None
    assert parse.attrs == {
        "range": "+/- 5%",
        "range_pct": 5.0,
        "extra": "n=100",
        "source_unit": "ms",
    }
    assert _get(profile, K.BENCH, "sort").avg_ns == 811.0
    assert _get(profile, K.MEASURE, "jit").better is Better.HIGHER
    decode = _get(profile, K.MEASURE, "decode")
    assert (decode.unit, decode.value, decode.better) == ("tokens/s", 97.5, Better.HIGHER)
    binary = _get(profile, K.MEASURE, "binary")
    assert (binary.unit, binary.value, binary.better) == ("bytes", 1536.0, Better.LOWER)


@pytest.mark.parametrize(
    ("unit", "kind", "factor", "better"),
    [
        ("seconds", "time", 1_000_000_000, Better.LOWER),
        ("µs", "time", 1_000, Better.LOWER),
        ("ns/op", "time", 1, Better.LOWER),
        ("Milliseconds", "time", 1_000_000, Better.LOWER),
        ("MiB", "size", 1024**2, Better.LOWER),
        ("bytes", "size", 1, Better.LOWER),
        ("req/s", "rate", 1, Better.HIGHER),
        ("MB/s", "rate", 1, Better.HIGHER),
        ("Percent", "other", 1, None),
        ("points", "other", 1, None),
    ],
)
def test_classify(unit: str, kind: str, factor: int, better: Better | None) -> None:
    said = action_benchmark.classify(unit)
    assert (said.kind, said.factor, said.better) == (kind, factor, better)


def test_repeated_names_are_numbered(tmp_path: Path) -> None:
    entries = [
        {"name": "x", "unit": "ms", "value": 1},
        {"name": "x", "unit": "ms", "value": 2},
        {"name": "x (2)", "unit": "ms", "value": 3},
    ]
    profile = _one(_write(tmp_path, entries))
    assert [(m.name, m.avg_ns) for m in profile.metrics] == [
        ("x", 1e6),
        ("x (2)", 2e6),
        ("x (2) (2)", 3e6),
    ]
    assert profile.warnings == [
        "entry name 'x' repeats; this entry is named 'x (2)'",
        "entry name 'x (2)' repeats; this entry is named 'x (2) (2)'",
    ]


def test_extra_that_is_not_text_is_kept_as_json(tmp_path: Path) -> None:
    entries = [{"name": "x", "unit": "ms", "value": 1, "extra": {"b": 2, "a": [1]}}]
    assert _one(_write(tmp_path, entries)).metrics[0].attrs["extra"] == '{"a": [1], "b": 2}'


# --- bad input and options ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"better": "faster"}, "better='faster': expected lower or higher"),
        ({"tool": "pytest"}, "expected customSmallerIsBetter or customBiggerIsBetter"),
        ({"better": "lower", "tool": "customBiggerIsBetter"}, "disagree"),
    ],
)
def test_bad_options(custom: Path, options: dict[str, str], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        _one(custom, **options)


def test_truncated_json_names_the_line(tmp_path: Path, custom: Path) -> None:
    path = tmp_path / "cut.json"
    path.write_text(custom.read_text()[:150])  # cut in line 7, before its "extra" key
    with pytest.raises(ParseError, match="invalid JSON") as info:
        registry.parse_file(path, format="action_benchmark")
    assert info.value.line == 7


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ([{"name": "a", "unit": "ms", "value": "1.5"}], "entry 1 ('a'): 'value' must be a finite"),
        ([{"name": "a", "unit": "ms"}], "'value' must be a finite number; it is missing"),
        ([{"name": "a", "unit": "ms", "value": -1}], "a time cannot be negative"),
        ([{"name": "a", "unit": 3, "value": 1}], "'unit' must be a string"),
        ([{"name": "", "unit": "ms", "value": 1}], "entry 1: 'name' must be a non-empty string"),
        ([{"name": "a", "unit": "ms", "value": 1}, 7], "entry 2: expected an object"),
        ({"name": "a", "unit": "ms", "value": 1}, "expected a JSON array"),
        # Finite as given, infinite once in ns or bytes (found by fuzzing the corpus).
        (
            [{"name": "a", "unit": "ms", "value": 1e305}],
            "entry 1 ('a'): the number 1e+305 is too large once converted (× 1,000,000)",
        ),
        (
            [{"name": "m", "unit": "MB", "value": 1.7976931348623157e308}],
            "entry 1 ('m'): the number 1.7976931348623157e+308 is too large",
        ),
    ],
)
def test_shapes_it_cannot_read(tmp_path: Path, doc: object, expected: str) -> None:
    with pytest.raises(ParseError, match="action_benchmark") as info:
        registry.parse_file(_write(tmp_path, doc), format="action_benchmark")
    assert expected in str(info.value)


@pytest.mark.parametrize(
    "doc",
    [
        [{"name": "aten::mm", "ph": "X", "ts": 1, "dur": 2}],  # a Chrome trace as an array
        [{"name": "a", "unit": "ms", "value": "1"}],
        [{"name": "a", "value": 1}],
        [],
        {"name": "a", "unit": "ms", "value": 1},
    ],
)
def test_sniff_refuses_look_alikes(tmp_path: Path, doc: object) -> None:
    assert not action_benchmark.sniff(registry.read_head(_write(tmp_path, doc)))


def test_an_empty_array_is_a_warning(tmp_path: Path) -> None:
    [profile] = registry.parse_file(_write(tmp_path, []), format="action_benchmark")
    assert profile.metrics == [] and profile.warnings == ["the file holds no entries"]
