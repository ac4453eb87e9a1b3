"""Nsight Systems SQLite exports (perfci.formats.nsys.nsys_sqlite).

The five real exports in ../shared/corpus/nsys_sqlite (nsys 2023.1 to 2024.6, schemas 3.1.2 to
3.16.1) are checked against hard-coded numbers and against independent SQL on the same file.
What the corpus lacks (NVTX ranges and steps, NCCL kernels, missing enum tables, nvprof
databases, broken files) is covered with small databases built here.
"""

from __future__ import annotations

import gzip
import hashlib
import shutil
import sqlite3
from collections.abc import Iterable, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from perfci.core.errors import ParseError
from perfci.core.model import Device, Metric, MetricKind, Profile
from perfci.formats import registry
from perfci.formats.nsys import _sqlite_schema, nsys_sqlite

K = MetricKind
JIANG = "JiangShanCode_CUDATutorial__report1.sqlite"
JORGE = "Jorgedavyd_cuda__profiling_report4.sqlite"
RAJA = "RajaATAli_SC23-OpenMP__report3.sqlite"
HAROON = "haroonsyed_NVIDIA_SGEMM_PRACTICE__report1.sqlite"
NIKITIN = "nikitinvv_recon-stream__prof19.nvvp.sqlite"
ALL = (JIANG, JORGE, RAJA, HAROON, NIKITIN)


def _corpus(corpus_dir: Path, name: str) -> Path:
    return corpus_dir / "nsys_sqlite" / name


def _parse(path: Path) -> Profile:
    profiles = registry.parse_file(path)
    assert len(profiles) == 1
    return profiles[0]


