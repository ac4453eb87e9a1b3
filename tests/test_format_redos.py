"""Issue 31: no hostile text stalls format detection or a text reader (catastrophic backtracking).

A line of 2,048 spaces took the MLPerf summary reader 31 s, ``'iteration 1/1 |' * 4369`` the
Megatron detector 21 s, ``'Processing [' + '] with [' * N`` the nsys detector 79 s: while the
service parsed one such upload, every other client waited. Three levels are checked here:

* every module-level pattern of ``perfci.formats`` (and of ``perfci.core.units``, which the readers
  use), applied as its module applies it (``search`` tries every position, ``match`` one), on
  strings built from the pattern's own pieces (``redos_inputs``): its literals repeated, long
  runs of what its repeats take, what it matched so far followed by such a run;
* every detector (``registry.detect`` and each format's ``sniff``), on the reported inputs and
  on runs of every detector pattern's pieces;
* every text reader, forced on a file that starts like one of its own and goes on with such
  lines (so that its state machine reaches the patterns that read the rows).

No timings are asserted: each check runs under a hang guard (``SIGALRM``, which interrupts the
regular expression engine too) far above what the fixed code takes (milliseconds) and far
below what the old patterns took on these sizes (tens of seconds to hours). The speed itself
is measured by ``benchmarks/redos.py``.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from deadlines import time_scale
from redos_inputs import FormatPattern, adversarial, adversarial_text, format_patterns

import perfci.core.units
from perfci.core.errors import ParseError, UnknownFormatError
from perfci.formats import registry
from perfci.formats.mlperf import mlperf_summary
from perfci.formats.nsys import _reports as nsys_reports
from perfci.formats.protocol import Head
from perfci.formats.workload import _layer_metrics as layer_metrics
from perfci.formats.workload import _megatron_reader as megatron_reader

#: Seconds a check may take; the fixed code takes milliseconds on these inputs.
GUARD = 20.0
SIZE = 256 * 1024
READER_LINE = 64 * 1024


class Hung(BaseException):
    """A hang guard expired: a ``BaseException``, so that no parser's or detector's handler
    (``except Exception``, the registry's ``OSError``…) takes it for a bad input."""


@contextmanager
def hang_guard(what: str, seconds: float = GUARD) -> Iterator[None]:
    """Fail with ``what`` named when the block runs longer than ``seconds`` on a quiet machine
    (stretched by :func:`deadlines.time_scale` on a busy one: a hang guard, not a timing)."""
    seconds *= time_scale()

    def expired(signum: int, frame: object) -> None:
        raise Hung(f"{what} ran longer than {seconds:g} s: super-linear backtracking?")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# --- every pattern ------------------------------------------------------------------------------

Apply = Callable[[re.Pattern[Any], Any], object]

#: Patterns whose call site the source analysis cannot see (passed to a helper), or that the
#: call site bounds: tried as the code applies them.
CALL_SITES: dict[str, Apply] = {
    # Passed to _not_a_row, which calls row_start.match(line).
    "perfci.formats.nvprof._csv.COUNT_START": lambda p, s: p.match(s),
    "perfci.formats.nvprof.nvprof._ROW_START": lambda p, s: p.match(s),
    "perfci.formats.nvprof._text_rows.TRACE_ROW_START": lambda p, s: p.match(s),
    # _metric_line picks one of the two and calls pattern.fullmatch(line).
    "perfci.formats.nvprof.nvprof._METRIC_ROW": lambda p, s: p.fullmatch(s),
    "perfci.formats.nvprof.nvprof._EVENT_ROW": lambda p, s: p.fullmatch(s),
    # _running matches up to the line's last "]" only (see there why).
    "perfci.formats.nsys.nsys_stats._RUNNING": lambda p, s: p.match(s, 0, s.rfind("]") + 1),
    # Tables of patterns: _column tries each on a column title with fullmatch, kind_of each
    # on a row's name with search.
    "perfci.formats._fixed_width._COLUMN_RULES": lambda p, s: p.fullmatch(s),
    "perfci.formats.pytorch._table_rows._KIND_RULES": lambda p, s: p.search(s),
}


def _patterns() -> list[FormatPattern]:
    units = [
        FormatPattern(
            f"perfci.core.units.{name}", getattr(perfci.core.units, name), frozenset({"match"})
        )
        for name in ("_DURATION", "_SIZE")
    ]
    return format_patterns() + units


PATTERNS = _patterns()


def _apply(found: FormatPattern) -> Apply:
    table = found.name.partition("[")[0]  # a pattern of a table: the table's call site
    if table in CALL_SITES:
        return CALL_SITES[table]
    if found.scanning:
        return lambda p, s: p.search(s)
    return lambda p, s: p.fullmatch(s) if found.methods == {"fullmatch"} else p.match(s)


def test_the_sweep_sees_every_pattern_of_the_readers() -> None:
    names = {found.name for found in PATTERNS}
    assert len(names) > 180  # and those of tables of patterns (_COLUMN_RULES[0] …)
    # The reported ones are among them, as are the helpers' (sniffers, rows, units).
    assert {
        "perfci.formats.workload._detectors._MEGATRON_LOG_SNIFF_ITERATION",
        "perfci.formats.nsys._detectors._NSYS_STATS_SNIFF",
        "perfci.formats.nvprof.nvprof._ROW",
        "perfci.core.units._DURATION",
    } <= names
    assert set(CALL_SITES) <= {name.partition("[")[0] for name in names}


@pytest.mark.parametrize("found", PATTERNS, ids=[found.name for found in PATTERNS])
def test_no_pattern_backtracks_on_strings_of_its_own_pieces(found: FormatPattern) -> None:
    apply = _apply(found)
    inputs = adversarial(found.pattern, SIZE, lean=True)
    assert inputs
    with hang_guard(f"{found.name} on {len(inputs)} strings of {SIZE} characters"):
        for text in inputs:
            apply(found.pattern, text)


#: Patterns replaced by code (``str.find`` and friends): each function, and the pattern it
#: replaced, whose pieces build the strings it is fed.
Replaced = tuple[Callable[[str], object], str]
REPLACED: dict[str, Replaced] = {
    "mlperf_summary key : value": (
        mlperf_summary._key_value,
        r"^\s*(?P<key>[^:]+?)\s*:\s*(?P<value>.*?)\s*$",
    ),
    "nsys column title (unit)": (
        nsys_reports.split_title,
        r"^(?P<base>.*?)\s*(?:\((?P<unit>[^)]*)\))?$",
    ),
    "nsys Processing [report] with [script]": (
        nsys_reports.processing,
        r"^Processing \[(.+?)\] with \[(?:.*[/\\])?([\w.-]+?)\.py\]",
    ),
    "megatron report_memory": (
        megatron_reader._memory_line,
        r"(?:\[Rank (?P<rank>\d{1,9})\] )?\([^)]*\) memory \(MB\) \|(?P<fields>.*)$",
    ),
    "simai summary cell (percent)": (
        layer_metrics.summary_cell,
        r"^(?P<value>.*?)\s*(?:\((?P<percent>[^()]*)%\))?$",
    ),
}


@pytest.mark.parametrize("replaced", REPLACED.values(), ids=list(REPLACED))
def test_no_replacement_of_a_pattern_backtracks(
    replaced: tuple[Callable[[str], object], str],
) -> None:
    function, pattern = replaced
    inputs = adversarial_text(pattern, 0, SIZE, lean=True)
    with hang_guard(f"{function.__qualname__} on {len(inputs)} strings of {SIZE} characters"):
        for text in inputs:
            function(text)


# --- detection ----------------------------------------------------------------------------------

#: The inputs issue 31 reported, at the size of the head the registry sniffs.
REPORTED = {
    "mlperf summary, a line of spaces": (
        "================\nMLPerf Results Summary\n================\n"
        + " " * (SIZE // 2)
        + "x"
        + " " * (SIZE // 2)
        + "\n"
    ),
    "megatron iteration heads": "iteration 1/1 |" * (SIZE // 15),
    "nsys processing brackets": "Processing [" + "] with [" * (SIZE // 8),
}


@pytest.mark.parametrize("text", REPORTED.values(), ids=list(REPORTED))
def test_the_reported_uploads_are_detected_at_once(tmp_path: Path, text: str) -> None:
    path = tmp_path / "upload.txt"
    path.write_text(text)
    with hang_guard("detection of the reported input"), suppress(UnknownFormatError):
        registry.detect(path)


def test_the_mlperf_summary_reader_reads_the_line_of_spaces_at_once(tmp_path: Path) -> None:
    path = tmp_path / "mlperf_log_summary.txt"
    path.write_text(REPORTED["mlperf summary, a line of spaces"])
    with hang_guard("mlperf_summary on a line of spaces"):
        [profile] = registry.parse_file(path, format="mlperf_summary")
    assert profile.metrics == []  # the line has no "key : value"


def _sniffer_texts() -> list[str]:
    """What every detector is fed: the reported inputs, and the pieces of every pattern a
    sniffer uses repeated (one string per pattern: all its lean strings, one per line)."""
    texts = list(REPORTED.values())
    for found in PATTERNS:
        if "SNIFF" in found.name and isinstance(found.pattern.pattern, str):
            pieces = adversarial(found.pattern, SIZE // 8, lean=True)
            texts.append("\n".join(pieces)[: 4 * SIZE])
    return texts


SNIFFER_TEXTS = _sniffer_texts()


@pytest.mark.parametrize("spec", list(registry.formats().values()), ids=list(registry.formats()))
def test_every_detector_reads_pathological_heads_at_once(spec: registry.FormatSpec) -> None:
    with hang_guard(f"{spec.name}.sniff on {len(SNIFFER_TEXTS)} heads"):
        for text in SNIFFER_TEXTS:
            head = Head(raw=text.encode("utf-8", "replace"), text=text, gzipped=False)
            with suppress(ValueError, UnicodeError):  # "not mine", as the registry takes it
                spec.sniff(head)


# --- text readers -------------------------------------------------------------------------------


def _pytorch_table() -> str:
    rule = "  ".join(["-" * 20] + ["-" * 12] * 3)
    header = "  ".join(["Name".rjust(20), "Self CPU %".rjust(12), "Self CPU".rjust(12)])
    header += "  " + "# of Calls".rjust(12)
    row = "  ".join(["aten::mm".rjust(20), "1.00%".rjust(12), "1.000ms".rjust(12)])
    row += "  " + "1".rjust(12)
    return f"{rule}\n{header}\n{rule}\n{row}\n"


#: A start of each text format's files, so that the reader is in its rows' state when the
#: pathological lines come.
PRELUDES = {
    "mlperf_summary": "================\nMLPerf Results Summary\n================\n"
    "Samples per second: 33.6903\n",
    "megatron_log": " iteration        1/     100 | consumed samples:            8 | elapsed "
    "time per iteration (ms): 100.0 | learning rate: 1.000E-04 |\n",
    "nsys_stats": "Processing [x.sqlite] with [/opt/reports/cuda_api_sum.py]...\n\n"
    " ** CUDA API Summary (cuda_api_sum):\n\n"
    " Time (%)  Total Time (ns)  Num Calls  Avg (ns)  Med (ns)  Min (ns)  Max (ns)  "
    "StdDev (ns)  Name\n"
    " --------  ---------------  ---------  --------  --------  --------  --------  "
    "-----------  ----\n"
    "    100.0             1000          1    1000.0    1000.0      1000      1000  "
    "        0.0  cudaMalloc\n",
    "nvprof": "==1== Profiling result:\n"
    "            Type  Time(%)      Time     Calls       Avg       Min       Max  Name\n"
    " GPU activities:  100.00%  1.0000ms         1  1.0000ms  1.0000ms  1.0000ms  k(float*)\n",
    "ncu_text": "==PROF== Connected to process 1 (/bin/x)\n[1] x@host\n"
    "  kernel(), Context 1, Stream 7\n    Section: GPU Speed Of Light Throughput\n"
    "    ---------------------- ----------- ------------\n"
    "    Metric Name            Metric Unit Metric Value\n"
    "    ---------------------- ----------- ------------\n"
    "    Duration               usecond             1.00\n",
    "pytorch_table": _pytorch_table(),
    "deepspeed_comms": "[Rank 0] comm op: all_reduce | time (ms): 0.5 | msg size: 1.0 MB | "
    "algbw (Gbps): 1.0 | busbw (Gbps): 1.0\n",
    "dynamo_csv": "dev,name,batch_size,speedup,abs_latency\ncuda,m,1,1.5,2.0\n",
    "simai_results": "layer_name,run,fwd compute,wg compute,ig compute,fwd exposed comm,"
    "wg exposed comm,ig exposed comm\nl,,1,1,1,0,0,0\n",
    "workload_table": "HYBRID_TRANSFORMER model_parallel_NPU_group: 4\n1\n"
    "l -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n",
    "megatron_trace": "rank:0:forward_step(duration=1.0,timestamp=1.0)\n",
    "mlperf_log": ':::MLLOG {"key": "run_start", "value": null, "time_ms": 1, '
    '"event_type": "INTERVAL_START", "metadata": {}}\n',
    "ncu_csv": '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
    '"Section Name","Metric Name","Metric Unit","Metric Value"\n'
    '"0","1","x","h","k()","1","7","S","Duration","usecond","1.00"\n',
    "nvbench_md": "# Benchmark Results\n\n## copy\n\n### [0] NVIDIA H100\n\n"
    "| Elements | Samples | GPU Time | Noise |\n|----------|---------|----------|-------|\n"
    "| 1 | 100x | 1.000 ms | 0.50% |\n",
    "nsys_stats_csv": '"Time (%)","Total Time (ns)","Num Calls","Avg (ns)","Med (ns)",'
    '"Min (ns)","Max (ns)","StdDev (ns)","Name"\n'
    "100.0,1000,1,1000.0,1000.0,1000,1000,0.0,cudaMalloc\n",
    "nccl_tests": "# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 "
    "iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n"
    "#  Rank  0 Group  0 Pid      1 on       host device  0 [0x00] NVIDIA H100\n#\n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong\n"
    "           8             2     float     sum      -1     10.0    0.00    0.00      0"
    "     10.0    0.00    0.00      0\n",
}


def _family(name: str) -> str:
    return registry.get_format(name).reader.rsplit(".", 1)[0] + "."


def _reader_lines(name: str) -> list[str]:
    """Runs of blanks and separators, unterminated brackets, the reported strings, and the
    lean strings of every pattern of the reader's family and of the shared helpers."""
    size = READER_LINE
    lines = [
        " " * size + "x",
        "\t" * size + "x",
        "x" + " " * size + "x:",
        "(" * size,
        "[" * size,
        "|" * size,
        "," * size,
        "0" * size + "x",
        *(text[:size] for text in REPORTED.values()),
    ]
    family = _family(name)
    shared = ("perfci.formats._", "perfci.core.units.")
    for found in PATTERNS:
        if found.name.startswith((family, *shared)) and isinstance(found.pattern.pattern, str):
            strings = adversarial(found.pattern, size // 4, lean=True)
            lines += [text.replace("\n", " ") for text in strings[:6]]
    return lines


@pytest.mark.parametrize("name", list(PRELUDES))
def test_every_text_reader_reads_pathological_lines_at_once(tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.txt"
    lines = _reader_lines(name)
    path.write_text(PRELUDES[name] + "\n".join(lines) + "\n", encoding="utf-8")
    # Refusing garbage is fine; taking minutes over it is not.
    with hang_guard(f"{name} on {len(lines)} pathological lines"), suppress(ParseError):
        registry.parse_file(path, format=name)


#: Rows that the readers' own call sites made slow (a pattern tried at every start of a
#: repeated sentence, or read on to the end of the line from every candidate).
SLOW_ROWS = {
    "nsys Running [script.py without its ]": ("nsys_stats", "Running [" + "a/a.py " * (SIZE // 7)),
    "megatron checkpoint sentences": (
        "megatron_log",
        "successfully loaded checkpoint from " * (4 * SIZE // 36) + "iteration x",
    ),
    "megatron memory parentheses": ("megatron_log", "(" * SIZE + ")x) memory (MB) |"),
    "deepspeed comm op heads": ("deepspeed_comms", "[Rank 0] comm op: " * (SIZE // 18)),
}


@pytest.mark.parametrize("row", SLOW_ROWS.values(), ids=list(SLOW_ROWS))
def test_rows_slow_at_their_call_sites_are_read_at_once(
    tmp_path: Path, row: tuple[str, str]
) -> None:
    name, line = row
    path = tmp_path / f"{name}.txt"
    path.write_text(f"{PRELUDES[name]}{line}\n{line}\n")
    with hang_guard(f"{name} on {len(line)} characters"), suppress(ParseError):
        registry.parse_file(path, format=name)


#: Text tables a reader reads in another state than its prelude's (issue 33): a format's
#: further starts, each fed the pathological lines of its reader.
MORE_PRELUDES = {
    "nvprof text trace": (
        "nvprof",
        "==1== Profiling result:\n"
        "   Start  Duration            Grid Size      Block Size     Regs*    SSMem*    DSMem*"
        "      Size  Throughput  SrcMemType  DstMemType           Device   Context    Stream  "
        "Name\n"
        "612.48ms  1.0590ms                    -               -         -         -         -"
        "  4.0000MB  3.6886GB/s    Pageable      Device  Tesla V100-SXM2         1         7  "
        "[CUDA memcpy HtoD]\n",
    ),
}


@pytest.mark.parametrize("start", MORE_PRELUDES.values(), ids=list(MORE_PRELUDES))
def test_further_text_tables_read_pathological_lines_at_once(
    tmp_path: Path, start: tuple[str, str]
) -> None:
    name, prelude = start
    lines = _reader_lines(name)
    path = tmp_path / f"{name}.txt"
    path.write_text(prelude)
    assert registry.detect(path).name == name
    # Each line alone after the table's first row, and again as the start of a row of it
    # (a bad row ends the file's reading, so one file per line reaches the cell reader).
    with hang_guard(f"{name} on {2 * len(lines)} pathological lines"):
        for line in lines:
            for row in (line, f"612.48ms  {line}"):
                path.write_text(f"{prelude}{row}\n", encoding="utf-8")
                with suppress(ParseError):
                    registry.parse_file(path, format=name)


def test_the_prelude_of_each_text_reader_is_its_own(tmp_path: Path) -> None:
    """The preludes are files of their formats: the lines after them reach the row patterns."""
    for name, prelude in PRELUDES.items():
        path = tmp_path / f"{name}.txt"
        path.write_text(prelude)
        assert registry.detect(path).name == name
        assert registry.parse_file(path, format=name)


def test_benchmark_action_units_and_ranges_are_read_at_once(tmp_path: Path) -> None:
    """The action's units (``ns/iter``, ``ops per second``) and ranges (``± 5%``) are free
    text of the JSON: a long run of blanks in one was quadratic to classify."""
    entries = [
        {"name": f"b{index}", "value": 1.0, "unit": unit, "range": spread}
        for index, (unit, spread) in enumerate(
            [
                ("per" + " " * SIZE + "x", " " * SIZE + "x"),
                ("ns" + " " * SIZE + "/" + " " * SIZE + "x", "±" + " " * SIZE),
                ("x" + " " * SIZE + "faster!", "+/-" + "1" * SIZE + "x"),
            ]
        )
    ]
    path = tmp_path / "output.json"
    path.write_text(json.dumps(entries))
    with hang_guard("action_benchmark on long units and ranges"):
        registry.parse_file(path, format="action_benchmark")
