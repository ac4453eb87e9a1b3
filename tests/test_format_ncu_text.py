"""Nsight Compute's default text report: the two corpus files (a sectioned report of ncu 2025,
a ``--metrics`` report with NVTX ranges) and small reports written here (processes, repeated
kernels, units, rule advice, app output, cut and foreign files)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import shared_path

from perfci.core.errors import ParseError
from perfci.core.model import Better, Metric, MetricKind, Profile
from perfci.formats import registry

K = MetricKind
CORPUS = "ncu_text"
BLOG = "duoan_playground-cuda__blog_kernel_ncu.txt"
GCN = "YKTian__ncu_metrics_prof_torch.txt"
SIGMOID = (
    "void vectorized_elementwise_kernel<4, sigmoid_kernel_cuda(TensorIteratorBase &)::"
    "[lambda() (instance 2)]::operator ()() lambda() (instance 2)]::operator ()() "
    "lambda(float) (instance 1)], array<char *, 2>>(int, T2, T3)"
)
SGEMM = "ampere_sgemm_32x32_sliced1x4_tn"
BN_TORCH = (
    "void at::native::batch_norm_transform_input_channels_last_kernel<float, float, float, 4>"
)

RULE = "    ----------------------- ----------- ------------"
SOL = [
    "    Section: GPU Speed Of Light Throughput",
    RULE,
    "    Metric Name             Metric Unit Metric Value",
    RULE,
]


def _kernel_block(name: str, duration: str, unit: str, occupancy: str) -> list[str]:
    return [
        f"  {name} (64, 1, 1)x(256, 1, 1), Context 1, Stream 7, Device 0, CC 9.0",
        "",
        *SOL,
        f"    Duration                {unit:>11} {duration:>12}",
        "    SM Frequency                    Ghz         1.98",
        "    L1/TEX Cache Throughput           %        22.10",
        RULE,
        "",
        "    OPT   This kernel grid is too small to fill the available resources on this device.",
        "",
        "    Section: Occupancy",
        RULE,
        "    Metric Name             Metric Unit Metric Value",
        RULE,
        f"    Achieved Occupancy                %  {occupancy:>11}",
        "    Block Limit Registers         block           8",
        "    Theoretical Occupancy             %          n/a",
        RULE,
        "",
    ]


def _report(*, cut: bool = False) -> str:
    lines = [
        "==PROF== Connected to process 4242 (/usr/bin/python3.11)",
        '==PROF== Profiling "gemm" - 0: 0%....50%....100% - 9 passes',
        "step=000 loss=7.0313",
        "==PROF== Disconnected from process 4242",
        "[4242] python3.11@runner-7",
        *_kernel_block("void gemm<128>(float const*, float*, int)", "12.50", "us", "61.20"),
        *_kernel_block("void softmax<float>(float*, int)", "812", "nsecond", "40.00"),
        *_kernel_block("void gemm<128>(float const*, float*, int)", "1.25", "ms", "59.80"),
        "==PROF== Connected to process 4343 (/usr/bin/python3.11)",
        "[4343] python3.11@runner-7",
        "  reduce_kernel, 2024-Jul-13 20:38:34, Context 1, Stream 13",
        "",
        "    Section: Command line profiler metrics",
        "    ---------------------------------- --------------- ------------",
        "    gpu__time_duration.sum                     usecond         6.43",
        "    launch__registers_per_thread       register/thread           26",
        "    ---------------------------------- --------------- ------------",
        "",
    ]
    text = "\n".join(lines) + "\n"
    if cut:
        text = text[: text.index("    launch__registers_per_thread") + 20]
    return text


def _write(tmp_path: Path, text: str, name: str = "ncu.txt") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _get(profile: Profile, kind: MetricKind, name: str, scope: str | None = None) -> Metric:
    metric = profile.find(kind, name, scope=scope)
    assert metric is not None, f"no {kind.value} {name!r} in scope {scope!r}"
    return metric


# --- the corpus -----------------------------------------------------------------------------


def test_blog_report_is_one_launch_with_its_sections_as_counters() -> None:
    path = shared_path("corpus", CORPUS, BLOG)
    assert registry.detect(path).name == "ncu_text"
    [profile] = registry.parse_file(path)
    assert (profile.label, profile.format) == ("python3.12", "ncu_text")
    assert profile.metadata["pid"] == 307362
    assert profile.metadata["host"] == "127.0.0.1"
    kernel = _get(profile, K.KERNEL, SIGMOID)
    # "Duration us 12.13" in the Speed Of Light section is the kernel's time.
    assert (kernel.calls, kernel.samples_ns) == (1, [12130.0])
    assert kernel.attrs["grid"] == "(2048, 1, 1)"
    assert kernel.attrs["block"] == "(128, 1, 1)"
    assert (kernel.attrs["device"], kernel.attrs["cc"]) == (0, "12.0")
    sm = _get(profile, K.COUNTER, "SM Frequency", scope=SIGMOID)
    assert (sm.value, sm.unit, sm.better) == (2.63e9, "Hz", Better.HIGHER)
    cycles = _get(profile, K.COUNTER, "SM Active Cycles", scope=SIGMOID)
    assert cycles.value == 26224.44
    regs = _get(profile, K.COUNTER, "Registers Per Thread", scope=SIGMOID)
    assert (regs.value, regs.unit) == (36.0, "register/thread")
    # Kbyte is 1000 bytes in ncu (perfci/formats/ncu/_units.py).
    shared = _get(profile, K.COUNTER, "Shared Memory Configuration Size", scope=SIGMOID)
    assert (shared.value, shared.unit) == (32770.0, "bytes")
    names = {m.name for m in profile.by_kind(K.COUNTER)}
    # Words, not numbers (PolicySpread, CachePreferNone), and the time itself are no counters.
    assert {"Cluster Scheduling Policy", "Function Cache Configuration", "Duration"} & names == (
        set()
    )
    assert len(profile.by_kind(K.COUNTER)) == 45


def test_metrics_report_has_14_launches_of_12_kernels_with_nvtx_ranges() -> None:
    path = shared_path("corpus", CORPUS, GCN)
    assert registry.detect(path).name == "ncu_text"
    [profile] = registry.parse_file(path)
    assert profile.metadata["pid"] == 2072460
    kernels = profile.by_kind(K.KERNEL)
    assert len(kernels) == 12
    assert sum(m.calls or 0 for m in kernels) == 14 == profile.metadata["launches"]
    sgemm = _get(profile, K.KERNEL, SGEMM)
    assert sgemm.samples_ns == [16740.0]  # "usecond 16.74"
    assert (sgemm.attrs["block"], sgemm.attrs["grid"]) == (128, 120)
    assert sgemm.attrs["nvtx"] == ["0:<default domain>:convLayer"]
    [batch_norm] = [m for m in kernels if m.name.startswith(BN_TORCH)]
    assert batch_norm.samples_ns == [6660.0, 4990.0]  # the 6th and 12th launch, in order
    assert batch_norm.attrs["first_launch"] == 5
    warps = _get(
        profile, K.COUNTER, "sm__warps_active.avg.pct_of_peak_sustained_active", scope=SGEMM
    )
    assert (warps.unit, warps.better) == ("%", Better.HIGHER)
    # 12 kernels x 7 counters; the durations and the launch configuration are not counters.
    assert len(profile.by_kind(K.COUNTER)) == 84
    assert profile.warnings == []


def test_text_and_csv_reports_of_one_program_name_the_kernels_alike() -> None:
    """The same GCN inference profiled by ncu twice, once as text, once with --csv: the
    kernel series line up, so a project can switch between the two outputs."""
    [text] = registry.parse_file(shared_path("corpus", CORPUS, GCN))
    [csv] = registry.parse_file(
        shared_path("corpus", "ncu_csv", "YKTian__ncu_metrics_show_torch.csv.txt")
    )
    assert {m.key for m in text.metrics} == {m.key for m in csv.metrics}


# --- reports written here -------------------------------------------------------------------


def test_each_process_is_a_profile_and_repeated_kernels_keep_their_launches(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, _report())
    assert registry.detect(path).name == "ncu_text"
    first, second = registry.parse_file(path)
    assert (first.label, second.label) == ("python3.11", "python3.11 #2")
    assert (first.metadata["pid"], first.metadata["host"]) == (4242, "runner-7")
    gemm = _get(first, K.KERNEL, "void gemm<128>(float const*, float*, int)")
    # us and ms in one report, each scaled to ns; the launches in the order printed.
    assert gemm.samples_ns == [12500.0, 1250000.0]
    assert (gemm.calls, gemm.attrs["first_launch"]) == (2, 0)
    softmax = _get(first, K.KERNEL, "void softmax<float>(float*, int)")
    assert softmax.samples_ns == [812.0]
    assert softmax.attrs["first_launch"] == 1
    occupancy = _get(
        first, K.COUNTER, "Achieved Occupancy", scope="void gemm<128>(float const*, float*, int)"
    )
    assert occupancy.samples == [61.2, 59.8]
    assert occupancy.attrs["section"] == "Occupancy"
    # n/a is no value; a metric name with a slash and spaces is cut by the columns.
    names = {m.name for m in first.by_kind(K.COUNTER)}
    assert "Theoretical Occupancy" not in names
    assert "L1/TEX Cache Throughput" in names
    assert first.warnings == []
    reduce = _get(second, K.KERNEL, "reduce_kernel")
    assert reduce.samples_ns == [6430.0]
    assert reduce.attrs["stream"] == 13
    regs = _get(second, K.COUNTER, "launch__registers_per_thread", scope="reduce_kernel")
    assert regs.value == 26.0


def test_a_cut_last_line_is_left_out_with_a_warning(tmp_path: Path) -> None:
    path = _write(tmp_path, _report(cut=True))
    *_, second = registry.parse_file(path)
    assert _get(second, K.KERNEL, "reduce_kernel").samples_ns == [6430.0]
    assert second.find(K.COUNTER, "launch__registers_per_thread", scope="reduce_kernel") is None
    assert any("cut short" in warning for warning in second.warnings)


def test_kernel_lines_without_tables_are_an_error_naming_that(tmp_path: Path) -> None:
    text = "[4242] app@host\n  void k(int) (1, 1, 1)x(32, 1, 1), Context 1, Stream 7\n"
    path = _write(tmp_path, text)
    with pytest.raises(ParseError, match=r"1 kernel line.*no metric table") as caught:
        registry.parse_file(path)
    assert caught.value.format == "ncu_text"


def test_a_csv_report_forced_as_text_is_sent_to_ncu_csv(tmp_path: Path) -> None:
    text = (
        "==PROF== Connected to process 1 (/bin/app)\n"
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
        '"Section Name","Metric Name","Metric Unit","Metric Value"\n'
        '"0","1","app","h","k","1","7","s","Duration","us","1.0"\n'
    )
    path = _write(tmp_path, text)
    assert registry.detect(path).name == "ncu_csv"
    with pytest.raises(ParseError, match=r"ncu --csv output .* line 2.*--format ncu_csv"):
        registry.parse_file(path, format="ncu_text")


def test_other_text_is_not_taken_for_a_report(tmp_path: Path) -> None:
    path = _write(tmp_path, "==PROF== Connected to process 1 (/bin/app)\nhello\n")
    with pytest.raises(ParseError, match="no ncu text report found"):
        registry.parse_file(path, format="ncu_text")
