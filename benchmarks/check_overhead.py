"""What ``perfci check`` adds around the benchmark: cold-start wall time, phases, imports.

Usage::

    .venv/bin/python benchmarks/check_overhead.py [--rounds 5] [--baseline-runs 30]
        [--no-compare-speed] [--fail-over 2]

Setup (not timed): a scratch directory without git, an embedded SQLite store
(``.perfci/perfci.db``) holding ``--baseline-runs`` runs of ``main`` made from the example's
shipped Chrome traces (``examples/gpt/profiles/main-*``, 3 repeats a run), and 5 Chrome-trace
files from the example as the candidate. Timed:

- ``perfci check --profile <5 files>``, a fresh process each round (cold start: interpreter,
  imports, parsing, context, store, comparison, report); no benchmark runs in this mode, so
  the whole wall time is perfci's overhead;
- the floor: ``python -c pass`` and ``perfci --version``;
- the phases of one check in a fresh process (imports, parse, context, open store, submit,
  print), and ``python -X importtime`` summed per top-level package;
- ``benchmarks/compare_speed.py`` (10,000 metrics × (30, 10)), unless ``--no-compare-speed``.

Prints Markdown tables; targets: check overhead < 2 s, compare of 10k metrics < 1 s. Exits 0
whether or not the targets are met unless ``--fail-over SECONDS`` asks it to gate on the median.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROFILES = ROOT / "examples" / "gpt" / "profiles"
BIN = Path(sys.executable).parent
CHECK_BUDGET_S = 2.0
BENCHMARK, PROJECT = "gpt-tiny", "bench/check-overhead"
ENV_FLAGS = ("--env", "runner=check-overhead")

# `perfci check` through an app that registers only check_cmd: what registering the other
# subcommands costs (little since their modules import their dependencies inside the commands).
LEAN = """
import sys, typer
from perfci.cli import check_cmd
app = typer.Typer()
@app.callback()
def _root() -> None:
    pass
check_cmd.register(app)
sys.exit(app(args=sys.argv[1:], standalone_mode=False) or 0)
"""

# Runs one check in-process with a clock around each phase (a fresh interpreter: cold imports).
PHASES = """
import sys, time
t0 = time.perf_counter()
from pathlib import Path
from perfci.cli import main as cli_main
from perfci.core.settings import get_settings
from perfci.usecases.check import run as check
from perfci.usecases.submit.repeats import parse_repeats
from perfci.integrations.context import detect_run_context
from perfci.store.db import open_store
from perfci.usecases.submit.run import submit_run
from perfci.report.console import print_comparison
from rich.console import Console
t1 = time.perf_counter()
url, files = sys.argv[1], [Path(p) for p in sys.argv[2:]]
settings = get_settings({"database_url": url, "project": "%(project)s"})
repeats = parse_repeats(files)
t2 = time.perf_counter()
context = detect_run_context(settings.project, {"branch": "phases", "base_branch": "main",
    "ci_run_id": "phases-%(stamp)s", "environment": {"runner": "check-overhead"}})
t3 = time.perf_counter()
store = open_store(settings)
t4 = time.perf_counter()
with store.sessions() as session:
    result = submit_run(session, context=context, benchmark="%(benchmark)s", repeats=repeats,
                        settings=settings)
store.close()
t5 = time.perf_counter()
print_comparison(result.comparison, Console(file=open("/dev/null", "w")))
t6 = time.perf_counter()
print(f"imports={t1-t0} parse={t2-t1} context={t3-t2} open_store={t4-t3} "
      f"submit={t5-t4} print={t6-t5}")
"""


def _trace_files(run: str) -> list[Path]:
    return sorted((PROFILES / run).glob("*.pt.trace.json.gz"))


def build_store(folder: Path, runs: int) -> str:
    """``runs`` baseline runs on main through the real ingest use case, dated in the past."""
    from perfci.core.settings import get_settings
    from perfci.integrations.context import detect_run_context
    from perfci.store.db import open_store
    from perfci.usecases.submit.ingest import ingest_run
    from perfci.usecases.submit.repeats import parse_repeats

    sources = [parse_repeats(_trace_files(f"main-{i}")) for i in range(1, 5)]
    url = f"sqlite:///{folder / '.perfci' / 'perfci.db'}"
    store = open_store(get_settings({"database_url": url}))
    start = datetime.now(UTC) - timedelta(days=runs + 1)
    try:
        for index in range(runs):
            context = detect_run_context(
                PROJECT,
                {
                    "branch": "main",
                    "commit": f"{index + 1:040x}",
                    "ci_run_id": f"main-{index}",
                    "environment": {"runner": "check-overhead"},
                },
                cwd=folder,
            )
            with store.sessions() as session:
                ingest_run(
                    session,
                    context=context,
                    benchmark=BENCHMARK,
                    repeats=sources[index % len(sources)],
                    created_at=start + timedelta(days=index),
                )
    finally:
        store.close()
    return url


def candidate_files(folder: Path) -> list[Path]:
    """5 Chrome traces of the example: the slow-attention run's 3 and 2 of main-4."""
    chosen = [*_trace_files("slow-attention"), *_trace_files("main-4")[:2]]
    target = folder / "candidate"
    target.mkdir()
    out = []
    for index, path in enumerate(chosen):
        copy = target / f"r{index}.pt.trace.json.gz"
        shutil.copyfile(path, copy)
        out.append(copy)
    return out


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "PERFCI_"))}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def timed(argv: list[str], cwd: Path) -> tuple[float, float, int, str]:
    """Wall and CPU (user + sys) seconds of one fresh process; CPU time is what a busy shared
    machine inflates least."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=_env(), capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode, done.stdout + done.stderr


def check_argv(url: str, files: list[Path], round_: int) -> list[str]:
    return [
        str(BIN / "perfci"),
        "check",
        *(a for f in files for a in ("--profile", str(f))),
        "--benchmark",
        BENCHMARK,
        "--project",
        PROJECT,
        "--database-url",
        url,
        "--branch",
        "pr",
        "--base-branch",
        "main",
        "--ci-run-id",
        f"pr-{round_}",
        "--no-comment",
        "--no-fail-on-regression",
        *ENV_FLAGS,
    ]


def import_summary(cwd: Path, argv: list[str]) -> dict[str, float]:
    """Self time of every import, summed per top-level package (ms), from ``-X importtime``."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "perfci.cli.main", *argv[1:]],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    totals: dict[str, float] = defaultdict(float)
    pattern = re.compile(r"import time:\s+(\d+) \|\s+\d+ \|(\s*)(\S+)")
    for line in done.stderr.splitlines():
        match = pattern.match(line)
        if match:
            totals[match.group(3).split(".")[0]] += int(match.group(1)) / 1000
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


