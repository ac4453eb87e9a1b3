"""nvprof --print-gpu-trace / --print-api-trace: --csv and text traces summed per name.

The layouts are the ones public parsers quote: rlscope/iml ``NvprofTraceFileReader`` (20 columns
with SrcMemType, DstMemType and Correlation_ID; the API trace), leimingyu/magus ``*_trace.csv``
(17 columns, ``[1073]`` after kernel names, ``ms`` and ``e-03`` durations), and the multi-GPU
columns ``"Src Dev","Src Ctx","Dst Dev","Dst Ctx"``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from perfci.core.errors import ParseError
from perfci.core.model import Better, Device, Metric, MetricKind, Profile
from perfci.formats import registry
from perfci.formats.nvprof import nvprof

K = MetricKind
GPU0 = "GeForce RTX 2080 Ti (0)"
ADD = "void add<float>(float*, float const *, int)"
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"
BANNER = (
    "==2119== NVPROF is profiling process 2119, command: ./fusion_bench -n 10\n"
    "==2119== Profiling application: ./fusion_bench -n 10\n"
    "==2119== Profiling result:\n"
)
GPU_COLUMNS = [
    "Start",
    "Duration",
    "Grid X",
    "Grid Y",
    "Grid Z",
    "Block X",
    "Block Y",
    "Block Z",
    "Registers Per Thread",
    "Static SMem",
    "Dynamic SMem",
    "Size",
    "Throughput",
    "SrcMemType",
    "DstMemType",
    "Device",
    "Context",
    "Stream",
    "Name",
    "Correlation_ID",
]
GPU_HEADER = ",".join(f'"{column}"' for column in GPU_COLUMNS) + "\n"
GPU_UNITS = "us,us,,,,,,,,KB,KB,KB,GB/s,,,,,,,\n"
# Lines 6-12 of GPU_TRACE (after the banner, the header and the units row).
GPU_ROWS = (
    f'0.000000,1.888000,,,,,,,,,,1.003906,0.507097,"Device",,"{GPU0}","1","7","[CUDA memset]",272\n'
    f"4643.346000,1.536000,,,,,,,,,,0.125000,0.077610,"
    f'"Pinned","Device","{GPU0}","1","22","[CUDA memcpy HtoD]",316\n'
    f'4650.1,2.304000,128,1,1,256,1,1,16,0,0,,,,,"{GPU0}","1","7","{ADD}",320\n'
    f'4660.2,2.000000,128,1,1,256,1,1,16,0,0,,,,,"{GPU0}","1","7","{ADD}",324\n'
    f"4700.000000,3.264000,,,,,,,,,,0.250000,0.076599,"
    f'"Pageable","Device","{GPU0}","1","7","[CUDA memcpy HtoD]",330\n'
    f'4800.000000,16.944000,1,1,1,64,1,1,32,0,0,,,,,"{GPU0}","1","7","{NCCL}",340\n'
    f"4900.000000,5.120000,,,,,,,,,,4.000000,0.745058,"
    f'"Device","Pageable","{GPU0}","1","7","[CUDA memcpy DtoH]",350\n'
)
GPU_TRACE = BANNER + GPU_HEADER + GPU_UNITS + GPU_ROWS
API_TRACE = (
    '"Start","Duration","Name","Correlation_ID"\n'
    "us,us,,\n"
    '0.000000,2.866000,"cuDeviceGetPCIBusId",1\n'
    '4645.000000,10.000000,"cudaMemcpy",315\n'
    '4648.000000,5.100000,"cudaLaunchKernel",320\n'
    '4658.000000,4.200000,"cudaLaunchKernel",324\n'
    '4698.000000,20.000000,"cudaMemcpy",329\n'
    '4790.000000,3.300000,"cudaLaunchKernel",340\n'
    '4898.000000,30.000000,"cudaMemcpy",349\n'
)
# The summary nvprof --csv prints for the same launches and calls.
SUMMARY = (
    '"Type","Time(%)","Time","Calls","Avg","Min","Max","Name"\n'
    ",%,us,,us,us,us,\n"
    f'"GPU activities",51.570000,16.944000,1,16.944000,16.944000,16.944000,"{NCCL}"\n'
    '"GPU activities",15.580000,5.120000,1,5.120000,5.120000,5.120000,"[CUDA memcpy DtoH]"\n'
    '"GPU activities",14.610000,4.800000,2,2.400000,1.536000,3.264000,"[CUDA memcpy HtoD]"\n'
    f'"GPU activities",13.100000,4.304000,2,2.152000,2.000000,2.304000,"{ADD}"\n'
    '"GPU activities",5.750000,1.888000,1,1.888000,1.888000,1.888000,"[CUDA memset]"\n'
    '"API calls",78.350000,60.000000,3,20.000000,10.000000,30.000000,"cudaMemcpy"\n'
    '"API calls",16.450000,12.600000,3,4.200000,3.300000,5.100000,"cudaLaunchKernel"\n'
    '"API calls",3.740000,2.866000,1,2.866000,2.866000,2.866000,"cuDeviceGetPCIBusId"\n'
)


def _write(tmp_path: Path, text: str, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode())
    return path


def _one(path: Path) -> Profile:
    [profile] = registry.parse_file(path)
    return profile


def _get(profile: Profile, kind: MetricKind, name: str) -> Metric:
    metric = profile.find(kind, name)
    assert metric is not None, f"no {kind.value} {name!r}"
    return metric


def _times(metric: Metric) -> tuple[int | None, float | None, float | None, float | None]:
    return metric.calls, metric.total_ns, metric.min_ns, metric.max_ns


def _timed(profile: Profile) -> list[Metric]:
    """The metrics a summary of the same launches also gives: all but the copies' counters."""
    return [m for m in profile.metrics if m.kind is not K.COUNTER]


