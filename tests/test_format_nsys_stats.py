"""Nsight Systems ``nsys stats`` console text and ``--format csv`` (FORMATS.md d1, d2; seed 003).

Real files: seed 003 (three ``nsys profile --stats=true`` runs inside a written report) and every
file of ``corpus/nsys_stats`` and ``corpus/nsys_stats_csv``. The eras that no saved sample
shows (2020 titles, 2021 ``Running [...]`` with a wrapped header and European digit grouping,
2022 ``Processing [...]`` + ``GridXYZ``, ``--timeunit us``, space-grouped numbers) are built
by ``_table`` the way the nsys formatter lays tables out: right-aligned cells, dash columns as
wide as the widest cell, the name column left-aligned.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from conftest import seed

from perfci.core.errors import ParseError
from perfci.core.model import Device, Metric, MetricKind, Profile
from perfci.formats import registry
from perfci.formats.nsys import nsys_stats, nsys_stats_csv

K = MetricKind
H2D = "[CUDA memcpy Host-to-Device]"
D2H = "[CUDA memcpy Device-to-Host]"
D2D = "[CUDA memcpy Device-to-Device]"
MODERN = [
    "Time (%)",
    "Total Time (ns)",
    "Num Calls",
    "Avg (ns)",
    "Med (ns)",
    "Min (ns)",
    "Max (ns)",
    "StdDev (ns)",
    "Name",
]


def _get(profile: Profile, kind: MetricKind, name: str) -> Metric:
    metric = profile.find(kind, name)
    assert metric is not None, f"{profile.label}: no {kind.value} metric {name!r}"
    return metric


def _times(metric: Metric) -> tuple[object, ...]:
    return (
        metric.calls,
        metric.total_ns,
        metric.avg_ns,
        metric.median_ns,
        metric.min_ns,
        metric.max_ns,
        metric.std_ns,
    )


def _table(titles: list[str], rows: list[list[str]]) -> str:
    """A table as the nsys ``column`` formatter prints it."""
    widths = [max(len(t), *(len(r[i]) for r in rows)) for i, t in enumerate(titles)]
    last = len(titles) - 1

    def cell(text: str, i: int) -> str:
        return text.ljust(widths[i]) if i == last else text.rjust(widths[i])

    header = "  ".join(t.center(widths[i]) for i, t in enumerate(titles))
    dashes = "  ".join("-" * w for w in widths)
    body = ["  ".join(cell(c, i) for i, c in enumerate(r)) for r in rows]
    return "\n".join(" " + line for line in [header, dashes, *body]) + "\n\n"


def _write(tmp_path: Path, text: str, name: str = "nsys.txt") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- seed 003: three profiles in a written report ------------------------------------------------


@pytest.fixture(scope="module")
def seed003() -> list[Profile]:
    path = seed("003")
    assert registry.detect(path).name == "nsys_stats"
    return registry.parse_file(path)


LABELS = ["2.7B_ctx512_forward", "2.7B_ctx512_backward", "2.7B_ctx512_train"]
REPORTS = [
    "nvtx_sum",
    "osrt_sum",
    "cuda_api_sum",
    "cuda_gpu_kern_sum",
    "cuda_gpu_mem_time_sum",
    "cuda_gpu_mem_size_sum",
]


def test_seed003_three_labelled_profiles(seed003: list[Profile]) -> None:
    assert [p.label for p in seed003] == LABELS
    for profile, kind in zip(seed003, ("forward", "backward", "train"), strict=True):
        assert profile.format == "nsys_stats"
        assert profile.metadata["profiling"] == {
            "size": "2.7B",
            "context_length": "512",
            "type": kind,
        }
        assert profile.metadata["report_file"] == f"{profile.label}.nsys-rep"
        assert profile.metadata["reports"] == REPORTS
        assert profile.warnings == []
        assert profile.steps == 1


# Rows per report: the tables of each profile, counted in the seed by hand.
ROWS = {
    "2.7B_ctx512_forward": {K.RANGE: 49, K.OS: 28, K.API: 21, K.KERNEL: 24, K.MEMORY: 1},
    "2.7B_ctx512_backward": {K.RANGE: 51, K.OS: 31, K.API: 25, K.KERNEL: 49, K.MEMORY: 3},
    "2.7B_ctx512_train": {K.RANGE: 52, K.OS: 31, K.API: 25, K.KERNEL: 56, K.MEMORY: 3},
}


def test_seed003_every_row_and_nothing_else(seed003: list[Profile]) -> None:
    for profile in seed003:
        counts = {kind: len(profile.by_kind(kind)) for kind in ROWS[profile.label]}
        assert counts == ROWS[profile.label]
        assert [m.name for m in profile.by_kind(K.STEP)] == ["profiled_step"]
        assert {m.kind for m in profile.metrics} == {*ROWS[profile.label], K.STEP}
        # Prose, the line-number gutter and the Chinese summary table give no metric: every
        # metric comes from one of the six reports (the step from its NVTX range).
        for metric in profile.metrics:
            source = metric.attrs.get("report") or metric.attrs.get("reports")
            assert source or metric.attrs.get("from_range") == "profiled_step", metric


# (kind, name) → (calls, total, avg, median, min, max, std) in ns, copied from the seed's rows.
SEED003_VALUES: dict[str, dict[tuple[MetricKind, str], tuple[object, ...]]] = {
    "2.7B_ctx512_forward": {
        (K.KERNEL, "ampere_sgemm_128x64_tn"): (
            900,
            3_008_940_150,
            3_343_266.8,
            1_452_872.0,
            1_437_240,
            7_050_554,
            2_162_776.2,
        ),
        (K.API, "cudaLaunchKernel"): (
            7_329,
            743_243_840,
            101_411.4,
            10_411.0,
            5_751,
            44_795_302,
            1_077_893.2,
        ),
        (K.RANGE, "forward_pass"): (
            1,
            844_640_598,
            844_640_598.0,
            844_640_598.0,
            844_640_598,
            844_640_598,
            0.0,
        ),
        (K.OS, "poll"): (
            118,
            10_727_933_987,
            90_914_694.8,
            100_118_737.0,
            4_048,
            214_439_550,
            31_076_672.9,
        ),
        (K.MEMORY, H2D): (
            292,
            3_548_951_388,
            12_153_943.1,
            6_252_206.0,
            1_888,
            76_263_521,
            16_791_999.3,
        ),
    },
    "2.7B_ctx512_backward": {
        (K.KERNEL, "ampere_sgemm_128x64_tn"): (
            900,
            2_980_566_485,
            3_311_740.5,
            1_448_649.0,
            1_431_800,
            7_050_586,
            2_135_138.7,
        ),
        (K.API, "cudaLaunchKernel"): (
            19_695,
            5_898_486_517,
            299_491.6,
            9_428.0,
            5_310,
            495_334_972,
            3_778_261.6,
        ),
        (K.RANGE, "backward_pass"): (
            1,
            1_734_457_535,
            1_734_457_535.0,
            1_734_457_535.0,
            1_734_457_535,
            1_734_457_535,
            0.0,
        ),
        (K.OS, "poll"): (
            230,
            21_952_963_197,
            95_447_666.1,
            100_118_655.0,
            3_066,
            225_544_678,
            22_928_907.3,
        ),
        (K.MEMORY, H2D): (
            292,
            7_007_930_722,
            23_999_762.7,
            15_852_378.5,
            1_888,
            118_282_014,
            29_602_623.7,
        ),
    },
    "2.7B_ctx512_train": {
        (K.KERNEL, "ampere_sgemm_128x64_tn"): (
            900,
            3_002_482_417,
            3_336_091.6,
            1_453_497.5,
            1_432_568,
            7_054_938,
            2_156_094.1,
        ),
        (K.API, "cudaLaunchKernel"): (
            25_295,
            7_699_062_535,
            304_370.9,
            9_278.0,
            4_599,
            495_402_097,
            3_601_347.1,
        ),
        (K.RANGE, "optimizer_step"): (
            1,
            178_760_308,
            178_760_308.0,
            178_760_308.0,
            178_760_308,
            178_760_308,
            0.0,
        ),
        (K.OS, "poll"): (
            179,
            16_855_550_195,
            94_165_084.9,
            100_119_887.0,
            2_615,
            232_676_522,
            26_328_365.5,
        ),
        (K.MEMORY, H2D): (
            292,
            1_509_378_340,
            5_169_103.9,
            1_929_510.0,
            1_888,
            24_205_822,
            6_308_501.9,
        ),
    },
}


@pytest.mark.parametrize("index", [0, 1, 2], ids=LABELS)
def test_seed003_exact_values(seed003: list[Profile], index: int) -> None:
    profile = seed003[index]
    for (kind, name), expected in SEED003_VALUES[profile.label].items():
        assert _times(_get(profile, kind, name)) == expected, (kind, name)
    kernel = _get(profile, K.KERNEL, "ampere_sgemm_128x64_tn")
    assert kernel.device is Device.GPU
    assert _get(profile, K.API, "cudaLaunchKernel").device is Device.CPU


def test_seed003_memcpy_time_and_size_merged(seed003: list[Profile]) -> None:
    """One metric per operation: times from cuda_gpu_mem_time_sum, bytes from the size report
    (``13,627.402`` decimal MB = 13,627,402,000 B)."""
    forward, backward, train = seed003
    h2d = _get(forward, K.MEMORY, H2D)
    assert h2d.bytes == 13_627_402_000
    assert h2d.attrs["reports"] == ["cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum"]
    assert h2d.attrs["avg_bytes"] == 46_669_000
    assert h2d.attrs["max_bytes"] == 104_858_000
    d2d = _get(backward, K.MEMORY, D2D)
    assert (d2d.calls, d2d.total_ns, d2d.bytes) == (268, 7_517_185, 6_189_235_000)
    memset = _get(train, K.MEMORY, "[CUDA memset]")
    assert (memset.calls, memset.total_ns, memset.bytes) == (260, 555_642, 21_000)


def test_seed003_duplicate_api_names_are_kept_apart(seed003: list[Profile]) -> None:
    """cuda_api_sum lists cudaMemcpyAsync (and five other calls) twice with different numbers:
    both rows stay, the second as ``<name> #2``, none merged or dropped."""
    forward = seed003[0]
    first = _get(forward, K.API, "cudaMemcpyAsync")
    second = _get(forward, K.API, "cudaMemcpyAsync #2")
    assert (first.calls, first.total_ns, first.max_ns) == (292, 3_642_255_174, 77_013_961)
    assert (second.calls, second.total_ns, second.max_ns) == (292, 3_641_878_090, 77_013_541)
    assert "occurrence" not in first.attrs
    assert second.attrs["occurrence"] == 2
    assert second.attrs["base_name"] == "cudaMemcpyAsync"
    doubled = sorted(
        m.attrs["base_name"] for m in forward.by_kind(K.API) if "occurrence" in m.attrs
    )
    assert doubled == [
        "cudaDeviceSynchronize",
        "cudaFree",
        "cudaLaunchKernel",
        "cudaMalloc",
        "cudaMemcpyAsync",
        "cudaStreamSynchronize",
    ]
    # Every row's time is there: the API totals add up to the report's column.
    assert sum(m.total_ns or 0 for m in forward.by_kind(K.API)) == 13_362_592_560


