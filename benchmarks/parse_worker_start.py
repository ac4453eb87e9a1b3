"""What a fresh upload parse worker costs, with and without the main script's modules preloaded.

Every upload is parsed in a fresh process forked from a forkserver
(:mod:`perfci.server.parse_pool`), which first runs the server's main script again. This script
is started by path and imports the CLI at its top, as the ``perfci`` console script does for
``perfci serve``. It times ``--workers`` empty jobs, each in a fresh worker: once with the
forkserver preloading what the main script imports (:func:`main_script_modules`, the server's
way), once with only the parsers preloaded (the way before stop 45).

    .venv/bin/python benchmarks/parse_worker_start.py [--workers 15]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfci.cli.main import main as _cli  # noqa: F401  (what `perfci serve`'s script imports)
from perfci.server import parse_pool

_BUDGET = parse_pool.Budget(10.0, 1.0, 2**30, 2**26)


def _time_workers(count: int, preload_main: bool) -> list[float]:
    if not preload_main:
        parse_pool.main_script_modules = lambda main=None: []  # type: ignore[assignment]
    pool = parse_pool.ParsePool(_BUDGET)
    pool.warm()
    spent = []
    for _ in range(count):
        started = time.perf_counter()
        pool.run(parse_pool._nothing, (), 0)
        spent.append(time.perf_counter() - started)
    return spent


def _measure(count: int, preload_main: bool, results: multiprocessing.Queue[list[float]]) -> None:
    results.put(_time_workers(count, preload_main))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=15)
    args = parser.parse_args(argv)
    print("| forkserver preloads | fresh worker, median ms | min ms |\n|:--|--:|--:|")
    # Each way in a process of its own: a forkserver, once started, keeps its preload.
    context = multiprocessing.get_context("spawn")
    for preload_main, label in ((True, "the main script's modules too"), (False, "the parsers")):
        results: multiprocessing.Queue[list[float]] = context.Queue()
        process = context.Process(target=_measure, args=(args.workers, preload_main, results))
        process.start()
        spent = results.get()
        process.join()
        print(f"| {label} | {statistics.median(spent) * 1000:.1f} | {min(spent) * 1000:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
