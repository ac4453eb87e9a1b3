"""NVIDIA nccl-tests output (``all_reduce_perf``, ``all_gather_perf``, ``alltoall_perf``, … and
their ``_mpi`` builds): the log a GPU cluster's CI keeps of its interconnect checks.

What a test prints, from rank 0's main thread (NVIDIA/nccl-tests ``src/common.cu`` ``run()``,
``TimeTest()``, ``BenchTime()``; in newer versions ``src/util.cu`` ``writeDeviceReport()``,
``writeResultHeader()``, ``writeBenchmarkLine*()``, ``writeResultFooter()``)::

    # nccl-tests version 2.18.0 nccl-headers=22907 nccl-library=22907     (newer versions)
    # Collective test starting: all_reduce_perf                          (newer versions)
    # nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 …
    # Using devices
    #  Rank  0 Group  0 Pid  12345 on   hostname device  0 [0x07] NVIDIA A100-SXM4-80GB
    #       size         count      type   redop    root     time   algbw   busbw #wrong …
    #        (B)    (elements)                               (us)  (GB/s)  (GB/s)        …
         1048576        262144     float     sum      -1    36.21   28.96   50.68      0 …
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 50.6812
    # Collective test concluded: all_reduce_perf                         (newer versions)

Rows are read by the column header's names, so each column set of the tool's history parses:
old per-test headers (``all_gather`` without ``redop`` and ``root``) with an ``error`` column
(the largest difference) where ``#wrong`` (wrong elements; ``N/A`` without a data check) came
later, ``cputime`` (``-C 1``), and the extra cells of a timestamp, the per-iteration ``i_min
i_max i_p99 i_cv%`` and ``#bitdiff``. Launcher prefixes (``[1,0]<stdout>:``, ``srun -l``'s
`` 0: ``, GitHub Actions' timestamps) are taken off and each prefix's lines read on their own;
NCCL's ``host:pid:tid [dev] NCCL INFO …`` lines and other chatter are skipped, also one NCCL
printed into a row (the header's right-aligned names say where the row's cell ended). The JSON
file newer versions write (an output file named ``*.json``) is not read here.

What becomes which metric: each row is a ``bench`` metric per half (a benchmark case on the GPU:
it gates on its own, as a Google Benchmark case does; a collective inside a training step is a
``comm`` metric instead, gated by its share of the step), ``<op> <size>`` for the
out-of-place half and ``<op> <size> (in-place)`` for the other (``all_reduce 128 MiB``: sizes
exact in 1024-based units, else bytes): the halves run different buffer layouts through NCCL and
a regression can hit either, so each is a series of its own. The data type, reduction and root
join the name only when they vary within the test (``-d all``, ``-o all``, ``-r -1``):
``all_reduce half max 1 MiB``, ``broadcast 1 MiB root 3``. ``avg_ns`` is the printed time (µs,
the mean over the launches timed), ``calls`` those launches (``iters × agg iters × graph
launches`` per printed row) and ``total_ns`` / ``bytes`` their sums; ``samples_ns`` holds each
printed time (several with ``-N``) and ``profile.steps`` the launches of all cycles, so that a
compared value is the time of one launch. algbw and busbw (GB/s: 1e9 bytes/s in ``*GetBw``) go
to ``attrs`` (``algbw_gb_s``, ``busbw_gb_s``) with the element count, type, reduction and root;
``i_min`` / ``i_max`` become ``min_ns`` / ``max_ns``. A non-zero ``#wrong`` is a warning naming
the result. ``# Avg bus bandwidth`` (the mean busbw of all rows) is a ``measure`` in ``GB/s``,
higher is better.

Each test in the log (a CI script running ``all_reduce_perf`` then ``all_gather_perf``) is a
profile labelled by its op: from ``# Collective test starting:``; older versions do not print
it, so from ``--option op=NAME``, else the last ``<op>_perf`` a line names before the test (the
command a script echoed), else ``collective`` with a warning. Settings, versions, ranks, hosts
and GPU models are metadata.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from perfci.core.errors import ParseError
from perfci.core.model import Better, Device, Metric, MetricKind, Profile
from perfci.formats._text_lines import open_text
from perfci.formats.workload._detectors import NCCL_TESTS
from perfci.formats.workload._nccl_reader import Reader, Test

NAME = NCCL_TESTS.name
DESCRIPTION = NCCL_TESTS.description
sniff = NCCL_TESTS.sniff

_NS_PER_US = 1e3
_UNITS = ((1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB"))
_LISTED = 5  # wrong results named in a warning


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """A profile per test run in the log."""
    reader = Reader(path, format=NAME)
    with open_text(path, format=NAME) as handle:
        for number, line in enumerate(handle, 1):
            reader.feed(number, line)
    reader.close()
    return _profiles(reader, path, options.get("op") or None)


def _profiles(reader: Reader, path: Path, op: str | None) -> list[Profile]:
    tests = [test for test in reader.tests if test.rows]
    if not tests:
        raise ParseError(
            "no nccl-tests result found: expected a '#  size  count  type …  time  algbw  "
            "busbw …' column header followed by rows of results",
            source=str(path),
            format=NAME,
        )
    labels: dict[str, int] = {}
    profiles = [_profile(test, path, op, labels) for test in tests]
    empty = len(reader.tests) - len(tests)
    if empty:
        profiles[0].warnings.append(f"{empty} test(s) of the log printed no results")
    profiles[-1].warnings.extend(reader.cut)
    return profiles


def _size_name(size: int) -> str:
    for factor, unit in _UNITS:
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


def _profile(test: Test, path: Path, option: str | None, labels: dict[str, int]) -> Profile:
    op = test.op or option or test.mentioned
    label = op or "collective"
    labels[label] = labels.get(label, 0) + 1
    if labels[label] > 1:
        label = f"{label}#{labels[label]}"
    profile = Profile(label=label, format=NAME, source=str(path), metadata=_metadata(test))
    if op is None:
        profile.warnings.append(
            f"the test at line {test.line} does not name its collective (older nccl-tests print "
            f"no '# Collective test starting:' line): pass --option op=NAME, e.g. all_reduce"
        )
    results, varying = _results(test)
    launches = _launches(test.metadata)
    profile.metrics = [
        _metric(op or "collective", key, halves, launches, varying)
        for key, halves in results.items()
    ]
    profile.steps = launches * max(len(halves) for halves in results.values())
    if test.avg_busbw is not None:
        profile.metrics.append(_avg_busbw(test.avg_busbw))
    else:
        test.warnings.append(
            f"the test at line {test.line} has no '# Avg bus bandwidth' line: it stopped "
            f"before its end (a failure, or a cut log)"
        )
    profile.warnings += test.warnings + _wrong(profile.metrics)
    return profile


def _metadata(test: Test) -> dict[str, Any]:
    metadata = dict(test.metadata)
    if test.gpus:
        metadata["ranks"], metadata["hosts"] = len(test.gpus), len(set(test.hosts))
        metadata["devices"] = list(dict.fromkeys(test.gpus))
    types = [row.qualifiers[0] for row in test.rows if row.qualifiers[0]]
    if types:
        metadata["data_types"] = list(dict.fromkeys(types))
    return metadata


def _launches(metadata: Mapping[str, Any]) -> int:
    """Launches behind one printed time: ``BenchTime`` divides by all of them."""
    iters = int(metadata.get("iters", 1)) * int(metadata.get("agg_iters", 1))
    return max(iters, 1) * max(int(metadata.get("cuda_graph_launches", 0)), 1)


#: A result: (type, redop, root, size, in-place).
_Key = tuple[str | None, str | None, str | None, int, bool]
_Half = dict[str, float | None]


def _results(test: Test) -> tuple[dict[_Key, list[_Half]], tuple[bool, ...]]:
    """Each result's printed halves (several with ``-N``), and which qualifiers vary."""
    results: dict[_Key, list[_Half]] = {}
    for row in test.rows:
        for index, half in enumerate(row.halves):
            key = (*row.qualifiers, row.size, index == 1)
            results.setdefault(key, []).append({**half, "count": row.count})
    varying = tuple(len({row.qualifiers[i] for row in test.rows}) > 1 for i in range(3))
    return results, varying


