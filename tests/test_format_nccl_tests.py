"""NVIDIA nccl-tests logs, written here as the tool prints them: every writer passes the printf
format it follows, verbatim, to ``printf`` (NVIDIA/nccl-tests ``src/common.cu`` at d2d40cc,
2019's per-test ``print_header`` of ``src/all_gather.cu`` at 0f8c785, ``src/util.cu`` at
0fdb00a). No public nccl-tests log is in ../shared/corpus."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from conftest import shared_path

from perfci.core.errors import ParseError
from perfci.core.model import Better, Metric, MetricKind, Profile
from perfci.formats import registry
from perfci.formats.workload import nccl_tests

K = MetricKind
MIB = 1024**2
#: One half of a row: (time in µs, algbw, busbw, #wrong; None prints N/A).
Half = tuple[float, float, float, int | None]
OK: Half = (1042.5, 128.75, 225.31, 0)

# common.cu at d2d40cc, run() and TimeTest():
TITLE = (
    "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
)
NAMES = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s"
UNITS = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s"
PREAMBLE = "%12li  %12li  %8s  %6s  %6s"  # bytes, count, typeName, opName, rootName ("%6i")


def printf(format: str, *args: object) -> str:
    """C's printf for these formats (Python ignores the ``l`` of ``%li``; the lines' ``\\n``
    is left out, they are joined)."""
    return format % args


def _config(*, iters: int = 20, validation: int = 1, unalign: bool = False) -> str:
    line = printf(
        "# nThread %d nGpus %d minBytes %ld maxBytes %ld step: %ld(%s) warmup iters: %d "
        "iters: %d agg iters: %d validation: %d graph: %d",
        *(1, 8, 8, 134217728, 2, "factor", 5, iters, 1, validation, 0),
    )
    return line + (printf(" unalign: %d", 0) if unalign else "")  # util.cu's addition


def _devices(ranks: int = 8, hosts: int = 1) -> list[str]:
    per_host = ranks // hosts
    return ["#", "# Using devices"] + [
        printf(
            "#  Rank %2d Group %2d Pid %6d on %10s device %2d [0x%02x] %s",
            *(rank, 0, 4000 + rank, f"node{rank // per_host}", rank % per_host, rank, "H100"),
        )
        for rank in range(ranks)
    ]


def _header(time: str = "time") -> list[str]:
    """``time`` is "cputime" with ``-C 1``."""
    names = ("size", "count", "type", "redop", "root", *(time, "algbw", "busbw", "#wrong") * 2)
    units = ("(B)", "(elements)", "", "", "", *("(us)", "(GB/s)", "(GB/s)", "") * 2)
    return ["#", printf(TITLE, "", "", "", "", ""), printf(NAMES, *names), printf(UNITS, *units)]


def _time(us: float) -> str:
    """BenchTime()'s timeStr: "%7.0f" from 10000 µs, "%7.1f" from 100 µs, else "%7.2f"."""
    return printf("%7.0f" if us >= 10000 else "%7.1f" if us >= 100 else "%7.2f", us)


def _body(half: Half) -> str:
    us, algbw, busbw, wrong = half
    if wrong is None:
        return printf("  %7s  %6.2f  %6.2f  %5s", _time(us), algbw, busbw, "N/A")
    return printf("  %7s  %6.2f  %6.2f  %5g", _time(us), algbw, busbw, wrong)


def _row(
    size: int,
    out: Half = OK,
    inplace: Half = OK,
    *,
    kind: str = "float",
    redop: str = "sum",
    root: int = -1,
) -> str:
    count = size // (2 if kind == "half" else 4)
    preamble = printf(PREAMBLE, size, count, kind, redop, printf("%6i", root))
    return preamble + _body(out) + _body(inplace)


def _footer(busbw: float, errors: int = 0) -> list[str]:
    return [
        printf("# Out of bounds values : %d %s", errors, "FAILED" if errors else "OK"),
        printf("# Avg bus bandwidth    : %g %s", busbw, ""),  # "" unless NCCL_TESTS_MIN_BW
        "#",
        "",  # PRINT("%s\n", ncclGetLastError(NULL))
    ]


def _test(rows: list[str], busbw: float = 112.8, *, iters: int = 20) -> list[str]:
    return [_config(iters=iters), *_devices(), *_header(), *rows, *_footer(busbw)]


