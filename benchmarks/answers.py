"""Do verdicts answer? Run verdicts under two-level CI noise, issue 30's held-out worlds.

``benchmarks/verdicts.py`` counts false alarms and power per metric. This script asks the
other half of the question a pull request asks: how often is an unchanged run *called*
unchanged (not left inconclusive), how often a changed one is found, and whether a broad
change leaves the untouched kernels alone. Per comparison (defaults from issue 30):

- **Benchmark:** a step and ``--kernels`` kernels (300) holding 95 % of it, with heavy-tailed
  shares (``verdicts.make_world``), or ``--world mixed`` (kernels, operators, ranges, memory
  operations and API calls).
- **History:** ``--baseline`` runs (30) of ``--repeats`` repeats (5); the candidate has 5.
- **Noise:** 2 % log-normal repeats, a 1 % per-run level of each metric, a 1.5 % factor per
  run shared by every metric (``verdicts.Noise``).
- **The step** is what a profiler measures: its kernels' time plus the host's gaps between
  them (5 % of the step), which have noise of their own (``--gap-run-cv``, 5 % per run,
  and the repeat noise): the step is neither a metric of its own nor exactly its parts' sum.

Scenarios (issue 30, "Done when"): unchanged; unchanged with bimodal kernels (10 % of them
+8 % in 30 % of runs); +10 % on a kernel holding about 3.5 % of the step and +5 % on one
holding about 4.4 %, with Student-t₃ run levels; +10 % on half of the kernels.

Usage::

    .venv/bin/python benchmarks/answers.py                   # 200 comparisons a scenario
    .venv/bin/python benchmarks/answers.py --quick           # a smoke run
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from verdicts import Noise, World, make_world  # noqa: E402

from perfci.analysis.compare import CompareOptions, compare_run  # noqa: E402
from perfci.core.model import RunComparison, Verdict  # noqa: E402

Array = NDArray[np.float64]
Mask = NDArray[np.bool_]
#: The host's gaps between kernels, as a share of the step.
GAP_SHARE = 0.05


@dataclass(frozen=True)
class Shape:
    """What differs between scenarios: the noise, and kernels with a second mode."""

    noise: Noise = field(default_factory=Noise)
    #: Share of the kernels that land in a slower mode in some runs (an autotuner's choice).
    bimodal_share: float = 0.0
    bimodal_jump: float = 0.08
    bimodal_rate: float = 0.30
    #: The factor every metric of a run shares from Student t with 3 dof (same spread): now
    #: and then a run lands on a much slower or faster machine.
    heavy_shared: bool = False


Effect = Callable[[np.random.Generator, World], tuple[Array, Mask]]


@dataclass(frozen=True)
class Scenario:
    name: str
    effect: Effect
    shape: Shape = field(default_factory=Shape)


def sample_run(
    rng: np.random.Generator,
    world: World,
    effect: Array,
    repeats: int,
    shape: Shape,
    modes: Mask,
    gap_run_cv: float,
) -> Array:
    """metrics × repeats values of one run; row 0, the step, is its kernels plus the gaps."""
    noise = shape.noise
    n = len(world.keys)
    if noise.heavy_tails:
        rep = rng.standard_t(3, (n, repeats)) * noise.repeat_cv / np.sqrt(3.0)
    else:
        rep = rng.normal(0, noise.repeat_cv, (n, repeats))
    if noise.heavy_run_tails:
        run = rng.standard_t(3, (n, 1)) * noise.run_cv / np.sqrt(3.0)
    else:
        run = rng.normal(0, noise.run_cv, (n, 1))
    jump = np.where(modes & (rng.random(n) < shape.bimodal_rate), np.log1p(shape.bimodal_jump), 0)
    if shape.heavy_shared:
        shared = rng.standard_t(3) * noise.shared_cv / np.sqrt(3.0)
    else:
        shared = rng.normal(0, noise.shared_cv)
    logs = np.log(world.level)[:, None] + effect[:, None] + jump[:, None] + run + rep + shared
    values = np.exp(logs)
    gap_level = GAP_SHARE * world.level[0]
    gaps = gap_level * np.exp(
        rng.normal(0, gap_run_cv) + rng.normal(0, noise.repeat_cv, repeats) + shared
    )
    values[0] = values[world.kernels].sum(axis=0) + gaps
    return np.asarray(values, dtype=np.float64)


def kernel_world(rng: np.random.Generator, kernels: int, mix: str) -> World:
    return make_world(rng, kernels + 1, "kernels" if mix == "kernels" else "mixed")


def unchanged(rng: np.random.Generator, world: World) -> tuple[Array, Mask]:
    return np.zeros(len(world.keys)), np.zeros(len(world.keys), dtype=bool)


def one_kernel(change: float, share: float) -> Effect:
    """``change`` on the kernel whose share of the step is nearest ``share``."""

    def effect(rng: np.random.Generator, world: World) -> tuple[Array, Mask]:
        shares = world.share[world.kernels]
        target = int(world.kernels[int(np.argmin(np.abs(shares - share)))])
        out = np.zeros(len(world.keys))
        out[target] = np.log1p(change)
        changed = np.zeros(len(world.keys), dtype=bool)
        changed[target] = True
        return out, changed

    return effect


def half_kernels(rng: np.random.Generator, world: World) -> tuple[Array, Mask]:
    """+10 % on half of the kernels (by count); the step moves with them."""
    chosen = rng.choice(world.kernels, size=len(world.kernels) // 2, replace=False)
    out = np.zeros(len(world.keys))
    out[chosen] = np.log1p(0.10)
    changed = np.zeros(len(world.keys), dtype=bool)
    changed[chosen] = True
    changed[0] = True
    return out, changed


def scenarios() -> list[Scenario]:
    t3 = Shape(noise=Noise(heavy_run_tails=True))
    t3_shared = Shape(heavy_shared=True)
    return [
        Scenario("unchanged", unchanged),
        Scenario("unchanged, bimodal kernels (10 % of them +8 % in 30 % of runs)", unchanged,
                 Shape(bimodal_share=0.10)),
        Scenario("+10 % on a kernel holding 3.5 % of the step, t3 run levels",
                 one_kernel(0.10, 0.035), t3),
        Scenario("+5 % on a kernel holding 4.4 % of the step, t3 run levels",
                 one_kernel(0.05, 0.044), t3),
        Scenario("+10 % on a kernel holding 3.5 % of the step, t3 machine factors",
                 one_kernel(0.10, 0.035), t3_shared),
        Scenario("+5 % on a kernel holding 4.4 % of the step, t3 machine factors",
                 one_kernel(0.05, 0.044), t3_shared),
        Scenario("+10 % on half of the kernels", half_kernels),
        # Last, so that the scenarios before it keep their seeds (seed + index).
        Scenario("unchanged, t3 run levels", unchanged, t3),
    ]  # fmt: skip


@dataclass
class Tally:
    comparisons: int = 0
    run_verdicts: dict[str, int] = field(default_factory=dict)
    false_regressions: int = 0
    false_improvements: int = 0
    untouched_improvements: int = 0
    untouched_regressions: int = 0
    untouched: int = 0
    metrics: int = 0
    found: int = 0
    changed: int = 0
    step_regression: int = 0
    step_unchanged: int = 0
    step_wrong_way: int = 0
    seconds: float = 0.0

    def add(self, result: RunComparison, world: World, changed: Mask, step_moved: bool) -> None:
        self.comparisons += 1
        verdict = result.verdict.value
        self.run_verdicts[verdict] = self.run_verdicts.get(verdict, 0) + 1
        lines = {m.series: m.verdict for m in result.metrics if m.series is not None}
        verdicts = np.array([lines.get(k, Verdict.MISSING).value for k in world.keys])
        regressed = verdicts == Verdict.REGRESSION.value
        improved = verdicts == Verdict.IMPROVEMENT.value
        self.metrics += len(world.keys)
        self.false_regressions += int((regressed & ~changed).sum())
        self.false_improvements += int((improved & ~changed).sum())
        kernels = np.zeros_like(changed)
        kernels[world.kernels] = True
        quiet = kernels & ~changed
        self.untouched += int(quiet.sum())
        self.untouched_regressions += int((regressed & quiet).sum())
        self.untouched_improvements += int((improved & quiet).sum())
        target = changed.copy()
        target[0] = False
        self.found += int((regressed & target).sum())
        self.changed += int(target.sum())
        self.step_regression += int(regressed[0])
        self.step_unchanged += int(verdicts[0] == Verdict.UNCHANGED.value)
        self.step_wrong_way += int(improved[0] if step_moved else False)

    def share(self, verdict: Verdict) -> float:
        return self.run_verdicts.get(verdict.value, 0) / max(self.comparisons, 1)


def simulate(scenario: Scenario, args: argparse.Namespace, seed: int) -> Tally:
    rng = np.random.default_rng(seed)
    tally = Tally()
    options = CompareOptions(**args.options)
    for _ in range(args.comparisons):
        world = kernel_world(rng, args.kernels, args.world)
        effect, changed = scenario.effect(rng, world)
        modes = np.zeros(len(world.keys), dtype=bool)
        if scenario.shape.bimodal_share:
            count = round(scenario.shape.bimodal_share * len(world.kernels))
            modes[rng.choice(world.kernels, size=count, replace=False)] = True
        zero = np.zeros(len(world.keys))
        runs = [
            sample_run(rng, world, zero, args.repeats, scenario.shape, modes, args.gap_run_cv)
            for _ in range(args.baseline)
        ]
        cand = sample_run(rng, world, effect, args.repeats, scenario.shape, modes, args.gap_run_cv)
        baseline = {k: [run[i].tolist() for run in runs] for i, k in enumerate(world.keys)}
        candidate = {k: cand[i].tolist() for i, k in enumerate(world.keys)}
        start = time.perf_counter()
        result = compare_run(baseline, candidate, benchmark="sim", options=options)
        tally.seconds += time.perf_counter() - start
        tally.add(result, world, changed, step_moved=bool(changed[0]))
    return tally


def row(name: str, t: Tally) -> str:
    per500 = 500 / max(t.metrics / max(t.comparisons, 1), 1)
    n = max(t.comparisons, 1)
    found = "—" if not t.changed else f"{t.found / t.changed:.1%}"
    return (
        f"| {name} | {t.share(Verdict.UNCHANGED):.1%} | {t.share(Verdict.INCONCLUSIVE):.1%} "
        f"| {t.share(Verdict.REGRESSION):.1%} | {t.share(Verdict.IMPROVEMENT):.1%} "
        f"| {t.false_regressions / n * per500:.3f} | {t.false_improvements / n * per500:.3f} "
        f"| {t.untouched_regressions / n * per500:.3f} "
        f"| {t.untouched_improvements / n * per500:.3f} | {found} "
        f"| {t.step_regression / n:.1%} | {t.step_unchanged / n:.1%} "
        f"| {t.seconds / n * 1000:.0f} ms |"
    )


HEADER = (
    "| scenario | run unchanged | run inconclusive | run regression | run improvement "
    "| false regressions / 500 | false improvements / 500 | untouched kernels: regressions / 500 "
    "| untouched kernels: improvements / 500 | changed kernels found | step regression "
    "| step unchanged | compare_run |\n"
    "|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--comparisons", type=int, default=200)
    parser.add_argument("--kernels", type=int, default=300)
    parser.add_argument("--baseline", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--world", choices=("kernels", "mixed"), default="kernels")
    parser.add_argument(
        "--gap-run-cv", type=float, default=0.05, help="run-level noise of the host's gaps"
    )
    parser.add_argument("--scenario", action="append", default=None, help="name contains this")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a CompareOptions field (numbers only), e.g. gated_budget=0.36",
    )
    parser.add_argument("--seed", type=int, default=20261127)
    parser.add_argument("--quick", action="store_true", help="10 comparisons, 100 kernels")
    args = parser.parse_args(argv)
    args.options = {k: float(v) for k, v in (o.split("=", 1) for o in args.option)}
    if args.quick:
        args.comparisons, args.kernels = 10, 100
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"# Run verdicts that answer ({platform.node()}, Python {platform.python_version()})")
    print(
        f"{args.comparisons} comparisons a scenario; {args.kernels} kernels ({args.world} "
        f"world); {args.baseline} baseline runs x {args.repeats} repeats; the step is its "
        f"kernels plus {GAP_SHARE:.0%} host gaps ({args.gap_run_cv:.0%} run noise)\n"
    )
    print(HEADER)
    for index, scenario in enumerate(scenarios()):
        if args.scenario and not any(s in scenario.name for s in args.scenario):
            continue
        print(row(scenario.name, simulate(scenario, args, args.seed + index)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
