"""Adaptive repeats under sequential looks: false alarms and power, with and without spending.

Usage::

    .venv/bin/python benchmarks/sequential_looks.py [--checks 1000] [--first 5] [--max 15]
        [--noise 0.02] [--change 0.05]

Simulated same-runner A/B checks (:func:`perfci.analysis.paired.compare_paired`): a step and
12 kernels, a machine factor per pair (5 %, shared by both sides, what pairing cancels) and
log-normal process noise (``--noise``) on every value. Each check follows the adaptive loop of
``perfci check`` (:mod:`perfci.usecases.check.looks`): looks after ``first``, ``2·first`` …
``max`` pairs, stopping when :func:`~perfci.usecases.check.looks.next_reason` says so. Three
policies:

- *one look*: ``first`` pairs, tested at ``alpha`` (adaptive repeats off);
- *looks, no spending*: every look at ``alpha`` (what a naive loop would do);
- *looks, alpha / L*: every look at ``alpha / L`` (what perfci does).

Prints, per policy, the share of unchanged checks with a false run verdict (``regression`` or
``improvement``), the share of checks that find a ``--change`` slowdown of one kernel, and the
mean pairs run. No timing: the numbers are a property of the statistics, not of the machine.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfci.analysis.engine import CompareOptions
from perfci.analysis.paired import compare_paired
from perfci.core.model import MetricKind, RunComparison, SeriesKey, Verdict
from perfci.usecases.check import looks as adaptive

KEYS = [SeriesKey(kind=MetricKind.STEP, name="step")] + [
    SeriesKey(kind=MetricKind.KERNEL, name=f"kernel_{i}") for i in range(12)
]
TARGET = KEYS[1]


def draw(
    rng: np.random.Generator, pairs: int, *, noise: float, change: float
) -> tuple[dict[SeriesKey, list[float]], dict[SeriesKey, list[float]]]:
    machine = np.exp(rng.normal(0, 0.05, pairs))
    base, pr = {}, {}
    for key in KEYS:
        level = 1e6 * (len(KEYS) if key.kind is MetricKind.STEP else 1)
        factor = change if key == TARGET else 1.0
        base[key] = list(level * machine * np.exp(rng.normal(0, noise, pairs)))
        pr[key] = list(level * factor * machine * np.exp(rng.normal(0, noise, pairs)))
    return base, pr


def one_check(
    base: dict[SeriesKey, list[float]],
    pr: dict[SeriesKey, list[float]],
    plan: adaptive.LookPlan,
    alpha: float,
) -> tuple[RunComparison, int]:
    """The adaptive loop on pre-drawn pairs: the final result and the pairs it used."""
    options = CompareOptions(alpha=alpha)
    for size in plan.sizes:
        result = compare_paired(
            {k: v[:size] for k, v in base.items()},
            {k: v[:size] for k, v in pr.items()},
            benchmark="sim",
            options=options,
        )
        if (
            adaptive.next_reason(
                result, done=size, plan=plan, seconds_per_repeat=1.0, spent=float(size), budget=None
            )
            is not None
        ):
            return result, size
    return result, plan.maximum


def policy(name: str, plan: adaptive.LookPlan, alpha: float, args: argparse.Namespace) -> list[str]:
    rng = np.random.default_rng(args.seed)
    false = found = 0
    pairs: list[int] = []
    for _ in range(args.checks):
        result, used = one_check(
            *draw(rng, plan.maximum, noise=args.noise, change=1.0), plan, alpha
        )
        false += result.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)
        pairs.append(used)
        result, used = one_check(
            *draw(rng, plan.maximum, noise=args.noise, change=1 + args.change), plan, alpha
        )
        found += any(
            m.key == TARGET.key and m.verdict is Verdict.REGRESSION for m in result.metrics
        )
        pairs.append(used)
    n = args.checks
    return [name, f"{alpha:.4f}", f"{false / n:.3f}", f"{found / n:.3f}", f"{np.mean(pairs):.1f}"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checks", type=int, default=1000)
    parser.add_argument("--first", type=int, default=5)
    parser.add_argument("--max", type=int, default=15)
    parser.add_argument("--noise", type=float, default=0.02)
    parser.add_argument("--change", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    plan = adaptive.plan_looks(args.first, args.max)
    rows = [
        policy(f"one look ({args.first} pairs)", adaptive.single_look(args.first), 0.05, args),
        policy(f"looks {list(plan.sizes)}, no spending", plan, 0.05, args),
        policy(f"looks {list(plan.sizes)}, alpha / {plan.looks}", plan, plan.alpha(0.05), args),
    ]
    print(
        f"| policy | alpha per look | false run verdicts (unchanged) | +{args.change:.0%} "
        "kernel found | mean pairs |"
    )
    print("|---|---:|---:|---:|---:|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(
        f"\n{args.checks} unchanged and {args.checks} changed checks per policy; "
        f"{args.noise:.0%} process noise, 5 % machine factor per pair, 12 kernels + step."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
