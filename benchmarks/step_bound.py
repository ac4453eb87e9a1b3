"""The best any step-alone rule can do on a broad change: a ceiling for ``verdicts.py``.

Issue 12 asks two things of the step line when half of the kernels get 10 % slower: that the
step is judged on its own numbers (a broad change and a machine-wide shift must not be
confused), and that it is called a regression in ≥ 95 % of runs, with the 2 % practical
margin that keeps a +0.5 % change from failing a pull request. This script measures how far
those two can be met together in the worlds of ``benchmarks/verdicts.py``.

An *oracle* is given everything perfci has to estimate: the baseline's true level and the
candidate run's true machine factor. What is left is the step's own noise in one run (its
per-run level, ``--run-cv``, and its repeats, ``--repeat-cv``, summarised as perfci
summarises them) — noise that no other metric carries, because the step in these worlds is a
metric of its own. The oracle calls a regression when its estimate exceeds the margin; it
needs no significance test. Whatever perfci does with estimated factors, moderated variances
and BH cannot beat it.

The true step change of each draw is the share-weighted change of the kernels that moved
(``verdicts.with_step``), drawn from the same worlds as ``verdicts.py``.

Usage::

    .venv/bin/python benchmarks/step_bound.py [--draws 20000] [--delta 0.02]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from verdicts import Noise, half_kernels, make_world  # noqa: E402

from perfci.analysis.runs import summarise  # noqa: E402


def true_step_changes(rng: np.random.Generator, draws: int, world: str) -> np.ndarray:
    """The step's true change (ratio − 1) under "+10 % on half of the kernels"."""
    out = np.empty(draws)
    for i in range(draws):
        effect, _ = half_kernels(rng, make_world(rng, 500, world))
        out[i] = np.expm1(effect[0])
    return out


def oracle_found(
    rng: np.random.Generator, changes: np.ndarray, noise: Noise, repeats: int, delta: float
) -> np.ndarray:
    """Per draw: does one run's step, beyond a known factor and level, exceed the margin?"""
    n = changes.size
    run = rng.normal(0, noise.run_cv, n)
    reps = rng.normal(0, noise.repeat_cv, (n, repeats))
    estimate = np.log1p(changes) + run + summarise(reps)
    return np.asarray(estimate > np.log1p(delta))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--delta", type=float, default=0.02, help="the practical margin")
    parser.add_argument("--seed", type=int, default=20261125)
    args = parser.parse_args(argv)
    noise = Noise()
    print(
        f"{args.draws} draws a world; noise beyond the factor: run {noise.run_cv:.1%}, "
        f"repeats {noise.repeat_cv:.1%} x {args.repeats}; margin {args.delta:.0%}\n"
    )
    print(
        "| world | true step change: median | min | share ≥ +5 % "
        "| oracle finds the step | oracle, true change ≥ +5 % |"
    )
    print("|:--|--:|--:|--:|--:|--:|")
    for world in ("mixed", "kernels"):
        rng = np.random.default_rng(args.seed)
        changes = true_step_changes(rng, args.draws, world)
        found = oracle_found(rng, changes, noise, args.repeats, args.delta)
        big = changes >= 0.05
        print(
            f"| {world} | {np.median(changes):+.1%} | {changes.min():+.1%} | {big.mean():.1%} "
            f"| {found.mean():.1%} | {found[big].mean():.1%} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
