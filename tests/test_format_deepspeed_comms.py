"""DeepSpeed's comms_logger output, written here in the shapes ``comms_logging.py`` prints
(the per-operation lines as its documentation shows them, and ``log_summary()``'s table); no
public log is in ../shared/corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfci.core.errors import ParseError
from perfci.core.model import Metric, MetricKind, Profile
from perfci.formats import registry

K = MetricKind
PREFIX = "[2022-06-26 01:39:55,722] [INFO] [logging.py:69:log_dist]"
OPS = [
    f"{PREFIX} [Rank 0] step=1, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]",
    f"{PREFIX} [Rank 0] rank=0 | comm op: reduce_scatter_base | time (ms): 9.46 | msg size: "
    "678.86 MB | algbw (Gbps): 1204.52  | busbw (Gbps): 1129.23",
    f"{PREFIX} [Rank 0] rank=0 | comm op: all_gather_base | time (ms): 0.11 | msg size: 6.0 MB "
    "| algbw (Gbps): 954.41  | busbw (Gbps): 894.76",
    f"{PREFIX} [Rank 0] comm op: all_reduce | [Caller Func: reduce_gradients] | time (ms): 2.50 "
    "| msg size: 0B | algbw (Gbps): 0.00 | busbw (Gbps): 0.00",
    f"{PREFIX} [Rank 0] rank=0 | comm op: all_gather_base | time (ms): 0.13 | msg size: 6.0 MB "
    "| algbw (Gbps): 800.00  | busbw (Gbps): 750.00",
]
HEADER = (
    "Comm. Op            Message Size        Count               Total Latency(ms)   "
    "Avg Latency(ms)     tput_avg (Gbps)     busbw_avg (Gbps)    "
)


def _row(size: str, count: int, total: float, avg: float) -> str:
    """A row as log_all() prints it: 20-wide left-aligned cells."""
    cells = f"{size: <20}{count: <20}{total: <20.2f}{avg: <20.2f}"
    return f"{' ': <20}{cells}{877.2: <20.2f}{822.38: <20.2f}"


SUMMARY = [
    HEADER,
    "broadcast",
    _row("2.0 KB", 146, 11.12, 0.08),
    _row("98.25 MB", 1, 8317.12, 8317.12),
    "all_reduce | [Caller Func: allreduce_bucket]",
    _row("32.0 MB", 40, 120.4, 3.01),
    "_______________________________",
    "Breakdown with straggler effect",
    "-------------------------------",
]


def _write(tmp_path: Path, lines: list[str], *, end: str = "\n") -> Path:
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + end)
    return path


def _one(path: Path) -> Profile:
    assert registry.detect(path).name == "deepspeed_comms"
    [profile] = registry.parse_file(path)
    return profile


def _get(profile: Profile, name: str) -> Metric:
    metric = profile.find(K.COMM, name)
    assert metric is not None, f"no comm {name!r}: {[m.name for m in profile.metrics]}"
    return metric


def test_each_operation_and_size_is_a_collective_with_its_calls(tmp_path: Path) -> None:
    profile = _one(_write(tmp_path, OPS))
    assert (profile.label, profile.metadata["rank"]) == ("deepspeed", 0)
    gather = _get(profile, "all_gather_base 6.0 MB")
    assert gather.calls == 2
    assert gather.samples_ns == [110_000.0, 130_000.0]
    assert (gather.total_ns, gather.min_ns, gather.max_ns) == (240_000.0, 110_000.0, 130_000.0)
    # DeepSpeed prints sizes in 1024-based units.
    assert gather.bytes == 2 * 6 * 1024**2
    assert gather.attrs["busbw_gbps"] == pytest.approx((894.76 + 750.0) / 2)
    scatter = _get(profile, "reduce_scatter_base 678.86 MB")
    assert scatter.avg_ns == pytest.approx(9.46e6)
    reduce = _get(profile, "all_reduce [reduce_gradients] 0 B")
    assert (reduce.bytes, reduce.attrs["caller"]) == (0.0, "reduce_gradients")
    assert len(profile.metrics) == 3  # the summary beside the lines is not read twice


def test_a_summary_alone_gives_its_totals_and_trimmed_means(tmp_path: Path) -> None:
    profile = _one(_write(tmp_path, ["training...", *SUMMARY]))
    big = _get(profile, "broadcast 98.25 MB")
    assert (big.calls, big.total_ns, big.avg_ns) == (
        1,
        pytest.approx(8317.12e6),
        pytest.approx(8317.12e6),
    )
    small = _get(profile, "broadcast 2.0 KB")
    assert (small.calls, small.bytes) == (146, 146 * 2048.0)
    assert small.samples_ns is None
    bucket = _get(profile, "all_reduce [allreduce_bucket] 32.0 MB")
    assert (bucket.calls, bucket.avg_ns) == (40, pytest.approx(3.01e6))
    assert len(profile.metrics) == 3


def test_a_summary_printed_twice_counts_from_the_start(tmp_path: Path) -> None:
    later = [HEADER, "broadcast", _row("2.0 KB", 300, 24.0, 0.08)]
    profile = _one(_write(tmp_path, [*SUMMARY, "step 200", *later]))
    assert _get(profile, "broadcast 2.0 KB").calls == 300


def test_ranks_are_profiles_of_their_own(tmp_path: Path) -> None:
    lines = [*OPS[1:3], *(line.replace("[Rank 0]", "[Rank 1]") for line in OPS[1:3])]
    first, second = registry.parse_file(_write(tmp_path, lines))
    assert (first.label, second.label) == ("rank0", "rank1")
    assert second.metadata["rank"] == 1
    assert {m.name for m in second.metrics} == {m.name for m in first.metrics}


def test_a_cut_last_line_is_left_out_with_a_warning(tmp_path: Path) -> None:
    profile = _one(_write(tmp_path, [*OPS[:3], OPS[4][:-30]], end=""))
    assert _get(profile, "all_gather_base 6.0 MB").calls == 1
    assert any("cut short" in w for w in profile.warnings)


def test_a_log_without_records_is_an_error_naming_what_was_expected(tmp_path: Path) -> None:
    path = _write(tmp_path, [OPS[0], "loss 2.5"])
    with pytest.raises(ParseError, match="no DeepSpeed communication record") as caught:
        registry.parse_file(path, format="deepspeed_comms")
    assert caught.value.format == "deepspeed_comms"


def _aicb(op: str, group: str, ms: float, size: str, algbw: str, busbw: str) -> str:
    """AICB's ``LogItem.view_as_ds_log`` (``log_analyzer/log.py``): DeepSpeed's line with a
    comm group, AICB's enums as they print, and its GiB/s bandwidths labelled "(GB)"."""
    line = f"[RANK 0] comm op: {op} | comm group: {group} | time (ms): {ms:.2f}"
    if size == "0":
        return line + " | msg size: 0 | algbw (GB): 0 | busbw (GB): 0"
    return line + f" | msg size: {size} | algbw (GB): {algbw}  | busbw (GB): {busbw} "