def phases(cwd: Path, url: str, files: list[Path]) -> dict[str, float]:
    script = PHASES % {"project": PROJECT, "benchmark": BENCHMARK, "stamp": time.time_ns()}
    done = subprocess.run(
        [sys.executable, "-c", script, url, *map(str, files)],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    last = done.stdout.strip().splitlines()[-1]
    return {k: float(v) for k, v in (item.split("=") for item in last.split())}


def compare_speed() -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "compare_speed.py"), "--rounds", "3"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or done.stderr.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline-runs", type=int, default=30)
    parser.add_argument("--no-compare-speed", action="store_true")
    parser.add_argument(
        "--fail-over",
        type=float,
        default=None,
        metavar="SECONDS",
        help="exit 1 when the median check takes SECONDS or more (e.g. "
        f"{CHECK_BUDGET_S:g}, the budget); by default the table says "
        "whether the budget was met and the exit status does not, so "
        "a busy machine fails no smoke run",
    )
    args = parser.parse_args(argv)
    if not _trace_files("slow-attention"):
        print(f"the example's profiles are missing from {PROFILES}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="perfci-check-overhead-") as tmp:
        folder = Path(tmp)
        url = build_store(folder, args.baseline_runs)
        files = candidate_files(folder)
        floor_python = min(timed([sys.executable, "-c", "pass"], folder)[0] for _ in range(3))
        version = [timed([str(BIN / "perfci"), "--version"], folder) for _ in range(3)]
        floor_cli = (min(wall for wall, _, _, _ in version), min(cpu for _, cpu, _, _ in version))
        times, cpu = [], []
        for round_ in range(args.rounds):
            seconds, cpu_seconds, code, output = timed(check_argv(url, files, round_), folder)
            if code != 0:
                print(output, file=sys.stderr)
                return 2
            times.append(seconds)
            cpu.append(cpu_seconds)
        lean = [
            timed(
                [sys.executable, "-c", LEAN, *check_argv(url, files, args.rounds + round_)[1:]],
                folder,
            )
            for round_ in range(args.rounds)
        ]
        if any(code != 0 for _, _, code, _ in lean):
            print(next(out for _, _, code, out in lean if code), file=sys.stderr)
            return 2
        split = phases(folder, url, files)
        imports = import_summary(folder, check_argv(url, files, 2 * args.rounds))
    lean_median = statistics.median(wall for wall, _, _, _ in lean)
    _report(args, times, statistics.median(cpu), floor_python, floor_cli, split, imports)
    print(
        f"\n`perfci check` through an app registering only check_cmd, "
        f"median wall time: {lean_median:.2f} s"
    )
    if not args.no_compare_speed:
        print(f"\n{compare_speed()}")
    return 1 if args.fail_over is not None and statistics.median(times) >= args.fail_over else 0


def _report(
    args: argparse.Namespace,
    times: list[float],
    cpu: float,
    floor_python: float,
    floor_cli: tuple[float, float],
    split: dict[str, float],
    imports: dict[str, float],
) -> None:
    median = statistics.median(times)
    verdict = "met" if median < CHECK_BUDGET_S else "NOT met"
    print(
        f"`perfci check --profile` ×5 Chrome traces, {args.baseline_runs} baseline runs in "
        f"embedded SQLite, {args.rounds} cold starts ({platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()})\n"
    )
    print("| Measure | Seconds |\n|---|---:|")
    print(f"| `perfci check` wall time, median | {median:.2f} |")
    print(f"| `perfci check` wall time, best / worst | {min(times):.2f} / {max(times):.2f} |")
    print(f"| `perfci check` CPU time (user + sys), median | {cpu:.2f} |")
    print("| benchmark run time (none in --profile mode) | 0.00 |")
    print(f"| **overhead** (budget < {CHECK_BUDGET_S:.0f} s: {verdict}) | **{median:.2f}** |")
    print(f"| floor: `python -c pass` | {floor_python:.2f} |")
    print(f"| floor: `perfci --version` wall time | {floor_cli[0]:.2f} |")
    print(f"| floor: `perfci --version` CPU time (user + sys) | {floor_cli[1]:.2f} |")
    print("\nPhases of one check (fresh process):\n\n| Phase | Seconds |\n|---|---:|")
    for name, seconds in split.items():
        print(f"| {name} | {seconds:.3f} |")
    print("\nImport self time per top-level package (`-X importtime`, one check):\n")
    print("| Package | ms |\n|---|---:|")
    for name, ms in list(imports.items())[:12]:
        print(f"| {name} | {ms:.0f} |")
    print(f"| (all) | {sum(imports.values()):.0f} |")


if __name__ == "__main__":
    raise SystemExit(main())