def _query(path: Path, sql: str) -> list[tuple[Any, ...]]:
    """Independent read of the file, with the sqlite3 module and nothing from perfci."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)) as conn:
        return conn.execute(sql).fetchall()


def _get(profile: Profile, kind: MetricKind, name: str) -> Metric:
    metric = profile.find(kind, name)
    assert metric is not None, f"no {kind.value} {name!r} in {[m.name for m in profile.metrics]}"
    return metric


# --------------------------------------------------------------------------- real exports


@pytest.mark.parametrize("name", ALL)
def test_every_export_is_detected_as_nsys_sqlite(corpus_dir: Path, name: str) -> None:
    assert registry.detect(_corpus(corpus_dir, name)).name == "nsys_sqlite"


@pytest.mark.parametrize("name", [JIANG, JORGE, RAJA, NIKITIN])
def test_kernels_match_direct_sql(corpus_dir: Path, name: str) -> None:
    path = _corpus(corpus_dir, name)
    expected = _query(
        path,
        "SELECT s.value, COUNT(*), SUM(k.end - k.start) "
        "FROM CUPTI_ACTIVITY_KIND_KERNEL k "
        "JOIN StringIds s ON s.id = k.demangledName GROUP BY s.value",
    )
    profile = _parse(path)
    got = {(m.name, m.calls, m.total_ns) for m in profile.by_kind(K.KERNEL)}
    assert got == {(kernel, calls, float(total)) for kernel, calls, total in expected}


@pytest.mark.parametrize("name", ALL)
def test_runtime_calls_match_direct_sql(corpus_dir: Path, name: str) -> None:
    path = _corpus(corpus_dir, name)
    rows = _query(
        path,
        "SELECT s.value, COUNT(*), SUM(r.end - r.start) "
        "FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
        "JOIN StringIds s ON s.id = r.nameId GROUP BY s.value",
    )
    expected: dict[str, tuple[int, float]] = {}
    for raw, calls, total in rows:
        # nsys stats drops a "_v" + 4-character version suffix (_v3020) and keeps longer ones.
        clean = raw[:-6] if raw[-6:-4] == "_v" else raw
        before = expected.get(clean, (0, 0.0))
        expected[clean] = (before[0] + calls, before[1] + total)
    profile = _parse(path)
    assert {m.name: (m.calls, m.total_ns) for m in profile.by_kind(K.API)} == expected


def test_jiang_2023_3_export(corpus_dir: Path) -> None:
    profile = _parse(_corpus(corpus_dir, JIANG))
    kernel = _get(profile, K.KERNEL, "reduce_baseline(const int *, int *, unsigned long)")
    assert (kernel.calls, kernel.total_ns, kernel.device) == (1, 1_042_014_582.0, Device.GPU)
    assert kernel.attrs["short_name"] == "reduce_baseline"
    htod = _get(profile, K.MEMORY, "[CUDA memcpy Host-to-Device]")
    assert (htod.calls, htod.total_ns, htod.bytes) == (1, 8_614_971.0, 102_400_000.0)
    malloc = _get(profile, K.API, "cudaMalloc")  # cudaMalloc_v3020 in StringIds
    assert (malloc.calls, malloc.total_ns, malloc.min_ns, malloc.max_ns) == (
        2,
        66_778_542.0,
        39_391.0,
        66_739_151.0,
    )
    assert malloc.median_ns == 33_389_271.0
    ioctl = _get(profile, K.OS, "ioctl")
    assert (ioctl.calls, ioctl.total_ns, ioctl.device) == (486, 72_748_115.0, Device.CPU)
    # The "OS runtime libraries profiling started/finished" marks are not OS calls.
    assert not [m for m in profile.by_kind(K.OS) if m.name.startswith("OS runtime")]
    assert len(profile.by_kind(K.OS)) == 25
    assert profile.metadata["nsys_version"] == "2023.3.3.42"
    assert profile.metadata["schema_version"] == "3.4.0"
    assert profile.metadata["gpus"] == ["NVIDIA GeForce RTX 3060"]
    assert profile.steps is None and profile.warnings == []


def test_jorgedavyd_2024_6_export(corpus_dir: Path) -> None:
    profile = _parse(_corpus(corpus_dir, JORGE))
    kernel = _get(profile, K.KERNEL, "wave_residual_shared(float *, float *, float, float, int)")
    assert (kernel.calls, kernel.total_ns, kernel.min_ns, kernel.max_ns, kernel.median_ns) == (
        2,
        2656.0,
        1280.0,
        1376.0,
        1328.0,
    )
    assert kernel.std_ns == pytest.approx(67.882251, abs=1e-5)  # sample std of 1280, 1376
    dtoh = _get(profile, K.MEMORY, "[CUDA memcpy Device-to-Host]")
    assert (dtoh.calls, dtoh.total_ns, dtoh.bytes) == (2, 3040.0, 4096.0)
    assert _get(profile, K.API, "cudaMemcpyAsync").calls == 4
    assert profile.metadata["nsys_version"] == "2024.6.2.225"
    assert profile.metadata["schema_version"] == "3.16.1"


def test_raja_openmp_offload_export(corpus_dir: Path) -> None:
    profile = _parse(_corpus(corpus_dir, RAJA))
    kernel = _get(profile, K.KERNEL, "nvkernel_solve_F1L204_2")
    assert (kernel.calls, kernel.total_ns, kernel.min_ns, kernel.max_ns) == (
        50,
        1_071_243_791.0,
        20_698_883.0,
        36_062_345.0,
    )
    htod = _get(profile, K.MEMORY, "[CUDA memcpy Host-to-Device]")
    assert (htod.calls, htod.total_ns, htod.bytes) == (100, 13_380_195_901.0, 51_200_000_000.0)
    # Driver API names keep their short "_v2" (nsys prints cuMemcpyDtoHAsync_v2 too).
    assert _get(profile, K.API, "cuMemcpyDtoHAsync_v2").calls == 100


def test_haroon_export_without_kernel_table(corpus_dir: Path) -> None:
    path = _corpus(corpus_dir, HAROON)
    assert _query(
        path, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'"
    ) == [(0,)]
    profile = _parse(path)
    assert profile.by_kind(K.KERNEL) == [] and profile.by_kind(K.MEMORY) == []
    assert sum(m.calls or 0 for m in profile.by_kind(K.API)) == 2307
    launch = _get(profile, K.API, "cudaLaunchKernel")
    assert (launch.calls, launch.total_ns) == (192, 2_579_634.0)
    # A 5-digit version suffix stays, as in nsys stats output.
    assert profile.find(K.API, "cudaStreamGetCaptureInfo_v2_v11030") is not None
    # Schema 3.1.7 keeps its metadata in EXPORT_META_DATA, not META_DATA_EXPORT.
    assert profile.metadata["nsys_version"] == "2023.2.3.1001"
    assert profile.metadata["tables"] == ["CUPTI_ACTIVITY_KIND_RUNTIME"]


def test_nikitin_export_with_memset(corpus_dir: Path) -> None:
    profile = _parse(_corpus(corpus_dir, NIKITIN))
    memset = _get(profile, K.MEMORY, "[CUDA memset]")
    assert (memset.calls, memset.total_ns, memset.bytes) == (1, 1153.0, 8.0)
    log = _get(profile, K.KERNEL, "cupy_log__float64_float64")
    assert (log.calls, log.total_ns, log.min_ns, log.max_ns) == (2, 4864.0, 1920.0, 2944.0)
    assert len(profile.by_kind(K.KERNEL)) == 5
    assert profile.metadata["gpus"] == ["NVIDIA A100-SXM4-40GB"] * 4
    assert profile.metadata["schema_version"] == "3.1.2"


def test_parsing_never_writes(corpus_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "copy.sqlite"
    shutil.copyfile(_corpus(corpus_dir, JORGE), path)
    before = hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns
    _parse(path)
    assert (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.sqlite"]  # no journal, no wal


# --------------------------------------------------------------------------- built databases


def _db(
    path: Path, tables: dict[str, Sequence[str]], rows: dict[str, Iterable[Sequence[Any]]]
) -> Path:
    with closing(sqlite3.connect(path)) as conn:
        for table, columns in tables.items():
            conn.execute(f"CREATE TABLE {table} ({', '.join(f'{c!r}' for c in columns)})")
        for table, values in rows.items():
            values = list(values)
            if values:
                marks = ", ".join("?" * len(values[0]))
                conn.executemany(f"INSERT INTO {table} VALUES ({marks})", values)
        conn.commit()
    return path


STRINGS = ("id", "value")
RUNTIME_COLUMNS = (
    "start",
    "end",
    "eventClass",
    "globalTid",
    "correlationId",
    "nameId",
    "returnValue",
    "callchainId",
)
NVTX_COLUMNS = (
    "start",
    "end",
    "eventType",
    "rangeId",
    "category",
    "color",
    "text",
    "globalTid",
    "endGlobalTid",
    "textId",
    "domainId",
)
KERNEL_COLUMNS = (
    "start",
    "end",
    "deviceId",
    "streamId",
    "correlationId",
    "demangledName",
    "shortName",
)
MEMCPY_COLUMNS = ("start", "end", "deviceId", "streamId", "bytes", "copyKind")


def test_runtime_only_database(tmp_path: Path) -> None:
    """Only StringIds and a runtime table: every other table is optional."""
    path = _db(
        tmp_path / "runtime.sqlite",
        {"StringIds": STRINGS, "CUPTI_ACTIVITY_KIND_RUNTIME": ("start", "end", "nameId")},
        {
            "StringIds": [(1, "cudaMalloc_v3020"), (2, "cudaLaunchKernel_v7000")],
            "CUPTI_ACTIVITY_KIND_RUNTIME": [(0, 100, 1), (200, 500, 1), (600, 610, 2)],
        },
    )
    profile = _parse(path)
    assert [(m.kind, m.name, m.calls, m.total_ns) for m in profile.metrics] == [
        (K.API, "cudaLaunchKernel", 1, 10.0),
        (K.API, "cudaMalloc", 2, 400.0),
    ]
    malloc = _get(profile, K.API, "cudaMalloc")
    assert (malloc.avg_ns, malloc.median_ns, malloc.min_ns, malloc.max_ns) == (
        200.0,
        200.0,
        100.0,
        300.0,
    )
    assert malloc.std_ns == pytest.approx(141.421356, abs=1e-5)
    assert profile.steps is None and profile.metadata["tables"] == ["CUPTI_ACTIVITY_KIND_RUNTIME"]


def _nvtx_db(path: Path, step_name: str = "train_step {}") -> Path:
    pid_tid = (4242 << 24) | 4242
    strings = [(1, "forward"), (2, "cudaLaunchKernel_v7000")]
    events: list[tuple[Any, ...]] = [
        (0, None, 75, None, None, None, "NCCL", pid_tid, None, None, 7),  # domain create
        (5, None, 34, None, None, None, "a mark", pid_tid, None, None, 0),  # NvtxMark: no end
    ]
    step_ns = [3000, 1000, 1010, 990, 1000]  # the first step is warm-up (3x the rest)
    start = 10_000
    for number, duration in enumerate(step_ns):
        events.append(
            (
                start,
                start + duration,
                60,
                None,
                None,
                None,
                step_name.format(number),
                pid_tid,
                pid_tid,
                None,
                0,
            )
        )
        # registered string (textId) pushed inside each step
        events.append((start + 10, start + 110, 59, None, None, None, None, pid_tid, None, 1, 0))
        start += 5000
    events.append((50_000, 50_700, 59, None, None, None, "ncclAllReduce", pid_tid, None, None, 7))
    return _db(
        path,
        {
            "StringIds": STRINGS,
            "NVTX_EVENTS": NVTX_COLUMNS,
            "CUPTI_ACTIVITY_KIND_RUNTIME": RUNTIME_COLUMNS,
        },
        {
            "StringIds": strings,
            "NVTX_EVENTS": events,
            "CUPTI_ACTIVITY_KIND_RUNTIME": [(1, 4, 0, pid_tid, 1, 2, 0, None)],
        },
    )


def test_nvtx_ranges_and_steps(tmp_path: Path) -> None:
    profile = _parse(_nvtx_db(tmp_path / "nvtx.sqlite"))
    step = _get(profile, K.STEP, "train_step")
    assert step.samples_ns == [3000.0, 1000.0, 1010.0, 990.0, 1000.0]
    assert (step.calls, step.total_ns, step.warmup, step.device) == (5, 7000.0, 1, Device.CPU)
    assert profile.steps == 5
    # Numbered steps fold into the step metric instead of five one-call ranges.
    assert not [m for m in profile.by_kind(K.RANGE) if m.name.startswith("train_step")]
    forward = _get(profile, K.RANGE, "forward")  # text from StringIds through textId
    assert (forward.calls, forward.total_ns, forward.attrs["style"]) == (5, 500.0, "PushPop")
    nccl = _get(profile, K.RANGE, "NCCL:ncclAllReduce")  # non-default domain prefixed
    assert (nccl.calls, nccl.total_ns) == (1, 700.0)
    assert profile.find(K.RANGE, "a mark") is None  # marks are instants, not ranges
    assert len(profile.by_kind(K.RANGE)) == 2
    assert _get(profile, K.API, "cudaLaunchKernel").total_ns == 3.0


def test_the_steps_perfci_torch_marks_under_nsys(tmp_path: Path) -> None:
    """``profile_steps`` under ``--profiler nsys`` pushes ``ProfilerStep#N`` NVTX ranges."""
    profile = _parse(_nvtx_db(tmp_path / "nvtx.sqlite", step_name="ProfilerStep#{}"))
    step = _get(profile, K.STEP, "ProfilerStep")
    assert step.samples_ns == [3000.0, 1000.0, 1010.0, 990.0, 1000.0] and profile.steps == 5
    assert not [m for m in profile.by_kind(K.RANGE) if m.name.startswith("ProfilerStep")]


