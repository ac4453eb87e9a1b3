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

import math
import re
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfci.errors import ParseError
from perfci.formats._text_lines import open_text
from perfci.model import Better, Device, Metric, MetricKind, Profile

if TYPE_CHECKING:
    from perfci.formats.protocol import Head

NAME = "nccl_tests"
DESCRIPTION = "NVIDIA nccl-tests logs (all_reduce_perf …): time and bus bandwidth per size"

_NS_PER_US = 1e3
_SNIFF = re.compile(
    r"#\s+size\s+count\s+type\s+(?:\S+\s+){0,2}(?:cpu)?time\s+algbw\s+busbw\s"
    r"|# nThread \d+ nGpus \d+ minBytes \d+ maxBytes \d+"
)
#: GitHub Actions' raw-log timestamp, then ``mpirun --tag-output``'s or ``srun -l``'s prefix.
_PREFIX = re.compile(
    r"(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z )?"
    r"(?:\[\d+,(?P<tag>\d+)\]<std(?:out|err)>: ?|\s*(?P<srun>\d+): )?"
)
#: A result row starts with its size and element count, both whole numbers.
_ROW = re.compile(r"\s*\d+\s+\d+\s")
#: The rest of a row after a log line NCCL printed into it: the next result cells.
_CONTINUATION = re.compile(r"\s+(?:[-+.\d]|N/A)")
_CELL = re.compile(r"\S+")
_NUMBER = re.compile(r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|inf|nan)")
_COLUMNS = re.compile(r"#\s+size\s+count\s+type\s")
_CONFIG = re.compile(r"# nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+)")
_SETTING = re.compile(
    r"\b(step|warmup iters|agg iters|iters|validation|graph|unalign): (\d+)(?:\((factor|bytes)\))?"
)
_VERSION = re.compile(r"# nccl-tests version (\S+) nccl-headers=\d+ nccl-library=(\d+)")
_STARTING = re.compile(r"# Collective test starting: (\S+)")
_CONCLUDED = re.compile(r"# Collective test concluded:")
_DEVICE = re.compile(
    r"#\s+Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+"
    r"\[[^\]]*\]\s+(\S.*?)\s*$"
)
_CHECK = re.compile(r"# (Out of bounds values|Bitwise mismatches)\s*:\s*(\d+)")
_AVG = re.compile(r"# Avg bus bandwidth\s*:\s*(\S+)(?:\s+(FAILED))?")
_REDUCED = re.compile(r"# Reducing maxBytes to (\d+)")
_NCCL_LOG = re.compile(r"\S+:\d+:\d+ \[\d+\] NCCL [A-Z]+")
_NCCL_VERSION = re.compile(r"\bNCCL version (\d[\w.+-]*)")
_FAILURE = re.compile(r"Test (?:NCCL |CUDA )?failure|Test timeout")
_BINARY = re.compile(
    r"\b(all_reduce|all_gather|alltoallv?|broadcast|gather|hypercube|reduce_scatter|reduce|"
    r"scatter|sendrecv)_perf(?:_mpi)?\b"
)
_UNITS = ((1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB"))
_LISTED = 5  # wrong results named in a warning


def sniff(head: Head) -> bool:
    """The results' column header, or the settings line every test prints first."""
    return bool(_SNIFF.search(head.text))


@dataclass(frozen=True, slots=True)
class _Columns:
    """A test's column header: the cells of a row by name, and where each ends."""

    line: int
    names: tuple[str, ...]
    ends: tuple[int, ...]  # the header's cells are right-aligned with the rows'
    key: dict[str, int]  # size, count, type, redop, root
    halves: tuple[dict[str, int], ...]  # out-of-place, in-place: field → cell

    @property
    def cells(self) -> int:
        """Cells of a row: a timestamp (``-Z``) prints as a date and a time."""
        return len(self.names) + ("timestamp" in self.names)


@dataclass(frozen=True, slots=True)
class _Row:
    size: int
    count: int
    qualifiers: tuple[str | None, str | None, str | None]  # type, redop, root
    halves: tuple[dict[str, float | None], ...]


@dataclass(slots=True)
class _Test:
    line: int
    op: str | None  # as the test names itself
    mentioned: str | None  # the last ``<op>_perf`` a line before the test named
    metadata: dict[str, Any]
    columns: _Columns | None = None
    rows: list[_Row] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    gpus: list[str] = field(default_factory=list)
    avg_busbw: float | None = None
    done: bool = False  # its footer was printed: later rows are not its own


@dataclass(slots=True)
class _Stream:
    """The lines of one launcher prefix (one rank's output)."""

    test: _Test | None = None
    pending: dict[str, Any] = field(default_factory=dict)  # printed before the settings line
    partial: tuple[int, str] | None = None  # a row NCCL printed a log line into


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """A profile per test run in the log."""
    reader = _Reader(path)
    with open_text(path, format=NAME) as handle:
        for number, line in enumerate(handle, 1):
            reader.feed(number, line)
    return reader.profiles(options.get("op") or None)


class _Reader:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.tests: list[_Test] = []
        self.streams: dict[str, _Stream] = {}
        self.mentioned: str | None = None  # the last ``<op>_perf`` a line named
        self.cut: list[str] = []

    def feed(self, number: int, line: str) -> None:
        prefix = _PREFIX.match(line)  # always matches: every part is optional
        offset = prefix.end() if prefix else 0
        text = line[offset:].rstrip("\r\n")
        tag = (prefix["tag"] or prefix["srun"] or "") if prefix else ""
        stream = self.streams.setdefault(tag, _Stream())
        cut = not line.endswith("\n")
        if stream.partial is not None and self._continued(stream, text, offset, cut):
            return
        if text.startswith("#"):
            self._comment(stream, number, text)
        elif _ROW.match(text):
            self._row(stream, number, text, offset, cut)
        else:
            self._noise(stream, text)

    def _open(self, stream: _Stream, number: int) -> _Test:
        op = _op_of(stream.pending.get("program", ""))
        test = _Test(line=number, op=op, mentioned=self.mentioned, metadata=stream.pending)
        stream.test, stream.pending, self.mentioned = test, {}, None
        self.tests.append(test)
        return test

    def _comment(self, stream: _Stream, number: int, text: str) -> None:
        test = stream.test
        if match := _VERSION.match(text):
            stream.pending["nccl_tests_version"] = match[1]
            stream.pending["nccl_version"] = _nccl_version(int(match[2]))
        elif match := _STARTING.match(text):
            stream.pending["program"] = match[1]
        elif match := _CONFIG.match(text):
            _settings(self._open(stream, number).metadata, match, text)
        elif _COLUMNS.match(text) and (columns := _columns(text, number)):
            if test is None or test.columns is not None:
                test = self._open(stream, number)
            test.columns = columns
        elif test is not None:
            _footer(test, text)

    def _row(self, stream: _Stream, number: int, text: str, offset: int, cut: bool) -> None:
        test = stream.test
        if test is None or test.columns is None or test.done:
            return  # numbers outside a results table
        if _FAILURE.search(text):  # the test died while printing the row
            test.warnings.append(f"the test failed at line {number}: {text.strip()}")
            test.done = True
        elif log := _NCCL_LOG.search(text):
            # NCCL logged into the row being printed: the row's text ends at a cell's end.
            ends = [end for end in test.columns.ends if end > log.start()]
            stream.partial = (number, text[: ends[0] if ends else log.start()])
        elif cut:
            self.cut.append(f"line {number}, the file's last line, was cut short")
        else:
            test.rows.append(self._cells(test.columns, number, text, offset))

    def _continued(self, stream: _Stream, text: str, offset: int, cut: bool) -> bool:
        """Whether the line was the rest of a row NCCL printed a log line into."""
        start, head = stream.partial or (0, "")
        if _CONTINUATION.match(text) and not _ROW.match(text):
            stream.partial = None
            self._row(stream, start, head + text, offset, cut)
            return True
        if text.startswith("#") or _ROW.match(text) or _FAILURE.search(text):
            stream.partial = None
            if stream.test is not None:
                stream.test.warnings.append(f"the row at line {start} was never finished")
        return False

    def _cells(self, columns: _Columns, number: int, text: str, offset: int) -> _Row:
        cells = [(m.group(), offset + m.start() + 1) for m in _CELL.finditer(text)]
        if len(cells) != columns.cells:
            column = cells[columns.cells][1] if len(cells) > columns.cells else offset + len(text)
            raise self._error(
                number,
                column,
                f"the row has {len(cells)} cells where the column header (line "
                f"{columns.line}) names {columns.cells}",
            )
        key = {name: cells[index] for name, index in columns.key.items()}
        size, count = int(key["size"][0]), int(key["count"][0])  # whole numbers, as _ROW found
        kind, redop, root = (key[name][0] if name in key else None for name in _QUALIFIERS)
        halves = tuple(
            {name: self._value(number, *cells[index], name) for name, index in half.items()}
            for half in columns.halves
        )
        return _Row(size, count, (kind, redop, root), halves)

    def _value(self, number: int, text: str, column: int, name: str) -> float | None:
        """A result cell; ``N/A`` (no data check) and an infinite bandwidth are ``None``."""
        if name not in _READ or (text == "N/A" and name != "time"):
            return None
        # rccl-tests marks an ``error`` beyond its threshold with a "*".
        found = _NUMBER.fullmatch(text.rstrip("*") if name == "error" else text)
        value = float(found.group()) if found else None
        if value is None or (name == "time" and not 0 <= value < math.inf):
            raise self._error(number, column, f"the {name} {text!r} is not a number")
        return value if math.isfinite(value) else None

    def _noise(self, stream: _Stream, text: str) -> None:
        if _NCCL_LOG.match(text):
            return
        test = stream.test
        if match := _NCCL_VERSION.search(text):
            # NCCL prints its version as the test initialises its communicators.
            running = test is not None and not test.done
            (test.metadata if test and running else stream.pending).setdefault(
                "nccl_version", match[1]
            )
        if _FAILURE.search(text) and test is not None:
            test.warnings.append(f"the test failed: {text.strip()}")
        elif named := _BINARY.findall(text):
            self.mentioned = named[-1]

    def _error(self, number: int, column: int, message: str) -> ParseError:
        return ParseError(
            f"column {column}: {message}", source=str(self.path), line=number, format=NAME
        )

    def profiles(self, op: str | None) -> list[Profile]:
        for stream in self.streams.values():
            if stream.partial is not None:
                self.cut.append(f"line {stream.partial[0]}, a row the file ends in, was cut short")
        tests = [test for test in self.tests if test.rows]
        if not tests:
            raise ParseError(
                "no nccl-tests result found: expected a '#  size  count  type …  time  algbw  "
                "busbw …' column header followed by rows of results",
                source=str(self.path),
                format=NAME,
            )
        labels: dict[str, int] = {}
        profiles = [_profile(test, self.path, op, labels) for test in tests]
        empty = len(self.tests) - len(tests)
        if empty:
            profiles[0].warnings.append(f"{empty} test(s) of the log printed no results")
        profiles[-1].warnings.extend(self.cut)
        return profiles


#: Row cells that may name a result apart from its size: ``-d all``, ``-o all``, ``-r -1``.
_QUALIFIERS = ("type", "redop", "root")
#: Result cells read; the others (a timestamp, a fork's extras) are skipped.
_READ = frozenset(
    {"time", "algbw", "busbw", "#wrong", "error", "#bitdiff", "i_min", "i_max", "i_p99", "i_cv%"}
)


def _columns(text: str, number: int) -> _Columns | None:
    """The header's cells; ``None`` for a header without a time column (not a results table)."""
    found = list(_CELL.finditer(text[1:]))
    names = tuple(m.group() for m in found)
    starts = [i for i, name in enumerate(names) if name in ("time", "cputime")]
    if not starts:
        return None
    bounds = [*starts[:2], len(names)]
    return _Columns(
        line=number,
        names=names,
        ends=tuple(m.end() + 1 for m in found),
        key={name: i for i, name in enumerate(names[: starts[0]])},
        halves=tuple(
            {"time" if i == start else names[i]: i for i in range(start, end)}
            for start, end in pairwise(bounds)
        ),
    )


def _settings(metadata: dict[str, Any], match: re.Match[str], text: str) -> None:
    metadata["threads"], metadata["gpus_per_thread"] = int(match[1]), int(match[2])
    metadata["min_bytes"], metadata["max_bytes"] = int(match[3]), int(match[4])
    for setting in _SETTING.finditer(text, match.end()):
        name, value, unit = setting.groups()
        key = "cuda_graph_launches" if name == "graph" else name.replace(" ", "_")
        metadata[f"step_{unit}" if name == "step" else key] = int(value)


def _footer(test: _Test, text: str) -> None:
    """What a test prints after its settings: devices, summary lines."""
    if match := _DEVICE.match(text):
        test.hosts.append(match[1])
        test.gpus.append(match[2])
    elif match := _CHECK.match(text):
        if int(match[2]):
            test.warnings.append(f"{match[1]}: {match[2]} (nccl-tests' data check FAILED)")
    elif match := _AVG.match(text):
        found = _NUMBER.fullmatch(match[1])
        test.avg_busbw = float(found.group()) if found else None
        test.done = True
        if match[2]:
            test.warnings.append("Avg bus bandwidth FAILED: under 0.9 × NCCL_TESTS_MIN_BW")
    elif _CONCLUDED.match(text):
        test.done = True
    elif match := _REDUCED.match(text):
        test.warnings.append(f"nccl-tests reduced maxBytes to {match[1]} (GPU memory)")


def _op_of(program: str) -> str | None:
    if not program:
        return None
    found = _BINARY.search(program)
    return found[1] if found else program.removesuffix("_mpi").removesuffix("_perf")


def _nccl_version(code: int) -> str:
    """``22907`` → ``2.29.7``; before 2.9 the code was ``2708`` for 2.7.8."""
    if code >= 10000:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def _size_name(size: int) -> str:
    for factor, unit in _UNITS:
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


def _profile(test: _Test, path: Path, option: str | None, labels: dict[str, int]) -> Profile:
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


def _metadata(test: _Test) -> dict[str, Any]:
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


def _results(test: _Test) -> tuple[dict[_Key, list[_Half]], tuple[bool, ...]]:
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