def _series(profile: Profile) -> dict[str, tuple[object, ...]]:
    return {m.key: (m.calls, m.total_ns, m.avg_ns, m.min_ns, m.max_ns) for m in _timed(profile)}


def _head(text: str) -> registry.Head:
    return registry.Head(raw=text.encode(), text=text, gzipped=False)


def _row(columns: list[str], **cells: str) -> str:
    """A trace row with ``cells`` by column (``Grid_X`` for ``Grid X``), quoted as nvprof does:
    numbers bare, text columns in quotes, missing cells empty."""
    text = {"SrcMemType", "DstMemType", "Device", "Context", "Stream", "Name", "Src Dev"}
    text |= {"Src Ctx", "Dst Dev", "Dst Ctx", "Unified Memory", "Virtual Address"}
    values = {key.replace("_", " "): value for key, value in cells.items()}
    out = []
    for column in columns:
        value = values.get(column, "")
        out.append(f'"{value}"' if value and column in text else value)
    return ",".join(out) + "\n"


# --- the GPU trace ------------------------------------------------------------------------------


def test_gpu_trace_rows_are_summed_per_name(tmp_path: Path) -> None:
    path = _write(tmp_path, GPU_TRACE)
    assert registry.detect(path).name == "nvprof"
    profile = _one(path)
    assert profile.label == "./fusion_bench -n 10"
    assert profile.warnings == []
    assert [(m.kind, m.name) for m in _timed(profile)] == [
        (K.MEMORY, "[CUDA memset]"),
        (K.MEMORY, "[CUDA memcpy HtoD]"),
        (K.KERNEL, ADD),
        (K.COMM, NCCL),
        (K.MEMORY, "[CUDA memcpy DtoH]"),
    ]
    assert all(m.device is Device.GPU and m.scope is None for m in _timed(profile))
    add = _get(profile, K.KERNEL, ADD)
    assert _times(add) == (2, 4_304, 2_000, 2_304)
    assert add.avg_ns == 2_152
    assert add.samples_ns == [2_304, 2_000]  # file order, not sorted
    assert add.bytes is None
    assert add.attrs == {"grids": ["128x1x1"], "blocks": ["256x1x1"], "devices": [GPU0]}
    htod = _get(profile, K.MEMORY, "[CUDA memcpy HtoD]")
    assert _times(htod) == (2, 4_800, 1_536, 3_264)
    assert htod.samples_ns == [1_536, 3_264]
    assert htod.bytes == 384  # 0.125 KB + 0.25 KB, KB = 1024 bytes
    assert "grids" not in htod.attrs
    memset = _get(profile, K.MEMORY, "[CUDA memset]")
    assert (memset.calls, memset.total_ns, memset.bytes) == (1, 1_888, 1_028)  # 1.003906 KB
    assert _get(profile, K.COMM, NCCL).samples_ns == [16_944]
    assert _get(profile, K.MEMORY, "[CUDA memcpy DtoH]").bytes == 4_096
    # Each copy's size and throughput (GB/s = 1024**3 bytes/s, as nvprof's sizes) as counters.
    counters = {(m.scope, m.name): m for m in profile.metrics if m.kind is K.COUNTER}
    assert set(counters) == {
        (copy, what)
        for copy in ("[CUDA memset]", "[CUDA memcpy HtoD]", "[CUDA memcpy DtoH]")
        for what in ("size", "throughput")
    }
    rate = counters["[CUDA memcpy HtoD]", "throughput"]
    assert rate.samples == pytest.approx([0.077610 * 1024**3, 0.076599 * 1024**3])
    assert (rate.unit, rate.better, rate.calls) == ("bytes/s", Better.HIGHER, 2)
    assert counters["[CUDA memcpy HtoD]", "size"].samples == [128, 256]


