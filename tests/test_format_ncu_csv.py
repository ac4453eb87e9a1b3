"""Nsight Compute ``ncu --csv``: the two corpus files (details page, NVTX columns) and small
details / raw pages written here (units row, locales, processes, sections, cut files)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from conftest import shared_path

from perfci.core.errors import ParseError
from perfci.core.model import Better, Metric, MetricKind, Profile
from perfci.formats import registry
from perfci.formats.ncu import ncu_csv

K = MetricKind
CORPUS = "ncu_csv"
TORCH = "YKTian__ncu_metrics_show_torch.csv.txt"
PADDLE = "YKTian__ncu_metrics_show_paddle.csv.txt"
SGEMM = "ampere_sgemm_32x32_sliced1x4_tn"
BN_PADDLE = "void phi::BNForwardInference<float, (common::DataLayout)2>"
BN_TORCH = (
    "void at::native::batch_norm_transform_input_channels_last_kernel<float, float, float, 4>"
)
CUTLASS = (
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align1>"
    "(cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align1::Params)"
)
WARPS = "sm__warps_active.avg.pct_of_peak_sustained_active"
REGS = "launch__registers_per_thread"

# The column set of newer ncu releases (Block/Grid Size, Device, CC, rule columns).
NEW_HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
    '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
    '"Metric Value","Rule Name","Rule Type","Rule Description","Estimated Speedup Type",'
    '"Estimated Speedup"'
)
OLD_HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Kernel Time","Context",'
    '"Stream","Section Name","Metric Name","Metric Unit","Metric Value"'
)


def _row(
    launch: int,
    kernel: str,
    section: str,
    metric: str,
    unit: str,
    value: str,
    *,
    pid: int = 4242,
    process: str = "bench",
    rule: str = "",
) -> str:
    """A row under NEW_HEADER."""
    return (
        f'"{launch}","{pid}","{process}","127.0.0.1","{kernel}","1","7","(256, 1, 1)",'
        f'"(1024, 1, 1)","0","9.0","{section}","{metric}","{unit}","{value}",'
        f'"{rule}","","","",""'
    )


def _old_row(launch: int, kernel: str, metric: str, unit: str, value: str, *, pid: int) -> str:
    """A row under OLD_HEADER (``--metrics``: one section)."""
    return (
        f'"{launch}","{pid}","app","host","{kernel}","2024-Jul-13 19:18:31","1","7",'
        f'"Command line profiler metrics","{metric}","{unit}","{value}"'
    )


def _write(tmp_path: Path, lines: list[str], name: str = "ncu.csv") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def _one(path: Path, **options: str) -> Profile:
    [profile] = registry.parse_file(path, options=options)
    return profile


def _get(profile: Profile, kind: MetricKind, name: str, scope: str | None = None) -> Metric:
    metric = profile.find(kind, name, scope=scope)
    assert metric is not None, f"no {kind.value} {name!r} in scope {scope!r}"
    return metric


def _starting(profile: Profile, prefix: str) -> Metric:
    [metric] = [m for m in profile.by_kind(K.KERNEL) if m.name.startswith(prefix)]
    return metric


# --- the corpus -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def torch_profile() -> Profile:
    path = shared_path("corpus", CORPUS, TORCH)
    assert registry.detect(path).name == "ncu_csv"
    return _one(path)


@pytest.fixture(scope="module")
def paddle_profile() -> Profile:
    path = shared_path("corpus", CORPUS, PADDLE)
    assert registry.detect(path).name == "ncu_csv"
    return _one(path)


def test_torch_file_is_one_process_with_12_kernels_and_14_launches(torch_profile: Profile) -> None:
    assert torch_profile.label == "python3.8"
    assert torch_profile.format == "ncu_csv"
    assert torch_profile.metadata["pid"] == 2211167
    assert torch_profile.metadata["host"] == "127.0.0.1"
    assert torch_profile.metadata["page"] == "details"
    assert torch_profile.metadata["decimal_mark"] == "."
    kernels = torch_profile.by_kind(K.KERNEL)
    # IDs 0..13; 4/10 and 5/11 launch the same kernel twice.
    assert len(kernels) == 12
    assert sum(m.calls or 0 for m in kernels) == 14 == torch_profile.metadata["launches"]
    assert torch_profile.warnings == []


def test_torch_repeated_kernel_has_its_launch_times_in_order(torch_profile: Profile) -> None:
    batch_norm = _starting(torch_profile, BN_TORCH)
    # IDs 5 and 11: gpu__time_duration.sum "6,720" and "5,024" nsecond.
    assert batch_norm.calls == 2
    assert batch_norm.samples_ns == [6720.0, 5024.0]
    assert batch_norm.total_ns == 11744.0
    assert batch_norm.avg_ns == 5872.0
    assert (batch_norm.min_ns, batch_norm.max_ns) == (5024.0, 6720.0)
    assert batch_norm.unit == "ns"
    assert batch_norm.attrs["first_launch"] == 5


def test_torch_sgemm_time_counters_and_launch_attrs(torch_profile: Profile) -> None:
    sgemm = _get(torch_profile, K.KERNEL, SGEMM)
    assert sgemm.calls == 1
    assert sgemm.samples_ns == [16704.0]  # "16,704" nsecond
    assert sgemm.attrs["block"] == 128
    assert sgemm.attrs["grid"] == 120
    assert sgemm.attrs["context"] == 1
    assert sgemm.attrs["stream"] == 7
    assert sgemm.attrs["nvtx"] == ["0:<default domain>:convLayer:none:none"]

    regs = _get(torch_profile, K.COUNTER, REGS, scope=SGEMM)
    assert (regs.value, regs.unit, regs.better) == (86.0, "register/thread", Better.LOWER)
    warps = _get(torch_profile, K.COUNTER, WARPS, scope=SGEMM)
    assert (warps.value, warps.unit, warps.better) == (21.39, "%", Better.HIGHER)
    assert warps.samples == [21.39]
    assert warps.attrs["section"] == "Command line profiler metrics"
    # "32,768" byte/block: a thousands separator, and a size in bytes.
    static = _get(torch_profile, K.COUNTER, "launch__shared_mem_per_block_static", scope=SGEMM)
    assert (static.value, static.unit, static.better) == (32768.0, "bytes", Better.LOWER)
    sm = _get(torch_profile, K.COUNTER, "sm__throughput.avg.pct_of_peak_sustained_elapsed", SGEMM)
    assert (sm.value, sm.better) == (40.54, Better.HIGHER)


def test_torch_counters_leave_out_duration_and_launch_configuration(
    torch_profile: Profile,
) -> None:
    counters = {m.name for m in torch_profile.by_kind(K.COUNTER) if m.scope == SGEMM}
    assert counters == {
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
        REGS,
        "launch__shared_mem_per_block_dynamic",
        "launch__shared_mem_per_block_static",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        WARPS,
    }
    # 12 kernels x 7 counters, each once: the series identity is unique in the profile.
    assert len(torch_profile.by_kind(K.COUNTER)) == 84
    keys = [m.key for m in torch_profile.metrics]
    assert len(keys) == len(set(keys))


def test_paddle_repeated_kernel_counters_hold_each_launch(paddle_profile: Profile) -> None:
    assert paddle_profile.metadata["pid"] == 1965517
    kernels = paddle_profile.by_kind(K.KERNEL)
    assert len(kernels) == 12
    assert sum(m.calls or 0 for m in kernels) == 14
    batch_norm = _starting(paddle_profile, BN_PADDLE)
    assert batch_norm.samples_ns == [21248.0, 4800.0]  # IDs 5 and 11
    assert batch_norm.attrs["grid"] == [468, 20]  # launches differ: both kept, in order
    assert batch_norm.attrs["block"] == 256
    warps = _get(paddle_profile, K.COUNTER, WARPS, scope=batch_norm.name)
    assert warps.samples == [80.42, 16.15]
    assert warps.value == pytest.approx(48.285)
    assert warps.calls == 2
    regs = _get(paddle_profile, K.COUNTER, REGS, scope=batch_norm.name)
    assert regs.samples == [30.0, 30.0]


def test_paddle_cutlass_gemm_values(paddle_profile: Profile) -> None:
    gemm = _get(paddle_profile, K.KERNEL, CUTLASS)
    assert gemm.samples_ns == [13312.0]  # "13,312" nsecond
    dynamic = _get(paddle_profile, K.COUNTER, "launch__shared_mem_per_block_dynamic", CUTLASS)
    assert (dynamic.value, dynamic.unit) == (98304.0, "bytes")  # "98,304" byte/block
    assert _get(paddle_profile, K.COUNTER, REGS, scope=CUTLASS).value == 110.0


def test_sniff_claims_only_the_ncu_csv_corpus(corpus_dir: Path, seeds_dir: Path) -> None:
    files = [p for p in sorted(corpus_dir.glob("*/*")) + sorted(seeds_dir.glob("*"))]
    for path in files:
        if path.name == "SOURCES.md" or not path.is_file():
            continue
        mine = path.parent.name == CORPUS
        assert ncu_csv.sniff(registry.read_head(path)) is mine, path
        if mine:
            assert registry.detect(path).name == "ncu_csv"


# --- details page: layouts ------------------------------------------------------------------


def test_app_output_and_prof_lines_around_the_table(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        [
            "epoch 1 loss 0.25",
            '"quoted" application output, with a comma',
            "==PROF== Connected to process 4242 (/usr/bin/python3)",
            '==PROF== Profiling "k" - 0: 0%....50%....100% - 9 passes',
            "==PROF== Disconnected from process 4242",
            NEW_HEADER,
            _row(
                0,
                "k(float*)",
                "Command line profiler metrics",
                "gpu__time_duration.sum",
                "us",
                "3.5",
            ),
            "==WARNING== Found outstanding GPU clock reset, trying to revert...",
            _row(
                1,
                "k(float*)",
                "Command line profiler metrics",
                "gpu__time_duration.sum",
                "us",
                "4.25",
            ),
            "done.",
        ],
    )
    assert registry.detect(path).name == "ncu_csv"
    profile = _one(path)
    kernel = _get(profile, K.KERNEL, "k(float*)")
    assert kernel.samples_ns == [3500.0, 4250.0]
    assert kernel.attrs["block"] == "(256, 1, 1)"
    assert kernel.attrs["grid"] == "(1024, 1, 1)"
    assert kernel.attrs["device"] == 0
    assert kernel.attrs["cc"] == "9.0"
    assert profile.warnings == [
        "1 line(s) starting with a quote were not CSV rows of a table and were skipped "
        "(first at line 2)"
    ]


def test_sections_units_directions_and_shared_names(tmp_path: Path) -> None:
    sol, mem, occ, launch = (
        "GPU Speed Of Light Throughput",
        "Memory Workload Analysis",
        "Occupancy",
        "Launch Statistics",
    )
    rows = [
        ("DRAM Frequency", sol, "cycle/nsecond", "1.21"),
        ("SM Frequency", sol, "Ghz", "1.41"),
        ("Elapsed Cycles", sol, "cycle", "5,958"),
        ("Memory Throughput", sol, "%", "85.09"),
        ("Duration", sol, "usecond", "12.13"),
        ("Memory Throughput", mem, "Gbyte/second", "1,215.50"),
        ("No Eligible", "Scheduler Statistics", "%", "61.20"),
        ("Achieved Occupancy", occ, "%", "74.94"),
        ("Achieved Active Warps Per SM", occ, "warp", "35.97"),
        ("Block Size", launch, "", "128"),
        ("Function Cache Configuration", launch, "", "CachePreferNone"),
        ("Registers Per Thread", launch, "register/thread", "36"),
        ("Shared Memory Configuration Size", launch, "Kbyte", "32.77"),
        ("Executed Instructions", "Instruction Statistics", "Minst", "2.65"),
    ]
    lines = [NEW_HEADER]
    lines += [_row(0, "k", section, name, unit, value) for name, section, unit, value in rows]
    lines.append(_row(0, "k", launch, "", "", "", rule="LaunchStatistics"))  # a rule's row
    profile = _one(_write(tmp_path, lines))
    kernel = _get(profile, K.KERNEL, "k")
    assert kernel.samples_ns == [12130.0]  # the SOL Duration is the kernel's time
    assert kernel.attrs["block"] == "(256, 1, 1)"  # the column wins over the metric

    def counter(name: str) -> tuple[float | None, str, Better]:
        metric = _get(profile, K.COUNTER, name, scope="k")
        return metric.value, metric.unit, metric.better

    assert counter("DRAM Frequency") == (1.21e9, "Hz", Better.HIGHER)
    assert counter("SM Frequency") == (1.41e9, "Hz", Better.HIGHER)
    assert counter("Elapsed Cycles") == (5958.0, "cycle", Better.LOWER)
    assert counter(f"{sol}: Memory Throughput") == (85.09, "%", Better.HIGHER)
    assert counter(f"{mem}: Memory Throughput") == (1.2155e12, "bytes/s", Better.HIGHER)
    assert counter("No Eligible") == (61.2, "%", Better.LOWER)
    assert counter("Achieved Occupancy") == (74.94, "%", Better.HIGHER)
    assert counter("Achieved Active Warps Per SM") == (35.97, "warp", Better.HIGHER)
    assert counter("Registers Per Thread") == (36.0, "register/thread", Better.LOWER)
    # ncu's Kbyte is 1000 bytes (32 KiB prints as 32.77 Kbyte).
    assert counter("Shared Memory Configuration Size") == (32770.0, "bytes", Better.LOWER)
    assert counter("Executed Instructions") == (2.65e6, "inst", Better.LOWER)
    names = {m.name for m in profile.by_kind(K.COUNTER)}
    assert not names & {"Duration", "Block Size", "Function Cache Configuration", ""}
    assert len(names) == 11


def test_time_units_scale_per_value_and_na_is_left_out(tmp_path: Path) -> None:
    section = "Command line profiler metrics"
    lines = [
        NEW_HEADER,
        _row(0, "saxpy", section, "dram__throughput.avg.pct_of_peak_sustained_elapsed", "", "n/a"),
        _row(0, "saxpy", section, "gpu__time_duration.sum", "usecond", "1,205.00"),
        _row(0, "saxpy", section, "l1tex__t_bytes.sum", "byte", "8,192"),
        _row(1, "saxpy", section, "dram__throughput.avg.pct_of_peak_sustained_elapsed", "", "n/a"),
        _row(1, "saxpy", section, "gpu__time_duration.sum", "msecond", "2.00"),
        _row(1, "saxpy", section, "l1tex__t_bytes.sum", "Mbyte", "1.05"),
        _row(1, "saxpy", section, "gpu__time_duration.avg", "nsecond", "999"),
        _row(2, "saxpy", section, "gpu__time_duration.sum", "second", "0.000003"),
        _row(2, "saxpy", section, "l1tex__t_bytes.sum", "byte", "n/a"),
    ]
    profile = _one(_write(tmp_path, lines))
    saxpy = _get(profile, K.KERNEL, "saxpy")
    assert saxpy.calls == 3
    assert saxpy.samples_ns == [1_205_000.0, 2_000_000.0, 3000.0]
    assert saxpy.total_ns == 3_208_000.0
    assert profile.find(K.COUNTER, "dram__throughput.avg.pct_of_peak_sustained_elapsed") is None
    l1 = _get(profile, K.COUNTER, "l1tex__t_bytes.sum", scope="saxpy")
    assert (l1.samples, l1.unit, l1.calls) == ([8192.0, 1_050_000.0], "bytes", 2)
    avg = _get(profile, K.COUNTER, "gpu__time_duration.avg", scope="saxpy")
    assert (avg.unit, avg.samples_ns, avg.avg_ns, avg.value) == ("ns", [999.0], 999.0, None)


def test_rows_without_the_rule_columns(tmp_path: Path) -> None:
    # Some ncu builds end a row after Metric Value with a bare comma, leaving the five rule
    # columns of the header off; the last line has no line break.
    def row(launch: int, value: str) -> str:
        cells = _row(launch, "k", "SOL", "Duration", "usecond", value).split(',"')[:15]
        return ',"'.join(cells) + ","

    path = tmp_path / "ncu.csv"
    path.write_text("\n".join([NEW_HEADER, row(0, "1.50"), row(1, "2.25")]))
    profile = _one(path)
    assert _get(profile, K.KERNEL, "k").samples_ns == [1500.0, 2250.0]
    assert profile.warnings == []


def test_kernel_without_duration_gets_calls_and_a_warning(tmp_path: Path) -> None:
    section = "Command line profiler metrics"
    lines = [
        NEW_HEADER,
        _row(0, "k", section, "launch__registers_per_thread", "register/thread", "40"),
    ]
    profile = _one(_write(tmp_path, lines))
    kernel = _get(profile, K.KERNEL, "k")
    assert (kernel.calls, kernel.total_ns, kernel.samples_ns) == (1, None, None)
    assert profile.warnings[-1].startswith("1 kernel(s) have no gpu__time_duration.sum")


def test_two_processes_are_two_profiles(tmp_path: Path) -> None:
    duration = "gpu__time_duration.sum"
    lines = [
        "==PROF== Connected to process 100 (/usr/bin/python3)",
        "==PROF== Connected to process 200 (/usr/bin/python3)",
        OLD_HEADER,
        _old_row(0, "gemm", duration, "nsecond", "1,000", pid=100),
        _old_row(1, "gemm", duration, "nsecond", "1,100", pid=100),
        OLD_HEADER,
        _old_row(0, "gemm", duration, "nsecond", "2,000", pid=200),
        _old_row(1, "relu", duration, "nsecond", "300", pid=200),
    ]
    first, second = registry.parse_file(_write(tmp_path, lines))
    assert (first.label, second.label) == ("app", "app #2")
    assert (first.metadata["pid"], second.metadata["pid"]) == (100, 200)
    assert _get(first, K.KERNEL, "gemm").samples_ns == [1000.0, 1100.0]
    assert first.find(K.KERNEL, "relu") is None
    assert _get(second, K.KERNEL, "gemm").samples_ns == [2000.0]
    assert _get(second, K.KERNEL, "relu").samples_ns == [300.0]


def test_nvtx_columns_go_to_the_kernel_attrs(tmp_path: Path) -> None:
    header = (
        '"ID","Process ID","Process Name","Host Name",'
        '"thread Domain:Push/Pop_Range:PL_Type:PL_Value",'
        '"Id:Domain:Start/Stop_Range:PL_Type:PL_Value","Kernel Name","Kernel Time","Context",'
        '"Stream","Section Name","Metric Name","Metric Unit","Metric Value"'
    )

    def row(launch: int, push_pop: str, value: str) -> str:
        return (
            f'"{launch}","7","app","host","{push_pop}","","k","2024-Jul-13 19:18:31","1","7",'
            f'"Command line profiler metrics","gpu__time_duration.sum","nsecond","{value}"'
        )

    lines = [header, row(0, ' ""0:<default domain>:forward:none:none"" ', "10")]
    lines.append(row(1, ' ""0:<default domain>:backward:none:none"" ', "20"))
    profile = _one(_write(tmp_path, lines))
    kernel = _get(profile, K.KERNEL, "k")
    assert kernel.samples_ns == [10.0, 20.0]
    assert kernel.attrs["nvtx"] == [
        "0:<default domain>:forward:none:none",
        "0:<default domain>:backward:none:none",
    ]


def test_european_locale_is_detected(tmp_path: Path) -> None:
    section = "Command line profiler metrics"
    lines = [NEW_HEADER]
    for launch, (time, dram, sm) in enumerate(
        [("117.344", "27.595.520", "65,77"), ("120.416", "30.818.944", "65,63")]
    ):
        lines.append(_row(launch, "sgemm", section, "gpu__time_duration.sum", "ns", time))
        lines.append(_row(launch, "sgemm", section, "dram__bytes.sum", "byte", dram))
        lines.append(_row(launch, "sgemm", section, "sm__throughput.avg.pct", "%", sm))
    path = _write(tmp_path, lines)
    profile = _one(path)
    assert profile.metadata["decimal_mark"] == ","
    assert _get(profile, K.KERNEL, "sgemm").samples_ns == [117344.0, 120416.0]
    dram = _get(profile, K.COUNTER, "dram__bytes.sum", scope="sgemm")
    assert dram.samples == [27595520.0, 30818944.0]
    assert _get(profile, K.COUNTER, "sm__throughput.avg.pct", scope="sgemm").samples == [
        65.77,
        65.63,
    ]


def test_decimal_mark_option_settles_an_ambiguous_file(tmp_path: Path) -> None:
    section = "Command line profiler metrics"
    lines = [NEW_HEADER, _row(0, "k", section, "gpu__time_duration.sum", "usecond", "1,500")]
    path = _write(tmp_path, lines)
    assert _get(_one(path), K.KERNEL, "k").samples_ns == [1_500_000.0]  # "," groups by default
    assert _get(_one(path, decimal_mark=","), K.KERNEL, "k").samples_ns == [1500.0]
    with pytest.raises(ParseError, match="decimal_mark must be"):
        _one(path, decimal_mark=";")


# --- raw page -------------------------------------------------------------------------------


RAW_HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
    '"Block Size","Grid Size","Device","CC","device__attribute_display_name",'
    '"dram__bytes_read.sum","gpu__time_duration.sum",'
    '"sm__throughput.avg.pct_of_peak_sustained_elapsed","launch__registers_per_thread"'
)
RAW_UNITS = '"","","","","","","","","","","","","Kbyte","usecond","%","register/thread"'


def _raw_row(launch: int, kernel: str, cells: str) -> str:
    return (
        f'"{launch}","55","trainer","h","{kernel}","1","7","(128, 1, 1)","(80, 1, 1)","0",'
        f'"9.0","NVIDIA H100",{cells}'
    )


def test_raw_page_reads_the_units_row(tmp_path: Path) -> None:
    lines = [
        "==PROF== Disconnected from process 55",
        RAW_HEADER,
        RAW_UNITS,
        _raw_row(0, "w13_kernel", '"10,240.00","40.25","12.50","32"'),
        _raw_row(1, "reduce_kernel", '"5,120.00","20.00","n/a","64"'),
        _raw_row(2, "w13_kernel", '"10,240.50","42.00","13.75","32"'),
    ]
    path = _write(tmp_path, lines)
    assert registry.detect(path).name == "ncu_csv"
    profile = _one(path)
    assert profile.label == "trainer"
    assert profile.metadata["page"] == "raw"
    w13 = _get(profile, K.KERNEL, "w13_kernel")
    assert (w13.calls, w13.samples_ns) == (2, [40250.0, 42000.0])
    assert w13.attrs["block"] == "(128, 1, 1)"
    dram = _get(profile, K.COUNTER, "dram__bytes_read.sum", scope="w13_kernel")
    assert (dram.samples, dram.unit, dram.better) == (
        [10_240_000.0, 10_240_500.0],
        "bytes",
        Better.LOWER,
    )
    sm = _get(profile, K.COUNTER, "sm__throughput.avg.pct_of_peak_sustained_elapsed", "w13_kernel")
    assert (sm.samples, sm.value, sm.better) == ([12.5, 13.75], 13.125, Better.HIGHER)
    regs = _get(profile, K.COUNTER, REGS, scope="reduce_kernel")
    assert (regs.value, regs.unit) == (64.0, "register/thread")
    assert (
        profile.find(
            K.COUNTER, "sm__throughput.avg.pct_of_peak_sustained_elapsed", scope="reduce_kernel"
        )
        is None
    )
    assert profile.find(K.COUNTER, "device__attribute_display_name", scope="w13_kernel") is None
    assert profile.find(K.COUNTER, "gpu__time_duration.sum", scope="w13_kernel") is None


def test_raw_page_seconds_in_scientific_notation(tmp_path: Path) -> None:
    header = '"ID","Process ID","Process Name","Host Name","Kernel Name","gpu__time_duration.sum"'
    lines = [header, '"","","","","","second"', '"0","1","p","h","k","4.0e-05"']
    lines.append('"1","1","p","h","k","4.2e-05"')
    assert _get(_one(_write(tmp_path, lines)), K.KERNEL, "k").samples_ns == [40000.0, 42000.0]


# --- cut and bad files ----------------------------------------------------------------------


def test_header_only_file_is_a_parse_error(tmp_path: Path) -> None:
    path = _write(tmp_path, ["==PROF== Disconnected from process 1", NEW_HEADER])
    with pytest.raises(ParseError, match="has a header but no rows") as error:
        registry.parse_file(path, format="ncu_csv")
    assert error.value.line == 2


def test_file_without_a_table_is_a_parse_error(tmp_path: Path) -> None:
    path = _write(tmp_path, ["==PROF== Connected to process 1", "==ERROR== no kernels"])
    with pytest.raises(ParseError, match="no ncu CSV table found"):
        registry.parse_file(path, format="ncu_csv")


def test_cut_last_line_is_left_out_with_a_warning(tmp_path: Path) -> None:
    section = "Command line profiler metrics"
    full = [
        NEW_HEADER,
        _row(0, "k", section, "gpu__time_duration.sum", "nsecond", "1,000"),
        _row(1, "k", section, "gpu__time_duration.sum", "nsecond", "2,000"),
    ]
    text = "\n".join(full)
    value = text.rindex('"2,000"')
    for cut in (value + 3, value):  # in the last row's value cell, then just before it
        path = tmp_path / f"cut{cut}.csv"
        path.write_text(text[:cut])
        profile = _one(path)
        kernel = _get(profile, K.KERNEL, "k")
        assert kernel.samples_ns == [1000.0]
        assert profile.warnings[0].startswith("line 3, the file's last line,")


def test_short_row_inside_the_file_is_a_parse_error(tmp_path: Path) -> None:
    lines = [NEW_HEADER, '"0","1","p","h","k","1","7"', '"1","1","p","h","k","1","7"']
    with pytest.raises(ParseError, match="a row with 7 cells under the header at line 1") as err:
        registry.parse_file(_write(tmp_path, lines), format="ncu_csv")
    assert err.value.line == 2


def test_gzip_input(tmp_path: Path) -> None:
    section = "Command line profiler metrics"
    text = "\n".join([NEW_HEADER, _row(0, "k", section, "gpu__time_duration.sum", "ns", "7")])
    path = tmp_path / "ncu.csv.gz"
    path.write_bytes(gzip.compress(text.encode()))
    assert registry.detect(path).name == "ncu_csv"
    assert _get(_one(path), K.KERNEL, "k").samples_ns == [7.0]


def test_sniff_wants_the_kernel_and_metric_columns() -> None:
    def head(text: str) -> registry.Head:
        return registry.Head(raw=text.encode(), text=text, gzipped=False)

    assert ncu_csv.sniff(head("app says hi\n==PROF== x\n" + NEW_HEADER + "\n"))
    assert ncu_csv.sniff(head(RAW_HEADER + "\n" + RAW_UNITS + "\n"))
    assert not ncu_csv.sniff(head('"ID","Name","Value"\n"1","a","2"\n'))
    assert not ncu_csv.sniff(head('"ID","Process ID","Kernel Name","Context"\n'))
    assert not ncu_csv.sniff(head('x "ID","Kernel Name","Metric Name"\n'))
