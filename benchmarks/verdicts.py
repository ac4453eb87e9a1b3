"""Verdict benchmark: run comparisons under two-level CI noise, against the peers' detectors.

Each comparison simulates one benchmark of ``--metrics`` metrics (default 500: a step, kernels,
operators, ranges, memory operations and API calls with heavy-tailed shares of the step) with
``--baseline`` baseline runs (30) of ``--repeats`` repeats (5) and one candidate run, under the
noise shape of shared CI runners:

- per repeat: log-normal noise (``--repeat-cv``, 2 %), or Student t with 3 degrees of freedom
  scaled to the same spread (heavy tails);
- per run and metric: a level of its own (``--run-cv``, 1 %: another process, memory layout,
  autotuner choice);
- per run: a factor shared by every metric (``--shared-cv``, 1.5 %: another machine or card).

``--world kernels`` makes the benchmark a step and kernels only (95 % of the step), where half
the kernels moved is half of all metrics.

Scenarios: unchanged code; the same with 2 of 30 baseline runs 30–60 % slower in everything;
an accepted +8 % step-time change inside the window; +10 % and +5 % on one kernel holding at
least 2 % of the step; +10 % on half of the kernels (a broad change; also on kernels holding
half of the kernels' time, the step's change then near +4.5 %); heavy tails, of the
repeats and of the runs' own levels (``--no-tails`` turns off the tail calibration). The step is
either an independent metric with the same noise (``--step independent``, the harder case) or
the sum of its kernels plus 5 % overhead (``--step sum``).

perfci runs through its public ``compare_run``; the peers' default detectors
(``benchmarks/detection.py``) judge each metric on its run medians; a peer "fails the run"
when it flags any metric perfci would gate.

Usage::

    .venv/bin/python benchmarks/verdicts.py                  # 200 comparisons a scenario
    .venv/bin/python benchmarks/verdicts.py --quick          # a smoke run
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

from detection import PEERS  # noqa: E402

from perfci.analysis.compare import CompareOptions, compare_run  # noqa: E402
from perfci.core.model import MetricKind, SeriesKey, Verdict  # noqa: E402

Array = NDArray[np.float64]
#: (kind, count, total share of the step) of the simulated benchmark at 500 metrics.
MIX = (
    (MetricKind.KERNEL, 0.40, 0.90),
    (MetricKind.OP, 0.30, 0.85),
    (MetricKind.RANGE, 0.08, 1.60),
    (MetricKind.MEMORY, 0.02, 0.05),
    (MetricKind.API, 0.198, 0.30),
)


@dataclass(frozen=True)
class World:
    """One simulated benchmark: its series, their step shares and levels (ns per step)."""

    keys: list[SeriesKey]
    share: Array
    level: Array
    kernels: NDArray[np.int64]
    gated: NDArray[np.bool_]


#: ``--world kernels``: a step and kernels only, 95 % of the step in kernels. Half the
#: kernels moved is then half the metrics, the hardest case for telling a change from the
#: machine.
KERNELS_ONLY = ((MetricKind.KERNEL, 1.0, 0.95),)


def make_world(rng: np.random.Generator, metrics: int, mix: str = "mixed") -> World:
    """A benchmark with at least one kernel holding 2 % of the step (drawn until it has)."""
    while True:
        world = _draw_world(rng, metrics, KERNELS_ONLY if mix == "kernels" else MIX)
        if (world.share[world.kernels] >= 0.02).any():
            return world


def _draw_world(
    rng: np.random.Generator, metrics: int, parts: tuple[tuple[MetricKind, float, float], ...]
) -> World:
    keys = [SeriesKey(MetricKind.STEP, "train_step")]
    shares = [1.0]
    for kind, fraction, total in parts:
        count = max(1, round(fraction * metrics))
        weights = np.exp(rng.normal(0, 1.3, count))
        shares.extend(total * weights / weights.sum())
        keys.extend(SeriesKey(kind, f"{kind.value}_{i}") for i in range(count))
    keys, share = keys[:metrics], np.asarray(shares[:metrics])
    kinds = np.array([k.kind for k in keys])
    gate_kinds = {MetricKind.KERNEL, MetricKind.OP, MetricKind.RANGE, MetricKind.MEMORY}
    gated = np.array([k in gate_kinds for k in kinds]) & (share >= 0.01)
    gated[0] = True
    return World(keys, share, 20e6 * share, np.flatnonzero(kinds == MetricKind.KERNEL), gated)


@dataclass(frozen=True)
class Noise:
    repeat_cv: float = 0.02
    run_cv: float = 0.01
    shared_cv: float = 0.015
    heavy_tails: bool = False
    #: Each run's own level of a metric from Student t with 3 dof (same spread): now and then
    #: a metric of one run lies far off (another autotuner choice, a memory layout).
    heavy_run_tails: bool = False


def sample_run(
    rng: np.random.Generator,
    world: World,
    effect: Array,
    repeats: int,
    noise: Noise,
    step_model: str,
    wreck: float = 0.0,
) -> Array:
    """metrics × repeats values of one run; ``effect`` is each metric's log change."""
    n = len(world.keys)
    shape = (n, repeats)
    if noise.heavy_tails:
        rep = rng.standard_t(3, shape) * noise.repeat_cv / np.sqrt(3.0)
    else:
        rep = rng.normal(0, noise.repeat_cv, shape)
    if noise.heavy_run_tails:
        run = rng.standard_t(3, (n, 1)) * noise.run_cv / np.sqrt(3.0)
    else:
        run = rng.normal(0, noise.run_cv, (n, 1))
    shared = rng.normal(0, noise.shared_cv) + wreck
    logs = np.log(world.level)[:, None] + effect[:, None] + run + rep + shared
    if step_model == "sum":
        kernels = np.exp(logs[world.kernels]).sum(axis=0)
        overhead = 0.05 * world.level[0] * np.exp(rng.normal(0, noise.repeat_cv, repeats) + shared)
        logs[0] = np.log(kernels + overhead)
    return np.asarray(np.exp(logs), dtype=np.float64)