OLD_DEVICE = "GeForce GTX 1080 Ti (0)"
MATMUL = "void matrixMulCUDA<int=32>(float*, float*, float*, int, int)"
OLD_COLUMNS = [c for c in GPU_COLUMNS if c not in ("SrcMemType", "DstMemType", "Correlation_ID")]
OLD_ROW = f'0,,,"{OLD_DEVICE}","1","7",'  # Static SMem, Dynamic SMem … Stream of a launch
# 17 columns, ms durations (one as 2.048000e-03), and after each kernel name the correlation id
# of the launch, which the summary does not print.
OLD_TRACE = (
    "==12400== NVPROF is profiling process 12400, command: ./matrixMul\n"
    "==12400== Profiling application: ./matrixMul\n"
    "==12400== Profiling result:\n"
    + ",".join(f'"{c}"' for c in OLD_COLUMNS)
    + "\nms,ms,,,,,,,,KB,B,KB,MB/s,,,,\n"
    f'584.620743,1.028854,,,,,,,,,,400.000000,379.670001,"{OLD_DEVICE}","1","7",'
    '"[CUDA memcpy HtoD]"\n'
    f'585.737919,2.053933,,,,,,,,,,800.000000,380.367811,"{OLD_DEVICE}","1","7",'
    '"[CUDA memcpy HtoD]"\n'
    f'587.796940,0.077602,20,10,1,32,32,1,27,8.000000,{OLD_ROW}"{MATMUL} [1073]"\n'
    f'587.898094,0.076674,20,10,1,32,32,1,27,8.000000,{OLD_ROW}"{MATMUL} [1084]"\n'
    f'650.344851,2.048000e-03,,,,,,,,,,1600.000000,0.389430,"{OLD_DEVICE}","1","7",'
    '"[CUDA memcpy DtoH]"\n'
)


def test_older_layout_without_correlation_column(tmp_path: Path) -> None:
    """The kernel's name loses its `` [1073]``, to be the name the summary prints."""
    kernel = MATMUL
    text = OLD_TRACE
    profile = _one(_write(tmp_path, text))
    assert [m.name for m in _timed(profile)] == [
        "[CUDA memcpy HtoD]",
        kernel,
        "[CUDA memcpy DtoH]",
    ]
    matmul = _get(profile, K.KERNEL, kernel)
    assert _times(matmul) == (2, 154_276, 76_674, 77_602)
    assert matmul.attrs["grids"] == ["20x10x1"]
    assert matmul.attrs["blocks"] == ["32x32x1"]
    htod = _get(profile, K.MEMORY, "[CUDA memcpy HtoD]")
    assert (htod.total_ns, htod.bytes) == (3_082_787, 1_228_800)  # 400 KB + 800 KB
    dtoh = _get(profile, K.MEMORY, "[CUDA memcpy DtoH]")
    assert (dtoh.samples_ns, dtoh.bytes) == ([2_048], 1_638_400)