def test_seed003_truncated_kernel_names_stay_distinct(seed003: list[Profile]) -> None:
    backward = seed003[1]
    stem = (
        "void at::native::elementwise_kernel<(int)128, (int)2, void at::native::"
        "gpu_kernel_impl_nocast<at::n…"
    )
    same = [m for m in backward.by_kind(K.KERNEL) if m.attrs.get("base_name", m.name) == stem]
    assert len(same) == 8
    assert all(m.attrs["truncated"] for m in same)
    assert [m.total_ns for m in same[:2]] == [179_205_434, 102_337_256]
    assert len({m.name for m in backward.metrics if m.kind is K.KERNEL}) == 49


def test_seed003_nvtx_ranges_and_step(seed003: list[Profile]) -> None:
    forward = seed003[0]
    warmup = _get(forward, K.RANGE, "warmup")  # printed ":warmup" (default NVTX domain)
    assert warmup.total_ns == 3_509_732_403
    assert warmup.attrs["style"] == "PushPop"
    assert _get(forward, K.RANGE, "rope encoding").calls == 128
    step = _get(forward, K.STEP, "profiled_step")
    assert (step.calls, step.total_ns, step.avg_ns) == (1, 844_667_951, 844_667_951)
    assert _get(seed003[2], K.STEP, "profiled_step").total_ns == 2_758_088_295
    assert seed003[2].find(K.STEP, "optimizer_step") is None  # a phase, not an iteration