def with_step(world: World, effect: Array) -> Array:
    """``effect`` with the step's own change set from its kernels' (share-weighted)."""
    out = effect.copy()
    k = world.kernels
    out[0] = np.log1p(float(np.sum(world.share[k] * np.expm1(effect[k])) / 1.0))
    return out


@dataclass
class Scenario:
    name: str
    effect: Callable[[np.random.Generator, World], tuple[Array, NDArray[np.bool_]]]
    noise: Noise = field(default_factory=Noise)
    wrecked: int = 0
    step_at: int | None = None  # baseline run index from which an accepted change holds


def null_effect(rng: np.random.Generator, world: World) -> tuple[Array, NDArray[np.bool_]]:
    return np.zeros(len(world.keys)), np.zeros(len(world.keys), dtype=bool)


def one_kernel(
    change: float,
) -> Callable[[np.random.Generator, World], tuple[Array, NDArray[np.bool_]]]:
    def effect(rng: np.random.Generator, world: World) -> tuple[Array, NDArray[np.bool_]]:
        big = world.kernels[world.share[world.kernels] >= 0.02]
        target = int(rng.choice(big))
        out = np.zeros(len(world.keys))
        out[target] = np.log1p(change)
        changed = np.zeros(len(world.keys), dtype=bool)
        changed[target] = True
        return with_step(world, out), changed

    return effect