def test_nccl_kernels_are_comm_and_memcpy_labels_without_enum(tmp_path: Path) -> None:
    strings = [
        (1, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm *, unsigned long, ncclWork *)"),
        (2, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
        (3, "void gemm<float>(int)"),
        (4, "gemm"),
    ]
    kernels = [(0, 500, 0, 7, 1, 1, 2), (1000, 1300, 0, 7, 2, 1, 2), (0, 40, 0, 8, 3, 3, 4)]
    memcpy = [(0, 10, 0, 7, 64, 8), (20, 50, 0, 7, 128, 8), (60, 70, 0, 7, 4, 10)]
    path = _db(
        tmp_path / "nccl.sqlite",
        {
            "StringIds": STRINGS,
            "CUPTI_ACTIVITY_KIND_KERNEL": KERNEL_COLUMNS,
            "CUPTI_ACTIVITY_KIND_MEMCPY": MEMCPY_COLUMNS,
        },
        {
            "StringIds": strings,
            "CUPTI_ACTIVITY_KIND_KERNEL": kernels,
            "CUPTI_ACTIVITY_KIND_MEMCPY": memcpy,
        },
    )
    profile = _parse(path)
    comm = _get(profile, K.COMM, strings[0][1])
    assert (comm.calls, comm.total_ns, comm.device) == (2, 800.0, Device.GPU)
    assert comm.attrs == {"short_name": strings[1][1], "collective": "AllReduce"}
    assert [m.name for m in profile.by_kind(K.KERNEL)] == ["void gemm<float>(int)"]
    dtod = _get(profile, K.MEMORY, "[CUDA memcpy Device-to-Device]")
    assert (dtod.calls, dtod.total_ns, dtod.bytes) == (2, 40.0, 192.0)
    assert _get(profile, K.MEMORY, "[CUDA memcpy Peer-to-Peer]").bytes == 4.0


def test_nvprof_export_database(tmp_path: Path) -> None:
    """nvprof --export-profile: StringTable, CONCURRENT_KERNEL, cbid-only API, MARKER pairs."""
    path = _db(
        tmp_path / "prof.nvvp",
        {
            "StringTable": ("_id_", "value"),
            "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL": ("_id_", "start", "end", "name"),
            "CUPTI_ACTIVITY_KIND_RUNTIME": (
                "_id_",
                "cbid",
                "start",
                "end",
                "processId",
                "threadId",
                "correlationId",
                "returnValue",
            ),
            "CUPTI_ACTIVITY_KIND_MEMCPY": (
                "_id_",
                "copyKind",
                "srcKind",
                "dstKind",
                "flags",
                "bytes",
                "start",
                "end",
            ),
            "CUPTI_ACTIVITY_KIND_MARKER": (
                "_id_",
                "flags",
                "timestamp",
                "id",
                "objectKind",
                "objectId",
                "domain",
                "name",
            ),
        },
        {
            "StringTable": [(1, "_Z6vecAddPfS_S_i"), (2, "iteration 0"), (3, "iteration 1")],
            "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL": [(1, 100, 160, 1), (2, 200, 270, 1)],
            "CUPTI_ACTIVITY_KIND_RUNTIME": [
                (1, 211, 0, 9, 1, 1, 1, 0),
                (2, 211, 10, 15, 1, 1, 2, 0),
                (3, 9999, 20, 21, 1, 1, 3, 0),
            ],
            "CUPTI_ACTIVITY_KIND_MEMCPY": [(1, 1, 0, 0, 0, 256, 300, 340)],
            # flags 2 = start (named), 4 = end; a pair shares its id
            "CUPTI_ACTIVITY_KIND_MARKER": [
                (1, 2, 0, 1, 0, b"", 0, 2),
                (2, 4, 1000, 1, 0, b"", 0, 0),
                (3, 2, 1000, 2, 0, b"", 0, 3),
                (4, 4, 1800, 2, 0, b"", 0, 0),
            ],
        },
    )
    assert registry.detect(path).name == "nsys_sqlite"
    profile = _parse(path)
    assert profile.label == "nvprof"
    kernel = _get(profile, K.KERNEL, "_Z6vecAddPfS_S_i")
    assert (kernel.calls, kernel.total_ns) == (2, 130.0)
    launch = _get(profile, K.API, "cudaLaunchKernel")
    assert (launch.calls, launch.total_ns) == (2, 14.0)
    assert _get(profile, K.API, "cudaRuntimeApi#9999").calls == 1
    htod = _get(profile, K.MEMORY, "[CUDA memcpy Host-to-Device]")
    assert (htod.total_ns, htod.bytes) == (40.0, 256.0)
    step = _get(profile, K.STEP, "iteration")
    assert step.samples_ns == [1000.0, 800.0] and profile.steps == 2
    assert profile.by_kind(K.RANGE) == []


def test_median_and_std_left_out_above_the_detail_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sqlite_schema, "DETAIL_ROW_LIMIT", 2)
    path = _db(
        tmp_path / "big.sqlite",
        {"StringIds": STRINGS, "CUPTI_ACTIVITY_KIND_RUNTIME": ("start", "end", "nameId")},
        {
            "StringIds": [(1, "cudaFree")],
            "CUPTI_ACTIVITY_KIND_RUNTIME": [(0, 10, 1), (0, 20, 1), (0, 60, 1)],
        },
    )
    profile = _parse(path)
    free = _get(profile, K.API, "cudaFree")
    assert (free.calls, free.total_ns, free.avg_ns, free.median_ns, free.std_ns) == (
        3,
        90.0,
        30.0,
        None,
        None,
    )
    assert profile.warnings == ["3 api events: median and std left out (more than 2)"]