def test_multi_gpu_columns_peer_copies_and_devices(tmp_path: Path) -> None:
    columns = [*GPU_COLUMNS[:18], "Src Dev", "Src Ctx", "Dst Dev", "Dst Ctx", "Name"]
    v0, v1 = "Tesla V100-SXM2-16GB (0)", "Tesla V100-SXM2-16GB (1)"
    launch = {"Grid_X": "80", "Grid_Y": "1", "Grid_Z": "1", "Block_X": "256", "Block_Y": "1"}
    launch |= {"Block_Z": "1", "Registers_Per_Thread": "32", "Stream": "7", "Name": NCCL}
    peer = {"Size": "64.000000", "Throughput": "416.666667", "Name": "[CUDA memcpy PtoP]"}
    peer |= {"SrcMemType": "Device", "DstMemType": "Device"}
    text = (
        "======== Profiling result:\n"
        + ",".join(f'"{c}"' for c in columns)
        + "\ns,ms,,,,,,,,B,B,MB,GB/s,,,,,,,,,,\n"
        + _row(columns, Start="1.2", Duration="0.150000", Device=v0, Context="1", **peer)
        + _row(columns, Start="1.3", Duration="0.160000", Device=v1, Context="2", **peer)
        + _row(columns, Start="1.4", Duration="0.020000", Device=v0, Context="1", **launch)
        + _row(columns, Start="1.4005", Duration="0.021000", Device=v1, Context="2", **launch)
    )
    profile = _one(_write(tmp_path, text))
    assert profile.label == "nvprof"
    peer_copy = _get(profile, K.MEMORY, "[CUDA memcpy PtoP]")
    assert (_times(peer_copy), peer_copy.bytes) == (
        (2, 310_000, 150_000, 160_000),
        2 * 64 * 1024**2,
    )
    allreduce = _get(profile, K.COMM, NCCL)
    assert _times(allreduce) == (2, 41_000, 20_000, 21_000)
    assert allreduce.attrs["devices"] == [v0, v1]


def test_api_rows_and_unified_memory_rows_in_one_table(tmp_path: Path) -> None:
    """Both traces printed as one table: a row without a Device is an API call (a unified
    memory CPU page fault has no Device either, and no Duration)."""
    columns = [*GPU_COLUMNS[:11], "Device", "Context", "Stream", "Unified Memory"]
    columns += ["Virtual Address", "Name"]
    t4 = "Tesla T4 (0)"
    fault = {"Unified_Memory": "PC 0x46de3225", "Name": "[Unified Memory CPU page faults]"}
    copy = {"Device": t4, "Unified_Memory": "256.000000", "Name": "[Unified Memory Memcpy HtoD]"}
    text = (
        BANNER
        + ",".join(f'"{c}"' for c in columns)
        + "\nms,us,,,,,,,,B,B,,,,B,,\n"
        + _row(columns, Start="480.0", Duration="307.910000", Name="cudaMallocManaged")
        + _row(columns, Start="488.05", Virtual_Address="0x7612d2000000", **fault)
        + _row(columns, Start="488.82", Virtual_Address="0x7612d2010000", **fault)
        + _row(columns, Start="491.48", Duration="25.952000", **copy)
        + _row(columns, Start="491.90", Duration="23.967000", **copy)
        + _row(columns, Start="492.0", Duration="303.860000", Name="cudaLaunchKernel")
    )
    profile = _one(_write(tmp_path, text))
    malloc = _get(profile, K.API, "cudaMallocManaged")
    assert (malloc.device, _times(malloc)) == (Device.CPU, (1, 307_910, 307_910, 307_910))
    assert _get(profile, K.API, "cudaLaunchKernel").device is Device.CPU
    faults = _get(profile, K.MEMORY, "[Unified Memory CPU page faults]")
    assert (faults.calls, faults.total_ns, faults.samples_ns) == (2, None, None)
    assert faults.attrs == {"rows_without_duration": 2}
    um_copy = _get(profile, K.MEMORY, "[Unified Memory Memcpy HtoD]")
    assert (um_copy.device, _times(um_copy)) == (Device.GPU, (2, 49_919, 23_967, 25_952))


# --- the API trace ------------------------------------------------------------------------------


def test_api_trace_rows_become_api_metrics(tmp_path: Path) -> None:
    profile = _one(_write(tmp_path, "======== Profiling result:\n" + API_TRACE))
    launch = _get(profile, K.API, "cudaLaunchKernel")
    assert launch.device is Device.CPU
    assert _times(launch) == (3, 12_600, 3_300, 5_100)
    assert launch.samples_ns == [5_100, 4_200, 3_300]
    assert launch.avg_ns == 4_200
    assert launch.attrs == {}
    assert [m.name for m in profile.metrics] == [
        "cuDeviceGetPCIBusId",
        "cudaMemcpy",
        "cudaLaunchKernel",
    ]
    assert all(m.kind is K.API for m in profile.metrics)


