"""Pathological text uploads (issue 31): detection and parse time against input size, and the
time and memory a text profile over the metric cap costs before it is refused.

Usage::

    .venv/bin/python benchmarks/redos.py [--sizes 16,64,256] [--timeout 30] [--code DIR]
        [--caps-rows 1700000] [--cap 200000] [--cases megatron,nsys]

Part 1, one row per case: a detector (``registry.detect`` on a file of that text) or a reader
(``registry.parse_file`` forced to its format, on a start of one of its files followed by the
pathological line) or ``perfci.core.units`` itself, timed on inputs of each size (KiB), in this
process, each under a ``SIGALRM`` deadline of ``--timeout`` seconds (shown as ``> T``). The
cases are the inputs issue 31 reported and the worst kinds of string that
``tests/redos_inputs.py`` found for the other patterns (a line of blanks between two words, a
word repeated, an unterminated bracket).

Part 2: a gzipped Dynamo CSV of ``--caps-rows`` distinct models (two metrics each) parsed, in a
fresh child per measurement, as the service does with its default cap of 200,000 metrics:
seconds until the refusal and the child's peak RSS over that of a child that parses nothing.
Without the counting readers (``--code`` of an older tree) the file is parsed whole, then
counted.

``--code DIR``: import ``perfci`` from ``DIR`` (a checkout of another commit) instead of this
tree, to measure "before" with the same script; the cases use only ``registry``, ``units``
and, when present, ``formats.caps``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KIB = 1024

#: A start of each reader's files: the pathological line comes after it, where the reader
#: applies the patterns of its rows.
PRELUDES = {
    "mlperf_summary": "================\nMLPerf Results Summary\n================\n",
    "nvprof": "==1== Profiling result:\n"
    "            Type  Time(%)      Time     Calls       Avg       Min       Max  Name\n",
    "nvprof_metrics": "==1== Metric result:\n"
    "Invocations                               Metric Name                        "
    "Metric Description         Min         Max         Avg\n"
    'Device "Tesla K80 (0)"\n    Kernel: kernel(float*)\n',
    "ncu_text": "==PROF== Connected to process 1 (/bin/x)\n[1] x@host\n"
    "  kernel(), Context 1, Stream 7\n",
    "nsys_stats": "",
    "megatron_log": " iteration        1/     100 | consumed samples:            8 | elapsed "
    "time per iteration (ms): 100.0 |\n",
    "deepspeed_comms": "",
    "nccl_tests": "# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 "
    "iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n",
}


def _fill(unit: str, size: int, lead: str = "", tail: str = "") -> str:
    return lead + unit * max(1, (size - len(lead) - len(tail)) // len(unit)) + tail


#: case → (what runs: "detect", a format name, or "units"; the text of a size in bytes).
CASES: dict[str, tuple[str, Callable[[int], str]]] = {
    "detect: Megatron's 'iteration 1/1' head repeated (reported)": (
        "detect",
        lambda n: _fill("iteration 1/1 |", n),
    ),
    "detect: 'Processing [' + '] with [' repeated (reported)": (
        "detect",
        lambda n: _fill("] with [", n, "Processing ["),
    ),
    "detect: blank lines": ("detect", lambda n: _fill("\n", n, "x")),
    "detect: '[0] ' + '@' repeated": ("detect", lambda n: _fill("@", n, "[0] ")),
    "detect: 'comm op: ' repeated": ("detect", lambda n: _fill("comm op: ", n)),
    "detect: a table header, then blanks": (
        "detect",
        lambda n: _fill(" ", n, "---  ---\n #  Name", "x"),
    ),
    "mlperf_summary: a line of blanks around a word (reported)": (
        "mlperf_summary",
        lambda n: _fill(" ", n // 2) + "x" + _fill(" ", n // 2),
    ),
    "nvprof: a summary row of blanks": ("nvprof", lambda n: _fill(" ", n, "", "x")),
    "nvprof: a metric row of blanks": ("nvprof_metrics", lambda n: _fill(" ", n, " 1 x a", "x")),
    "ncu_text: a section of blanks": ("ncu_text", lambda n: _fill(" ", n, "    Section: ", "x")),
    "nsys_stats: 'Processing [' + '] with [' repeated": (
        "nsys_stats",
        lambda n: _fill("] with [", n, "Processing ["),
    ),
    "nsys_stats: 'Running [' + 'a/a.py ' repeated": (
        "nsys_stats",
        lambda n: _fill("a/a.py ", n, "Running ["),
    ),
    "megatron_log: checkpoint sentences": (
        "megatron_log",
        lambda n: _fill("successfully loaded checkpoint from ", n, "", " iteration x"),
    ),
    "megatron_log: '(' before a memory report": (
        "megatron_log",
        lambda n: _fill("(", n, "", ")x) memory (MB) |"),
    ),
    "megatron_log: an argument, then blanks": (
        "megatron_log",
        lambda n: _fill(" ", n, "  log_interval .... x", "y"),
    ),
    "deepspeed_comms: 'comm op: ' repeated": (
        "deepspeed_comms",
        lambda n: _fill("comm op: ", n, "[Rank 0] "),
    ),
    "nccl_tests: a device line, then blanks": (
        "nccl_tests",
        lambda n: _fill(" ", n, "#  Rank  0 Group  0 Pid 1 on h device  0 [0] GPU", "x"),
    ),
    "units.parse_duration: a number, blanks, a sign": (
        "units",
        lambda n: _fill(" ", n, "1", "!"),
    ),
}


class Expired(BaseException):
    """The deadline passed (a ``BaseException``: no parser's handler takes it)."""


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    def expired(signum: int, frame: object) -> None:
        raise Expired

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_case(kind: str, text: str, folder: Path) -> None:
    from perfci.core import units
    from perfci.core.errors import PerfciError
    from perfci.formats import registry

    if kind == "units":
        with suppress(ValueError):
            units.parse_duration(text, unit="ns")
        return
    path = folder / "upload.txt"
    if kind == "detect":
        path.write_text(text)
        with suppress(PerfciError):
            registry.detect(path)
        return
    path.write_text(PRELUDES[kind] + text + "\n")
    with suppress(PerfciError):
        registry.parse_file(path, format=kind.removesuffix("_metrics"))


def time_case(kind: str, text: str, folder: Path, timeout: float) -> float | None:
    """Seconds of the best of up to three runs (one when it takes over a second); ``None``
    past the deadline."""
    best: float | None = None
    for _ in range(3):
        start = time.perf_counter()
        try:
            with deadline(timeout):
                run_case(kind, text, folder)
        except Expired:
            return None
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
        if elapsed > 1.0:
            break
    return best


def _cell(seconds: float | None, timeout: float) -> str:
    if seconds is None:
        return f"> {timeout:g} s"
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.1f} s"