def test_export_with_only_metadata_gives_an_empty_profile(tmp_path: Path) -> None:
    path = _db(
        tmp_path / "empty.sqlite",
        {"StringIds": STRINGS, "META_DATA_EXPORT": ("name", "value")},
        {"META_DATA_EXPORT": [("EXPORT_PRODUCT_VERSION", "2025.5.2.1")]},
    )
    profile = _parse(path)
    assert profile.metrics == [] and profile.metadata["nsys_version"] == "2025.5.2.1"
    assert profile.warnings == ["the export holds no CUDA, NVTX or OS runtime events"]


# --------------------------------------------------------------------------- bad input


def test_plain_sqlite_database_is_refused_clearly(tmp_path: Path) -> None:
    path = _db(tmp_path / "app.db", {"users": ("id", "name")}, {"users": [(1, "ada")]})
    # The sniff cannot see tables, so any SQLite file is routed here; parse says what is wrong.
    assert registry.detect(path).name == "nsys_sqlite"
    with pytest.raises(ParseError) as err:
        registry.parse_file(path)
    assert str(err.value).startswith(f"{path}: SQLite database without Nsight Systems tables")


@pytest.mark.parametrize("size", [100, 4096, 65536, 400_000])
def test_truncated_export(corpus_dir: Path, tmp_path: Path, size: int) -> None:
    path = tmp_path / "cut.sqlite"
    path.write_bytes(_corpus(corpus_dir, JORGE).read_bytes()[:size])
    with pytest.raises(ParseError) as err:
        registry.parse_file(path)
    message = str(err.value)
    assert message.startswith(f"{path}: corrupt or unreadable SQLite database")
    assert message.endswith("(nsys_sqlite)")


