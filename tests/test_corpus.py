"""Every real file in ../shared/corpus for the formats of issue 2 is detected and parsed.

Detection is from content only (``registry.detect``, no ``--format``): the test asserts the
detected format is the one expected for the folder, that parsing succeeds, and that the
metrics include the kinds that folder's tool produces. One test case per file, so a failure
names the file. Skips when ../shared is absent.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import SHARED

from perfci.core.errors import UnknownFormatError
from perfci.core.model import MetricKind
from perfci.formats import registry

K = MetricKind


@dataclass(frozen=True)
class Expected:
    """What a folder's files must give: the format, kinds of which at least one must appear
    (``any_of``), and kinds that must all appear (``all_of``)."""

    format: str
    any_of: frozenset[MetricKind] = frozenset()
    all_of: frozenset[MetricKind] = frozenset()


EXPECTED: dict[str, Expected] = {
    "pytorch_table": Expected("pytorch_table", any_of=frozenset({K.OP})),
    "nvprof": Expected("nvprof", any_of=frozenset({K.KERNEL, K.API})),
    "nsys_stats": Expected("nsys_stats", any_of=frozenset({K.KERNEL, K.API})),
    "nsys_stats_csv": Expected("nsys_stats_csv", any_of=frozenset({K.KERNEL, K.API})),
    # Two of the SQLite exports have no kernel table (nothing ran on the GPU while tracing).
    "nsys_sqlite": Expected(
        "nsys_sqlite", any_of=frozenset({K.KERNEL, K.API, K.RANGE, K.OS, K.MEMORY})
    ),
    # hta cpu_only has no GPU events at all, hence op *or* kernel.
    "kineto_chrome_trace": Expected("chrome_trace", any_of=frozenset({K.OP, K.KERNEL})),
    "astrasim_workload": Expected("workload_table", all_of=frozenset({K.LAYER})),
    # AICB communication CSVs hold only collectives, AIOB files only compute.
    "aicb_simai": Expected("workload_table", any_of=frozenset({K.LAYER, K.COMM})),
    "echo_megatron_trace": Expected("megatron_trace", all_of=frozenset({K.RANGE, K.COMM, K.STEP})),
    # Issue 15: every MLPerf training log has its epochs or blocks and its headline values.
    "mlperf_log": Expected("mlperf_log", all_of=frozenset({K.STEP, K.MEASURE})),
    "ncu_csv": Expected("ncu_csv", all_of=frozenset({K.KERNEL, K.COUNTER})),
    "ncu_text": Expected("ncu_text", all_of=frozenset({K.KERNEL, K.COUNTER})),
    # Several tools' JSON in one folder: each file's own expectation is in BY_FILE.
    "bench_json": Expected(""),
}

#: Expectations of single files, where a folder holds several formats.
BY_FILE: dict[str, Expected] = {
    "bench_json/bencher__report_bmf_mixed.json": Expected("bmf", all_of=frozenset({K.BENCH})),
    "bench_json/bencher__report_dhat.json": Expected("bmf", all_of=frozenset({K.MEASURE})),
    "bench_json/github-action-benchmark__customSmallerIsBetter_output.json": Expected(
        "action_benchmark", all_of=frozenset({K.MEASURE})
    ),
    "bench_json/github-action-benchmark__googlecpp_output.json": Expected(
        "google_benchmark", all_of=frozenset({K.BENCH})
    ),
    "bench_json/github-action-benchmark__pytest_output.json": Expected(
        "pytest_benchmark", all_of=frozenset({K.BENCH})
    ),
    "bench_json/pytest-benchmark__test_storage_0030.json": Expected(
        "pytest_benchmark", all_of=frozenset({K.BENCH})
    ),
    "bench_json/huggingface_optimum-benchmark__benchmark.json": Expected(
        "optimum_benchmark", all_of=frozenset({K.BENCH, K.MEASURE})
    ),
}

# Files that are documentation, not profiler output, named with the reason.
NOT_PROFILES = {
    "SOURCES.md": "provenance table written by whoever collected the corpus",
    # The ASTRA-sim README documents the workload layout in prose; it holds no workload.
    "astra-sim__ASTRA-sim-1.0__README.md": "format documentation without a workload",
    # The compliance checker's verdict on a result file: no :::MLLOG event in it.
    "training_results_v4.0__ASUSTeK__ESC8000A-E12-8xH100-PCIE-80GB__ssd__compliance_result.out": (
        "MLPerf compliance-checker output (INFO - SUCCESS lines), not a log"
    ),
}


def _cases() -> list[Any]:
    root = SHARED / "corpus"
    if not root.is_dir():
        return [pytest.param("", "", id="corpus-absent")]
    cases = []
    for folder in EXPECTED:
        for path in sorted((root / folder).glob("*")):
            if path.is_file() and path.name not in NOT_PROFILES:
                cases.append(pytest.param(folder, path.name, id=f"{folder}/{path.name}"))
    return cases


@pytest.mark.parametrize(("folder", "name"), _cases())
def test_corpus_file(corpus_dir: Path, folder: str, name: str) -> None:
    path = corpus_dir / folder / name
    expected = BY_FILE.get(f"{folder}/{name}", EXPECTED[folder])
    assert expected.format, f"{folder}/{name} has no expectation in BY_FILE"
    assert registry.detect(path).name == expected.format
    profiles = registry.parse_file(path)
    assert profiles, "no profiles"
    kinds = {metric.kind for profile in profiles for metric in profile.metrics}
    assert all(profile.metrics for profile in profiles), "a profile without metrics"
    if expected.any_of:
        assert kinds & expected.any_of, f"got kinds {sorted(kinds)}"
    assert expected.all_of <= kinds, f"got kinds {sorted(kinds)}"


def test_every_expected_folder_exists(corpus_dir: Path) -> None:
    missing = [folder for folder in EXPECTED if not (corpus_dir / folder).is_dir()]
    assert missing == []
    unlisted = [
        path.name
        for path in sorted(corpus_dir.iterdir())
        if path.is_dir() and path.name not in EXPECTED
    ]
    assert unlisted == [], "a corpus folder nobody expects anything of"


def test_excluded_files_really_are_documentation(corpus_dir: Path) -> None:
    """Guard the exclusions: neither excluded file is recognised as any format."""
    readme = corpus_dir / "astrasim_workload" / "astra-sim__ASTRA-sim-1.0__README.md"
    assert "compute times are denoted in cycles" in readme.read_text()
    with pytest.raises(UnknownFormatError):
        registry.detect(readme)