# --- corpus: console text -------------------------------------------------------------------------


def _corpus(corpus_dir: Path, folder: str, name: str) -> list[Profile]:
    path = corpus_dir / folder / name
    assert registry.detect(path).name == folder
    return registry.parse_file(path)


def test_corpus_torch_gcn(corpus_dir: Path) -> None:
    [profile] = _corpus(corpus_dir, "nsys_stats", "YKTian__torch_gcn_profile_nsys.txt")
    assert profile.label == "torch_gcn_profile_nsys"
    assert profile.metadata["skipped_reports"] == ["nvtx_sum"]
    assert profile.steps is None
    assert _times(_get(profile, K.OS, "poll")) == (
        28,
        1_602_579_192,
        57_234_971.1,
        78_157_206.5,
        2_730,
        100_161_327,
        45_977_068.9,
    )
    assert _get(profile, K.API, "cudaMemcpyAsync").total_ns == 929_629_185
    assert _get(profile, K.KERNEL, "ampere_sgemm_64x32_sliced1x4_tn").calls == 3
    h2d = _get(profile, K.MEMORY, H2D)
    assert (h2d.calls, h2d.total_ns, h2d.bytes) == (97, 138_432, 846_000)
    assert [len(profile.by_kind(k)) for k in (K.OS, K.API, K.KERNEL, K.MEMORY)] == [29, 12, 19, 3]


def test_corpus_paddle_gcn_after_false_friend(corpus_dir: Path) -> None:
    """The app prints `` ** MAE Tensor(...`` before the tables: not a report title."""
    [profile] = _corpus(corpus_dir, "nsys_stats", "YKTian__paddle_gcn_profile_nsys.txt")
    assert profile.label == "paddle_gcn_profile_nsys"
    assert _get(profile, K.API, "cudaMalloc").total_ns == 1_064_588_721
    kernel = _get(
        profile,
        K.KERNEL,
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align1>(T1::Params)",
    )
    assert (kernel.calls, kernel.total_ns, kernel.std_ns) == (3, 33_245, 381.8)
    assert _get(profile, K.MEMORY, "[CUDA memset]").bytes == 9_000
    assert len(profile.by_kind(K.KERNEL)) == 27


def test_corpus_readme_with_two_fenced_runs(corpus_dir: Path) -> None:
    profiles = _corpus(corpus_dir, "nsys_stats", "YKTian__CodeInstrumentation_README.md")
    assert [p.label for p in profiles] == ["torch_gcn_profile_nsys", "paddle_gcn_profile_nsys"]
    torch, paddle = profiles
    assert _get(torch, K.OS, "pthread_cond_timedwait").total_ns == 1_500_221_586
    assert _get(paddle, K.OS, "usleep").total_ns == 4_009_727_563


def test_corpus_readme_with_five_runs(corpus_dir: Path) -> None:
    profiles = _corpus(corpus_dir, "nsys_stats", "ayush-os_nsight-systems-deep-dive__README.md")
    assert [p.label for p in profiles] == [
        "vector_add_profile_v3",
        "vector_add_profile_v4",
        "vector_add_profile_v5_N50M",
        "vector_add_profile_serial",
        "vector_add_profile_streamed",
    ]
    v3, _, v5, serial, streamed = profiles
    assert _get(v3, K.RANGE, "Profile_Loop").total_ns == 3_481_709
    # Pre-2023 operation names are renamed to the current ones; the printed name is kept.
    d2h = _get(v5, K.MEMORY, D2H)
    assert (d2h.total_ns, d2h.bytes) == (94_886_051, 200_000_000)
    assert d2h.attrs["nsys_name"] == "[CUDA memcpy DtoH]"
    # An unnumbered "iteration" range with 100 instances is the step.
    step = _get(serial, K.STEP, "iteration")
    assert (step.calls, step.total_ns, step.avg_ns) == (100, 4_029_987_269, 40_299_872.7)
    assert serial.steps == 100
    assert _get(streamed, K.API, "cudaHostAlloc").total_ns == 373_652_747
    assert _get(v3, K.OS, "listen").total_ns == 0


