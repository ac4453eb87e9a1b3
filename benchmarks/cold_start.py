"""Cold start of the short ``perfci`` commands against the CLI framework alone (issue 33).

Usage::

    .venv/bin/python benchmarks/cold_start.py [--rounds 15] [--warmup 2] [--target 2.0]

Times, as whole fresh processes, interleaved round by round (every command once per round,
in the same order, so that a drift of the machine's speed touches all of them alike):

- ``python -c pass`` (the interpreter) and ``python -c "import typer"`` (the CLI framework
  alone: the reference);
- two former floors, what the framework would import before any of perfci's code runs: Typer's
  Rich help (``typer.rich_utils``) for ``--help``, and for ``parse`` Typer's coercion of
  argument values (``typer._adapters``, which imports pydantic) with a Rich table. In a pipe,
  as here, perfci now imports none of them (plain help and tables, ``perfci/cli/_coercion.py``);
  the rows show what that saves;
- ``perfci --help``, ``perfci formats``;
- ``perfci parse FILE`` of two files of about 10 KB that the script writes (not timed): an
  ``nvprof`` summary (a text reader) and a Kineto Chrome trace (the reader that uses numpy).

Each command's stdout and stderr go to a pipe that is read to the end, as in a CI log. Prints
per command the median wall time and CPU time (user + system of the child, from
``RUSAGE_CHILDREN``: on a shared, loaded machine the steadier of the two), their ratios to
``import typer`` (medians of the per-round ratios) and whether the wall ratio is within
``--target``. Exits 0 whatever the result (a benchmark, not a gate).

perfci's modules are compiled to bytecode first (``compileall``), as ``pip install`` of the
package does: a source checkout installed in editable mode under ``PYTHONDONTWRITEBYTECODE=1``
(this VM sets it) would otherwise compile every module on every start, which no installed
``perfci`` does, and which doubled what earlier runs of this script measured for ``parse``.
``--no-compile`` measures that case.

Issue 33's target: ``perfci --help``, ``perfci formats`` and ``perfci parse`` of a 10 KB file
each within 2× of ``python -c "import typer"`` on a quiet VM.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 2.0
REFERENCE = "import typer"
FLOOR_HELP = "floor of help: import typer.rich_utils"
FLOOR_COMMAND = "floor of parse: import typer, typer._adapters (pydantic), rich.table"


def nvprof_summary(path: Path, size: int = 10_000) -> Path:
    """An ``nvprof`` summary (the layout of ``nvprof ./app`` on a CUDA sample) of ``size`` bytes."""
    lines = [
        "==4242== NVPROF is profiling process 4242, command: ./matrixMul",
        "==4242== Profiling application: ./matrixMul",
        "==4242== Profiling result:",
        "            Type  Time(%)      Time     Calls       Avg       Min       Max  Name",
    ]
    kernel = 0
    while sum(len(line) + 1 for line in lines) < size - 200:
        kind = " GPU activities:" if kernel == 0 else "                 "
        name = f"void gemm_{kernel}<float, {32 << (kernel % 3)}>(float*, float*, float*, int)"
        lines.append(
            f"{kind}   {40.0 / (kernel + 1):6.2f}%  {300.0 / (kernel + 1):7.4f}ms       "
            f"{300 + kernel}  {1.0 + kernel / 100:.4f}ms  {0.9:.4f}ms  {1.2 + kernel:.4f}ms  {name}"
        )
        kernel += 1
    lines.append(
        "      API calls:   90.00%  120.00ms         3  40.000ms  1.0000us  119.99ms  cudaMalloc"
    )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def kineto_trace(path: Path, size: int = 10_000) -> Path:
    """A Kineto Chrome trace (the keys and event shapes torch.profiler writes) of ``size``
    bytes: profiler steps, CPU operators, a runtime call and the kernels it launched."""
    events: list[dict[str, object]] = []
    doc: dict[str, object] = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9}],
        "traceEvents": events,
        "traceName": "bench.pt.trace.json",
    }
    step = 0
    while len(json.dumps(doc)) < size - 400:
        start = 1_000_000.0 + step * 5_000.0
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{step}",
                "pid": 1,
                "tid": 1,
                "ts": start,
                "dur": 4_900.0,
                "args": {},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::mm",
                "pid": 1,
                "tid": 1,
                "ts": start + 10,
                "dur": 60.0,
                "args": {"External id": step},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": start + 20,
                "dur": 8.0,
                "args": {"correlation": step},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": "ampere_sgemm_128x64_tn",
                "pid": 0,
                "tid": 7,
                "ts": start + 30,
                "dur": 4_000.0 + step,
                "args": {"device": 0, "stream": 7, "correlation": step},
            }
        )
        step += 1
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def commands(work: Path) -> dict[str, list[str]]:
    python = sys.executable
    perfci = str(Path(python).parent / "perfci")
    text = nvprof_summary(work / "nvprof_summary.txt")
    trace = kineto_trace(work / "trace.json")
    return {
        "python -c pass": [python, "-c", "pass"],
        REFERENCE: [python, "-c", REFERENCE],
        # What the framework itself imports before perfci does anything: for help (Typer's Rich
        # help), and for a command with an argument that prints a table (Typer coerces every
        # non-flag value through pydantic; the table is Rich's).
        FLOOR_HELP: [python, "-c", "import typer.rich_utils"],
        FLOOR_COMMAND: [python, "-c", "import typer, typer._adapters, rich.console, rich.table"],
        "perfci --help": [perfci, "--help"],
        "perfci formats": [perfci, "formats"],
        f"perfci parse ({text.stat().st_size / 1000:.0f} KB nvprof text)": [
            perfci,
            "parse",
            str(text),
        ],
        f"perfci parse ({trace.stat().st_size / 1000:.0f} KB Kineto trace)": [
            perfci,
            "parse",
            str(trace),
        ],
    }


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh process of ``argv``."""
    cpu = _children_cpu()
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, cwd=cwd, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr.decode()}")
    return seconds, _children_cpu() - cpu