def _write(
    tmp_path: Path, lines: list[str], *, newline: str = "\n", cut: bool = False, name: str = "n.log"
) -> Path:
    path = tmp_path / name
    path.write_bytes((newline.join(lines) + ("" if cut else newline)).encode())
    return path


def _parse(path: Path, **options: str) -> list[Profile]:
    assert registry.detect(path).name == "nccl_tests"
    return registry.parse_file(path, options=options)


def _comm(profile: Profile, name: str) -> Metric:
    metric = profile.find(K.BENCH, name)
    assert metric is not None, f"no comm {name!r}: {[m.name for m in profile.metrics]}"
    return metric


def _busbw(profile: Profile) -> float | None:
    metric = profile.find(K.MEASURE, "avg bus bandwidth")
    assert metric is not None, "no avg bus bandwidth"
    return metric.value


def test_each_size_is_a_collective_per_half_with_its_time_and_bandwidths(tmp_path: Path) -> None:
    lines = [
        "+ mpirun -np 1 ./build/all_reduce_perf -b 8 -e 128M -f 2 -g 8",
        *_test([_row(8, (36.21, 0.0, 0.0, 0), (35.95, 0.0, 0.0, 0)), _row(128 * MIB)]),
    ]
    [profile] = _parse(_write(tmp_path, lines))
    assert profile.label == "all_reduce"  # from the command the CI script echoed
    assert _comm(profile, "all_reduce 8 B").avg_ns == pytest.approx(36_210.0)
    assert _comm(profile, "all_reduce 8 B (in-place)").avg_ns == pytest.approx(35_950.0)
    big = _comm(profile, "all_reduce 128 MiB")
    # Each printed time is the mean over "iters" launches.
    assert (big.calls, big.samples_ns) == (20, [pytest.approx(1_042_500.0)])
    assert big.total_ns == pytest.approx(20 * 1_042_500.0)
    assert big.bytes == 20 * 128 * MIB
    assert (big.attrs["algbw_gb_s"], big.attrs["busbw_gb_s"]) == (128.75, 225.31)
    assert (big.attrs["msg_size_bytes"], big.attrs["count"]) == (128 * MIB, 32 * MIB)
    assert (big.attrs["type"], big.attrs["redop"], big.attrs["in_place"]) == ("float", "sum", False)
    assert "root" not in big.attrs  # -1: all_reduce has none
    assert profile.steps == 20
    assert len(profile.by_kind(K.BENCH)) == 4
    assert profile.warnings == []


def test_avg_bus_bandwidth_is_a_measure_higher_is_better(tmp_path: Path) -> None:
    [profile] = _parse(_write(tmp_path, _test([_row(MIB)], busbw=448.212)))
    measure = profile.find(K.MEASURE, "avg bus bandwidth")
    assert measure is not None
    assert (measure.value, measure.unit, measure.better) == (448.212, "GB/s", Better.HIGHER)


def test_settings_and_devices_are_metadata(tmp_path: Path) -> None:
    lines = [_config(iters=50), *_devices(ranks=16, hosts=2), *_header(), _row(MIB)]
    [profile] = _parse(_write(tmp_path, [*lines, *_footer(1.0)]))
    assert profile.metadata == {
        "threads": 1,
        "gpus_per_thread": 8,
        "min_bytes": 8,
        "max_bytes": 134217728,
        "step_factor": 2,
        "warmup_iters": 5,
        "iters": 50,
        "agg_iters": 1,
        "validation": 1,
        "cuda_graph_launches": 0,
        "ranks": 16,
        "hosts": 2,
        "devices": ["H100"],
        "data_types": ["float"],
    }
    assert profile.steps == 50


def _newer(program: str, rows: list[str], *, busbw: float = 50.68) -> list[str]:
    """A test as util.cu (0fdb00a) prints it: writeDeviceReport(), writeResultHeader() (no
    timestamp: "%*s" with 0, ""), the rows, writeResultFooter()."""
    names = ("size", "count", "type", "redop", "root", *("time", "algbw", "busbw", "#wrong") * 2)
    units = ("(B)", "(elements)", "", "", "", *("(us)", "(GB/s)", "(GB/s)", "") * 2)
    header = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s"
    return [
        printf("# nccl-tests version %s nccl-headers=%d nccl-library=%d", "2.18.0", 22907, 22907),
        printf("# Collective test starting: %s", program),
        _config(unalign=True),
        "#",
        "# Using devices",
        printf(
            "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s",
            *(0, 0, 2994447, "lab", 0, 0, 2, 0, "NVIDIA GeForce RTX 5090"),
        ),
        "#",
        printf(TITLE, "", "", "", "", ""),
        printf(header, *names, 0, ""),
        printf(header, *units, 0, ""),
        *rows,
        printf("# %-20s : %d %s", "Out of bounds values", 0, "OK"),
        printf("# %-20s : %g %s", "Avg bus bandwidth", busbw, ""),
        "#",
        printf("# Collective test concluded: %s", program),
    ]


