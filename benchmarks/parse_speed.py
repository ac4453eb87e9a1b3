"""Parse speed and peak memory of every registered parser on ≥ 100 MB inputs built from real files.

Usage::

    .venv/bin/python benchmarks/parse_speed.py [--size-mb 100] [--formats chrome_trace,nvprof]
        [--out-dir benchmarks/out] [--repeat 1] [--timeout 600]

Inputs (written to ``--out-dir``, gitignored, reused when already there):

* ``chrome_trace``: the largest trace of ``../shared/corpus/kineto_chrome_trace`` with its
  ``traceEvents`` replicated (``ProfilerStep#N`` renumbered per copy so steps stay distinct)
  into one valid JSON object of at least ``--size-mb``; ``chrome_trace_gz`` is the same file
  gzipped; ``json.load`` and ``json.load (gz)`` read those same files as the reference.
* text formats: the seed of that format repeated (for the TSV workload table, its rows under
  one header) up to ``--size-mb``: 000 pytorch_table, 001 nvprof, 002 workload_table,
  003 nsys_stats, 004 megatron_trace; the text formats without a seed from a corpus file:
  ``mlperf_log`` (a ResNet log, each copy shifted in time: a new run), ``ncu_csv`` (the
  torch details page, data rows repeated under its header) and ``ncu_text`` (the text report
  of the same program, its process block repeated). ``nsys_sqlite`` is not built (a
  binary SQLite export cannot be grown by concatenation).

Every measurement runs in a fresh subprocess: throughput is the decompressed size over the
wall time of the ``registry.parse_file(path, format=NAME)`` call alone, peak memory is the
child's ``ru_maxrss`` (read with ``os.wait4``, i.e. ``RUSAGE_CHILDREN`` of exactly that child)
minus that of a child which imports the same modules and parses nothing. A format that is not
registered yet is reported as such.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PERFCI_SHARED_DIR", REPO.parent / "shared"))
MB = 1024 * 1024

# Benchmark name → (registered format, seed prefix) for the text formats.
TEXT_SEEDS: dict[str, tuple[str, str]] = {
    "pytorch_table": ("pytorch_table", "000"),
    "nvprof": ("nvprof", "001"),
    "workload_table": ("workload_table", "002"),
    "nsys_stats": ("nsys_stats", "003"),
    "megatron_trace": ("megatron_trace", "004"),
}
# Text formats without a seed (issue 15), grown from a real corpus file: name → (format, file).
TEXT_CORPUS: dict[str, tuple[str, str]] = {
    "mlperf_log": (
        "mlperf_log",
        "mlperf_log/training_results_v4.0__NVIDIA__eos_n8_ngc24.04_mxnet__resnet__result_0.txt",
    ),
    "ncu_csv": ("ncu_csv", "ncu_csv/YKTian__ncu_metrics_show_torch.csv.txt"),
    "ncu_text": ("ncu_text", "ncu_text/YKTian__ncu_metrics_prof_torch.txt"),
}
CHROME = ("chrome_trace", "chrome_trace_gz", "json.load", "json.load_gz")
ALL = (*CHROME, *TEXT_SEEDS, *TEXT_CORPUS, "nsys_sqlite")
_TIME_MS = re.compile(rb'"time_ms": (\d+)')
_STEP = re.compile(r"^ProfilerStep#(\d+)$")


@dataclass
class Result:
    name: str
    input: str
    disk_mb: float = 0.0
    data_mb: float = 0.0
    seconds: float | None = None
    peak_mb: float | None = None
    metrics: int | None = None
    note: str = ""

    def row(self) -> str:
        speed = f"{self.data_mb / self.seconds:.0f}" if self.seconds else "–"
        peak = f"{self.peak_mb:.0f}" if self.peak_mb is not None else "–"
        ratio = (
            f"{self.peak_mb / self.data_mb:.2f}"
            if self.peak_mb is not None and self.data_mb
            else "–"
        )
        secs = f"{self.seconds:.2f}" if self.seconds is not None else "–"
        metrics = str(self.metrics) if self.metrics is not None else "–"
        return (
            f"| {self.name} | {self.input} | {self.disk_mb:.1f} | {self.data_mb:.1f} | "
            f"{secs} | {speed} | {peak} | {ratio} | {metrics} | {self.note} |"
        )


# --- building the inputs -------------------------------------------------------------------


def largest_trace() -> Path:
    folder = SHARED / "corpus" / "kineto_chrome_trace"
    traces = [p for p in folder.glob("*.json*") if p.is_file()]
    if not traces:
        raise SystemExit(f"no Chrome traces in {folder}")
    return max(traces, key=lambda p: len(_read_bytes(p)))


def _read_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def build_chrome(out_dir: Path, size_mb: int) -> tuple[Path, Path]:
    """A ≥ ``size_mb`` trace from the largest corpus trace, and its gzip."""
    target = out_dir / f"chrome_trace_{size_mb}mb.json"
    gz = target.with_suffix(".json.gz")
    if target.is_file() and gz.is_file():
        return target, gz
    source = largest_trace()
    trace = json.loads(_read_bytes(source))
    events: list[dict[str, Any]] = trace.pop("traceEvents")
    head = json.dumps(trace)[:-1]  # the other keys, without the closing brace
    copy = 0
    with target.open("w", encoding="utf-8") as handle:
        handle.write(head + (", " if trace else "") + '"traceEvents": [')
        while handle.tell() < size_mb * MB:
            chunk = json.dumps([_renumbered(event, copy) for event in events])[1:-1]
            handle.write((", " if copy else "") + chunk)
            copy += 1
        handle.write("]}")
    with target.open("rb") as src, gzip.open(gz, "wb", compresslevel=6) as dst:
        while block := src.read(8 * MB):
            dst.write(block)
    return target, gz


def _renumbered(event: dict[str, Any], copy: int) -> dict[str, Any]:
    match = _STEP.match(str(event.get("name", "")))
    if not match:
        return event
    return {**event, "name": f"ProfilerStep#{int(match.group(1)) + copy * 1000}"}


def build_text(out_dir: Path, name: str, size_mb: int) -> Path:
    """The seed of ``name`` repeated to ≥ ``size_mb`` (TSV: rows repeated under one header)."""
    _, prefix = TEXT_SEEDS[name]
    target = out_dir / f"{name}_{size_mb}mb.txt"
    if target.is_file():
        return target
    seeds = sorted((SHARED / "seeds").glob(f"{prefix}_*"))
    if not seeds:
        raise FileNotFoundError(f"seed {prefix}_* is absent")
    text = seeds[0].read_bytes()
    header, body = b"", text if text.endswith(b"\n") else text + b"\n"
    if name == "workload_table":
        header, _, body = body.partition(b"\n")
        header += b"\n"
    with target.open("wb") as handle:
        handle.write(header)
        while handle.tell() < size_mb * MB:
            handle.write(body)
    return target


def build_corpus_text(out_dir: Path, name: str, size_mb: int) -> Path:
    """A real corpus file of ``name`` grown to ≥ ``size_mb``.

    ``mlperf_log``: the whole log again and again, each copy shifted in time so that it is a
    new run (one profile per run), as a file of many training runs. ``ncu_csv``: the data
    rows repeated under the one header (launches of more kernels). ``ncu_text``: the
    process's block repeated (more launches of the same process).
    """
    _, relative = TEXT_CORPUS[name]
    source = SHARED / "corpus" / relative
    if not source.is_file():
        raise FileNotFoundError(f"{relative} is absent")
    target = out_dir / f"{name}_{size_mb}mb.txt"
    if target.is_file():
        return target
    text = source.read_bytes()
    if not text.endswith(b"\n"):
        text += b"\n"
    with target.open("wb") as handle:
        if name == "mlperf_log":
            copy = 0
            while handle.tell() < size_mb * MB:
                shift = copy * 10**9  # ms: each copy a run of its own, ~11 days later
                handle.write(_TIME_MS.sub(functools.partial(_shifted, shift=shift), text))
                copy += 1
        elif name == "ncu_text":
            lines = text.splitlines(keepends=True)
            start = next(i for i, line in enumerate(lines) if line.startswith(b"["))
            handle.write(b"".join(lines[:start]))
            body = b"".join(lines[start:])  # the process's report: its launches again
            while handle.tell() < size_mb * MB:
                handle.write(body)
        else:
            lines = text.splitlines(keepends=True)
            header = next(i for i, line in enumerate(lines) if line.startswith(b'"ID"'))
            handle.write(b"".join(lines[: header + 1]))
            body = b"".join(lines[header + 1 :])
            while handle.tell() < size_mb * MB:
                handle.write(body)
    return target


def _shifted(match: re.Match[bytes], *, shift: int) -> bytes:
    return b'"time_ms": %d' % (int(match[1]) + shift)


# --- measuring ---------------------------------------------------------------------------


def worker(mode: str, path: str, timeout_s: int) -> None:
    """Runs in the child: import like the parser does, time one parse, print JSON."""
    signal.alarm(timeout_s)  # a parser that hangs ends as "timeout", not a stuck benchmark
    sys.path.insert(0, str(REPO))
    from perfci.formats import registry

    known = list(registry.formats())  # import every parser module, as the baseline child does
    if mode == "baseline":
        print(json.dumps({"registered": known}))
        return
    start = time.perf_counter()
    if mode == "json.load":
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as handle:
            doc = json.load(handle)
        count = len(doc["traceEvents"])
    else:
        profiles = registry.parse_file(Path(path), format=mode)
        count = sum(len(profile.metrics) for profile in profiles)
    print(json.dumps({"seconds": time.perf_counter() - start, "metrics": count}))


def build_worker(names: list[str], size_mb: int, out_dir: Path) -> None:
    """Runs in a child so that the parent stays small (see ``run_child``)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    built: dict[str, str] = {}
    if any(name in CHROME for name in names):
        plain, gz = build_chrome(out_dir, size_mb)
        built |= {
            "chrome_trace": str(plain),
            "chrome_trace_gz": str(gz),
            "json.load": str(plain),
            "json.load_gz": str(gz),
        }
    for name in (n for n in TEXT_SEEDS if n in names):
        try:
            built[name] = str(build_text(out_dir, name, size_mb))
        except FileNotFoundError as exc:
            built[name] = f"error: {exc}"
    for name in (n for n in TEXT_CORPUS if n in names):
        try:
            built[name] = str(build_corpus_text(out_dir, name, size_mb))
        except (FileNotFoundError, StopIteration) as exc:
            built[name] = f"error: {exc or 'no header'}"
    print(json.dumps(built))