def part_one(sizes: list[int], timeout: float, only: list[str]) -> str:
    head = "| case | " + " | ".join(f"{size} KiB" for size in sizes) + " |"
    rows = [head, "|---|" + "--:|" * len(sizes)]
    with tempfile.TemporaryDirectory(prefix="perfci-redos-") as tmp:
        for name, (kind, build) in CASES.items():
            if only and not any(word in name for word in only):
                continue
            cells = [
                _cell(time_case(kind, build(size * KIB), Path(tmp), timeout), timeout)
                for size in sizes
            ]
            rows.append(f"| {name} | " + " | ".join(cells) + " |")
            print(rows[-1], file=sys.stderr, flush=True)
    return "\n".join(rows)


# --- part 2: a text profile over the cap -----------------------------------------------------

_CHILD = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from perfci.core.errors import InputTooLarge
from perfci.formats import registry
path, cap = sys.argv[2], int(sys.argv[3])
try:
    from perfci.formats.caps import ParseLimits, parse_limits
except ImportError:
    parse_limits = None
start = time.perf_counter()
outcome = "parsed"
if path != "-":
    try:
        if parse_limits is None:
            metrics = sum(len(p.metrics) for p in registry.parse_file(path, format="dynamo_csv"))
            outcome = f"parsed whole: {metrics} metrics, then refused" if metrics > cap else "ok"
        else:
            with parse_limits(ParseLimits(max_metrics=cap)):
                registry.parse_file(path, format="dynamo_csv")
    except InputTooLarge:
        outcome = "refused while reading"
print(json.dumps({"seconds": time.perf_counter() - start, "outcome": outcome,
                  "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def _child(code: Path, path: str, cap: int) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(code), path, str(cap)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def part_two(code: Path, rows: int, cap: int = 200_000) -> str:
    with tempfile.TemporaryDirectory(prefix="perfci-caps-") as tmp:
        path = Path(tmp) / "inductor_timm_models_training.csv.gz"
        lines = (f"cuda,model{index},1,1.5,2.0\n" for index in range(rows))
        with gzip.open(path, "wt", compresslevel=9) as handle:
            handle.write("dev,name,batch_size,speedup,abs_latency\n")
            handle.writelines(lines)
        size_mb = path.stat().st_size / 2**20
        base = _child(code, "-", cap)
        run = _child(code, str(path), cap)
    peak = (int(str(run["rss_kb"])) - int(str(base["rss_kb"]))) / 1024
    return (
        "| input | cap | seconds to the refusal | peak RSS over an idle child | outcome |\n"
        "|---|--:|--:|--:|---|\n"
        f"| Dynamo CSV, {rows:,} models, {size_mb:.2f} MB gzipped | {cap:,} | "
        f"{float(str(run['seconds'])):.2f} | {peak:.0f} MiB | {run['outcome']} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="16,64,256", help="input sizes in KiB")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per measurement")
    parser.add_argument("--code", type=Path, default=REPO, help="the tree to import perfci from")
    parser.add_argument("--caps-rows", type=int, default=1_700_000, help="0: skip part 2")
    parser.add_argument("--cap", type=int, default=200_000, help="the metric cap of part 2")
    parser.add_argument("--cases", default="", help="comma-separated words a case must hold")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(args.code.resolve()))
    os.environ["PYTHONPATH"] = str(args.code.resolve())
    import perfci

    print(f"perfci from {Path(perfci.__file__).parent}, Python {sys.version.split()[0]}")
    print()
    sizes = [int(size) for size in args.sizes.split(",")]
    only = [word for word in args.cases.split(",") if word]
    print(part_one(sizes, args.timeout, only))
    if args.caps_rows:
        print()
        print(part_two(args.code.resolve(), args.caps_rows, args.cap))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