def test_garbage_after_the_header(tmp_path: Path) -> None:
    path = tmp_path / "junk.sqlite"
    path.write_bytes(nsys_sqlite.SQLITE_MAGIC + bytes(range(256)) * 40)
    with pytest.raises(ParseError, match="corrupt or unreadable SQLite database"):
        registry.parse_file(path)


def test_not_sqlite_with_forced_format(tmp_path: Path) -> None:
    path = tmp_path / "report.txt"
    path.write_text("Time (%)  Total Time (ns)  Instances\n")
    with pytest.raises(ParseError, match="not an SQLite database: expected the 'SQLite format 3'"):
        registry.parse_file(path, format="nsys_sqlite")


def test_gzipped_export_is_not_sniffed_and_refused(corpus_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "report.sqlite.gz"
    path.write_bytes(gzip.compress(_corpus(corpus_dir, JORGE).read_bytes()))
    assert nsys_sqlite.sniff(registry.read_head(path)) is False
    with pytest.raises(ParseError, match="gzip-compressed SQLite database"):
        registry.parse_file(path, format="nsys_sqlite")


def test_table_without_expected_columns(tmp_path: Path) -> None:
    path = _db(
        tmp_path / "odd.sqlite",
        {"StringIds": STRINGS, "CUPTI_ACTIVITY_KIND_KERNEL": ("begin", "finish")},
        {},
    )
    with pytest.raises(ParseError) as err:
        registry.parse_file(path)
    assert str(err.value) == (
        f"{path}: unexpected export layout: table "
        "CUPTI_ACTIVITY_KIND_KERNEL lacks column(s) start, end "
        "(nsys_sqlite)"
    )