def run_child(mode: str, *args: Path | str, timeout_s: int = 0) -> tuple[dict[str, Any], float]:
    """The child's JSON answer and its peak RSS in MiB.

    Linux carries the spawning process's RSS high-water mark into the child across exec, so
    the parent keeps itself small: it never imports perfci nor holds an input in memory.
    """
    with tempfile.TemporaryFile() as errors:
        command = [sys.executable, __file__, "--worker", mode, *map(str, args), str(timeout_s)]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors)
        assert process.stdout is not None
        out = process.stdout.read()
        # wait4 gives this one child's rusage (RUSAGE_CHILDREN would be a max over all of them).
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        errors.seek(0)
        text = errors.read().decode(errors="replace").strip()
    peak = usage.ru_maxrss / 1024  # KiB on Linux
    if process.returncode == -signal.SIGALRM:
        return {"error": f"timeout after {timeout_s} s"}, peak
    if process.returncode != 0:
        last = text.splitlines()[-1] if text else f"exit {process.returncode}"
        return {"error": last}, peak
    return json.loads(out), peak


def data_size(path: Path) -> int:
    """Decompressed size, read in blocks so that the parent stays small."""
    if path.suffix != ".gz":
        return path.stat().st_size
    size = 0
    with gzip.open(path, "rb") as handle:
        while block := handle.read(MB):
            size += len(block)
    return size