def test_aicb_log_lines_are_collectives_of_their_group(tmp_path: Path) -> None:
    lines = [
        _aicb("CommType.all_reduce", "CommGroup.dp_group", 12.5, "64.0 MB", "5.00", "8.75"),
        _aicb("CommType.computation", "None", 3.1, "0", "", ""),
        _aicb("CommType.all_reduce", "CommGroup.dp_group", 12.7, "64.0 MB", "4.92", "8.61"),
        _aicb("CommType.all_gather", "CommGroup.tp_group", 0.8, "2.0 MB", "2.44", "1.83"),
    ]
    path = _write(tmp_path, lines)
    assert registry.detect(path).name == "deepspeed_comms"
    profile = _one(path)
    assert [m.name for m in profile.metrics] == [
        "all_reduce[dp_group] 64.0 MB",
        "all_gather[tp_group] 2.0 MB",
    ]
    reduce = _get(profile, "all_reduce[dp_group] 64.0 MB")
    assert (reduce.calls, reduce.samples_ns, reduce.bytes) == (
        2,
        [12_500_000.0, 12_700_000.0],
        2 * 64 * 2**20,
    )
    assert reduce.attrs["busbw_gib_s"] == pytest.approx(8.68)
    assert "algbw_gbps" not in reduce.attrs  # AICB's "(GB)" is GiB/s, not DeepSpeed's Gbps
    assert profile.warnings == [
        "1 line(s) of compute time or of no message (AICB's CommType.computation, msg size 0) "
        "are not communication; not read"
    ]