# --- corpus: CSV ---------------------------------------------------------------------------------


def test_corpus_csv_kernels(corpus_dir: Path) -> None:
    [profile] = _corpus(
        corpus_dir,
        "nsys_stats_csv",
        "LittleLittleCloud_dotLLM-Optimization__dotLLM-prefill-profiling_block1.csv",
    )
    assert profile.format == "nsys_stats_csv"
    assert len(profile.by_kind(K.KERNEL)) == 15
    assert _times(_get(profile, K.KERNEL, "flash_attention_prefill_f16")) == (
        32,
        99_385_786,
        3_105_805.8,
        3_041_179.0,
        2_987_340,
        3_777_790,
        216_832.4,
    )
    assert profile.warnings == []


def test_corpus_csv_api_with_elided_rows(corpus_dir: Path) -> None:
    [profile] = _corpus(
        corpus_dir,
        "nsys_stats_csv",
        "LittleLittleCloud_dotLLM-Optimization__dotLLM-prefill-profiling_block2.csv",
    )
    assert len(profile.by_kind(K.API)) == 11
    assert _get(profile, K.API, "cuMemcpyHtoD_v2").total_ns == 1_417_580_893
    assert _get(profile, K.API, "cudaLaunchKernel").calls == 224
    assert profile.warnings == ["line 13: rows elided ('...') in the cuda_api_sum block"]


# --- other eras of the console text ---------------------------------------------------------------


def test_2020_titles_without_units_in_columns(tmp_path: Path) -> None:
    old = ["Time(%)", "Total Time", "Calls", "Average", "Minimum", "Maximum", "Name"]
    text = (
        "Generating CUDA API Statistics...\nCUDA API Statistics (nanoseconds)\n\n"
        + _table(
            old,
            [
                ["99.6", "204521358", "3", "68173786.0", "14536", "204483866", "cudaMallocManaged"],
                ["0.4", "706546", "1", "706546.0", "706546", "706546", "cudaDeviceSynchronize"],
            ],
        )
        + "Generating CUDA Memory Operation Statistics...\n"
        "CUDA Memory Operation Statistics (nanoseconds)\n\n"
        + _table(
            ["Time(%)", "Total Time", "Operations", "Average", "Minimum", "Maximum", "Name"],
            [
                [
                    "100.0",
                    "11235014",
                    "236",
                    "47605.1",
                    "3263",
                    "409152",
                    "[CUDA Unified Memory memcpy HtoD]",
                ]
            ],
        )
        + "CUDA Memory Operation Statistics (KiB)\n\n"
        + _table(
            ["Total", "Operations", "Average", "Minimum", "Maximum", "Name"],
            [
                [
                    "8192.000",
                    "236",
                    "34.712",
                    "4.000",
                    "996.000",
                    "[CUDA Unified Memory memcpy HtoD]",
                ]
            ],
        )
    )
    path = _write(tmp_path, text)
    assert registry.detect(path).name == "nsys_stats"
    [profile] = registry.parse_file(path)
    assert profile.label == "nsys"
    malloc = _get(profile, K.API, "cudaMallocManaged")
    assert (malloc.calls, malloc.total_ns, malloc.avg_ns, malloc.max_ns) == (
        3,
        204_521_358,
        68_173_786.0,
        204_483_866,
    )
    assert malloc.median_ns is None  # 2020 had no median column
    memory = _get(profile, K.MEMORY, "[CUDA Unified Memory memcpy Host-to-Device]")
    assert (memory.calls, memory.total_ns, memory.bytes) == (236, 11_235_014, 8192 * 1024)


NSYS_2021 = Path(__file__).parent / "data" / "nsys" / "nsys_stats_2021.txt"


def _check_2021(profile: Profile) -> None:
    """What the 2021 ``--stats=true`` log of ``tests/data/nsys`` holds (issue 33)."""
    counts: dict[MetricKind, int] = {}
    for metric in profile.metrics:
        counts[metric.kind] = counts.get(metric.kind, 0) + 1
    assert counts == {K.API: 9, K.KERNEL: 1, K.MEMORY: 2, K.OS: 7}
    h2d, d2h = _get(profile, K.MEMORY, H2D), _get(profile, K.MEMORY, D2H)
    # Times from the "(by time)" table, sizes (KiB) from the "(by size in KiB)" one, in bytes.
    assert (h2d.calls, h2d.total_ns, h2d.avg_ns, h2d.min_ns, h2d.max_ns) == (
        16,
        130_551_904,
        8_159_494.0,
        8_098_336,
        8_261_024,
    )
    assert h2d.bytes == 1_048_576 * 1024
    assert (h2d.attrs["avg_bytes"], h2d.attrs["max_bytes"]) == (65_536 * 1024, 65_536 * 1024)
    assert (d2h.calls, d2h.total_ns, d2h.bytes) == (8, 63_440_511, 524_288 * 1024)
    # No size is ever a time: the KiB numbers appear in no time field.
    times = {getattr(m, f) for m in profile.metrics for f in ("total_ns", "avg_ns", "min_ns")}
    assert not times & {1_048_576.0, 524_288.0, 65_536.0}
    assert {m.attrs["report"] for m in profile.metrics if m.kind is K.OS} == {"osrt_sum"}
    assert {m.attrs["report"] for m in profile.metrics if m.kind is K.API} == {"cuda_api_sum"}
    poll = _get(profile, K.OS, "poll")
    assert (poll.calls, poll.total_ns, poll.max_ns) == (17, 801_203_337, 100_162_284)


