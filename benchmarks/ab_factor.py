"""Same-runner A/B on a runner whose speed varies per process: with and without process factors.

Usage::

    .venv/bin/python benchmarks/ab_factor.py [--checks 400] [--pairs 5] [--metrics 45]
        [--process-cv 0.05] [--noise 0.02] [--tails] [--scenario TEXT] [--seed 0]

Simulated ``perfci check --ab`` comparisons (:func:`perfci.analysis.paired.compare_paired`): a
step and ``--metrics − 1`` operators with log-normal shares of it, ``--pairs`` alternating
pairs, each side of each pair a fresh process. Every process has its own speed, shared by all
its metrics (log-normal, ``--process-cv``: what a loaded 2-core VM showed, ±5 % between
processes of the example, ``benchmarks/RESULTS.md``), and every value its own noise
(``--noise``; ``--tails``: from Student t with 3 dof at that spread). Scenarios (``--scenario``
picks those whose name holds it): unchanged code; one operator holding ≥ 2 % of the step +5 %
and +10 %; half the operators +10 %; every operator +5 %.

Two ways: *plain paired* (``remove_shared_factor=False``: the paired t on the log differences,
as before) and *process factors* (the default: each process's factor estimated within its side
and taken out, the factor between the sides judged as its own line).

Prints, per scenario and way: runs with a false run verdict (unchanged code), the changed
operator found, unchanged operators called regressions and improvements (per run), and the step
called a regression. No timing: the numbers are a property of the statistics.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfci.analysis.engine import CompareOptions
from perfci.analysis.paired import compare_paired
from perfci.core.model import MetricKind, SeriesKey

Array = NDArray[np.float64]
Effect = Callable[[np.random.Generator, Array], Array]


def world(rng: np.random.Generator, metrics: int) -> tuple[list[SeriesKey], Array]:
    """Keys (step first) and shares of the step; at least one operator holds 2 %."""
    while True:
        weights = np.exp(rng.normal(0, 1.3, metrics - 1))
        shares = 0.95 * weights / weights.sum()
        if (shares >= 0.02).any():
            break
    keys = [SeriesKey(MetricKind.STEP, "step")]
    keys += [SeriesKey(MetricKind.OP, f"aten::op_{i}") for i in range(metrics - 1)]
    return keys, np.concatenate([[1.0], shares])


def with_step(effect: Array, shares: Array) -> Array:
    out = effect.copy()
    out[0] = np.log1p(float(np.sum(shares[1:] * np.expm1(effect[1:]))))
    return out


def one_op(size: float) -> Effect:
    def effect(rng: np.random.Generator, shares: Array) -> Array:
        out = np.zeros(len(shares))
        out[int(rng.choice(np.flatnonzero(shares[1:] >= 0.02))) + 1] = np.log1p(size)
        return with_step(out, shares)

    return effect


def half_ops(rng: np.random.Generator, shares: Array) -> Array:
    out = np.zeros(len(shares))
    chosen = rng.choice(np.arange(1, len(shares)), size=(len(shares) - 1) // 2, replace=False)
    out[chosen] = np.log1p(0.10)
    return with_step(out, shares)


def every_op(rng: np.random.Generator, shares: Array) -> Array:
    out = np.full(len(shares), np.log1p(0.05))
    return with_step(out, shares)


SCENARIOS: dict[str, Effect] = {
    "unchanged": lambda rng, shares: np.zeros(len(shares)),
    "+5 % on one operator (>= 2 % of step)": one_op(0.05),
    "+10 % on one operator (>= 2 % of step)": one_op(0.10),
    "+10 % on half of the operators": half_ops,
    "+5 % on every operator": every_op,
}


def side(
    rng: np.random.Generator, shares: Array, effect: Array, pairs: int, args: argparse.Namespace
) -> Array:
    process = rng.normal(0, args.process_cv, pairs)
    if args.tails:  # Student t with 3 dof at the same spread: now and then a value far off
        noise = rng.standard_t(3, (len(shares), pairs)) * args.noise / np.sqrt(3.0)
    else:
        noise = rng.normal(0, args.noise, (len(shares), pairs))
    logs = np.log(20e6 * shares)[:, None] + effect[:, None] + process[None, :] + noise
    return np.asarray(np.exp(logs), dtype=np.float64)


def run(name: str, effect_of: Effect, args: argparse.Namespace) -> list[str]:
    rows = []
    for way, options in (
        ("plain paired", CompareOptions(remove_shared_factor=False)),
        ("process factors", CompareOptions()),
    ):
        rng = np.random.default_rng(args.seed)
        failed = found = step = false_up = false_down = 0
        for _ in range(args.checks):
            keys, shares = world(rng, args.metrics)
            effect = effect_of(rng, shares)
            base = side(rng, shares, np.zeros(len(shares)), args.pairs, args)
            pr = side(rng, shares, effect, args.pairs, args)
            result = compare_paired(
                {k: base[i].tolist() for i, k in enumerate(keys)},
                {k: pr[i].tolist() for i, k in enumerate(keys)},
                benchmark="sim",
                options=options,
            )
            verdicts = {m.key: m.verdict.value for m in result.metrics}
            moved = [k.key for i, k in enumerate(keys) if i > 0 and effect[i] != 0]
            still = [k.key for i, k in enumerate(keys) if i > 0 and effect[i] == 0]
            failed += result.verdict.value in ("regression", "improvement")
            found += bool(moved) and all(verdicts[k] == "regression" for k in moved[:1])
            step += verdicts[keys[0].key] == "regression"
            false_up += sum(verdicts[k] == "regression" for k in still)
            false_down += sum(verdicts[k] == "improvement" for k in still)
        n = args.checks
        changed = name != "unchanged"
        rows.append(
            f"| {name} | {way} | {'—' if changed else f'{failed / n:.1%}'} | "
            f"{f'{found / n:.1%}' if changed and 'one' in name else '—'} | "
            f"{false_up / n:.3f} / {false_down / n:.3f} | {step / n:.1%} |"
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=400)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--metrics", type=int, default=45)
    parser.add_argument("--process-cv", type=float, default=0.05)
    parser.add_argument("--noise", type=float, default=0.02)
    parser.add_argument(
        "--tails", action="store_true", help="each value's noise from Student t, 3 dof"
    )
    parser.add_argument("--scenario", default=None, help="only scenarios whose name holds this")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(
        f"{args.checks} checks per row, {args.pairs} pairs, {args.metrics} metrics, "
        f"process factor ±{args.process_cv:.0%}, value noise ±{args.noise:.0%}\n"
    )
    print(
        "| scenario | way | unchanged runs failed | changed operator found "
        "| unchanged operators called regression / improvement, per run | step a regression |"
    )
    print("|---|---|---:|---:|---:|---:|")
    for name, effect in SCENARIOS.items():
        if args.scenario and args.scenario not in name:
            continue
        for row in run(name, effect, args):
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