# --- a trace and a summary of the same launches -------------------------------------------------


def test_trace_and_summary_of_the_same_launches_give_the_same_series(tmp_path: Path) -> None:
    traced = _one(_write(tmp_path, GPU_TRACE + "\n" + API_TRACE, "trace.csv"))
    summed = _one(_write(tmp_path, BANNER + SUMMARY, "summary.csv"))
    assert len(_timed(traced)) == 8
    assert _series(traced) == _series(summed)
    # Only the trace has the launches themselves.
    assert all(m.samples_ns for m in _timed(traced))
    assert not any(m.samples_ns for m in summed.metrics)


def test_summary_wins_over_a_trace_of_the_same_result(tmp_path: Path) -> None:
    text = BANNER + SUMMARY + "\n" + GPU_HEADER + GPU_UNITS + GPU_ROWS + "\n" + API_TRACE
    profile = _one(_write(tmp_path, text))
    assert _series(profile) == _series(_one(_write(tmp_path, BANNER + SUMMARY, "summary.csv")))
    assert not any(m.samples_ns for m in profile.metrics)
    assert profile.warnings == [
        "7 rows of the GPU trace (table at line 15) were not read: the summary of the same "
        "result already counts these calls, and perfci counts each call once",
        "7 rows of the API trace (table at line 25) were not read: the summary of the same "
        "result already counts these calls, and perfci counts each call once",
    ]


def test_a_gpu_summary_leaves_the_api_trace_to_be_read(tmp_path: Path) -> None:
    gpu_summary = "".join(line + "\n" for line in SUMMARY.splitlines() if "API calls" not in line)
    profile = _one(_write(tmp_path, BANNER + API_TRACE + "\n" + gpu_summary))
    assert _get(profile, K.KERNEL, ADD).samples_ns is None  # from the summary
    assert _get(profile, K.API, "cudaMemcpy").samples_ns == [10_000, 20_000, 30_000]
    assert profile.warnings == []


def test_a_name_another_table_gives_is_not_added_twice(tmp_path: Path) -> None:
    """A --metrics table names the kernel already: the trace must not add a second series."""
    metrics = (
        '"Device","Kernel","Invocations","Metric Name","Metric Description","Min","Max","Avg"\n'
        f'"{GPU0}","{ADD}",2,"ipc","Executed IPC",1.200000,1.400000,1.300000\n'
    )
    profile = _one(_write(tmp_path, BANNER + metrics + "\n" + GPU_HEADER + GPU_UNITS + GPU_ROWS))
    kernels = [m for m in profile.metrics if m.name == ADD]
    assert len(kernels) == 1 and kernels[0].total_ns is None
    assert _get(profile, K.MEMORY, "[CUDA memcpy HtoD]").total_ns == 4_800
    assert (
        "2 rows of the GPU trace (table at line 7) for 1 name(s) that another table of the same "
        f"result already gives (first: {ADD!r}) were not read"
    ) in profile.warnings


def test_each_result_block_has_its_own_trace(tmp_path: Path) -> None:
    second = GPU_TRACE.replace("2119", "2120").replace("2.304000", "2.404000")
    profiles = registry.parse_file(_write(tmp_path, GPU_TRACE + "\n" + second))
    assert [p.label for p in profiles] == ["./fusion_bench -n 10 #1", "./fusion_bench -n 10 #2"]
    assert [p.find(K.KERNEL, ADD).total_ns for p in profiles] == [4_304, 4_404]  # type: ignore[union-attr]


# --- detection ----------------------------------------------------------------------------------


def test_trace_tables_without_a_banner_are_detected(tmp_path: Path) -> None:
    gpu = _write(tmp_path, GPU_HEADER + GPU_UNITS + GPU_ROWS, "gpu.csv")
    api = _write(tmp_path, API_TRACE, "api.csv")
    assert registry.detect(gpu).name == "nvprof"
    assert registry.detect(api).name == "nvprof"
    assert _one(gpu).label == "nvprof"
    assert _get(_one(api), K.API, "cudaMemcpy").total_ns == 60_000


