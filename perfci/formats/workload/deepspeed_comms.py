"""DeepSpeed's communication log (``comms_logger`` in the DeepSpeed config): its per-operation
lines (``verbose``) and its summary table (``deepspeed.comm.log_summary()``), in a training log.

Per-operation lines, one per collective (``deepspeed/utils/comms_logging.py``), behind the
logger's prefix::

    [2022-06-26 01:39:55,722] [INFO] [logging.py:69:log_dist] [Rank 0] comm op: all_reduce |
    time (ms): 9.46 | msg size: 678.86 MB | algbw (Gbps): 1204.52 | busbw (Gbps): 1129.23

(one line; with ``debug`` the name carries its caller: ``all_reduce | [Caller Func: step]``).
The summary, per operation and message size::

    Comm. Op            Message Size        Count               Total Latency(ms)   Avg ...
    all_reduce
                        98.25 MB            12                  113.52              9.46 ...

Alibaba AICB prints its measured collectives in the same shape (``LogItem.view_as_ds_log``,
``log_analyzer/log.py``), with the comm group and its enums as they print::

    [RANK 0] comm op: CommType.all_reduce | comm group: CommGroup.dp_group | time (ms): 12.50 |
    msg size: 64.0 MB | algbw (GB): 5.00  | busbw (GB): 8.75

The op is then AICB's own name for it, ``all_reduce[dp_group]`` (its CSV's), and the
bandwidths are GiB/s (``calc_bw_log``), kept as ``algbw_gib_s``; a ``computation`` entry (or a
zero-size message) is compute time, not communication, and is counted in a warning.

What becomes which metric: each (operation, message size) is one ``comm`` metric named
``<op> <size>`` (``all_reduce 98.25 MB``; a caller goes in brackets after the op), with
``calls``, ``bytes`` (the size × calls; DeepSpeed prints sizes in 1024-based units, rounded to
two decimals) and its times from ms: every call's time as a sample when the per-operation lines
are there, else the summary's total and (trimmed) mean. The bandwidths go to ``attrs``. Lines of
several ranks (``[Rank N]``) give a profile per rank; the summary, which names no rank, is read
only from a log without per-operation lines.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from perfci.core.errors import ParseError
from perfci.core.model import Metric, MetricKind, Profile
from perfci.core.units import parse_size
from perfci.formats._text_lines import open_text
from perfci.formats.caps import Budget, budget
from perfci.formats.workload._aicb import enum_value
from perfci.formats.workload._detectors import DEEPSPEED_COMMS

NAME = DEEPSPEED_COMMS.name
DESCRIPTION = DEEPSPEED_COMMS.description
sniff = DEEPSPEED_COMMS.sniff

_NUMBER = r"[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"
_SIZE = rf"(?P<size>{_NUMBER} ?(?:B|KB|MB|GB|TB))"
# Linear on any line (issue 31): a field ends at its " |" and the operation at a second
# "comm op: " too, so no attempt reads past the next one (a line of "comm op: " re-read the
# rest of the line from each, as did a caller read on across "|" to a "]").
_OP_LINE = re.compile(
    r"(?:\[(?:Rank|RANK) (?P<rank>\d+)\] )?(?:rank=\d+ \| )?"
    r"comm op: (?P<op>(?:(?!comm op: )[^|])+?)"
    r"(?: \| comm group: (?P<group>[^|]+?))?"
    r"(?: \| \[Caller Func: (?P<caller>[^\]|]*)\])?"
    rf" \| time \(ms\): (?P<ms>{_NUMBER}) \| msg size: (?:{_SIZE}|(?P<zero>0))"
    rf"(?: \| algbw \((?P<unit>Gbps|GB)\): (?P<algbw>{_NUMBER}))?"
    rf"(?: +\| busbw \((?:Gbps|GB)\): (?P<busbw>{_NUMBER}))?"
)
#: AICB's stand-in for compute time between collectives (``CommType.computation``).
_COMPUTATION = "computation"
_SUMMARY_HEADER = re.compile(r"^Comm\. Op +Message Size +Count +Total Latency\(ms\)")
_SUMMARY_ROW = re.compile(
    rf"^ {{10,}}{_SIZE} +(?P<count>\d+) +(?P<total>{_NUMBER}) +(?P<avg>{_NUMBER})"
    rf"(?: +(?P<algbw>{_NUMBER}) +(?P<busbw>{_NUMBER}))?\s*$"
)
_SUMMARY_OP = re.compile(
    r"^(?P<op>[A-Za-z_][\w.]*)(?: \| \[Caller Func: (?P<caller>[^\]]*)\])?\s*$"
)
_STRAGGLER = re.compile(r"^_{5,}\s*$|^Breakdown with straggler effect")
_SIZE_PARTS = re.compile(rf"^({_NUMBER}) ?([A-Z]+)$")
_NS_PER_MS = 1e6
#: A series: (operation, caller or None, message size as printed).
_Key = tuple[str, str | None, str]


@dataclass(slots=True)
class _Series:
    """One (operation, message size) of one rank."""

    op: str
    caller: str | None
    size: str
    times_ms: list[float] = field(default_factory=list)
    algbw: list[float] = field(default_factory=list)
    busbw: list[float] = field(default_factory=list)
    calls: int = 0
    total_ms: float | None = None
    avg_ms: float | None = None
    #: DeepSpeed prints Gbps (gigabits); AICB prints "(GB)", its GiB/s (``calc_bw_log``).
    bandwidth: str = "gbps"

    @property
    def name(self) -> str:
        op = f"{self.op} [{self.caller}]" if self.caller else self.op
        return f"{op} {self.size}"


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """A profile per rank of the per-operation lines, else one of the summary."""
    ranks: dict[str, dict[_Key, _Series]] = {}
    summary: dict[_Key, _Series] = {}
    in_summary = False
    op: tuple[str, str | None] | None = None
    warnings: list[str] = []
    computations = 0
    counted = budget(str(path), NAME)  # a new series is a metric, a call more a sample
    with open_text(path, format=NAME) as handle:
        for number, line in enumerate(handle, 1):
            text = line.rstrip("\r\n")
            if match := _OP_LINE.search(text):
                if not line.endswith("\n"):
                    warnings.append(f"line {number}, the file's last line, was cut short")
                    break
                if enum_value(match["op"]) == _COMPUTATION or match["zero"] is not None:
                    computations += 1
                    continue
                _add_call(ranks.setdefault(match["rank"] or "", {}), match, counted)
                continue
            if _SUMMARY_HEADER.match(text):
                in_summary, op = True, None
                continue
            if not in_summary:
                continue
            if _STRAGGLER.match(text) or not text.strip():
                in_summary = False  # the straggler breakdown has other columns
            elif row := _SUMMARY_ROW.match(text):
                if op is None:
                    raise ParseError(
                        "a summary row before any operation name",
                        source=str(path),
                        line=number,
                        format=NAME,
                    )
                if not ranks and (op[0], op[1], _size_text(row["size"])) not in summary:
                    counted.metric()  # (a summary after per-operation lines is left out)
                _add_summary_row(summary, op, row)
            elif named := _SUMMARY_OP.match(text):
                op = (named["op"], named["caller"])
            else:
                in_summary = False
    if computations:
        warnings.append(
            f"{computations} line(s) of compute time or of no message (AICB's "
            f"CommType.computation, msg size 0) are not communication; not read"
        )
    if ranks:
        return [
            _profile(path, rank, series, warnings, len(ranks)) for rank, series in ranks.items()
        ]
    if summary:
        return [_profile(path, "", summary, warnings, 1)]
    raise ParseError(
        "no DeepSpeed communication record found: expected 'comm op: <op> | time (ms): <t> | "
        "msg size: <size>' lines (comms_logger verbose) or a log_summary() table",
        source=str(path),
        format=NAME,
    )


def _add_call(series: dict[_Key, _Series], match: re.Match[str], counted: Budget) -> None:
    op, caller, size = enum_value(match["op"]), match["caller"], _size_text(match["size"])
    group = enum_value(match["group"] or "")  # AICB's "None" is no group
    if group:
        op = f"{op}[{group}]"  # AICB's own name for a collective of a group (its CSV's)
    found = series.get((op, caller, size))
    if found is None:
        counted.metric()
        found = series[(op, caller, size)] = _Series(op, caller, size)
    else:
        counted.sample()
    found.calls += 1
    if match["unit"] == "GB":
        found.bandwidth = "gib_s"
    found.times_ms.append(float(match["ms"]))
    if match["algbw"] is not None:
        found.algbw.append(float(match["algbw"]))
    if match["busbw"] is not None:
        found.busbw.append(float(match["busbw"]))


def _add_summary_row(
    summary: dict[_Key, _Series], op: tuple[str, str | None], row: re.Match[str]
) -> None:
    name, caller = op
    size = _size_text(row["size"])
    found = summary.setdefault((name, caller, size), _Series(name, caller, size))
    # A summary printed twice (every N steps) counts from the start: the last one holds all.
    found.calls = int(row["count"])
    found.total_ms, found.avg_ms = float(row["total"]), float(row["avg"])
    if row["algbw"] is not None:
        found.algbw, found.busbw = [float(row["algbw"])], [float(row["busbw"])]


def _size_text(text: str) -> str:
    """``"98.25 MB"``; DeepSpeed writes a zero size as ``0B``."""
    return _SIZE_PARTS.sub(r"\1 \2", text)


def _profile(
    path: Path, rank: str, series: dict[_Key, _Series], warnings: list[str], ranks: int
) -> Profile:
    label = f"rank{rank}" if rank and ranks > 1 else "deepspeed"
    profile = Profile(label=label, format=NAME, source=str(path), warnings=list(warnings))
    if rank:
        profile.metadata["rank"] = int(rank)
    for found in series.values():
        profile.metrics.append(_metric(found))
    return profile


def _metric(found: _Series) -> Metric:
    size = parse_size(found.size) or 0.0  # 1024-based, as DeepSpeed's convert_size prints
    attrs: dict[str, object] = {"op": found.op, "msg_size_bytes": size}
    if found.caller:
        attrs["caller"] = found.caller
    if found.algbw:
        attrs[f"algbw_{found.bandwidth}"] = statistics.fmean(found.algbw)
    if found.busbw:
        attrs[f"busbw_{found.bandwidth}"] = statistics.fmean(found.busbw)
    times = [ms * _NS_PER_MS for ms in found.times_ms]
    total: float | None = sum(times) if times else _ns(found.total_ms)
    avg: float | None = statistics.fmean(times) if times else _ns(found.avg_ms)
    return Metric(
        kind=MetricKind.COMM,
        name=found.name,
        calls=found.calls,
        bytes=size * found.calls,
        total_ns=total,
        avg_ns=avg,
        min_ns=min(times) if times else None,
        max_ns=max(times) if times else None,
        samples_ns=times or None,
        attrs=attrs,
    )


def _ns(ms: float | None) -> float | None:
    return None if ms is None else ms * _NS_PER_MS