def test_2021_titles_sizes_are_bytes_and_os_rows_their_own_report() -> None:
    """nsys 2021.1-2021.2 titled its tables ``CUDA API Statistics:`` and printed the memory
    sizes in KiB under ``CUDA Memory Operation Statistics (by size in KiB):``, with no unit
    in the columns. That table was read as a second time table (a profile of its own, KiB as
    ns), and the OS runtime rows said ``cuda_api_sum``."""
    assert registry.detect(NSYS_2021).name == "nsys_stats"
    [profile] = registry.parse_file(NSYS_2021)
    assert profile.label == "nsys_stats_2021"
    assert profile.metadata["reports"] == [
        "cudaapisum",
        "gpukernsum",
        "gpumemtimesum",
        "gpumemsizesum",
        "osrtsum",
    ]
    _check_2021(profile)
    assert not profile.warnings


def test_2021_tables_without_their_titles_still_read_sizes_as_sizes(tmp_path: Path) -> None:
    """The same tables pasted without their titles: a memory table with no time column is
    a size table, and an OS call inferred from a ``Num Calls`` table is ``osrt_sum``'s."""
    lines = NSYS_2021.read_text().splitlines(keepends=True)
    path = tmp_path / "nsys_stats_2021.txt"
    path.write_text("".join(line for line in lines if "Statistics" not in line))
    [profile] = registry.parse_file(path, format="nsys_stats")
    _check_2021(profile)


def test_2021_running_lines_wrapped_header_and_european_grouping(tmp_path: Path) -> None:
    titles = [
        "Time(%)",
        "Total Time (ns)",
        "Num Calls",
        "Average",
        "Minimum",
        "Maximum",
        "StdDev",
        "Name",
    ]
    table = _table(
        titles,
        [
            [
                "78,4",
                "123.456.789",
                "10",
                "12.345.678,9",
                "1.000",
                "100.000.000",
                "31.234.567,8",
                "cudaMalloc",
            ],
            ["21,6", "2.176", "1.024", "2,1", "1", "60", "3,0", "cuInit"],
        ],
    )
    header, dashes, *rows = table.splitlines()
    name_at = header.rindex("Name")
    wrapped = [header[:name_at].rstrip(), " " * name_at + "Name", dashes, *rows]
    text = (
        "Using report3.sqlite for SQL queries.\n"
        "Running [/opt/nvidia/nsight-systems/2021.2.1/target-linux-x64/reports/"
        "cudaapisum.py report3.sqlite]... \n\n" + "\n".join(wrapped) + "\n\n"
        "Running [/opt/nvidia/nsight-systems/2021.2.1/target-linux-x64/reports/"
        "gpukernsum.py report3.sqlite]... SKIPPED: report3.sqlite does not contain CUDA "
        "kernel data.\n"
    )
    [profile] = registry.parse_file(_write(tmp_path, text))
    assert profile.label == "report3"
    assert profile.metadata["skipped_reports"] == ["gpukernsum"]
    malloc = _get(profile, K.API, "cudaMalloc")
    assert (malloc.total_ns, malloc.avg_ns, malloc.min_ns, malloc.std_ns) == (
        123_456_789,
        12_345_678.9,
        1_000,
        31_234_567.8,
    )
    init = _get(profile, K.API, "cuInit")
    assert (init.calls, init.total_ns, init.avg_ns) == (1_024, 2_176, 2.1)