def test_sniff_wants_the_trace_header_with_its_units_row() -> None:
    assert nvprof.sniff(_head(GPU_HEADER + GPU_UNITS))
    assert nvprof.sniff(_head(API_TRACE.replace("\n", "\r\n")))
    lookalikes = (
        '"Start","Duration","Name"\n1.0,2.0,"k"\n',  # no units row
        "Start,Duration,Grid X,Grid Y,Grid Z\nus,us,,,\n",  # not nvprof's quoting
        '"Start (ns)","Duration (ns)","CorrId","GrdX","GrdY","GrdZ","BlkX","BlkY","BlkZ","Name"\n'
        "1000,2304,320,128,1,1,256,1,1,add\n",  # nsys stats --report cuda_gpu_trace
    )
    for text in lookalikes:
        assert not nvprof.sniff(_head(text)), text


# --- cut, broken and odd files --------------------------------------------------------------------


def test_cut_last_row_is_not_read_and_the_rows_before_are(tmp_path: Path) -> None:
    cut = GPU_TRACE[: GPU_TRACE.index(ADD + '",324') + 10]  # inside the 2nd add row's name
    profile = _one(_write(tmp_path, cut))
    add = _get(profile, K.KERNEL, ADD)
    assert (add.calls, add.samples_ns) == (1, [2_304])
    assert [m.name for m in _timed(profile)] == ["[CUDA memset]", "[CUDA memcpy HtoD]", ADD]
    assert len(profile.warnings) == 1
    assert profile.warnings[0].startswith(
        "line 9: the file ends in the middle of a line, which was not read: '4660.2,2.000000,"
    )


def test_a_row_cut_inside_its_name_starts_no_series(tmp_path: Path) -> None:
    """With Name the last column, a row cut inside the name has all its cells: it is still not
    read, as its cut name would be a series of its own."""
    cut = OLD_TRACE[: OLD_TRACE.index("[1084]") - 12]
    profile = _one(_write(tmp_path, cut))
    assert [m.name for m in _timed(profile)] == ["[CUDA memcpy HtoD]", MATMUL]
    assert _get(profile, K.KERNEL, MATMUL).calls == 1
    assert profile.warnings[0].startswith("line 9: the file ends in the middle of a line")


def test_units_row_with_a_unit_perfci_does_not_know(tmp_path: Path) -> None:
    units = "us,us,,,,,,,,KB,KB,KB,Gbit/s,,,,,,,\n"
    profile = _one(_write(tmp_path, GPU_TRACE.replace(GPU_UNITS, units)))
    assert _get(profile, K.KERNEL, ADD).total_ns == 4_304


def test_bad_duration_names_line_and_column(tmp_path: Path) -> None:
    text = GPU_TRACE.replace("4650.1,2.304000,", "4650.1,2.3o4000,")
    with pytest.raises(
        ParseError,
        match=r"trace\.csv:8: expected a duration .* in column Duration, got '2\.3o4000'",
    ) as info:
        registry.parse_file(_write(tmp_path, text))
    assert info.value.line == 8


def test_bad_size_names_line_and_column(tmp_path: Path) -> None:
    text = GPU_TRACE.replace("0.125000,0.077610", "0.125.000,0.077610")
    with pytest.raises(
        ParseError, match=r":7: expected a size .* in column Size, got '0\.125\.000'"
    ):
        registry.parse_file(_write(tmp_path, text))


def test_duration_without_a_units_row_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match=r":5: expected a duration .* column Duration"):
        registry.parse_file(_write(tmp_path, GPU_TRACE.replace(GPU_UNITS, "")))


def test_a_short_row_inside_the_table_is_an_error(tmp_path: Path) -> None:
    text = GPU_TRACE.replace(f'"{ADD}",320', f'"{ADD}"')
    with pytest.raises(
        ParseError, match=r":8: expected 20 CSV cells like the header on line 4, got 19"
    ):
        registry.parse_file(_write(tmp_path, text))


def test_crlf_line_ends_read_like_lf(tmp_path: Path) -> None:
    lf = _one(_write(tmp_path, GPU_TRACE, "lf.csv"))
    crlf = _one(_write(tmp_path, GPU_TRACE.replace("\n", "\r\n"), "crlf.csv"))
    assert crlf.warnings == []
    assert [(m.key, m.samples_ns, m.bytes) for m in crlf.metrics] == [
        (m.key, m.samples_ns, m.bytes) for m in lf.metrics
    ]


