"""Reading an nccl-tests log (:mod:`.nccl_tests`) line by line into its tests.

Launcher prefixes are taken off and each prefix's lines read on their own; the settings, column
header, result rows and summary lines of each test become a :class:`Test`, from which
:mod:`.nccl_tests` builds the profiles.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from perfci.core.errors import ParseError
from perfci.formats.caps import budget

__all__ = ["Reader", "Test"]

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
# The GPU's name runs to the line's last non-blank: ``\S(?:.*\S)?`` is what the lazy
# ``\S.*?\s*$`` took, without trying ``\s*$`` from every character of a blank run (issue 31).
_DEVICE = re.compile(
    r"#\s+Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+"
    r"\[[^\]]*\]\s+(\S(?:.*\S)?)\s*$"
)
_CHECK = re.compile(r"# (Out of bounds values|Bitwise mismatches)\s*:\s*(\d+)")
_AVG = re.compile(r"# Avg bus bandwidth\s*:\s*(\S+)(?:\s+(FAILED))?")
_REDUCED = re.compile(r"# Reducing maxBytes to (\d+)")
# Tried at the start of a word only (``(?<!\S)``): a match inside a word also matches from its
# start, and trying every character of a long word re-read it each time (issue 31).
_NCCL_LOG = re.compile(r"(?<!\S)\S+:\d+:\d+ \[\d+\] NCCL [A-Z]+")
_NCCL_VERSION = re.compile(r"\bNCCL version (\d[\w.+-]*)")
_FAILURE = re.compile(r"Test (?:NCCL |CUDA )?failure|Test timeout")
_BINARY = re.compile(
    r"\b(all_reduce|all_gather|alltoallv?|broadcast|gather|hypercube|reduce_scatter|reduce|"
    r"scatter|sendrecv)_perf(?:_mpi)?\b"
)


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
class Test:
    line: int
    op: str | None  # as the test names itself
    mentioned: str | None  # the last ``<op>_perf`` a line before the test named
    metadata: dict[str, Any]
    columns: _Columns | None = None
    rows: list[_Row] = field(default_factory=list)
    results: set[tuple[Any, ...]] = field(default_factory=set)  # the metrics so far
    warnings: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    gpus: list[str] = field(default_factory=list)
    avg_busbw: float | None = None
    done: bool = False  # its footer was printed: later rows are not its own


@dataclass(slots=True)
class _Stream:
    """The lines of one launcher prefix (one rank's output)."""

    test: Test | None = None
    pending: dict[str, Any] = field(default_factory=dict)  # printed before the settings line
    partial: tuple[int, str] | None = None  # a row NCCL printed a log line into


class Reader:
    def __init__(self, path: Path, *, format: str) -> None:
        self.path = path
        self.format = format
        self.tests: list[Test] = []
        self.streams: dict[str, _Stream] = {}
        self.mentioned: str | None = None  # the last ``<op>_perf`` a line named
        self.cut: list[str] = []
        self.counted = budget(str(path), format)

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

    def _open(self, stream: _Stream, number: int) -> Test:
        op = _op_of(stream.pending.get("program", ""))
        test = Test(line=number, op=op, mentioned=self.mentioned, metadata=stream.pending)
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
            self._add(test, self._cells(test.columns, number, text, offset))

    def _add(self, test: Test, row: _Row) -> None:
        """Keep a row: each result (half) new to the test is a metric, a repeat (``-N``) of
        one a sample, counted within a service upload's caps (issue 31)."""
        for index in range(len(row.halves)):
            key = (*row.qualifiers, row.size, index == 1)
            if key in test.results:
                self.counted.sample()
            else:
                test.results.add(key)
                self.counted.metric()
        test.rows.append(row)

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
            f"column {column}: {message}", source=str(self.path), line=number, format=self.format
        )

    def close(self) -> None:
        """Note each row the file ends in the middle of (in ``cut``)."""
        for stream in self.streams.values():
            if stream.partial is not None:
                self.cut.append(f"line {stream.partial[0]}, a row the file ends in, was cut short")


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


def _footer(test: Test, text: str) -> None:
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