def test_2022_processing_lines_grid_block_columns_and_timeunit(tmp_path: Path) -> None:
    titles = [
        "Time (%)",
        "Total Time (us)",
        "Instances",
        "Avg (us)",
        "Med (us)",
        "Min (us)",
        "Max (us)",
        "StdDev (us)",
        "GridXYZ",
        "BlockXYZ",
        "Name",
    ]
    rows = [
        [
            "99.0",
            "1,234.567",
            "10",
            "123.457",
            "123.456",
            "123.000",
            "124.000",
            "0.300",
            "125000    1    1",
            "32    1    1",
            "vectorAdd(float *, float *, int)",
        ],
        [
            "1.0",
            "12.480",
            "2",
            "6.240",
            "6.240",
            "6.000",
            "6.480",
            "0.339",
            "1    1    1",
            "256    1    1",
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(int)",
        ],
    ]
    text = (
        " ** MAE Tensor(shape=[], dtype=float32, place=Place(gpu:0),\n"
        "Processing [report1.sqlite] with [/opt/nvidia/nsight-systems/2022.4.2/"
        "host-linux-x64/reports/gpukernsum.py]... \n\n"
        " ** CUDA GPU Kernel Summary (gpukernsum):\n\n" + _table(titles, rows)
    )
    [profile] = registry.parse_file(_write(tmp_path, text))
    assert profile.label == "report1"
    kernel = _get(profile, K.KERNEL, "vectorAdd(float *, float *, int)")
    assert (kernel.calls, kernel.total_ns, kernel.avg_ns, kernel.std_ns) == (
        10,
        1_234_567,
        123_457,
        300,
    )
    assert kernel.attrs["grid"] == "125000    1    1"
    assert kernel.attrs["block"] == "32    1    1"
    nccl = _get(profile, K.COMM, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(int)")
    assert nccl.total_ns == 12_480
    assert profile.metadata["reports"] == ["gpukernsum"]


@pytest.mark.parametrize(
    ("report", "kind"),
    [
        ("cudaapisum", K.API),
        ("cuda_api_sum", K.API),
        ("osrtsum", K.OS),
        ("osrt_sum", K.OS),
        ("nvtxppsum", K.RANGE),
        ("nvtxsum", K.RANGE),
        ("nvtx_sum", K.RANGE),
        ("gpukernsum", K.KERNEL),
        ("cuda_gpu_kern_sum", K.KERNEL),
        ("gpumemtimesum", K.MEMORY),
        ("cuda_gpu_mem_time_sum", K.MEMORY),
    ],
)
def test_report_names_of_every_era(tmp_path: Path, report: str, kind: MetricKind) -> None:
    text = f"[4/4] Executing '{report}' stats report\n\n" + _table(
        MODERN, [["100.0", "1,000", "2", "500.0", "500.0", "400", "600", "141.4", "thing"]]
    )
    [profile] = registry.parse_file(_write(tmp_path, text))
    assert [(m.kind, m.name, m.total_ns) for m in profile.metrics] == [(kind, "thing", 1_000)]
    assert profile.metadata["reports"] == [report]


def test_unread_report_is_skipped_with_a_warning(tmp_path: Path) -> None:
    text = (
        "[4/5] Executing 'cuda_gpu_trace' stats report\n\n"
        + _table(MODERN, [["100.0", "1,000", "2", "500.0", "500.0", "400", "600", "141.4", "x"]])
        + "[5/5] Executing 'osrt_sum' stats report\n\n"
        + _table(
            MODERN, [["100.0", "7,000", "7", "1,000.0", "1,000.0", "900", "1,100", "50.0", "poll"]]
        )
    )
    [profile] = registry.parse_file(_write(tmp_path, text))
    assert [m.name for m in profile.metrics] == ["poll"]
    assert profile.warnings == [
        "line 3: report 'cuda_gpu_trace' is not read by perfci; its table was skipped"
    ]


@pytest.mark.parametrize("space", [" ", "\u00a0", "\u202f"], ids=["space", "nbsp", "narrow"])
def test_space_grouped_numbers(tmp_path: Path, space: str) -> None:
    def grouped(text: str) -> str:
        return text.replace(",", space)

    rows = [
        [grouped(c) for c in row]
        for row in (
            [
                "90.1",
                "3,509,732,403",
                "1,200",
                "2,924,777.0",
                "2,924,000.5",
                "1,001",
                "9,000,000",
                "12,345.6",
                "cudaMemcpyAsync",
            ],
            [
                "9.9",
                "385,000",
                "35",
                "11,000.0",
                "10,000.0",
                "9,000",
                "20,000",
                "1,000.0",
                "cudaFree",
            ],
        )
    ]
    text = "[5/8] Executing 'cuda_api_sum' stats report\n\n" + _table(MODERN, rows)
    [profile] = registry.parse_file(_write(tmp_path, text))
    memcpy = _get(profile, K.API, "cudaMemcpyAsync")
    assert (memcpy.calls, memcpy.total_ns, memcpy.avg_ns, memcpy.max_ns) == (
        1_200,
        3_509_732_403,
        2_924_777.0,
        9_000_000,
    )
    assert _get(profile, K.API, "cudaFree").total_ns == 385_000


def test_numbered_nvtx_steps_and_repeated_report_splits_profiles(tmp_path: Path) -> None:
    nvtx = [
        "Time (%)",
        "Total Time (ns)",
        "Instances",
        "Avg (ns)",
        "Med (ns)",
        "Min (ns)",
        "Max (ns)",
        "StdDev (ns)",
        "Style",
        "Range",
    ]

    def run(first: str) -> str:
        rows = [
            [
                "60.0",
                first,
                "1",
                first + ".0",
                first + ".0",
                first,
                first,
                "0.0",
                "PushPop",
                ":train_step-0",
            ]
        ]
        rows += [
            [
                "20.0",
                "2000",
                "1",
                "2000.0",
                "2000.0",
                "2000",
                "2000",
                "0.0",
                "PushPop",
                f":train_step-{n}",
            ]
            for n in (1, 2, 10)
        ]
        return "[3/8] Executing 'nvtx_sum' stats report\n\n" + _table(nvtx, rows)

    text = run("9000") + "prompt$ nsys profile --stats=true python train.py\n" + run("8000")
    first, second = registry.parse_file(_write(tmp_path, text, "train.log"))
    assert [first.label, second.label] == ["train#1", "train#2"]
    step = _get(first, K.STEP, "train_step")
    assert step.samples_ns == [9000, 2000, 2000, 2000]  # step 10 after step 2
    assert step.warmup == 1
    assert first.steps == 4
    assert _get(second, K.STEP, "train_step").samples_ns == [8000, 2000, 2000, 2000]
    # Both profiles announced [3/8] only: each says the output looks cut short.
    assert "only steps 1-3 of the 8" in first.warnings[0]


def test_gzip_input(tmp_path: Path) -> None:
    text = "[5/8] Executing 'cuda_api_sum' stats report\n\n" + _table(
        MODERN, [["100.0", "1,000", "2", "500.0", "500.0", "400", "600", "141.4", "cuInit"]]
    )
    path = tmp_path / "stats.txt.gz"
    path.write_bytes(gzip.compress(text.encode()))
    [profile] = registry.parse_file(path)
    assert profile.label == "stats"
    assert _get(profile, K.API, "cuInit").total_ns == 1_000


# --- damaged input --------------------------------------------------------------------------------


def test_file_cut_mid_row_keeps_complete_rows_and_warns(tmp_path: Path) -> None:
    data = seed("003").read_bytes()
    cut = data.index(b"2,007.4") + 3  # inside the train kernel table, mid-row
    path = tmp_path / "cut.txt"
    path.write_bytes(data[:cut])
    profiles = registry.parse_file(path)
    assert [p.label for p in profiles] == LABELS
    train = profiles[2]
    assert len(train.by_kind(K.KERNEL)) == 45  # the rows before the cut one
    assert train.by_kind(K.MEMORY) == []
    assert any("not one of its rows" in w for w in train.warnings)
    assert any("only steps 1-6 of the 8" in w for w in train.warnings)
    assert profiles[0].warnings == []


def test_file_cut_after_a_row_warns(tmp_path: Path) -> None:
    text = "[5/8] Executing 'cuda_api_sum' stats report\n\n" + _table(
        MODERN, [["100.0", "1,000", "2", "500.0", "500.0", "400", "600", "141.4", "cuInit"]]
    )
    [profile] = registry.parse_file(_write(tmp_path, text.rstrip("\n")))
    assert _get(profile, K.API, "cuInit").calls == 2
    assert profile.warnings == [
        "line 5: the file ends in the middle of a line inside the cuda_api_sum table after "
        "1 rows: the output may be cut short",
        "only steps 1-5 of the 8 that nsys announced appear: the output may be cut short",
    ]


def test_bad_number_names_file_line_and_column(tmp_path: Path) -> None:
    rows = [
        ["60.0", "1,000", "2", "500.0", "500.0", "400", "600", "141.4", "cuInit"],
        ["40.0", "1,0x0", "2", "500.0", "500.0", "400", "600", "141.4", "cuFree"],
    ]
    path = _write(
        tmp_path, "[5/8] Executing 'cuda_api_sum' stats report\n\n" + _table(MODERN, rows)
    )
    with pytest.raises(ParseError) as error:
        registry.parse_file(path)
    assert error.value.line == 6
    assert "expected a number in column 'Total Time (ns)', got '1,0x0'" in str(error.value)
    assert str(error.value).startswith(f"{path}:6: cuda_api_sum table:")


def test_no_table_is_a_parse_error(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "Collecting data...\n[3/8] Executing 'nvtx_sum' stats report\n"
        "SKIPPED: x.sqlite does not contain NV Tools Extension (NVTX) data.\n",
    )
    with pytest.raises(ParseError, match="no nsys stats summary table in 3 lines"):
        nsys_stats.parse(path, options={})


# --- CSV ------------------------------------------------------------------------------------------


CSV_TEXT = """\
Generating SQLite file run7.sqlite from run7.nsys-rep
Processing [run7.sqlite] with [/opt/nsys/host-linux-x64/reports/nvtx_sum.py]...
Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Style,Range
75.0,9000,3,3000.0,2000.0,2000,5000,1732.1,PushPop,:profiled_step
25.0,3000,1,3000.0,3000.0,3000,3000,0.0,StartEnd,cuBLAS:cublasCreate_v2

Processing [run7.sqlite] with [/opt/nsys/host-linux-x64/reports/cuda_gpu_kern_sum.py]...
Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name
90.0,9000,3,3000.0,3000.0,2900,3100,100.0,"void gemm<float, 128>(const float *, float *)"
10.0,1000,1,1000.0,1000.0,1000,1000,0.0,ncclDevKernel_AllGather_RING_LL(int)

Processing [run7.sqlite] with [/opt/nsys/host-linux-x64/reports/cuda_gpu_mem_size_sum.py]...
Total (MB),Count,Avg (MB),Med (MB),Min (MB),Max (MB),StdDev (MB),Operation
4.194,1,4.194,4.194,4.194,4.194,0.000,[CUDA memcpy Host-to-Device]

Processing [run7.sqlite] with [/opt/nsys/host-linux-x64/reports/cuda_gpu_mem_time_sum.py]...
Time (%),Total Time (ns),Count,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Operation
100.0,1500,1,1500.0,1500.0,1500,1500,0.0,[CUDA memcpy Host-to-Device]

Processing [run8.sqlite] with [/opt/nsys/host-linux-x64/reports/osrt_sum.py]...
Time (%),Total Time (ns),Num Calls,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name
100.0,7000,7,1000.0,1000.0,1000,1000,0.0,poll
"""


def test_csv_console_blocks(tmp_path: Path) -> None:
    path = _write(tmp_path, CSV_TEXT, "stats.csv")
    assert registry.detect(path).name == "nsys_stats_csv"
    run7, run8 = registry.parse_file(path)
    assert [run7.label, run8.label] == ["run7", "run8"]
    assert run7.metadata["reports"] == [
        "nvtx_sum",
        "cuda_gpu_kern_sum",
        "cuda_gpu_mem_size_sum",
        "cuda_gpu_mem_time_sum",
    ]
    gemm = _get(run7, K.KERNEL, "void gemm<float, 128>(const float *, float *)")
    assert (gemm.calls, gemm.total_ns, gemm.std_ns) == (3, 9_000, 100.0)
    assert _get(run7, K.COMM, "ncclDevKernel_AllGather_RING_LL(int)").total_ns == 1_000
    assert _get(run7, K.RANGE, "cuBLAS:cublasCreate_v2").attrs["style"] == "StartEnd"
    step = _get(run7, K.STEP, "profiled_step")
    assert (step.calls, step.total_ns, step.avg_ns, step.median_ns) == (3, 9_000, 3_000, 2_000)
    assert run7.steps == 3
    # Size before time: still one metric, 4.194 decimal MB.
    [memory] = run7.by_kind(K.MEMORY)
    assert (memory.calls, memory.total_ns, memory.bytes) == (1, 1_500, 4_194_000)
    assert _get(run8, K.OS, "poll").calls == 7


def test_csv_file_per_report_and_inferred_kinds(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "Time (%),Total Time (ns),Num Calls,Avg (ns),Med (ns),Min (ns),"
        "Max (ns),StdDev (ns),Name\n100.0,7000,7,1000.0,1000.0,1000,1000,0.0,poll\n",
        "report1_osrt_sum.csv",
    )
    [profile] = registry.parse_file(path)
    assert profile.label == "report1"
    assert profile.metadata["reports"] == ["osrt_sum"]
    assert _get(profile, K.OS, "poll").total_ns == 7_000
    # Without a report name the same columns are CUDA API or OS runtime by the row's name.
    path = _write(
        tmp_path,
        "Time (%),Total Time (ns),Num Calls,Avg (ns),Med (ns),Min (ns),"
        "Max (ns),StdDev (ns),Name\n60.0,600,1,600.0,600.0,600,600,0.0,cudaFree\n"
        "40.0,400,1,400.0,400.0,400,400,0.0,sem_wait\n",
        "mixed.csv",
    )
    [profile] = registry.parse_file(path)
    assert _get(profile, K.API, "cudaFree").total_ns == 600
    assert _get(profile, K.OS, "sem_wait").total_ns == 400


def test_csv_row_with_wrong_cell_count(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),"
        "Max (ns),StdDev (ns),Name\n90.0,9000,3,3000.0,3000.0,2900,3100,100.0,"
        "void gemm<float, 128>(float *)\n",
        "kern.csv",
    )
    with pytest.raises(ParseError) as error:
        nsys_stats_csv.parse(path, options={})
    assert error.value.line == 2
    assert "expected 9 comma-separated cells as in the header, got 10" in str(error.value)


