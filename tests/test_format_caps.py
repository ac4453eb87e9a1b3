"""Issue 31: the readers count metrics while they read, and stop at the service's cap.

The cap on metrics per run was checked once every file of an upload was parsed: a 0.47 MB
gzipped Dynamo CSV of 1.7 M model rows took 68 s and 1 GB before its 413. Inside
``formats.caps.parse_limits`` each text reader now counts a metric when it first keeps a name
(and a sample for each further ``samples_ns`` value) and stops with ``InputTooLarge`` at the
first one past the cap: time and memory are bounded by the cap, not by the file.

Checked for every text format on a file of far more names than the cap (refused, naming the
cap and its setting, within a small memory peak), and on a file of its own size (the count is
exact: a cap of its metric count passes, one less is refused).
"""

from __future__ import annotations

import gzip
import tracemalloc
from pathlib import Path

import pytest
from profile_files import FILES

from perfci.core.errors import InputTooLarge, ParseError, UnknownFormatError
from perfci.formats import registry
from perfci.formats.caps import ParseLimits, parse_limits
from perfci.usecases.submit.repeats import parse_repeats

CAP = 1_000
#: Names in the files over the cap: two hundred times the cap.
MANY = 200_000
#: Peak Python memory allowed while refusing such a file (tracemalloc). Parsing it whole
#: takes from 60 MB to over 300 MB (benchmarks/RESULTS.md); a refusal at the cap, a few MB.
PEAK_BYTES = 24 * 1024 * 1024


def _write(tmp_path: Path, name: str, count: int, *, gzipped: bool = False) -> Path:
    text = FILES[name](count)
    path = tmp_path / (f"{name}.txt.gz" if gzipped else f"{name}.txt")
    path.write_bytes(gzip.compress(text.encode(), 1) if gzipped else text.encode())
    return path


def _metrics(path: Path, name: str) -> int:
    return sum(len(profile.metrics) for profile in registry.parse_file(path, format=name))


def test_every_text_format_has_a_file_of_many_names() -> None:
    text_formats = {
        spec.name
        for spec in registry.formats().values()
        if spec.name not in _DOCUMENTS and spec.name != "nsys_sqlite"
    }
    assert text_formats <= set(FILES) | {"ncu_text"}  # ncu_text: ncu_csv's reader (rows)


#: Formats read as one JSON document (bounded by the upload's size caps, not streamed).
_DOCUMENTS = frozenset(
    {
        "vllm_bench",
        "perfci_json",
        "google_benchmark",
        "pytest_benchmark",
        "optimum_benchmark",
        "action_benchmark",
        "action_benchmark_history",
        "torchbench",
        "hf_trainer",
        "bmf",
        "nvbench_json",
    }
)


@pytest.mark.parametrize("name", list(FILES))
def test_a_file_of_its_own_size_is_counted_exactly(tmp_path: Path, name: str) -> None:
    path = _write(tmp_path, name, 40)
    assert registry.detect(path).name == name
    metrics = _metrics(path, name)
    assert metrics >= 40
    with parse_limits(ParseLimits(max_metrics=metrics)):
        assert _metrics(path, name) == metrics
    with parse_limits(ParseLimits(max_metrics=metrics - 1)), pytest.raises(InputTooLarge):
        registry.parse_file(path, format=name)


@pytest.mark.parametrize("name", list(FILES))
def test_a_file_of_many_names_is_refused_at_the_cap(tmp_path: Path, name: str) -> None:
    path = _write(tmp_path, name, MANY, gzipped=name in ("dynamo_csv", "nsys_stats_csv"))
    tracemalloc.start()
    try:
        with parse_limits(ParseLimits(max_metrics=CAP)), pytest.raises(InputTooLarge) as refused:
            registry.parse_file(path, format=name)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    message = str(refused.value)
    assert f"more than {CAP} metrics" in message
    assert "PERFCI_MAX_METRICS" in message
    assert str(path) in message and refused.value.format == name
    assert peak < PEAK_BYTES, f"{name}: {peak / 2**20:.1f} MiB at the peak"


def test_the_caps_count_all_the_files_of_a_run_together(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    paths = [_write(first, "dynamo_csv", 300), _write(second, "dynamo_csv", 300)]
    assert len(parse_repeats(paths, max_metrics=1200)) == 2  # 2 × 300 models × 2 metrics
    with pytest.raises(InputTooLarge, match="more than 1100 metrics"):
        parse_repeats(paths, max_metrics=1100)


def test_samples_count_against_their_own_cap(tmp_path: Path) -> None:
    """One model on many rows: a metric, and a sample per further row (its samples_ns)."""
    path = tmp_path / "runs.csv"
    rows = "".join("cuda,bert,1,1.5,2.0\n" for _ in range(MANY))
    path.write_text("dev,name,batch_size,speedup,abs_latency\n" + rows)
    with parse_limits(ParseLimits(max_samples=CAP)), pytest.raises(InputTooLarge) as refused:
        registry.parse_file(path, format="dynamo_csv")
    assert f"more than {CAP} samples" in str(refused.value)
    assert "PERFCI_MAX_SAMPLES" in str(refused.value)


def test_outside_a_limits_block_nothing_is_counted(tmp_path: Path) -> None:
    path = _write(tmp_path, "dynamo_csv", 2 * CAP)
    assert _metrics(path, "dynamo_csv") == 4 * CAP


def test_no_real_profile_is_refused_at_its_own_counts(shared_dir: Path) -> None:
    """What a reader counts is at most what it gives: each file of ../shared parses under
    caps of its own metric and samples_ns counts (a count over them would refuse uploads
    that the service accepts)."""
    checked = 0
    for path in sorted(p for p in shared_dir.rglob("*") if p.is_file()):
        try:
            name = registry.detect(path).name
            profiles = registry.parse_file(path, format=name)
        except (UnknownFormatError, ParseError):
            continue  # the READMEs
        metrics = [metric for profile in profiles for metric in profile.metrics]
        samples = sum(len(metric.samples_ns or ()) for metric in metrics)
        with parse_limits(ParseLimits(max_metrics=len(metrics), max_samples=samples)):
            registry.parse_file(path, format=name)
        checked += 1
    assert checked >= 60