def test_empty_duration_cells_count_as_calls_without_samples(tmp_path: Path) -> None:
    text = GPU_TRACE.replace("4660.2,2.000000,", "4660.2,,")
    add = _get(_one(_write(tmp_path, text)), K.KERNEL, ADD)
    assert (add.calls, add.samples_ns, add.total_ns, add.avg_ns) == (2, [2_304], 2_304, 2_304)
    assert add.attrs["rows_without_duration"] == 1


# --- the text trace -----------------------------------------------------------------------------

TEXT_TRACE = (
    "==30176== NVPROF is profiling process 30176, command: ./vectorAddGPU\n"
    "Test PASSED\n"
    "==30176== Profiling application: ./vectorAddGPU\n"
    "==30176== Profiling result:\n"
    "   Start  Duration            Grid Size      Block Size     Regs*    SSMem*    DSMem*      "
    "Size  Throughput  SrcMemType  DstMemType           Device   Context    Stream  Name\n"
    "182.96ms  6.4049ms                    -               -         -         -         -  "
    "38.147MB  5.8163GB/s    Pageable      Device  GeForce GT 650M         1         7  "
    "[CUDA memcpy HtoD]\n"
    "195.89ms  3.4072ms          (39063 1 1)       (256 1 1)         8        0B        0B  "
    "       -           -           -           -  GeForce GT 650M         1         7  "
    "vectorAdd(float const *, float const *, float*, int) [112]\n"
    "\n"
    "Regs: Number of registers used per CUDA thread.\n"
)


VECTOR_ADD = "vectorAdd(float const *, float const *, float*, int)"
DATA = Path(__file__).parent / "data" / "nvprof"


def test_a_text_trace_is_read_by_its_column_positions(tmp_path: Path) -> None:
    """Issue 33: the text trace was refused ("device and kernel names hold spaces"); its
    cells end where their titles end, so the spaces of ``GeForce GT 650M`` and of the
    kernel's signature are no ambiguity."""
    path = _write(tmp_path, TEXT_TRACE, "trace.log")
    assert registry.detect(path).name == "nvprof"
    profile = _one(path)
    assert profile.label == "./vectorAddGPU"
    assert [(m.kind, m.name) for m in _timed(profile)] == [
        (K.MEMORY, "[CUDA memcpy HtoD]"),
        (K.KERNEL, VECTOR_ADD),  # without the launch's correlation id, as the summary
    ]
    add = _get(profile, K.KERNEL, VECTOR_ADD)
    assert (add.calls, add.samples_ns, add.device) == (1, [3_407_200], Device.GPU)
    assert add.attrs == {
        "grids": ["39063x1x1"],
        "blocks": ["256x1x1"],
        "devices": ["GeForce GT 650M"],
    }
    copy = _get(profile, K.MEMORY, "[CUDA memcpy HtoD]")
    assert (copy.samples_ns, copy.bytes) == ([6_404_900], round(38.147 * 1024**2))
    [rate] = [m for m in profile.metrics if m.kind is K.COUNTER and m.name == "throughput"]
    assert rate.scope == "[CUDA memcpy HtoD]"
    assert rate.samples == pytest.approx([5.8163 * 1024**3])
    # Without its banner too: the header alone says what it is.
    headless = _write(tmp_path, TEXT_TRACE.split("Profiling result:\n")[1], "headless.log")
    assert registry.detect(headless).name == "nvprof"
    assert _series(_one(headless)) == _series(profile)


def test_a_text_trace_beside_a_summary_of_the_same_result_counts_once(tmp_path: Path) -> None:
    summary = (
        "            Type  Time(%)      Time     Calls       Avg       Min       Max  Name\n"
        " GPU activities:  100.00%  3.4072ms         1  3.4072ms  3.4072ms  3.4072ms  "
        "vectorAdd(float const *, float const *, float*, int)\n\n"
    )
    profile = _one(_write(tmp_path, TEXT_TRACE + summary))
    assert [m.name for m in profile.metrics] == [VECTOR_ADD]
    assert any(
        w.startswith("2 rows of the GPU trace (table at line 5) were not read: the summary")
        for w in profile.warnings
    )