def test_csv_2021_memory_size_file_is_detected(tmp_path: Path) -> None:
    # 2020/2021 gpumemsizesum: no unit in the titles (KiB), "Operations" counts, "Name".
    path = _write(
        tmp_path,
        '"Total","Operations","Average","Minimum","Maximum","Name"\n'
        '781250.000,2,390625.000,390625.000,390625.000,"[CUDA memcpy HtoD]"\n',
        "report3_gpumemsizesum.csv",
    )
    assert registry.detect(path).name == "nsys_stats_csv"
    [profile] = registry.parse_file(path)
    assert profile.metadata["reports"] == ["gpumemsizesum"]
    [memory] = profile.by_kind(K.MEMORY)
    assert memory.name == H2D
    assert (memory.calls, memory.bytes) == (2, 781_250 * 1024)
    assert memory.attrs["avg_bytes"] == 390_625 * 1024


GPU_SUM = [
    "Time (%)",
    "Total Time (ns)",
    "Instances",
    "Avg (ns)",
    "Med (ns)",
    "Min (ns)",
    "Max (ns)",
    "StdDev (ns)",
    "Category",
    "Operation",
]
KERN_SUM = [*GPU_SUM[:8], "Name"]
MEM_TIME_SUM = [*GPU_SUM[:3], *GPU_SUM[3:8], "Operation"]
GEMM = "void gemm<float, 128>(const float *, float *)"