Times = dict[str, list[tuple[float, float]]]


def measure(cmds: dict[str, list[str]], rounds: int, warmup: int, cwd: Path) -> Times:
    times: Times = {name: [] for name in cmds}
    for round_ in range(warmup + rounds):
        for name, argv in cmds.items():
            seconds = run_once(argv, cwd)
            if round_ >= warmup:
                times[name].append(seconds)
    return times


def _ratio(runs: list[tuple[float, float]], reference: list[tuple[float, float]], i: int) -> float:
    """Median over rounds of this command's figure ``i`` over the reference's, same round."""
    return statistics.median(run[i] / ref[i] for run, ref in zip(runs, reference, strict=True))


def report(times: Times, target: float) -> str:
    reference = times[REFERENCE]
    rows = [
        "| Command | wall s, median (min–max) | CPU s, median | wall × import typer "
        f"| CPU × import typer | wall within {target:g}× |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, runs in times.items():
        wall = [run[0] for run in runs]
        cpu = [run[1] for run in runs]
        paired = _ratio(runs, reference, 0)
        verdict = ""
        if name.startswith("perfci"):
            verdict = "yes" if paired <= target else "**no**"
        rows.append(
            f"| `{name}` | {statistics.median(wall):.3f} ({min(wall):.3f}–{max(wall):.3f}) "
            f"| {statistics.median(cpu):.3f} | {paired:.2f} | {_ratio(runs, reference, 1):.2f} "
            f"| {verdict} |"
        )
    return "\n".join(rows)


def compile_perfci() -> Path:
    """Write the bytecode of every perfci module, as installing the package does."""
    spec = importlib.util.find_spec("perfci")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("perfci is not importable: run scripts/setup first")
    package = Path(next(iter(spec.submodule_search_locations)))
    if not compileall.compile_dir(package, quiet=1):
        raise SystemExit(f"could not compile {package}")
    return package


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--target", type=float, default=TARGET)
    parser.add_argument(
        "--no-compile",
        action="store_true",
        help="leave perfci's bytecode as it is (none, in an editable install that never wrote it)",
    )
    args = parser.parse_args()
    compiled = "left as it was" if args.no_compile else f"compiled ({compile_perfci()})"
    with tempfile.TemporaryDirectory(prefix="perfci-cold-") as scratch:
        work = Path(scratch)
        cmds = commands(work)
        times = measure(cmds, args.rounds, args.warmup, work)
    load = os.getloadavg()
    print(
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (after the run); "
        f"{args.rounds} rounds after {args.warmup} of warm-up, interleaved; perfci's bytecode "
        f"{compiled}; PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}"
    )
    print()
    print(report(times, args.target))


if __name__ == "__main__":
    main()
