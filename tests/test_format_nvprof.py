"""nvprof summary text and --csv: seed 001, the nvprof corpus, and small logs written here."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from conftest import seed

from perfci.core.errors import ParseError
from perfci.core.model import Device, Metric, MetricKind, Profile
from perfci.formats import registry
from perfci.formats.nvprof import nvprof

K = MetricKind
CORPUS = "nvprof"
SGEMM = "volta_sgemm_128x64_tn"
NCCL_KERNEL = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
HEADER = "            Type  Time(%)      Time     Calls       Avg       Min       Max  Name"


def _one(path: Path) -> Profile:
    [profile] = registry.parse_file(path)
    return profile


def _get(profile: Profile, kind: MetricKind, name: str, scope: str | None = None) -> Metric:
    metric = profile.find(kind, name, scope=scope)
    assert metric is not None, f"no {kind.value} {name!r} in scope {scope!r}"
    return metric


def _write(tmp_path: Path, text: str, name: str = "nvprof.log") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def seed001() -> Profile:
    path = seed("001")
    assert registry.detect(path).name == "nvprof"
    return _one(path)


# --- seed 001: summary ----------------------------------------------------------------------


def test_seed001_is_one_profile_labelled_by_its_command(seed001: Profile) -> None:
    assert seed001.label == "./train_gpt2cu -e gpt2_124M.bin"
    assert seed001.format == "nvprof"
    assert seed001.metadata["pid"] == 3481340
    assert seed001.warnings == ["nvprof: Found 1 invalid range marker(s)"]


def test_seed001_sgemm_kernel_exact_values(seed001: Profile) -> None:
    sgemm = _get(seed001, K.KERNEL, SGEMM)
    assert sgemm.device is Device.GPU
    assert sgemm.calls == 1200
    assert sgemm.total_ns == 4_910_600_000  # 4.91060s
    assert sgemm.avg_ns == 4_092_200  # 4.0922ms
    assert sgemm.min_ns == 1_587_800  # 1.5878ms
    assert sgemm.max_ns == 7_277_500  # 7.2775ms
    assert sgemm.attrs["time_pct"] == 43.88


def test_seed001_summary_row_counts_by_kind(seed001: Profile) -> None:
    top = [m for m in seed001.metrics if m.scope is None]
    counts = {kind: sum(m.kind is kind for m in top) for kind in K}
    # 30 GPU activities rows (26 kernels, 3 memcpy/memset, 1 NCCL kernel), 51 API calls.
    assert counts[K.KERNEL] == 26
    assert counts[K.MEMORY] == 3
    assert counts[K.COMM] == 1
    assert counts[K.API] == 51
    assert counts[K.RANGE] == 35
    assert counts[K.STEP] == 1


def test_seed001_memory_comm_and_api_rows(seed001: Profile) -> None:
    memset = _get(seed001, K.MEMORY, "[CUDA memset]")
    assert (memset.calls, memset.total_ns, memset.min_ns) == (717, 36_588_000, 639)
    htod = _get(seed001, K.MEMORY, "[CUDA memcpy HtoD]")
    assert (htod.calls, htod.total_ns, htod.min_ns) == (136, 41_543_000, 640)
    nccl = _get(seed001, K.COMM, NCCL_KERNEL)
    assert (nccl.calls, nccl.total_ns, nccl.avg_ns) == (4, 67_776, 16_944)
    sync = _get(seed001, K.API, "cudaDeviceSynchronize")
    assert sync.device is Device.CPU
    assert (sync.calls, sync.total_ns, sync.max_ns) == (53, 8_338_940_000, 366_800_000)
    last = _get(seed001, K.API, "cuDriverGetVersion")  # the summary's last row, 683ns
    assert (last.calls, last.total_ns, last.avg_ns) == (3, 683, 227)
    # A continuation row keeps its group: the demangled template kernel stays a kernel.
    fused = _get(
        seed001,
        K.KERNEL,
        "void fused_classifier_kernel5<bool=1, bool=0>(float*, "
        "float*, float*, float, int const *, int, int, int, int, "
        "std::integral_constant<bool, bool=1>)",
    )
    assert (fused.calls, fused.total_ns) == (24, 215_340_000)


# --- seed 001: NVTX ---------------------------------------------------------------------------


def test_seed001_nvtx_range_blocks(seed001: Profile) -> None:
    ranges = seed001.by_kind(K.RANGE)
    names = [m.name for m in ranges]
    assert len(ranges) == 35
    assert names[:3] == ["ncclAllReduce", "ncclCommInitRank", "InitOpt"]
    # nvprof sorts the blocks by name as text: Layer 0, Layer 1, Layer 10, Layer 11, Layer 2 …
    assert names[3:15] == sorted(f"Layer {i}" for i in range(12))
    assert names[15:18] == ["Train step 0", "Train step 1", "Train step 2"]
    assert names[-1] == "validation"
    assert all(m.scope is None and m.device is Device.CPU for m in ranges)
    allreduce = _get(seed001, K.RANGE, "ncclAllReduce")
    assert allreduce.attrs["domain"] == "NCCL"
    assert allreduce.attrs["thread"] == "<unnamed> (1757286400)"
    assert (allreduce.calls, allreduce.total_ns, allreduce.min_ns) == (4, 629_690_000, 60_081)
    assert _get(seed001, K.RANGE, "Layer 0").attrs["domain"] == "<unnamed>"
    # Every block has its own breakdown.
    assert {m.scope for m in seed001.metrics if m.scope} == set(names)


def test_seed001_encoder_backward_breakdown(seed001: Profile) -> None:
    scope = "encoder_backward"
    block = _get(seed001, K.RANGE, scope)
    assert (block.calls, block.total_ns, block.avg_ns, block.max_ns) == (
        4,
        15_253_000,
        3_813_300,
        5_181_000,
    )
    inside = [(m.kind, m.name, m.calls, m.total_ns) for m in seed001.metrics if m.scope == scope]
    assert inside == [
        (
            K.KERNEL,
            "void wte_backward_kernel<int=256>(float*, int4 const *, int const *, "
            "float const *, int const *, unsigned int, int, int, int)",
            4,
            430_710,
        ),
        (
            K.KERNEL,
            "wpe_backward_kernel(float*, float const *, int const *, int, int, int, unsigned int)",
            4,
            288_790,
        ),
        (K.MEMORY, "[CUDA memcpy HtoD]", 8, 100_770),
        (K.API, "cudaMemcpyAsync", 8, 393_390),
        (K.API, "cudaLaunchKernel", 8, 121_360),
    ]


def test_seed001_nccl_range_and_train_step_breakdowns(seed001: Profile) -> None:
    nccl = _get(seed001, K.COMM, NCCL_KERNEL, scope="ncclAllReduce")
    assert (nccl.calls, nccl.total_ns) == (4, 67_776)
    launch = _get(seed001, K.API, "cudaLaunchKernelExC", scope="ncclAllReduce")
    assert launch.total_ns == 629_440_000
    sgemm = _get(seed001, K.KERNEL, SGEMM, scope="Train step 0")
    assert (sgemm.calls, sgemm.total_ns, sgemm.avg_ns) == (1020, 4_233_410_000, 4_150_400)
    assert len([m for m in seed001.metrics if m.scope == "Train step 0"]) == 36
    assert len([m for m in seed001.metrics if m.scope == "Layer 0"]) == 20


def test_seed001_train_steps_with_warmup(seed001: Profile) -> None:
    [step] = seed001.by_kind(K.STEP)
    assert step.name == "Train step"
    assert step.samples_ns == [8_153_450_000, 1_000_350_000, 1_012_880_000]
    assert step.warmup == 1
    assert step.steady_samples() == [1_000_350_000, 1_012_880_000]
    assert seed001.steps == 3


# --- the corpus -------------------------------------------------------------------------------


def test_corpus_cs566_summary(corpus_dir: Path) -> None:
    profile = _one(corpus_dir / CORPUS / "Tyler-S-M_cs566-4__nvprof.out")
    assert profile.label == "./main"
    assert len(profile.by_kind(K.KERNEL)) == 6
    assert len(profile.by_kind(K.API)) == 14
    fill = _get(profile, K.KERNEL, "fill(void)")
    assert (fill.calls, fill.total_ns, fill.avg_ns, fill.min_ns, fill.max_ns) == (
        400,
        2_202_700,
        5_506,
        5_439,
        6_111,
    )
    create = _get(profile, K.API, "cudaEventCreate")
    assert (create.calls, create.total_ns, create.min_ns) == (2, 98_832_000, 564)
    # The file ends without a line break after its last row: read, and said so.
    uuid = _get(profile, K.API, "cuDeviceGetUuid")
    assert uuid.total_ns == 147
    assert any("line 28" in w and "may have been cut" in w for w in profile.warnings)


def test_corpus_darknet_metrics_mode(corpus_dir: Path) -> None:
    profile = _one(corpus_dir / CORPUS / "HUSTzhaowei_darknet-GPGPUsim__nvprof_metrics.txt")
    kernels = profile.by_kind(K.KERNEL)
    assert len(kernels) == 16
    assert profile.metadata["mode"] == "metrics/events"
    normalize = _get(
        profile, K.KERNEL, "normalize_kernel(int, float*, float*, float*, int, int, int)"
    )
    assert normalize.calls == 18
    assert normalize.total_ns is None
    assert normalize.attrs["device"] == "Tesla V100-PCIE-32GB (0)"
    values = normalize.attrs["nvprof_metrics"]
    assert len(values) == 158
    assert values["warp_nonpred_execution_efficiency"] == {
        "description": "Warp Non-Predicated Execution Efficiency",
        "min": "93.69%",
        "max": "93.70%",
        "avg": "93.69%",
    }
    assert any(w.startswith("metrics/events mode: 16 kernels") for w in profile.warnings)


def test_corpus_game_of_life_metrics_mode(corpus_dir: Path) -> None:
    profile = _one(corpus_dir / CORPUS / "ericreinsmidt_GameOfLife__nvprof_output.txt")
    [kernel] = profile.metrics
    assert kernel.name == "changeCellState(char*, char*, int, int)"
    assert kernel.calls == 100
    assert kernel.attrs["device"] == "GeForce GT 650M (0)"
    values = kernel.attrs["nvprof_metrics"]
    assert len(values) == 105
    assert values["ipc"]["avg"] == "2.507215"
    assert values["gld_requested_throughput"]["max"] == "1.9626GB/s"
    assert values["alu_fu_utilization"] == {
        "description": "Arithmetic Function Unit Utilization",
        "min": "Mid (5)",
        "max": "Mid (5)",
        "avg": "Mid (5)",
    }
    # The file ends with a stray line after the table: not read, and said so.
    assert any(w.startswith("line 112: text after a table") for w in profile.warnings)


# --- CSV ------------------------------------------------------------------------------------


CSV_LOG = """\
==4242== NVPROF is profiling process 4242, command: python train.py
==4242== Profiling application: python train.py
==4242== Profiling result:
"Type","Time(%)","Time","Calls","Avg","Min","Max","Name"
,%,us,,us,us,us,
"GPU activities",29.820746,6659.683000,510,13.058000,10.944000,22.048000,"volta_sgemm_128x64_nn"
"GPU activities",1.500000,335.000000,2,167.500000,100.000000,235.000000,"[CUDA memcpy HtoD]"
"GPU activities",0.250000,55.800000,4,13.950000,12.000000,16.100000,"ncclDevKernel_AllRed\
uce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
"API calls",60.100000,12000.500000,3,4000.166667,0.950000,11000.000000,"cudaMalloc"
"""


def test_csv_summary_with_units_row(tmp_path: Path) -> None:
    path = _write(tmp_path, CSV_LOG, "nvprof.csv")
    assert registry.detect(path).name == "nvprof"
    profile = _one(path)
    assert profile.label == "python train.py"
    sgemm = _get(profile, K.KERNEL, "volta_sgemm_128x64_nn")
    assert (sgemm.calls, sgemm.total_ns, sgemm.avg_ns, sgemm.min_ns, sgemm.max_ns) == (
        510,
        6_659_683,
        13_058,
        10_944,
        22_048,
    )
    assert sgemm.attrs["time_pct"] == 29.820746
    htod = _get(profile, K.MEMORY, "[CUDA memcpy HtoD]")
    assert (htod.calls, htod.total_ns) == (2, 335_000)
    nccl = _get(
        profile,
        K.COMM,
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    )
    assert nccl.total_ns == 55_800
    malloc = _get(profile, K.API, "cudaMalloc")
    assert (malloc.calls, malloc.total_ns, malloc.min_ns) == (3, 12_000_500, 950)
    assert len(profile.metrics) == 4


def test_csv_nvtx_unified_memory_and_metrics_tables(tmp_path: Path) -> None:
    text = (
        CSV_LOG
        + "==4242== NVTX result:\n"
        + '========      Range "Train step 0"\n'
        + '"Type","Time(%)","Time","Calls","Avg","Min","Max","Name"\n'
        + ",%,ms,,ms,ms,ms,\n"
        + '"Range",100.000000,12.500000,1,12.500000,12.500000,12.500000,"Train step 0"\n'
        + '"GPU activities",80.000000,10.000000,5,2.000000,1.000000,3.000000,'
        + '"volta_sgemm_128x64_nn"\n'
        + "==4242== Unified Memory profiling result:\n"
        + '"Device","Count","Avg Size","Min Size","Max Size","Total Size","Total Time",'
        + '"Name"\n'
        + ",,KB,KB,KB,MB,ms,\n"
        + '"Tesla V100-SXM2-16GB (0)",11,32.000000,4.000000,156.000000,0.343750,0.043990,'
        + '"Host To Device"\n'
    )
    profile = _one(_write(tmp_path, text, "nvprof.csv"))
    step = _get(profile, K.RANGE, "Train step 0")
    assert (step.calls, step.total_ns) == (1, 12_500_000)
    inner = _get(profile, K.KERNEL, "volta_sgemm_128x64_nn", scope="Train step 0")
    assert (inner.calls, inner.total_ns, inner.min_ns) == (5, 10_000_000, 1_000_000)
    htod = _get(profile, K.MEMORY, "[Unified Memory] Host To Device")
    assert (htod.calls, htod.total_ns, htod.bytes) == (11, 43_990, 0.34375 * 1024**2)
    assert htod.attrs["avg_size"] == 32 * 1024
    assert profile.steps == 1


def test_csv_metrics_mode(tmp_path: Path) -> None:
    text = (
        "==7== Profiling result:\n==7== Metric result:\n"
        '"Device","Kernel","Invocations","Metric Name","Metric Description","Min","Max",'
        '"Avg"\n'
        '"Tesla V100 (0)","saxpy(int, float*)",4,"ipc","Executed IPC",1.200000,1.400000,'
        "1.300000\n"
        '"Tesla V100 (0)","saxpy(int, float*)",4,"dram_utilization","Device Memory '
        'Utilization","Low (1)","Low (2)","Low (1)"\n'
    )
    [kernel] = _one(_write(tmp_path, text, "metrics.csv")).metrics
    assert (kernel.name, kernel.calls) == ("saxpy(int, float*)", 4)
    assert kernel.attrs["nvprof_metrics"]["ipc"] == {
        "description": "Executed IPC",
        "min": "1.200000",
        "max": "1.400000",
        "avg": "1.300000",
    }
    assert kernel.attrs["nvprof_metrics"]["dram_utilization"]["max"] == "Low (2)"


def test_csv_without_units_row_is_an_error_naming_the_line(tmp_path: Path) -> None:
    text = CSV_LOG.replace(",%,us,,us,us,us,\n", "")
    with pytest.raises(ParseError, match=r"nvprof\.csv:5: expected a duration") as info:
        registry.parse_file(_write(tmp_path, text, "nvprof.csv"))
    assert info.value.line == 5


# --- cut and broken files ---------------------------------------------------------------------


def _seed_text() -> str:
    return seed("001").read_text()


def test_file_cut_mid_row_keeps_complete_rows_and_warns(tmp_path: Path) -> None:
    text = _seed_text()
    cut = text.index("  651.26ms ") + 5  # inside the 4th GPU row (volta_sgemm_64x64_nn)
    profile = _one(_write(tmp_path, text[:cut]))
    assert [m.name for m in profile.metrics] == [
        SGEMM,
        "volta_sgemm_128x128_tn",
        "volta_sgemm_128x64_nn",
    ]
    assert any("line 8" in w and "not read" in w for w in profile.warnings)


def test_file_cut_mid_name_keeps_the_row_with_a_warning(tmp_path: Path) -> None:
    text = _seed_text()
    cut = text.index("softmax_forward_kernel5(") + 10
    profile = _one(_write(tmp_path, text[:cut]))
    assert len(profile.metrics) == 7
    assert profile.metrics[-1].name == "softmax_fo"
    assert any("line 11" in w and "may have been cut" in w for w in profile.warnings)


def test_broken_row_inside_the_file_is_a_parse_error(tmp_path: Path) -> None:
    text = _seed_text().replace("  2.22244s       312  7.1232ms", "  2.22244s       312", 1)
    with pytest.raises(ParseError, match=r":6: cannot read this summary") as info:
        registry.parse_file(_write(tmp_path, text))
    assert "volta_sgemm_128x128_tn" in str(info.value)


def test_bad_time_unit_names_line_and_column(tmp_path: Path) -> None:
    text = _seed_text().replace("4.91060s", "4.91060x", 1)
    with pytest.raises(
        ParseError,
        match=r":5: expected a duration .* column Time, got "
        r"'4\.91060x'",
    ):
        registry.parse_file(_write(tmp_path, text))


def test_log_without_results_is_a_parse_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "==12== NVPROF is profiling process 12, command: ./a\nhello\n")
    with pytest.raises(ParseError, match="no nvprof result found"):
        registry.parse_file(path, format="nvprof")


def test_gzip_input(tmp_path: Path) -> None:
    path = tmp_path / "seed001.log.gz"
    path.write_bytes(gzip.compress(seed("001").read_bytes()))
    profile = _one(path)
    assert _get(profile, K.KERNEL, SGEMM).total_ns == 4_910_600_000


# --- layouts from the documentation, written here ----------------------------------------------


def test_output_interleaved_in_a_summary_table_is_skipped(tmp_path: Path) -> None:
    """Application output written while nvprof prints its summary does not end the table:
    the continuation rows after it (no Type) still belong to their group."""
    text = (
        "==17612== Profiling result:\n" + HEADER + "\n"
        " GPU activities:   49.75%  2.2027ms       400  5.5060us  5.4390us  6.1110us  fill(void)\n"
        "Average running time for Block Reduction 0.0121805 ms\n"
        "                   14.66%  648.83us       100  6.4880us  6.4630us  6.9760us  "
        "parallel_redution_block(void)\n"
        "      API calls:   87.72%  98.832ms         2  49.416ms     564ns  98.831ms  "
        "cudaEventCreate\n"
    )
    profile = _one(_write(tmp_path, text))
    block = _get(profile, K.KERNEL, "parallel_redution_block(void)")
    assert (block.calls, block.total_ns, block.avg_ns, block.max_ns) == (100, 648_830, 6_488, 6_976)
    assert _get(profile, K.API, "cudaEventCreate").min_ns == 564
    assert len(profile.metrics) == 3
    assert profile.warnings == [
        "line 4: not a row of the table at line 2 (interleaved output?), skipped: "
        "'Average running time for Block Reduction 0.0121805 ms'"
    ]


def test_several_runs_are_separate_profiles(tmp_path: Path) -> None:
    def run(pid: int, flag: str, time: str) -> str:
        return (
            f"=={pid}== NVPROF is profiling process {pid}, command: ./bench {flag}\n"
            "step done\n"
            f"=={pid}== Profiling application: ./bench {flag}\n"
            f"=={pid}== Profiling result:\n{HEADER}\n"
            f" GPU activities:  100.00%  {time}         2  1.0000ms  1.0000ms  1.0000ms  "
            "k(int)\n"
            "      API calls:  100.00%  3.0000ms         2  1.5000ms  1.0000ms  2.0000ms  "
            "cudaLaunchKernel\n\n"
        )

    text = (
        run(11, "--a", "2.0000ms") + "======== separator: commit abc\n" + run(12, "--b", "2.5000ms")
    )
    profiles = registry.parse_file(_write(tmp_path, text))
    assert [p.label for p in profiles] == ["./bench --a #1", "./bench --b #2"]
    assert [p.metadata["pid"] for p in profiles] == [11, 12]
    assert [p.find(K.KERNEL, "k(int)").total_ns for p in profiles] == [2_000_000, 2_500_000]


def test_imported_log_with_equals_prefix_and_no_kernels(tmp_path: Path) -> None:
    text = (
        "======== Profiling result:\n"
        "No kernels were profiled.\n" + HEADER + "\n"
        "      API calls:   99.00%  624.30ms         1  624.30ms  624.30ms  624.30ms  "
        "cudaMallocHost\n"
        "                    1.00%  6.3060ms         2  3.1530ms  588ns  6.3054ms  cudaFree\n"
    )
    profile = _one(_write(tmp_path, text))
    assert profile.label == "nvprof"
    assert profile.metadata["no_kernels_profiled"] is True
    assert [(m.kind, m.name, m.min_ns) for m in profile.metrics] == [
        (K.API, "cudaMallocHost", 624_300_000),
        (K.API, "cudaFree", 588),
    ]


def test_a_table_without_its_banner_is_read_whole(tmp_path: Path) -> None:
    """A summary pasted alone (no ``Profiling result:`` line): the run starts at its header,
    so every row is read, not only the first."""
    text = (
        HEADER + "\n"
        " GPU activities:   62.64%  5.11732s     11200  456.90us  13.695us  1.3693ms  "
        "kmeans_kernel(float*, int*, float*, int, int)\n"
        "                   36.63%  2.99263s     11200  267.20us  13.695us  1.3693ms  other(int)\n"
        "      API calls:  100.00%  624.30ms         1  624.30ms  624.30ms  624.30ms  "
        "cudaMallocHost\n"
    )
    profile = _one(_write(tmp_path, text))
    assert [(m.kind, m.name, m.total_ns) for m in profile.metrics] == [
        (K.KERNEL, "kmeans_kernel(float*, int*, float*, int, int)", 5_117_320_000),
        (K.KERNEL, "other(int)", 2_992_630_000),
        (K.API, "cudaMallocHost", 624_300_000),
    ]
    assert profile.metadata["line"] == 1


def test_old_layout_without_type_column(tmp_path: Path) -> None:
    text = (
        "==7== Profiling application: ./old\n"
        "==7== Profiling result:\n"
        "Time(%)      Time     Calls       Avg       Min       Max  Name\n"
        " 90.00%  9.0000us         3  3.0000us  2.0000us  4.0000us  add(float*, float*)\n"
        " 10.00%  1.0000us         1  1.0000us  1.0000us  1.0000us  [CUDA memcpy DtoH]\n"
        "\n"
        "==7== API calls:\n"
        "Time(%)      Time     Calls       Avg       Min       Max  Name\n"
        "100.00%  5.0000ms         1  5.0000ms  5.0000ms  5.0000ms  cudaMalloc\n"
    )
    assert nvprof.sniff(registry.Head(raw=b"", text=text, gzipped=False))
    profile = _one(_write(tmp_path, text))
    assert [(m.kind, m.name, m.total_ns) for m in profile.metrics] == [
        (K.KERNEL, "add(float*, float*)", 9_000),
        (K.MEMORY, "[CUDA memcpy DtoH]", 1_000),
        (K.API, "cudaMalloc", 5_000_000),
    ]


def test_normalized_time_unit_row(tmp_path: Path) -> None:
    text = (
        "==10== Profiling result:\n" + HEADER + "\n"
        "                        %        ms                    ms        ms        ms\n"
        " GPU activities:  100.00%  34.910         2  17.455  15.000  19.910  kernel(float*)\n"
        "      API calls:  100.00%  0.0270         1  0.0270  0.0270  0.0270  cudaMalloc\n"
    )
    profile = _one(_write(tmp_path, text))
    kernel = _get(profile, K.KERNEL, "kernel(float*)")
    assert (kernel.total_ns, kernel.avg_ns, kernel.min_ns, kernel.max_ns) == (
        34_910_000,
        17_455_000,
        15_000_000,
        19_910_000,
    )
    assert _get(profile, K.API, "cudaMalloc").total_ns == 27_000


def test_nvtx_cut_names_take_the_summary_name(tmp_path: Path) -> None:
    full = "fused_residual_forward_kernel5(float*, float*, float const *, int, int)"
    text = (
        "==10== Profiling result:\n" + HEADER + "\n"
        f" GPU activities:  100.00%  34.910ms         1  34.910ms  34.910ms  34.910ms  {full}\n"
        "\n==10== NVTX result:\n"
        '==10==   Thread "<unnamed>" (id = 2564218880)\n'
        '==10==     Domain "my_domain"\n'
        '==10==       Range "function_my_domain"\n' + HEADER + "\n"
        "          Range:  100.00%  1.22693s         1  1.22693s  1.22693s  1.22693s  "
        "function_my_domain\n"
        " GPU activities:  100.00%  34.910ms         1  34.910ms  34.910ms  34.910ms  "
        "fused_residual_forward_kernel5(float*, flo\n"
        "      API calls:  100.00%  27.030us         1  27.030us  27.030us  27.030us  "
        "cudaLaunchKernel\n"
    )
    profile = _one(_write(tmp_path, text))
    inner = _get(profile, K.KERNEL, full, scope="function_my_domain")
    assert inner.attrs["nvtx_name"] == "fused_residual_forward_kernel5(float*, flo"
    block = _get(profile, K.RANGE, "function_my_domain")
    assert (block.total_ns, block.attrs["domain"]) == (1_226_930_000, "my_domain")
    assert profile.steps is None


def test_unified_memory_section(tmp_path: Path) -> None:
    text = (
        "==5== Profiling result:\n" + HEADER + "\n"
        " GPU activities:  100.00%  1.0000ms         1  1.0000ms  1.0000ms  1.0000ms  k\n"
        "\n==5== Unified Memory profiling result:\n"
        'Device "Tesla V100-SXM2-16GB (0)"\n'
        "   Count  Avg Size  Min Size  Max Size  Total Size  Total Time  Name\n"
        "      11  32.889KB  4.0000KB  156.00KB  361.78KB  43.99us  Host To Device\n"
        "       3         -         -         -           -  1.014752ms  "
        "Gpu page fault groups\n"
        "Total CPU Page faults: 17\n"
        "Total CPU thrashes: 48\n"
    )
    profile = _one(_write(tmp_path, text))
    htod = _get(profile, K.MEMORY, "[Unified Memory] Host To Device")
    assert (htod.calls, htod.total_ns, htod.bytes) == (11, 43_990, 361.78 * 1024)
    assert htod.attrs["device"] == "Tesla V100-SXM2-16GB (0)"
    faults = _get(profile, K.MEMORY, "[Unified Memory] Gpu page fault groups")
    assert (faults.calls, faults.total_ns, faults.bytes) == (3, 1_014_752, None)
    assert profile.metadata["unified_memory"] == {
        "Total CPU Page faults": 17,
        "Total CPU thrashes": 48,
    }


def test_events_mode_and_skipped_tables(tmp_path: Path) -> None:
    text = (
        "==9== Profiling result:\n"
        "==9== Event result:\n"
        "Invocations                                Event Name         Min         Max"
        "         Avg       Total\n"
        'Device "Tesla K80 (0)"\n'
        "\tKernel: saxpy(int, float, float*, float*)\n"
        "          2                             inst_executed       1000        1200"
        "        1100        2200\n"
        "\n"
        "   Start  Duration            Grid Size      Block Size  Name\n"
        "  1.0s  2.0us  (1 1 1)  (32 1 1)  saxpy(int, float, float*, float*) [93]\n"
        "  1.1s  2.0us  (1 1 1)  (32 1 1)  saxpy(int, float, float*, float*) [95]\n"
    )
    profile = _one(_write(tmp_path, text))
    [kernel] = profile.metrics
    assert kernel.calls == 2
    assert kernel.attrs["nvprof_events"]["inst_executed"] == {
        "min": "1000",
        "max": "1200",
        "avg": "1100",
        "total": "2200",
    }
    # The trace's rows (read by their words: the table has no column with spaces but the
    # name) are of the kernel the event table already gives, and count once.
    assert any(
        w.startswith("2 rows of the GPU trace (table at line 8) for 1 name(s) that another")
        for w in profile.warnings
    )


def test_rows_of_an_unknown_type_are_counted_in_a_warning(tmp_path: Path) -> None:
    text = (
        "==3== Profiling result:\n" + HEADER + "\n"
        " GPU activities:  100.00%  1.0000ms         1  1.0000ms  1.0000ms  1.0000ms  k\n"
        " OpenACC (excl):   60.00%  2.0000ms         1  2.0000ms  2.0000ms  2.0000ms  w\n"
        "                   40.00%  1.0000ms         1  1.0000ms  1.0000ms  1.0000ms  x\n"
    )
    profile = _one(_write(tmp_path, text))
    assert [m.name for m in profile.metrics] == ["k"]
    assert "2 rows of type 'OpenACC (excl)' (no matching metric kind) were not read" in (
        profile.warnings
    )


def test_sniff_rejects_other_tables() -> None:
    nsys = (
        " Time(%)  Total Time (ns)  Num Calls  Average  Minimum  Maximum  Name\n"
        " -------  ---------------  ---------  -------  -------  -------  ----\n"
    )
    lookalike = "Time(%),Time,Calls,Avg,Min,Max,Name\n29.8,6659.68,510,13.05,10.9,22.0,k\n"
    for text in (nsys, lookalike, "==PROF== Connected to process 1\n"):
        assert not nvprof.sniff(registry.Head(raw=b"", text=text, gzipped=False))


def test_only_newlines_end_lines(tmp_path: Path) -> None:
    # Text-mode lines, not str.splitlines(): \f, \x1c and U+2028 stay inside a name.
    path = tmp_path / "odd.log"
    path.write_text(
        _seed_text().replace(SGEMM, "volta\x0csgemm\x1c128x64\u2028tn"), encoding="utf-8"
    )
    profile = _one(path)
    assert _get(profile, K.KERNEL, "volta\x0csgemm\x1c128x64\u2028tn").total_ns == 4_910_600_000
    assert profile.find(K.KERNEL, SGEMM) is None


def test_cut_gzip_is_an_error_naming_the_file(tmp_path: Path) -> None:
    packed = gzip.compress(seed("001").read_bytes())
    path = tmp_path / "cut.log.gz"
    path.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(ParseError, match=r"cut\.log\.gz: cannot read file: .*\(nvprof\)"):
        registry.parse_file(path, format="nvprof")