def _name(op: str, key: _Key, varying: tuple[bool, ...]) -> str:
    kind, redop, root, size, in_place = key
    parts = [op, *(v for v, shown in zip((kind, redop), varying[:2], strict=True) if shown and v)]
    parts.append(_size_name(size))
    if varying[2] and root is not None:
        parts.append(f"root {root}")
    return " ".join(parts) + (" (in-place)" if in_place else "")


def _metric(
    op: str, key: _Key, halves: list[_Half], launches: int, varying: tuple[bool, ...]
) -> Metric:
    times = [half["time"] * _NS_PER_US for half in halves if half["time"] is not None]
    calls = launches * len(times)
    return Metric(
        kind=MetricKind.BENCH,
        device=Device.GPU,
        name=_name(op, key, varying),
        calls=calls,
        total_ns=statistics.fmean(times) * calls,
        avg_ns=statistics.fmean(times),
        min_ns=_combined(halves, "i_min", min, _NS_PER_US),
        max_ns=_combined(halves, "i_max", max, _NS_PER_US),
        bytes=float(key[3] * calls),
        samples_ns=times,
        attrs=_attrs(op, key, halves),
    )


#: Result cells kept in ``attrs``: (cell, attribute, how rows combine, scale).
_ATTRS: tuple[tuple[str, str, Callable[[list[float]], float], float], ...] = (
    ("algbw", "algbw_gb_s", statistics.fmean, 1.0),
    ("busbw", "busbw_gb_s", statistics.fmean, 1.0),
    ("#wrong", "wrong_elements", sum, 1.0),
    ("error", "max_error", max, 1.0),
    ("#bitdiff", "bitdiff", sum, 1.0),
    ("i_p99", "p99_ns", max, _NS_PER_US),
    ("i_cv%", "cv_pct", statistics.fmean, 1.0),
)