def test_text_trace_of_cuda_10_every_launch_and_copy() -> None:
    """``tests/data/nvprof/gpu_trace_cuda10.txt``: memory types, a cut device name."""
    [profile] = registry.parse_file(DATA / "gpu_trace_cuda10.txt")
    assert profile.warnings == []
    reduce = "void reduce_sum<float, int=512>(float const *, float*, int)"
    assert [(m.kind, m.name) for m in _timed(profile)] == [
        (K.MEMORY, "[CUDA memcpy HtoD]"),
        (K.MEMORY, "[CUDA memset]"),
        (K.KERNEL, VECTOR_ADD),
        (K.KERNEL, reduce),
        (K.MEMORY, "[CUDA memcpy DtoH]"),
    ]
    add = _get(profile, K.KERNEL, VECTOR_ADD)
    assert (add.calls, add.samples_ns, add.total_ns) == (2, [101_410, 101_250], 202_660)
    sums = _get(profile, K.KERNEL, reduce)
    assert sums.samples_ns == [55_808, 3_488]
    assert (sums.attrs["grids"], sums.attrs["blocks"]) == (["2048x1x1", "1x1x1"], ["512x1x1"])
    assert sums.attrs["devices"] == ["Tesla V100-SXM2"]
    htod = _get(profile, K.MEMORY, "[CUDA memcpy HtoD]")
    assert (htod.calls, htod.samples_ns, htod.bytes) == (2, [1_059_000, 1_049_700], 2 * 4 << 20)
    dtoh = _get(profile, K.MEMORY, "[CUDA memcpy DtoH]")
    assert (dtoh.samples_ns, dtoh.bytes) == ([2_112, 1_327_100], 4 + (4 << 20))
    counters = {(m.scope, m.name): m for m in profile.metrics if m.kind is K.COUNTER}
    assert counters["[CUDA memcpy DtoH]", "size"].samples == [4, 4 << 20]
    assert counters["[CUDA memcpy DtoH]", "throughput"].samples == pytest.approx(
        [1.8062 * 1024**2, 2.9434 * 1024**3]
    )
    assert counters["[CUDA memset]", "throughput"].samples == pytest.approx([1672.2 * 1024**3])


def test_text_trace_of_cuda_8_without_memory_types() -> None:
    """``tests/data/nvprof/gpu_trace_cuda8.txt``: narrower columns, ``Tesla K80 (0)``."""
    [profile] = registry.parse_file(DATA / "gpu_trace_cuda8.txt")
    image = "void computeImage<float>(float*, float, unsigned int, unsigned int)_105_gpu"
    color = "void colorImage<float>(float*, unsigned int, unsigned int, unsigned int)_55_gpu"
    assert [m.name for m in _timed(profile)] == [
        "[CUDA memcpy HtoD]",
        image,
        color,
        "[CUDA memcpy DtoH]",
    ]
    assert _get(profile, K.KERNEL, image).samples_ns == [1_229_400, 1_230_100]
    assert _get(profile, K.KERNEL, color).samples_ns == [2_384_300, 2_385_100]
    assert _get(profile, K.KERNEL, color).attrs["devices"] == ["Tesla K80 (0)"]
    assert _get(profile, K.MEMORY, "[CUDA memcpy DtoH]").bytes == 768 * 1024


def test_a_text_trace_row_whose_cells_cannot_be_told_apart_is_refused(tmp_path: Path) -> None:
    """A device cell that runs past its column: with spaces in the device and the name, where
    one cell ends is a guess, and perfci does not guess."""
    lines = (DATA / "gpu_trace_cuda10.txt").read_text().splitlines(keepends=True)
    lines[12] = lines[12].replace("Tesla V100-SXM2  ", "Tesla V100-SXM2-16GB  ")
    path = _write(tmp_path, "".join(lines), "shifted.log")
    with pytest.raises(ParseError, match=r"shifted\.log:13: cannot read this trace row: the "):
        registry.parse_file(path)


def test_a_cut_last_text_trace_row_is_not_read(tmp_path: Path) -> None:
    text = (DATA / "gpu_trace_cuda10.txt").read_text()
    cut = text[: text.index("[126]") - 30]  # inside the last launch's row
    profile = _one(_write(tmp_path, cut, "cut.log"))
    reduce = "void reduce_sum<float, int=512>(float const *, float*, int)"
    assert _get(profile, K.KERNEL, reduce).samples_ns == [55_808]
    assert profile.warnings[0].startswith("line 17: the file ends in the middle of a line")