def half_kernels(rng: np.random.Generator, world: World) -> tuple[Array, NDArray[np.bool_]]:
    chosen = rng.choice(world.kernels, size=len(world.kernels) // 2, replace=False)
    return _broad(world, chosen)


def half_kernel_time(rng: np.random.Generator, world: World) -> tuple[Array, NDArray[np.bool_]]:
    """+10 % on kernels (in random order) until they hold half of the kernels' time: the
    broad change with the step's true change fixed near +4.5 % (kernels hold 90 % of the step),
    where ``half_kernels`` (half by count) draws it anywhere from +0.7 to +9 %."""
    order = rng.permutation(world.kernels)
    share = np.cumsum(world.share[order])
    chosen = order[: int(np.searchsorted(share, share[-1] / 2)) + 1]
    return _broad(world, chosen)


def _broad(world: World, chosen: NDArray[np.int64]) -> tuple[Array, NDArray[np.bool_]]:
    """+10 % on the ``chosen`` kernels; they and the step are the changed metrics."""
    out = np.zeros(len(world.keys))
    out[chosen] = np.log1p(0.10)
    changed = np.zeros(len(world.keys), dtype=bool)
    changed[chosen] = True
    changed[0] = True
    return with_step(world, out), changed


def accepted_step(rng: np.random.Generator, world: World) -> Array:
    """An accepted change: kernels holding ~40 % of the step +20 % (step ≈ +8 %)."""
    order = rng.permutation(world.kernels)
    share = np.cumsum(world.share[order])
    chosen = order[: int(np.searchsorted(share, 0.40)) + 1]
    out = np.zeros(len(world.keys))
    out[chosen] = np.log1p(0.20)
    return with_step(world, out)


@dataclass
class Tally:
    comparisons: int = 0
    false_regressions: int = 0
    false_improvements: int = 0
    runs_failed: int = 0
    found: int = 0
    changed_metrics: int = 0
    unchanged_called_improvement: int = 0
    unchanged_metrics: int = 0
    step_regression: int = 0
    #: Comparisons whose true step change was at least +5 %, and of those, step regressions.
    big_steps: int = 0
    big_steps_found: int = 0
    seconds: float = 0.0


def simulate(scenario: Scenario, args: argparse.Namespace, seed: int) -> dict[str, Tally]:
    rng = np.random.default_rng(seed)
    peers = {} if args.perfci_only else PEERS
    tallies = {"perfci": Tally(), **{name: Tally() for name in peers}}
    options = CompareOptions(calibrate_tails=not args.no_tails)
    for _ in range(args.comparisons):
        world = make_world(rng, args.metrics, args.world)
        effect, changed = scenario.effect(rng, world)
        accepted = accepted_step(rng, world) if scenario.step_at is not None else None
        runs = []
        wrecked = set(rng.choice(args.baseline, size=scenario.wrecked, replace=False).tolist())
        for j in range(args.baseline):
            base_effect = np.zeros(len(world.keys))
            if accepted is not None and scenario.step_at is not None and j >= scenario.step_at:
                base_effect = accepted
            wreck = float(np.log(1 + rng.uniform(0.3, 0.6))) if j in wrecked else 0.0
            runs.append(
                sample_run(rng, world, base_effect, args.repeats, scenario.noise, args.step, wreck)
            )
        cand_effect = effect + (accepted if accepted is not None else 0.0)
        cand_repeats = args.candidate_repeats or args.repeats
        cand = sample_run(rng, world, cand_effect, cand_repeats, scenario.noise, args.step)
        baseline = {k: [run[i].tolist() for run in runs] for i, k in enumerate(world.keys)}
        candidate = {k: cand[i].tolist() for i, k in enumerate(world.keys)}
        if args.no_step:  # profiles with no iteration in them (nsys stats, nvprof, ncu)
            del baseline[world.keys[0]], candidate[world.keys[0]]
        start = time.perf_counter()
        result = compare_run(baseline, candidate, benchmark="sim", options=options)
        tallies["perfci"].seconds += time.perf_counter() - start
        verdicts = np.array([_verdict_of(result, k) for k in world.keys], dtype=object)
        if np.expm1(effect[0]) >= 0.05:
            tallies["perfci"].big_steps += 1
            tallies["perfci"].big_steps_found += int(verdicts[0] == Verdict.REGRESSION.value)
        _count(
            tallies["perfci"],
            verdicts == Verdict.REGRESSION.value,
            verdicts == Verdict.IMPROVEMENT.value,
            result.verdict is Verdict.REGRESSION,
            changed,
            world,
        )
        medians = np.stack([np.median(run, axis=1) for run in runs], axis=1)
        for name, peer in peers.items():
            flagged = np.asarray(peer(medians, cand))
            failed = bool((flagged & world.gated).any())
            _count(tallies[name], flagged, np.zeros_like(flagged), failed, changed, world)
    return tallies


def _verdict_of(result: object, key: SeriesKey) -> str:
    lines = {m.series: m for m in result.metrics}  # type: ignore[attr-defined]
    line = lines.get(key)
    return line.verdict.value if line is not None else "missing"


def _count(
    tally: Tally,
    regressed: NDArray[np.bool_],
    improved: NDArray[np.bool_],
    failed: bool,
    changed: NDArray[np.bool_],
    world: World,
) -> None:
    tally.comparisons += 1
    tally.false_regressions += int((regressed & ~changed).sum())
    tally.false_improvements += int((improved & ~changed).sum())
    tally.runs_failed += int(failed)
    target = changed.copy()
    target[0] = False
    tally.found += int((regressed & target).sum())
    tally.changed_metrics += int(target.sum())
    kernels = np.zeros_like(changed)
    kernels[world.kernels] = True
    quiet = kernels & ~changed
    tally.unchanged_called_improvement += int((improved & quiet).sum())
    tally.unchanged_metrics += int(quiet.sum())
    tally.step_regression += int(regressed[0])


def scenarios() -> list[Scenario]:
    return [
        Scenario("unchanged", null_effect),
        Scenario("unchanged, 2 of 30 baseline runs 30-60 % slower", null_effect, wrecked=2),
        Scenario("unchanged, accepted +8 % step 12 runs ago", null_effect, step_at=18),
        Scenario("unchanged, heavy tails (t3 repeats)", null_effect, Noise(heavy_tails=True)),
        Scenario("+10 % on one kernel (>= 2 % of step)", one_kernel(0.10)),
        Scenario("+5 % on one kernel (>= 2 % of step)", one_kernel(0.05)),
        Scenario("+10 % on half of the kernels", half_kernels),
        Scenario(
            "unchanged, heavy-tailed run levels (t3)", null_effect, Noise(heavy_run_tails=True)
        ),
        Scenario(
            "+10 % on one kernel, heavy-tailed run levels (t3)",
            one_kernel(0.10),
            Noise(heavy_run_tails=True),
        ),
        Scenario("+10 % on half of the kernel time", half_kernel_time),
    ]


def _rate(part: int, whole: int) -> str:
    return "—" if whole == 0 else f"{part / whole:.1%}"


def table(scenario: Scenario, tallies: dict[str, Tally]) -> list[str]:
    rows = [
        f"#### {scenario.name}",
        "",
        "| detector | false regressions / comparison | false improvements / comparison "
        "| runs failed | changed metrics found | unchanged kernels called improvements "
        "| step regression |",
        "|:--|--:|--:|--:|--:|--:|--:|",
    ]
    for name, t in tallies.items():
        n = max(t.comparisons, 1)
        rows.append(
            f"| {name} | {t.false_regressions / n:.3f} | {t.false_improvements / n:.3f} "
            f"| {_rate(t.runs_failed, t.comparisons)} "
            f"| {_rate(t.found, t.changed_metrics)} "
            f"| {_rate(t.unchanged_called_improvement, t.unchanged_metrics)} "
            f"| {_rate(t.step_regression, t.comparisons)} |"
        )
    return [*rows, ""]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--comparisons", type=int, default=200)
    parser.add_argument("--metrics", type=int, default=500)
    parser.add_argument("--baseline", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--candidate-repeats",
        type=int,
        default=None,
        help="repeats of the candidate run (default: --repeats); 1 is one profile file",
    )
    parser.add_argument("--step", choices=("independent", "sum"), default="independent")
    parser.add_argument(
        "--world",
        choices=("mixed", "kernels"),
        default="mixed",
        help="mixed: kernels, operators, ranges, memory operations and API calls (default); "
        "kernels: a step and kernels only",
    )
    parser.add_argument(
        "--scenario",
        action="append",
        default=None,
        help="run only scenarios whose name contains this text",
    )
    parser.add_argument(
        "--exact",
        action="store_true",
        help="--scenario names a scenario whole (e.g. just 'unchanged')",
    )
    parser.add_argument(
        "--perfci-only", action="store_true", help="leave the peers' detectors out (faster)"
    )
    parser.add_argument(
        "--no-tails",
        action="store_true",
        help="judge on the normal model alone (CompareOptions.calibrate_tails=False)",
    )
    parser.add_argument(
        "--no-step",
        action="store_true",
        help="leave the step series out of what compare_run is given (profiles with no "
        "iteration: nsys stats without NVTX steps, nvprof, Nsight Compute)",
    )
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--quick", action="store_true", help="10 comparisons, 100 metrics")
    args = parser.parse_args(argv)
    if args.quick:
        args.comparisons, args.metrics = 10, 100
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"# Verdicts under two-level noise ({platform.node()}, {platform.python_version()})")
    print(
        f"{args.comparisons} comparisons a scenario, {args.metrics} metrics, "
        f"{args.baseline} baseline runs x {args.repeats} repeats, step model: {args.step}, "
        f"world: {args.world}\n"
    )
    for index, scenario in enumerate(scenarios()):
        if args.scenario and not any(
            s == scenario.name if args.exact else s in scenario.name for s in args.scenario
        ):
            continue
        tallies = simulate(scenario, args, args.seed + index)
        print("\n".join(table(scenario, tallies)), flush=True)
        mine = tallies["perfci"]
        if mine.big_steps:
            print(
                f"perfci: step a regression in {_rate(mine.big_steps_found, mine.big_steps)} "
                f"of the {mine.big_steps} comparisons whose true step change was +5 % or "
                "more\n",
                flush=True,
            )
        per = tallies["perfci"].seconds / max(tallies["perfci"].comparisons, 1)
        print(f"perfci compare_run: {per * 1000:.0f} ms a comparison\n", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
