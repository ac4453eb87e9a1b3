"""Unchanged code under noise shapes other than issue 12's: how often is a run failed?

``benchmarks/verdicts.py`` measures the noise shape the issue describes. Real CI noise is
kept apart from us, so this script tries shapes a real runner pool shows and asks the one
question that decides whether a team keeps the bot: with nothing changed, how often does the
check fail, and how many metrics are called changed? Each comparison is one benchmark of
500 metrics (``verdicts.make_world``, the mixed world), 30 baseline runs of 5 repeats unless
the shape says otherwise, through the public ``compare_run`` with its defaults.

Shapes (per comparison):

- ``plain``: the issue's (2 % repeats, 1 % run level, 1.5 % shared factor);
- ``short baseline``: 5 runs of 3 repeats; ``tiny baseline``: 3 runs of 2;
  ``one repeat``: 30 runs of 1;
- ``two runner types``: each run on type A or B at random, B 4 % slower in everything and
  ±3 % per metric (another card or CPU model);
- ``drift``: the base branch 4 % slower over the window, smoothly (no step);
- ``loud``: 4 % repeats, 3 % run level, 3 % shared factor;
- ``t3 run levels``: each run's level of a metric from Student t with 3 dof (1 % spread);
  ``short t3``: the same with 5 runs of 3 repeats;
- ``bimodal``: 5 % of the metrics 8 % slower in a fifth of the runs (an autotuner's choice);
- ``partial wrecks``: 3 of 30 runs 30–60 % slower in the larger 40 % of the metrics only
  (a neighbour's job slows large operators, not small ones);
- ``slow episode at the end``: the same, in the last 3 runs;
- ``warm-up``: every run's first repeat 15 % slower;
- ``loaded candidate``: the candidate run 30 % slower in everything (a machine-wide shift:
  one run cannot tell it from code that slows everything, and says so; counted apart);
- ``candidate of 10 repeats``: more repeats than the baseline runs had (``--max-repeats``);
- ``quantized``: the smallest fifth of the metrics in whole units of 1/2 to 1/20 of their
  level (a profiler printing whole microseconds for operators of a few microseconds);
- ``noise by size``: each metric's repeat and run noise scaled by ``(median level / its
  level) ** 0.35`` within 0.3-5x: short kernels noisier than long ones, as on real GPUs;
- ``ragged baseline``: baseline runs of 2 to 8 repeats; ``candidate of 2 repeats``;
  ``candidate of 1 repeat`` (``perfci check --profile`` with one file);
- ``thermal``: within every run each repeat 1 % slower than the one before.

Usage::

    .venv/bin/python benchmarks/noise_shapes.py [--comparisons 100] [--shape TEXT ...]

To measure an older commit, copy this file into a worktree of it and run it there.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import verdicts  # noqa: E402

from perfci.analysis.compare import compare_run  # noqa: E402
from perfci.core.model import Verdict  # noqa: E402

Array = np.ndarray
Runs = tuple[list[Array], Array]


def _run(
    rng: np.random.Generator,
    world: verdicts.World,
    repeats: int,
    *,
    repeat_cv: float = 0.02,
    run_cv: float = 0.01,
    shared: float | None = None,
    shift: Array | None = None,
    t_levels: bool = False,
    warm: float = 0.0,
) -> Array:
    """metrics × repeats values of one run."""
    n = len(world.keys)
    rep = rng.normal(0, repeat_cv, (n, repeats))
    rep[:, 0] += warm
    if t_levels:
        level = rng.standard_t(3, (n, 1)) * run_cv / np.sqrt(3.0)
    else:
        level = rng.normal(0, run_cv, (n, 1))
    factor = rng.normal(0, 0.015) if shared is None else shared
    logs = np.log(world.level)[:, None] + level + rep + factor
    if shift is not None:
        logs += shift[:, None]
    return np.asarray(np.exp(logs), dtype=np.float64)


def _history(
    rng: np.random.Generator,
    world: verdicts.World,
    runs: int = 30,
    repeats: int = 5,
    **kwargs: Any,
) -> Runs:
    """``runs`` baseline runs and a candidate, all of one noise (``_run``'s options)."""
    return [_run(rng, world, repeats, **kwargs) for _ in range(runs)], _run(
        rng, world, repeats, **kwargs
    )


def _large(world: verdicts.World) -> Array:
    return np.asarray(world.share >= np.quantile(world.share, 0.6))


def _partial(rng: np.random.Generator, world: verdicts.World, slow: set[int]) -> Runs:
    large = _large(world)
    base = []
    for j in range(30):
        shift = np.where(large, np.log1p(rng.uniform(0.3, 0.6)), 0.0) if j in slow else None
        base.append(_run(rng, world, 5, shift=shift))
    return base, _run(rng, world, 5)


def _runner_types(rng: np.random.Generator, world: verdicts.World) -> Runs:
    type_b = rng.normal(0, 0.03, len(world.keys)) + np.log(1.04)

    def one() -> Array:
        return _run(rng, world, 5, shift=type_b if rng.random() < 0.5 else None)

    return [one() for _ in range(30)], one()


def _drift(rng: np.random.Generator, world: verdicts.World) -> Runs:
    def at(j: int) -> Array:
        return _run(rng, world, 5, shared=rng.normal(0, 0.015) + np.log1p(0.04 * j / 30))

    return [at(j) for j in range(30)], at(30)


def _bimodal(rng: np.random.Generator, world: verdicts.World) -> Runs:
    two = rng.random(len(world.keys)) < 0.05

    def one() -> Array:
        shift = np.where(two & (rng.random(len(world.keys)) < 0.2), np.log(1.08), 0.0)
        return _run(rng, world, 5, shift=shift)

    return [one() for _ in range(30)], one()


def _quantized(rng: np.random.Generator, world: verdicts.World) -> Runs:
    """The smallest fifth of the metrics read in whole units of 1/2 to 1/20 of their level (a
    profiler printing whole microseconds for operators of a few microseconds)."""
    small = world.share <= np.quantile(world.share, 0.2)
    units = (world.level / rng.uniform(2, 20, len(world.keys)))[small, None]

    def one() -> Array:
        values = _run(rng, world, 5)
        values[small] = np.round(values[small] / units) * units
        return values

    return [one() for _ in range(30)], one()


def _by_size(world: verdicts.World) -> Array:
    """Each metric's noise multiplier: small metrics noisier, ``(median / level) ** 0.35``
    within 0.3-5x (a 5 µs kernel's timer and launch jitter against a 5 ms one's)."""
    scale = (np.median(world.level) / world.level) ** 0.35
    return np.clip(scale, 0.3, 5.0)[:, None]


def _sized(rng: np.random.Generator, world: verdicts.World) -> Runs:
    scale = _by_size(world)
    return _history(rng, world, repeat_cv=0.02 * scale, run_cv=0.01 * scale)


def _ragged(rng: np.random.Generator, world: verdicts.World) -> Runs:
    """Baseline runs of 2 to 8 repeats (adaptive repeats, budgets, retried jobs)."""
    base = [_run(rng, world, int(rng.integers(2, 9))) for _ in range(30)]
    return base, _run(rng, world, 5)


def _thermal(rng: np.random.Generator, world: verdicts.World) -> Runs:
    """Each repeat 1 % slower than the one before, in every run (a GPU warming up)."""

    def one() -> Array:
        return _run(rng, world, 5) * np.exp(0.01 * np.arange(5))[None, :]

    return [one() for _ in range(30)], one()


SHAPES: dict[str, Callable[[np.random.Generator, verdicts.World], Runs]] = {
    "plain": lambda rng, w: _history(rng, w),
    "short baseline (5 runs x 3)": lambda rng, w: _history(rng, w, 5, 3),
    "tiny baseline (3 runs x 2)": lambda rng, w: _history(rng, w, 3, 2),
    "one repeat a run (30 x 1)": lambda rng, w: _history(rng, w, 30, 1),
    "two runner types (B +4 %, ±3 % a metric)": _runner_types,
    "drift: +4 % over the window": _drift,
    "loud: 4 % repeats, 3 % run level, 3 % shared": lambda rng, w: _history(
        rng, w, repeat_cv=0.04, run_cv=0.03, shared=None
    ),
    "t3 run levels": lambda rng, w: _history(rng, w, t_levels=True),
    "short t3 (5 runs x 3, t3 run levels)": lambda rng, w: _history(rng, w, 5, 3, t_levels=True),
    "bimodal: 5 % of metrics +8 % in a fifth of runs": _bimodal,
    "partial wrecks: 3 of 30 runs, large metrics +30-60 %": lambda rng, w: _partial(
        rng, w, set(rng.choice(30, 3, replace=False).tolist())
    ),
    "slow episode at the end: last 3 runs, large metrics": lambda rng, w: _partial(
        rng, w, {27, 28, 29}
    ),
    "warm-up: first repeat +15 %": lambda rng, w: _history(rng, w, warm=np.log(1.15)),
    "loaded candidate: +30 % in everything": lambda rng, w: (
        [_run(rng, w, 5) for _ in range(30)],
        _run(rng, w, 5, shared=np.log(1.3)),
    ),
    "candidate of 10 repeats (baseline runs of 5)": lambda rng, w: (
        [_run(rng, w, 5) for _ in range(30)],
        _run(rng, w, 10),
    ),
    "quantized: the smallest fifth in whole units of 1/2-1/20 of their level": _quantized,
    "noise by size: small metrics up to 5x noisier, large ones down to 0.3x": _sized,
    "ragged baseline: runs of 2-8 repeats": _ragged,
    "candidate of 2 repeats": lambda rng, w: (
        [_run(rng, w, 5) for _ in range(30)],
        _run(rng, w, 2),
    ),
    "candidate of 1 repeat (one profile file)": lambda rng, w: (
        [_run(rng, w, 5) for _ in range(30)],
        _run(rng, w, 1),
    ),
    "thermal: each repeat 1 % slower than the one before": _thermal,
}


def measure(name: str, comparisons: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    verdict_counts: Counter[str] = Counter()
    regressions = improvements = 0
    start = time.perf_counter()
    for _ in range(comparisons):
        world = verdicts.make_world(rng, 500, "mixed")
        base, cand = SHAPES[name](rng, world)
        baseline = {k: [run[i].tolist() for run in base] for i, k in enumerate(world.keys)}
        candidate = {k: cand[i].tolist() for i, k in enumerate(world.keys)}
        result = compare_run(baseline, candidate, benchmark="shape")
        verdict_counts[result.verdict.value] += 1
        regressions += sum(m.verdict is Verdict.REGRESSION for m in result.metrics)
        improvements += sum(m.verdict is Verdict.IMPROVEMENT for m in result.metrics)
    failed = verdict_counts[Verdict.REGRESSION.value]
    spent = (time.perf_counter() - start) / comparisons * 1000
    other = ", ".join(f"{k} {v}" for k, v in sorted(verdict_counts.items()))
    return (
        f"| {name} | {failed / comparisons:.1%} | {regressions / comparisons:.3f} | "
        f"{improvements / comparisons:.3f} | {other} | {spent:.0f} ms |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--comparisons", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument(
        "--shape", action="append", default=None, help="only shapes whose name holds this"
    )
    args = parser.parse_args(argv)
    print(f"# Unchanged code, other noise shapes ({platform.node()}, {args.comparisons} each)\n")
    print(
        "| shape | runs failed | false regressions / comparison | "
        "false improvements / comparison | run verdicts | per comparison |"
    )
    print("|:--|--:|--:|--:|:--|--:|")
    for index, name in enumerate(SHAPES):
        if args.shape and not any(s in name for s in args.shape):
            continue
        print(measure(name, args.comparisons, args.seed + index), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
