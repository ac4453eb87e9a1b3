"""Whole-process parse of a large Chrome trace against ``json.load`` (issues 33 and 35).

Usage::

    .venv/bin/python benchmarks/parse_whole_process.py [--size-mb 100] [--rounds 5]
        [--before DIR]

Each round runs, in turn and each in a fresh process, ``perfci parse FILE`` and
``python -c "import json, sys; json.load(open(sys.argv[1], 'rb'))" FILE`` (and, with
``--before DIR``, ``perfci parse`` of the tree extracted in ``DIR``, e.g. by
``git archive <commit> perfci | tar -x -C DIR``). It prints per round the wall and CPU seconds
of each (CPU = user + system of the child, from ``RUSAGE_CHILDREN``), the child's minor page
faults, and the ratio of ``json.load``'s time to the command's; then the medians.

The trace is ``parse_speed.py``'s (built there, in ``benchmarks/out``, from the largest corpus
trace in ``../shared``). perfci is compiled to bytecode first, as an installed perfci is
(``cold_start.py`` says why).
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JSON_LOAD = "import json, sys; json.load(open(sys.argv[1], 'rb'))"
PERFCI_MAIN = "import sys; from perfci.cli.main import main; sys.exit(main())"


def trace(size_mb: int) -> Path:
    path = REPO / "benchmarks" / "out" / f"chrome_trace_{size_mb}mb.json"
    if not path.exists():
        subprocess.run(
            [sys.executable, str(REPO / "benchmarks" / "parse_speed.py"), "--formats",
             "chrome_trace", "--size-mb", str(size_mb)],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
    return path


def run_once(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and minor page faults of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()}")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return wall, cpu, after.ru_minflt - before.ru_minflt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", type=Path, help="a tree holding an earlier perfci/")
    args = parser.parse_args()
    path = trace(args.size_mb)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERFCI_")}
    perfci = str(Path(sys.executable).parent / "perfci")
    commands = {
        "json.load": ([sys.executable, "-c", JSON_LOAD, str(path)], env, REPO),
        "perfci parse": ([perfci, "parse", str(path)], env, REPO),
    }
    compileall.compile_dir(REPO / "perfci", quiet=1)
    if args.before is not None:
        compileall.compile_dir(args.before / "perfci", quiet=1)
        before = args.before.resolve()
        argv = [sys.executable, "-c", PERFCI_MAIN, "parse", str(path)]
        # Run from the tree itself: ``python -c`` puts the working directory first on the path.
        commands["perfci parse (before)"] = (argv, {**env, "PYTHONPATH": str(before)}, before)
    print(f"{path.name}: {path.stat().st_size / 1e6:.1f} MB; load {os.getloadavg()[0]:.2f}")
    results: dict[str, list[tuple[float, float, int]]] = {name: [] for name in commands}
    for round_ in range(1, args.rounds + 1):
        for name, (argv, command_env, cwd) in commands.items():
            results[name].append(run_once(argv, command_env, cwd))
        ref_wall, ref_cpu, _ = results["json.load"][-1]
        cells = []
        for name, runs in results.items():
            wall, cpu, faults = runs[-1]
            cell = f"{name} {wall:.2f} s / {cpu:.2f} s CPU / {faults} faults"
            if name != "json.load":
                cell += f" ({ref_wall / wall:.2f}× / {ref_cpu / cpu:.2f}×)"
            cells.append(cell)
        print(f"round {round_} (load {os.getloadavg()[0]:.2f}): " + "; ".join(cells), flush=True)
    ref_wall = statistics.median(w for w, _, _ in results["json.load"])
    ref_cpu = statistics.median(c for _, c, _ in results["json.load"])
    print("median:")
    for name, runs in results.items():
        wall = statistics.median(w for w, _, _ in runs)
        cpu = statistics.median(c for _, c, _ in runs)
        faults = statistics.median(f for _, _, f in runs)
        ratio = ""
        if name != "json.load":
            ratio = f"; json.load's time ×{ref_wall / wall:.2f} (wall), ×{ref_cpu / cpu:.2f} (CPU)"
        print(f"  {name}: {wall:.3f} s wall, {cpu:.3f} s CPU, {faults:.0f} faults{ratio}")


if __name__ == "__main__":
    main()
