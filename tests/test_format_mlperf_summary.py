"""MLPerf inference LoadGen's ``mlperf_log_summary.txt``, written here in the layout LoadGen
prints (as public READMEs quote it: an Offline and a SingleStream run, an INVALID one); no
LoadGen summary is in ../shared/corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfci.core.errors import ParseError
from perfci.core.model import TIME_UNIT, Better, Metric, MetricKind, Profile
from perfci.formats import registry

K = MetricKind
RULE = "=" * 48


def _summary(result: list[str], stats: list[str], *, valid: str = "VALID") -> list[str]:
    return [
        RULE,
        "MLPerf Results Summary",
        RULE,
        "SUT name : PySUT",
        *result,
        f"Result is : {valid}",
        "  Min duration satisfied : Yes" if valid == "VALID" else "  Min duration satisfied : NO",
        "  Min queries satisfied : Yes",
        "  Early stopping satisfied: Yes",
        "",
        RULE,
        "Additional Stats",
        RULE,
        *stats,
        "",
        RULE,
        "Test Parameters Used",
        RULE,
        "samples_per_query : 550",
        "target_qps : 50",
        "target_latency (ns): 0",
        "min_duration (ms): 600000",
        "",
        "No warnings encountered during test.",
        "",
        "No errors encountered during test.",
    ]


OFFLINE = _summary(
    ["Scenario : Offline", "Mode     : PerformanceOnly", "Samples per second: 33.6903"],
    [
        "Min latency (ns)                : 16325180169",
        "Max latency (ns)                : 16325180169",
        "Mean latency (ns)               : 16325180169",
        "50.00 percentile latency (ns)   : 16325180169",
        "90.00 percentile latency (ns)   : 16325180169",
        "99.90 percentile latency (ns)   : 16325180169",
    ],
)
SINGLE = _summary(
    [
        "Scenario : Single Stream",
        "Mode     : Performance",
        "90th percentile latency (ns) : 141426994",
    ],
    [
        "QPS w/ loadgen overhead         : 7.72",
        "QPS w/o loadgen overhead        : 7.73",
        "",
        "Min latency (ns)                : 121304127",
        "50.00 percentile latency (ns)   : 124973763",
        "90.00 percentile latency (ns)   : 141426994",
    ],
)


def _write(tmp_path: Path, lines: list[str], name: str = "mlperf_log_summary.txt") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def _one(path: Path) -> Profile:
    assert registry.detect(path).name == "mlperf_summary"
    [profile] = registry.parse_file(path)
    return profile


def _get(profile: Profile, name: str) -> Metric:
    metric = profile.find(K.MEASURE, name)
    assert metric is not None, f"no measure {name!r}: {[m.name for m in profile.metrics]}"
    return metric


def test_an_offline_summary_gives_its_throughput_and_latencies(tmp_path: Path) -> None:
    profile = _one(_write(tmp_path, ["harness: Test Started", *OFFLINE]))
    assert (profile.label, profile.format) == ("Offline", "mlperf_summary")
    assert profile.metadata["sut"] == "PySUT"
    assert profile.metadata["result"] == "VALID"
    assert profile.metadata["parameters"]["samples_per_query"] == "550"
    rate = _get(profile, "Samples per second")
    assert (rate.value, rate.unit, rate.better) == (33.6903, "1/s", Better.HIGHER)
    p90 = _get(profile, "90.00 percentile latency (ns)")
    assert (p90.avg_ns, p90.unit, p90.better) == (16325180169.0, TIME_UNIT, Better.LOWER)
    # The parameters are settings, not results, though one names a latency.
    assert profile.find(K.MEASURE, "target_latency (ns)") is None
    assert len(profile.metrics) == 7
    assert profile.warnings == []


def test_a_single_stream_summary_gives_its_headline_percentile_and_qps(tmp_path: Path) -> None:
    profile = _one(_write(tmp_path, SINGLE))
    assert profile.label == "SingleStream"
    assert _get(profile, "90th percentile latency (ns)").avg_ns == 141426994.0
    qps = _get(profile, "QPS w/o loadgen overhead")
    assert (qps.value, qps.better) == (7.73, Better.HIGHER)
    assert _get(profile, "Min latency (ns)").avg_ns == 121304127.0


def test_an_invalid_run_is_read_with_a_warning_naming_what_was_unmet(tmp_path: Path) -> None:
    profile = _one(_write(tmp_path, _summary(["Samples per second: 1.21305"], [], valid="INVALID")))
    assert _get(profile, "Samples per second").value == 1.21305
    [warning] = profile.warnings
    assert warning.startswith("LoadGen marked this run INVALID (Min duration satisfied: NO)")


def test_summaries_appended_to_one_file_are_a_profile_each(tmp_path: Path) -> None:
    first, second = registry.parse_file(_write(tmp_path, [*OFFLINE, *SINGLE]))
    assert (first.label, second.label) == ("Offline #1", "SingleStream #2")
    assert first.find(K.MEASURE, "90th percentile latency (ns)") is None
    assert _get(second, "90th percentile latency (ns)").avg_ns == 141426994.0


def test_text_without_a_summary_is_an_error_naming_what_was_expected(tmp_path: Path) -> None:
    path = _write(tmp_path, [RULE, "Something else", RULE, "a : 1"])
    with pytest.raises(ParseError, match="no 'MLPerf Results Summary' section") as caught:
        registry.parse_file(path, format="mlperf_summary")
    assert caught.value.format == "mlperf_summary"