@pytest.mark.parametrize("combined_first", [False, True])
def test_the_combined_gpu_report_does_not_count_kernels_and_copies_twice(
    tmp_path: Path, combined_first: bool
) -> None:
    """``nsys stats --report cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,cuda_gpu_sum``: the
    combined report lists the same kernels and copies again, by Category."""
    kernels = "[1/3] Executing 'cuda_gpu_kern_sum' stats report\n\n" + _table(
        KERN_SUM,
        [
            ["75.0", "9,000", "3", "3,000.0", "3,000.0", "2,900", "3,100", "100.0", GEMM],
            ["8.3", "1,000", "1", "1,000.0", "1,000.0", "1,000", "1,000", "0.0", GEMM],
        ],
    )
    copies = "[2/3] Executing 'cuda_gpu_mem_time_sum' stats report\n\n" + _table(
        MEM_TIME_SUM,
        [
            [
                "16.7",
                "2,000",
                "2",
                "1,000.0",
                "1,000.0",
                "900",
                "1,100",
                "141.4",
                "[CUDA memcpy Host-to-Device]",
            ]
        ],
    )
    combined = "[3/3] Executing 'cuda_gpu_sum' stats report\n\n" + _table(
        GPU_SUM,
        [
            [
                "75.0",
                "9,000",
                "3",
                "3,000.0",
                "3,000.0",
                "2,900",
                "3,100",
                "100.0",
                "CUDA_KERNEL",
                GEMM,
            ],
            [
                "16.7",
                "2,000",
                "2",
                "1,000.0",
                "1,000.0",
                "900",
                "1,100",
                "141.4",
                "MEMORY_OPER",
                "[CUDA memcpy Host-to-Device]",
            ],
            [
                "8.3",
                "1,000",
                "1",
                "1,000.0",
                "1,000.0",
                "1,000",
                "1,000",
                "0.0",
                "CUDA_KERNEL",
                GEMM,
            ],
        ],
    )
    text = combined + kernels + copies if combined_first else kernels + copies + combined
    [profile] = registry.parse_file(_write(tmp_path, text))
    kernels_read = [(m.name, m.total_ns) for m in profile.by_kind(K.KERNEL)]
    # The kernel report's two rows (one name, two kernels the 100-character cap made equal).
    assert kernels_read == [(GEMM, 9_000), (f"{GEMM} #2", 1_000)]
    [copy] = profile.by_kind(K.MEMORY)
    assert (copy.name, copy.calls, copy.total_ns) == ("[CUDA memcpy Host-to-Device]", 2, 2_000)
    assert any("cuda_gpu_sum" in w and "3 rows" in w for w in profile.warnings)