def _attrs(op: str, key: _Key, halves: list[_Half]) -> dict[str, Any]:
    kind, redop, root, size, in_place = key
    attrs: dict[str, Any] = {"op": op, "msg_size_bytes": size, "in_place": in_place}
    if kind is not None:
        attrs["type"] = kind
    if redop not in (None, "", "none"):  # "none": a collective without reduction
        attrs["redop"] = redop
    if root is not None and root.isdigit():  # -1: a collective without root
        attrs["root"] = int(root)
    attrs["count"] = int(halves[-1]["count"] or 0)
    for cell, attr, combine, scale in _ATTRS:
        value = _combined(halves, cell, combine, scale)
        if value is not None:
            attrs[attr] = value
    return attrs


def _combined(
    halves: list[_Half], cell: str, combine: Callable[[list[float]], float], scale: float
) -> float | None:
    values = [value for half in halves if (value := half.get(cell)) is not None]
    return combine(values) * scale if values else None


def _avg_busbw(value: float) -> Metric:
    return Metric(
        kind=MetricKind.MEASURE,
        name="avg bus bandwidth",
        unit="GB/s",
        better=Better.HIGHER,
        value=value,
    )


def _wrong(metrics: list[Metric]) -> list[str]:
    """One warning naming the results nccl-tests' data check found wrong elements in."""
    bad = [
        f"{metric.name}: {metric.attrs['wrong_elements']:g} wrong elements"
        for metric in metrics
        if metric.attrs.get("wrong_elements")
    ]
    if not bad:
        return []
    more = f" and {len(bad) - _LISTED} more" if len(bad) > _LISTED else ""
    return [
        f"{len(bad)} result(s) failed nccl-tests' data check, the collective returned wrong "
        f"data: {'; '.join(bad[:_LISTED])}{more}"
    ]
