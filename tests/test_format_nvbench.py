"""NVBench output (issue 33): its JSON (``--json``) and its markdown (console, ``--md``).

Real NVBench output (``tests/data/nvbench/README.md``): a subset of the states of
``nvbench.example.axes`` run on a Quadro GV100 and a Quadro GP100 (NVBench's own
``test_cmp.json``), that subset rendered as markdown by NVBench's own
``nvbench_json_summary.py``, and the console output of ``nvbench.example.throughput`` that
NVBench's README shows (an older column set: ``GiB/s``, ``BWPeak``, ``Batch``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfci.core.errors import ParseError
from perfci.core.model import Better, Device, Metric, MetricKind, Profile
from perfci.formats import registry

K = MetricKind
DATA = Path(__file__).parent / "data" / "nvbench"
JSON_FILE = DATA / "nvbench_axes_gv100_gp100.json"
MD_FILE = DATA / "nvbench_axes_gv100_gp100.md"
README_FILE = DATA / "nvbench_throughput_readme.md"
GRID = "copy_sweep_grid_shape [BlockSize=2^8 NumBlocks=2^6]"


def _get(profile: Profile, kind: MetricKind, name: str, scope: str | None = None) -> Metric:
    found = profile.find(kind, name, scope=scope)
    assert found is not None, f"no {kind.value} {name!r} ({scope}) in {profile.label}"
    return found


@pytest.fixture(scope="module")
def from_json() -> list[Profile]:
    assert registry.detect(JSON_FILE).name == "nvbench_json"
    return registry.parse_file(JSON_FILE)


def test_json_one_profile_per_device_and_a_case_per_state(from_json: list[Profile]) -> None:
    gv100, gp100 = from_json
    assert (gv100.label, gp100.label) == ("[0] Quadro GV100", "[1] Quadro GP100")
    assert gv100.metadata["device"]["sm_version"] == 700
    assert gp100.metadata["device"]["number_of_sms"] == 56
    assert gv100.metadata["nvbench_version"] == {"json": "1.0.0", "nvbench": "0.1.0"}
    cases = [m.name for m in gv100.by_kind(K.BENCH) if not m.name.endswith("(batch)")]
    assert cases == [
        "simple",
        "single_float64_axis [Duration=0.0001]",
        "copy_sweep_grid_shape [BlockSize=2^6 NumBlocks=2^6]",
        GRID,
        "copy_type_sweep [T=U32]",
        "copy_type_conversion_sweep [In=I8 Out=I16]",
    ]
    # Per case: GPU time, batch GPU time, noise; with a byte count also bandwidth and elements.
    assert (len(gv100.metrics), len(gp100.metrics)) == (6 * 3 + 4 * 2, 3 * 3 + 2 * 2)
    assert gv100.warnings == [
        "1 skipped state(s) have no measurement: copy_type_conversion_sweep "
        "[Device=0 In=I8 Out=I8]: Not a conversion: InputType == OutputType."
    ]


def test_json_values_units_and_directions(from_json: list[Profile]) -> None:
    gv100 = from_json[0]
    time = _get(gv100, K.BENCH, GRID)
    # "0.0021665150973768462" s, 672 cold samples.
    assert time.avg_ns == pytest.approx(2_166_515.0973768462)
    assert (time.calls, time.unit, time.better, time.device) == (
        672,
        "ns",
        Better.LOWER,
        Device.GPU,
    )
    assert time.attrs["axes"] == {"BlockSize": "2^8", "NumBlocks": "2^6"}
    assert time.attrs["cpu_time_ns"] == pytest.approx(2_171_740.0, rel=1e-3)
    batch = _get(gv100, K.BENCH, GRID + " (batch)")
    assert (batch.calls, batch.avg_ns) == (673, pytest.approx(2_163_565.506021122))
    noise = _get(gv100, K.COUNTER, "noise", GRID)
    assert (noise.unit, noise.better) == ("%", Better.LOWER)
    assert noise.value == pytest.approx(0.701989634431853)
    bandwidth = _get(gv100, K.MEASURE, "global memory bandwidth", GRID)
    assert (bandwidth.unit, bandwidth.better) == ("bytes/s", Better.HIGHER)
    assert bandwidth.value == pytest.approx(247_803_909_905.83347)
    assert bandwidth.attrs["utilization_pct"] == pytest.approx(28.47, abs=0.01)
    items = _get(gv100, K.MEASURE, "element throughput", GRID)
    assert (items.unit, items.better) == ("elements/s", Better.HIGHER)
    assert items.value == pytest.approx(30_975_488_738.229183)
    # The benchmark's own columns (an element count, buffer sizes) stay in attrs.
    conversion = _get(gv100, K.BENCH, "copy_type_conversion_sweep [In=I8 Out=I16]")
    assert conversion.attrs["columns"] == {
        "Items": 67_108_864,
        "InSize": 67_108_864,
        "OutSize": 134_217_728,
    }
    # No axes: the benchmark's name alone.
    assert _get(from_json[1], K.BENCH, "simple").avg_ns == pytest.approx(1_002_792.9121602258)


def test_markdown_gives_the_json_series_to_its_rounding(from_json: list[Profile]) -> None:
    assert registry.detect(MD_FILE).name == "nvbench_md"
    from_md = registry.parse_file(MD_FILE)
    assert [p.label for p in from_md] == [p.label for p in from_json]
    for md, js in zip(from_md, from_json, strict=True):
        assert md.warnings == []
        by_key = {m.key: m for m in js.metrics}
        for metric in md.metrics:
            # Without a log, the element count column before Samples reads as an axis.
            key = metric.key.replace(" Items=67108864", "")
            twin = by_key.pop(key)
            got, want = (
                (metric.avg_ns, twin.avg_ns) if metric.is_time else (metric.value, twin.value)
            )
            assert got == pytest.approx(want, rel=5e-3, abs=0.01), key
            assert (metric.unit, metric.better, metric.calls) == (
                twin.unit,
                twin.better,
                twin.calls,
            )
        assert by_key == {}
    row = _get(from_md[0], K.BENCH, GRID)
    assert (row.avg_ns, row.calls) == (2.167e6, 672)  # "2.167 ms", "672x"
    sizes = _get(from_md[0], K.BENCH, "copy_type_conversion_sweep [In=I8 Out=I16 Items=67108864]")
    assert sizes.attrs["columns"] == {"InSize": "64.000 MiB", "OutSize": "128.000 MiB"}


def test_the_log_names_the_axes(tmp_path: Path, from_json: list[Profile]) -> None:
    """With the console's log (``Run:  [k/N] NAME [Device=0 In=I8 Out=I16]``) the axes are
    exactly NVBench's: the element count before Samples is the benchmark's own column."""
    log = (
        "# Log\n\n```\n"
        "Run:  [2/2] copy_type_conversion_sweep [Device=0 In=I8 Out=I16]\n"
        "Pass: Cold: 0.652877ms GPU, 0.658617ms CPU, 0.66s total GPU, 1008x\n"
        "```\n\n"
    )
    path = tmp_path / "console.md"
    path.write_text(log + MD_FILE.read_text())
    assert registry.detect(path).name == "nvbench_md"
    gv100 = registry.parse_file(path)[0]
    assert {m.key for m in gv100.metrics} == {m.key for m in from_json[0].metrics}
    case = _get(gv100, K.BENCH, "copy_type_conversion_sweep [In=I8 Out=I16]")
    assert case.attrs["columns"] == {
        "Items": "67108864",
        "InSize": "64.000 MiB",
        "OutSize": "128.000 MiB",
    }


def test_console_output_with_devices_log_and_the_older_columns() -> None:
    assert registry.detect(README_FILE).name == "nvbench_md"
    [profile] = registry.parse_file(README_FILE)
    assert profile.label == "[0] Quadro GV100"
    assert profile.metadata["device"]["Number of SMs"] == "80"
    # The log names no axis: NumElements and DataSize are the benchmark's own columns.
    time = _get(profile, K.BENCH, "throughput_bench")
    assert (time.avg_ns, time.calls) == (pytest.approx(262_392.0), 27_393)
    assert time.attrs["columns"] == {"NumElements": "16777216", "DataSize": "64.000 MiB"}
    assert time.attrs["cpu_time_ns"] == pytest.approx(267_860.0)
    assert time.attrs["cpu_noise_pct"] == 1.25
    batch = _get(profile, K.BENCH, "throughput_bench (batch)")
    assert (batch.avg_ns, batch.calls) == (pytest.approx(261_963.0), 27_394)
    assert _get(profile, K.COUNTER, "noise", "throughput_bench").value == 1.26
    bandwidth = _get(profile, K.MEASURE, "global memory bandwidth", "throughput_bench")
    assert bandwidth.value == pytest.approx(476.387 * 1024**3)  # GiB/s in this version
    assert bandwidth.attrs["utilization_pct"] == 58.77
    items = _get(profile, K.MEASURE, "element throughput", "throughput_bench")
    assert items.value == pytest.approx(63.940e9)


def test_a_bad_markdown_row_names_its_line(tmp_path: Path) -> None:
    text = MD_FILE.read_text().replace("| 2.167 ms |", "| 2.167 parsecs |")
    path = tmp_path / "bad.md"
    path.write_text(text)
    with pytest.raises(ParseError, match=r"bad\.md:34: cannot read this NVBench row: expected a"):
        registry.parse_file(path)


def test_a_cut_json_file_and_an_old_layout_are_refused(tmp_path: Path) -> None:
    cut = tmp_path / "cut.json"
    cut.write_text(JSON_FILE.read_text()[:20_000])
    with pytest.raises(ParseError, match=r"cut\.json:\d+: invalid JSON"):
        registry.parse_file(cut, format="nvbench_json")
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"benchmarks": [{"name": "b", "states": {"Device=0": {}}}]}))
    with pytest.raises(ParseError, match=r"NVBench JSON before version 1\.0"):
        registry.parse_file(old, format="nvbench_json")


def test_other_json_and_markdown_are_not_nvbench(tmp_path: Path) -> None:
    lookalikes = {
        "google.json": json.dumps({"context": {}, "benchmarks": [{"name": "b", "summaries": []}]}),
        "notes.md": "# Benchmark Results\n\n| Model | Accuracy |\n|---|---|\n| a | 1 |\n",
    }
    for name, text in lookalikes.items():
        path = tmp_path / name
        path.write_text(text)
        head = registry.read_head(path)
        assert not registry.get_format("nvbench_json").sniff(head), name
        assert not registry.get_format("nvbench_md").sniff(head), name
