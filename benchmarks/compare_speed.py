"""Speed of :func:`perfci.analysis.compare.compare`: 10,000 metrics × (30 baseline, 10 candidate).

Usage::

    .venv/bin/python benchmarks/compare_speed.py [--metrics 10000] [--baseline 30]
        [--repeats 10] [--rounds 5]

Prints the best and median wall time of ``--rounds`` calls (input building excluded) and
whether the issue's budget (< 1 s) is met.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfci.analysis.compare import CompareOptions, compare

BUDGET_S = 1.0


def make_inputs(
    metrics: int, n: int, m: int, seed: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Log-normal values (CV 2 %) around per-metric levels from 1 µs to 10 ms."""
    rng = np.random.default_rng(seed)
    levels = np.exp(rng.uniform(np.log(1e3), np.log(1e7), metrics))
    base = levels[:, None] * np.exp(rng.normal(0, 0.02, (metrics, n)))
    cand = levels[:, None] * np.exp(rng.normal(0, 0.02, (metrics, m)))
    keys = [f"kernel:gpu:k{i}" for i in range(metrics)]
    return dict(zip(keys, base.tolist(), strict=True)), dict(zip(keys, cand.tolist(), strict=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics", type=int, default=10_000)
    parser.add_argument("--baseline", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--shared-factor",
        action="store_true",
        help="also estimate and remove the shared run factor",
    )
    args = parser.parse_args(argv)
    base, cand = make_inputs(args.metrics, args.baseline, args.repeats, seed=1)
    options = CompareOptions(remove_shared_factor=args.shared_factor)
    times = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        compare(base, cand, options=options)
        times.append(time.perf_counter() - start)
    best, median = min(times), statistics.median(times)
    print(
        f"compare(): {args.metrics} metrics × ({args.baseline}, {args.repeats}), "
        f"method={options.method}, shared factor={'on' if args.shared_factor else 'off'}: "
        f"best {best:.3f} s, median {median:.3f} s over {args.rounds} rounds "
        f"({platform.machine()}, Python {platform.python_version()}, numpy {np.__version__}) "
        f"→ budget < {BUDGET_S:.0f} s {'met' if median < BUDGET_S else 'NOT met'}"
    )
    return 0 if median < BUDGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