def _float_str(value: float, width: int) -> str:
    """util.cu getFloatStr(): two decimals while they fit, then one, none, an exponent."""
    power, bound = 0, 1
    while value >= bound:
        power, bound = power + 1, bound * 10
    if power < width - 2:
        return printf("%*.2f", width, value)
    if power < width - 1:
        return printf("%*.1f", width, value)
    if power < width + 1:
        return printf("%*.0f", width, value)
    return printf("%*.1e", width, value)


def _newer_row(size: int, out: Half = OK, inplace: Half = OK, *, redop: str = "sum") -> str:
    """writeBenchmarkLinePreamble(), then writeBenchmarkLineBody() for each half."""
    line = printf(PREAMBLE, size, size // 4, "float", redop, printf("%6i", -1))
    for us, algbw, busbw, wrong in (out, inplace):
        cells = (_float_str(us, 7), _float_str(algbw, 6), _float_str(busbw, 6))
        line += printf("  %7s  %6s  %6s  %6g", *cells, wrong)
    return line


def test_newer_versions_name_the_test_and_their_versions(tmp_path: Path) -> None:
    rows = [_newer_row(MIB, (4366.46, 0.24, 0.24, 0), (4365.21, 0.24, 0.24, 0))]
    big: Half = (12345678.9, 1087.2, 12345.6, 0)  # an exponent, one decimal, none
    rows.append(_newer_row(128 * MIB, big, big))
    assert "1.2e+07  1087.2   12346" in rows[1]
    [profile] = _parse(_write(tmp_path, _newer("all_reduce_perf_mpi", rows)))
    assert profile.label == "all_reduce"
    assert profile.metadata["program"] == "all_reduce_perf_mpi"
    assert profile.metadata["nccl_tests_version"] == "2.18.0"
    assert profile.metadata["nccl_version"] == "2.29.7"
    assert profile.metadata["unalign"] == 0
    assert _comm(profile, "all_reduce 1 MiB").avg_ns == pytest.approx(4_366_460.0)
    large = _comm(profile, "all_reduce 128 MiB (in-place)")
    assert large.avg_ns == pytest.approx(1.2e10)
    assert (large.attrs["algbw_gb_s"], large.attrs["busbw_gb_s"]) == (1087.2, 12346.0)
    assert _busbw(profile) == 50.68
    assert profile.warnings == []


def test_wrong_elements_warn_naming_the_result(tmp_path: Path) -> None:
    rows = [_row(MIB), _row(128 * MIB, OK, (1040.0, 129.06, 225.85, 12))]
    lines = [_config(), *_header(), *rows, *_footer(112.8, errors=1)]
    [profile] = _parse(_write(tmp_path, lines), op="all_reduce")
    assert _comm(profile, "all_reduce 128 MiB (in-place)").attrs["wrong_elements"] == 12
    assert _comm(profile, "all_reduce 128 MiB").attrs["wrong_elements"] == 0
    wrong = [w for w in profile.warnings if "wrong elements" in w]
    assert wrong == [
        "1 result(s) failed nccl-tests' data check, the collective returned wrong data: "
        "all_reduce 128 MiB (in-place): 12 wrong elements"
    ]
    assert any(w.startswith("Out of bounds values: 1") for w in profile.warnings)


def test_without_data_check_the_wrong_column_is_na(tmp_path: Path) -> None:
    unchecked: Half = (58.5, 17.9, 31.4, None)
    row = _row(MIB, unchecked, unchecked)
    assert row.endswith("31.40    N/A")
    lines = [_config(validation=0), *_header(), row, *_footer(31.4)]
    [profile] = _parse(_write(tmp_path, lines), op="all_reduce")
    metric = _comm(profile, "all_reduce 1 MiB")
    assert metric.avg_ns == pytest.approx(58_500.0)
    assert "wrong_elements" not in metric.attrs
    assert profile.warnings == []


def test_each_test_of_a_log_is_a_profile_labelled_by_its_op(tmp_path: Path) -> None:
    gather: Half = (900.0, 149.1, 130.5, 0)
    lines = [
        *_newer("all_reduce_perf", [_newer_row(MIB)], busbw=225.0),
        *_newer("all_gather_perf", [_newer_row(MIB, gather, gather, redop="none")], busbw=130.5),
        *_newer("all_reduce_perf", [_newer_row(MIB)], busbw=226.0),
    ]
    first, second, third = _parse(_write(tmp_path, lines))
    assert (first.label, second.label, third.label) == ("all_reduce", "all_gather", "all_reduce#2")
    assert _comm(second, "all_gather 1 MiB").avg_ns == pytest.approx(900_000.0)
    assert "redop" not in _comm(second, "all_gather 1 MiB").attrs  # "none"
    assert [_busbw(p) for p in (first, second, third)] == [225.0, 130.5, 226.0]


def test_older_logs_take_the_op_from_a_command_before_each_test(tmp_path: Path) -> None:
    lines = [
        "Running ./build/all_reduce_perf -b 8 -e 128M",
        *_test([_row(MIB)]),
        "srun --mpi=pmix /opt/nccl-tests/build/alltoall_perf_mpi -b 8 -e 128M",
        *_test([_row(MIB, redop="none")]),
    ]
    path = _write(tmp_path, lines)
    first, second = _parse(path)
    assert (first.label, second.label) == ("all_reduce", "alltoall")
    assert second.find(K.BENCH, "alltoall 1 MiB") is not None
    # A guess from the log's chatter gives way to the op the user names.
    assert [p.label for p in _parse(path, op="sendrecv")] == ["sendrecv", "sendrecv#2"]


def test_an_unnamed_test_takes_the_op_option_else_warns(tmp_path: Path) -> None:
    path = _write(tmp_path, _test([_row(MIB)]))
    [named] = _parse(path, op="broadcast")
    assert (named.label, named.metrics[0].name) == ("broadcast", "broadcast 1 MiB")
    assert named.warnings == []
    [unnamed] = _parse(path)
    assert (unnamed.label, unnamed.metrics[0].name) == ("collective", "collective 1 MiB")
    assert any("--option op=" in w for w in unnamed.warnings)


def test_types_reductions_and_roots_name_results_only_when_they_vary(tmp_path: Path) -> None:
    # -d all and -o all: TimeTest() once per type and reduction, each a whole size sweep.
    rows = [_row(MIB, kind=k, redop=r) for k in ("float", "half") for r in ("sum", "max")]
    [profile] = _parse(_write(tmp_path, _test(rows)), op="all_reduce")
    names = {m.name for m in profile.by_kind(K.BENCH)}
    assert "all_reduce half max 1 MiB (in-place)" in names
    assert len(names) == 8
    assert profile.metadata["data_types"] == ["float", "half"]
    # broadcast -r -1: a sweep per root.
    rows = [_row(MIB, redop="none", root=root) for root in (0, 1)]
    [profile] = _parse(_write(tmp_path, _test(rows)), op="broadcast")
    rooted = _comm(profile, "broadcast 1 MiB root 1")
    assert (rooted.attrs["root"], "redop" in rooted.attrs) == (1, False)


def test_run_cycles_are_samples_of_one_result(tmp_path: Path) -> None:
    # -N 2 prints the sweep twice.
    second: Half = (1060.5, 126.6, 221.5, 0)
    rows = [_row(128 * MIB), _row(128 * MIB, second, second)]
    [profile] = _parse(_write(tmp_path, _test(rows, iters=10)), op="all_reduce")
    metric = _comm(profile, "all_reduce 128 MiB")
    assert metric.samples_ns == [pytest.approx(1_042_500.0), pytest.approx(1_060_500.0)]
    assert metric.avg_ns == pytest.approx(1_051_500.0)
    assert (metric.calls, profile.steps) == (20, 20)
    assert metric.attrs["busbw_gb_s"] == pytest.approx((225.31 + 221.5) / 2)


def test_launcher_prefixes_and_nccl_chatter_are_skipped(tmp_path: Path) -> None:
    # mpirun --tag-output, as a 2-node EFA job prints it (NCCL INFO from both ranks).
    test = _test([_row(MIB), _row(128 * MIB)], busbw=1.15327)
    tagged = ["[1,0]<stdout>:" + line for line in test]
    tagged.insert(3, "[1,1]<stdout>:worker-1:21:21 [0] NCCL INFO NET/OFI Selected Provider is efa")
    tagged.insert(-5, "[1,0]<stdout>:worker-0:21:21 [0] NCCL INFO comm 0x7fde rank 0 - Destroy")
    tagged.insert(0, "[1,0]<stderr>:Authorization required, but no authorization protocol")
    tagged.insert(0, "[1,0]<stdout>:NCCL version 2.12.7+cuda11.4")
    [profile] = _parse(_write(tmp_path, tagged), op="all_reduce")
    assert _busbw(profile) == 1.15327
    assert len(profile.by_kind(K.BENCH)) == 4
    assert (profile.metadata["ranks"], profile.metadata["nccl_version"]) == (8, "2.12.7+cuda11.4")
    # srun -l, and GitHub Actions' raw-log timestamps.
    srun = ["  0: " + line for line in test]
    stamped = ["2024-05-01T12:00:00.1234567Z " + line for line in test]
    for lines in (srun, stamped):
        [again] = _parse(_write(tmp_path, lines), op="all_reduce")
        assert [m.avg_ns for m in again.metrics] == [m.avg_ns for m in profile.metrics]


def test_a_digit_led_docker_hostname_in_nccl_lines_is_not_a_row(tmp_path: Path) -> None:
    rows = [_row(MIB), "51e6e7896958:71327:71327 [0] NCCL INFO Launch mode Parallel", _row(2 * MIB)]
    [profile] = _parse(_write(tmp_path, _test(rows)), op="all_reduce")
    assert len(profile.by_kind(K.BENCH)) == 4


def test_an_nccl_line_printed_into_a_row_leaves_the_row_whole(tmp_path: Path) -> None:
    # Lazy connection set-up logs while the row's preamble waits in stdout's line buffer.
    row = _row(128 * MIB)
    assert row[46:52] == "    -1"  # the preamble's last cell
    rows = [
        row[:52] + "node0:4000:4100 [0] NCCL INFO Channel 00/1 : 0[0] -> 1[1] via P2P/CUMEM",
        "node0:4000:4100 [0] NCCL INFO Connected all rings",
        row[52:],
        _row(256 * MIB),
    ]
    [profile] = _parse(_write(tmp_path, _test(rows)), op="all_reduce")
    metric = _comm(profile, "all_reduce 128 MiB (in-place)")
    assert (metric.avg_ns, metric.attrs["count"]) == (pytest.approx(1_042_500.0), 32 * MIB)
    assert len(profile.by_kind(K.BENCH)) == 4
    assert profile.warnings == []
    # A log that ends before the rest of the row came.
    lines = [_config(), *_header(), _row(MIB), *rows[:2]]
    [profile] = _parse(_write(tmp_path, lines), op="all_reduce")
    assert len(profile.by_kind(K.BENCH)) == 2
    cut = f"line {len(lines) - 1}, a row the file ends in, was cut short"
    assert any(cut in w for w in profile.warnings)


def test_crlf_and_gzip_logs_read_alike(tmp_path: Path) -> None:
    lines = _test([_row(MIB), _row(128 * MIB)])
    [plain] = _parse(_write(tmp_path, lines), op="all_reduce")
    [crlf] = _parse(_write(tmp_path, lines, newline="\r\n", name="crlf.log"), op="all_reduce")
    packed = tmp_path / "nccl.log.gz"
    packed.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    [unpacked] = _parse(packed, op="all_reduce")
    expected = [(m.name, m.avg_ns) for m in plain.metrics]
    assert len(expected) == 5
    assert [(m.name, m.avg_ns) for m in crlf.metrics] == expected
    assert [(m.name, m.avg_ns) for m in unpacked.metrics] == expected
    assert crlf.warnings == unpacked.warnings == []


def test_a_cut_last_row_is_left_out_with_a_warning(tmp_path: Path) -> None:
    lines = [_config(), *_header(), _row(MIB), _row(128 * MIB)[:70]]
    [profile] = _parse(_write(tmp_path, lines, cut=True), op="all_reduce")
    assert {m.name for m in profile.metrics} == {"all_reduce 1 MiB", "all_reduce 1 MiB (in-place)"}
    cut = f"line {len(lines)}, the file's last line, was cut short"
    assert any(cut in w for w in profile.warnings)
    assert any("no '# Avg bus bandwidth' line" in w for w in profile.warnings)


def test_a_test_that_fails_mid_row_keeps_its_earlier_rows(tmp_path: Path) -> None:
    # NCCLCHECK: "%s: Test NCCL failure %s:%d '%s'\n", after the row's preamble was printed.
    failure = printf("%s: Test NCCL failure %s:%d '%s'", "node0", "common.cu", 393, "unhandled")
    failing = _row(128 * MIB)[:52] + failure
    lines = [_config(), *_header(), _row(MIB), failing, " .. node0 pid 4000: Test failure"]
    [profile] = _parse(_write(tmp_path, lines), op="all_reduce")
    assert len(profile.metrics) == 2
    assert any("Test NCCL failure common.cu:393" in w for w in profile.warnings)


def test_a_row_with_the_wrong_number_of_cells_names_line_and_column(tmp_path: Path) -> None:
    row = _row(MIB)
    lines = [_config(), *_header(), row, row + "  7.5"]
    with pytest.raises(ParseError) as caught:
        registry.parse_file(_write(tmp_path, lines))
    assert (caught.value.line, caught.value.format) == (len(lines), "nccl_tests")
    # The first cell too many starts after the row and two spaces; the header is line 4.
    message = f"column {len(row) + 3}: the row has 14 cells where the column header (line 4)"
    assert message in str(caught.value)


def test_a_cell_that_is_no_number_names_line_and_column(tmp_path: Path) -> None:
    row = _row(MIB)
    lines = [_config(), *_header(), row.replace(" 1042.5", "   fast", 1)]
    column = row.index(" 1042.5") + 4  # 1-based, after the three spaces
    where = rf"n\.log:{len(lines)}: column {column}: the time 'fast' is not a number"
    with pytest.raises(ParseError, match=where):
        registry.parse_file(_write(tmp_path, lines))
    column = row.index("128.75") + 1
    lines[-1] = row.replace("128.75", "128,75", 1)
    with pytest.raises(ParseError, match=f"column {column}: the algbw '128,75' is not a number"):
        registry.parse_file(_write(tmp_path, lines))


def test_a_log_without_results_is_an_error(tmp_path: Path) -> None:
    lines = [_config(), *_devices(), *_header(), "node0: Test CUDA failure common.cu:891"]
    with pytest.raises(ParseError, match="no nccl-tests result found"):
        registry.parse_file(_write(tmp_path, lines))


def _all_gather_2019(rows: list[tuple[int, float, float]]) -> list[str]:
    """all_gather_perf as 2019's common.cu and per-test print_header() printed it: no redop or
    root, the largest difference as "error", a Docker container's id as the host."""
    names = ("size", "count", "type", *("time", "algbw", "busbw", "error") * 2)
    units = ("(B)", "(elements)", "", *("(us)", "(GB/s)", "(GB/s)", "") * 2)
    columns = "# %10s  %12s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s"
    title = "# %10s  %12s  %6s            out-of-place                       in-place          "
    return [
        printf(
            "# nThread %d nGpus %d minBytes %ld maxBytes %ld step: %ld(%s) warmup iters: %d "
            "iters: %d validation: %d ",
            *(1, 1, 8, 16, 2, "factor", 5, 20, 1),
        ),
        "# Using devices",
        printf(
            "#   Rank %2d Pid %6d on %10s device %2d [0x%02x] %s",
            *(0, 71327, "51e6e7896958", 0, 0x1A, "Tesla V100-SXM3-32GB"),
        ),
        "#",
        printf(title, "", "", ""),
        printf(columns, *names),
        printf(columns, *units),
        *(
            printf("%12li  %12li  %6s", size, size // 4, "float")  # print_line_header()
            + printf("  %7s  %6.2f  %6.2f  %5.0le", _time(us), 0.1, 0.1, error) * 2
            for size, us, error in rows
        ),
        "# Out of bounds values : 0 OK",
        "# Avg bus bandwidth    : 0.1 ",
    ]


def test_2019_logs_with_their_error_column_read(tmp_path: Path) -> None:
    lines = _all_gather_2019([(8, 158.3, 1e-7), (16, 160.4, 3e-8)])
    assert lines[-3].endswith("  3e-08")
    [profile] = _parse(_write(tmp_path, lines), op="all_gather")
    metric = _comm(profile, "all_gather 16 B (in-place)")
    assert metric.avg_ns == pytest.approx(160_400.0)
    assert metric.attrs["max_error"] == pytest.approx(3e-8)
    assert (metric.attrs["type"], "redop" in metric.attrs) == ("float", False)
    assert (metric.calls, profile.steps) == (20, 20)
    assert "agg_iters" not in profile.metadata
    assert profile.metadata["devices"] == ["Tesla V100-SXM3-32GB"]
    assert not any("wrong" in w for w in profile.warnings)


def test_cputime_per_iteration_and_timestamp_columns(tmp_path: Path) -> None:
    # writeResultHeader() with -C 1 and per-iteration timing adds "i_min i_max i_p99 i_cv%" to
    # each half, which writePerIterReport() prints as "  %7s  %7s  %7s  %7s".
    names = ("cputime", "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%")
    half = "  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s"
    key = printf("# %10s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root")
    header = ["#", key + printf(half + half + " %*s", *names, *names, 0, "")]
    body = printf("  %7s  %6s  %6s  %6g", "42.50", "24.67", "43.17", 0)
    body += printf("  %7s  %7s  %7s  %7s", "40.10", "47.92", "47.50", "3.12")
    row = printf(PREAMBLE, MIB, MIB // 4, "float", "sum", printf("%6i", -1)) + body * 2
    [profile] = _parse(_write(tmp_path, [_config(), *header, row]), op="all_reduce")
    metric = _comm(profile, "all_reduce 1 MiB")
    assert (metric.avg_ns, metric.min_ns, metric.max_ns) == (
        pytest.approx(42_500.0),
        pytest.approx(40_100.0),
        pytest.approx(47_920.0),
    )
    assert (metric.attrs["p99_ns"], metric.attrs["cv_pct"]) == (pytest.approx(47_500.0), 3.12)
    # -Z 1 without per-iteration timing: writeTimestamp() "%21s" after the in-place half.
    header = _header()
    header[2] += printf(" %*s", 19, "timestamp")
    stamped = _row(MIB) + printf("%21s", "2025-05-01 12:00:00")
    [profile] = _parse(_write(tmp_path, [_config(), *header, stamped]), op="all_reduce")
    assert _comm(profile, "all_reduce 1 MiB (in-place)").avg_ns == pytest.approx(1_042_500.0)


def test_nccl_init_chatter_past_the_head_does_not_hide_the_test(tmp_path: Path) -> None:
    # Every rank's NCCL INFO lines of its init come between the devices and the column header.
    chatter = [
        f"node{i // 8}:{4000 + i}:{4100 + i} [{i % 8}] NCCL INFO Channel 00/32 : 0 1 2 3 4 5 6 7"
        for i in range(5000)
    ]
    path = _write(
        tmp_path, [_config(), *_devices(), *chatter, *_header(), _row(MIB), *_footer(1.0)]
    )
    assert "size" not in registry.read_head(path).text  # the column header is past the head
    [profile] = _parse(path, op="all_reduce")
    assert len(profile.metrics) == 3


def _shared_files() -> list[Path]:
    folders = [shared_path("corpus"), shared_path("seeds")]
    return [p for folder in folders for p in sorted(folder.rglob("*")) if p.is_file()]


def test_no_file_of_another_format_looks_like_nccl_tests() -> None:
    files = _shared_files()
    assert len(files) > 50
    assert [p.name for p in files if nccl_tests.sniff(registry.read_head(p))] == []


def test_other_text_logs_are_not_sniffed(tmp_path: Path) -> None:
    others = {
        "deepspeed": "[Rank 0] comm op: all_reduce | time (ms): 9.46 | msg size: 678.86 MB",
        "megatron": " iteration       50/    5000 | elapsed time per iteration (ms): 61674.3 |",
        "nccl_info": "node0:1:2 [0] NCCL INFO comm 0x55a2 rank 0 nranks 8 - Init COMPLETE",
        "table": "#  size  count  type  root  bytes\n1 2 3 4 5",
    }
    for name, text in others.items():
        path = _write(tmp_path, [text], name=f"{name}.log")
        assert not nccl_tests.sniff(registry.read_head(path)), name
    assert nccl_tests.sniff(registry.read_head(_write(tmp_path, _test([_row(MIB)]))))