def measure(
    name: str, fmt: str, path: Path, baseline_mb: float, *, timeout_s: int, repeat: int
) -> Result:
    """Best time and highest peak of ``repeat`` fresh children (the machine may be shared)."""
    result = Result(
        name=name, input=path.name, disk_mb=path.stat().st_size / MB, data_mb=data_size(path) / MB
    )
    for _ in range(repeat):
        answer, peak = run_child(fmt, path, timeout_s=timeout_s)
        if "error" in answer:
            result.note = f"error: {answer['error'][:120]}"
            return result
        result.seconds = min(result.seconds or answer["seconds"], answer["seconds"])
        result.metrics = answer["metrics"]
        result.peak_mb = max(result.peak_mb or 0.0, peak - baseline_mb, 0.0)
    return result


def run(
    names: list[str], size_mb: int, out_dir: Path, *, timeout_s: int, repeat: int
) -> list[Result]:
    answer, baseline_mb = run_child("baseline", "-")
    known = set(answer.get("registered", []))
    built, _ = run_child("build", ",".join(names), str(size_mb), out_dir)
    if "error" in built:
        raise SystemExit(f"building the inputs failed: {built['error']}")
    results = [
        Result(
            "baseline (imports only)",
            "–",
            peak_mb=baseline_mb,
            note="peak RSS in MiB, subtracted from the rows below",
        )
    ]
    for name in (n for n in ALL if n in names):
        fmt = (
            "json.load"
            if name.startswith("json.load")
            else {**TEXT_SEEDS, **TEXT_CORPUS}.get(name, ("chrome_trace", ""))[0]
        )
        if name == "nsys_sqlite":
            results.append(
                Result(
                    name,
                    "–",
                    note="not measured: a binary SQLite export cannot be grown by concatenation",
                )
            )
        elif fmt != "json.load" and fmt not in known:
            results.append(Result(name, "–", note="not registered"))
        elif built.get(name, "").startswith("error: "):
            results.append(Result(name, "–", note=built[name]))
        else:
            results.append(
                measure(
                    name, fmt, Path(built[name]), baseline_mb, timeout_s=timeout_s, repeat=repeat
                )
            )
    return results


def table(results: list[Result]) -> str:
    lines = [
        "| benchmark | input | on disk MiB | data MiB | seconds | MiB/s | peak MiB over "
        "baseline | peak / data | metrics (events for json.load) | note |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    return "\n".join(lines + [result.row() for result in results])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:2] == ["--worker", "build"]:
        build_worker(argv[2].split(","), int(argv[3]), Path(argv[4]))
        return 0
    if argv[:1] == ["--worker"]:
        worker(argv[1], argv[2], int(argv[3]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument(
        "--formats", default=",".join(ALL), help=f"comma-separated, from: {', '.join(ALL)}"
    )
    parser.add_argument("--out-dir", type=Path, default=REPO / "benchmarks" / "out")
    parser.add_argument(
        "--timeout",
        type=int,
        default=600,
        help="seconds one parse may take before it is reported as a timeout",
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="children per measurement: best time, highest peak"
    )
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.formats.split(",") if name.strip()]
    unknown = [name for name in names if name not in ALL]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; valid: {', '.join(ALL)}")
    started = time.perf_counter()
    results = run(names, args.size_mb, args.out_dir, timeout_s=args.timeout, repeat=args.repeat)
    print(
        f"parse_speed: --size-mb {args.size_mb} --repeat {args.repeat}, "
        f"Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, {platform.machine()} "
        f"({time.perf_counter() - started:.0f} s including input building)\n"
    )
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
