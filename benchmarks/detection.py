"""Detection benchmark: perfci's comparator against the theoretical limit and peers' defaults.

For each noise scenario it simulates comparisons of ``--metrics`` metrics (default 500) with
``--baseline`` baseline runs (30) and ``--repeats`` candidate repeats (5), and reports per
detector: false alarms per comparison when nothing changed, power at +2/+5/+10 % and the
minimum detectable effect (MDE) at 90 % power. Power is measured on one regressed metric inside
a comparison whose other metrics are unchanged (the hardest case for a multiple-testing
correction, and the one the theoretical limit describes).

Usage::

    .venv/bin/python benchmarks/detection.py                 # full run (a few minutes)
    .venv/bin/python benchmarks/detection.py --comparisons 200 --scenarios lognormal-2%

Real series come from ../shared/changepoint-data/tcpd (labelled change points; windows that
cross no label are null series). The script prints Markdown to paste into benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from scipy import stats

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from perfci.analysis import noise  # noqa: E402
from perfci.analysis import stats as pstats  # noqa: E402
from perfci.analysis.engine import CompareOptions, decide, shift_test  # noqa: E402

Array = NDArray[np.float64]
Sampler = Callable[[np.random.Generator, int, int, int, int], tuple[Array, Array]]
EFFECTS = np.round(np.arange(0.0025, 0.2001, 0.0025), 4)
REPORTED = (0.02, 0.05, 0.10)
POWER = 0.9
TCPD = REPO.parent / "shared" / "changepoint-data" / "tcpd"


# --------------------------------------------------------------------------- noise scenarios


@dataclass(frozen=True)
class Scenario:
    """A noise model: per-metric multiplicative noise plus an optional per-column shared factor."""

    name: str
    sample: Sampler
    shared_cv: float = 0.0
    note: str = ""


def lognormal(cv: float) -> Sampler:
    def sample(rng: np.random.Generator, c: int, k: int, n: int, m: int) -> tuple[Array, Array]:
        return (np.exp(rng.normal(0, cv, (c, k, n))), np.exp(rng.normal(0, cv, (c, k, m))))

    return sample


def with_outliers(cv: float, rate: float = 0.05) -> Sampler:
    """Log-normal plus slow outliers: with probability ``rate`` a value is 10–50 % slower."""
    base_sampler = lognormal(cv)

    def sample(rng: np.random.Generator, c: int, k: int, n: int, m: int) -> tuple[Array, Array]:
        out = []
        for values in base_sampler(rng, c, k, n, m):
            hit = rng.random(values.shape) < rate
            out.append(values * np.where(hit, 1 + rng.uniform(0.1, 0.5, values.shape), 1.0))
        return out[0], out[1]

    return sample


def bimodal(cv: float, p: float = 0.2, jump: float = 0.08) -> Sampler:
    """Autotuner-like: with probability ``p`` a run/repeat lands in a mode ``jump`` slower."""
    base_sampler = lognormal(cv)

    def sample(rng: np.random.Generator, c: int, k: int, n: int, m: int) -> tuple[Array, Array]:
        out = []
        for values in base_sampler(rng, c, k, n, m):
            out.append(values * np.where(rng.random(values.shape) < p, 1 + jump, 1.0))
        return out[0], out[1]

    return sample


def real_windows(n: int, m: int) -> tuple[Array, Array]:
    """Windows of ``n + m`` consecutive points from TCPD stretches without a labelled change."""
    annotations = json.loads((TCPD / "annotations.json").read_text())
    windows: list[Array] = []
    weights: list[float] = []
    for path in sorted(TCPD.glob("datasets/*/*.json")):
        doc = json.loads(path.read_text())
        raw = doc["series"][0]["raw"] if doc.get("n_dim") == 1 else None
        if not raw or any(v is None or v <= 0 for v in raw):
            continue
        found = _stretch_windows(np.asarray(raw, float), annotations.get(doc["name"], {}), n + m)
        if not found:
            continue
        windows.extend(found)
        weights.extend([1.0 / len(found)] * len(found))
    pool = np.stack(windows)
    pool /= np.median(pool[:, :n], axis=1, keepdims=True)
    return pool, np.asarray(weights) / sum(weights)


def _stretch_windows(series: Array, labels: dict[str, list[int]], width: int) -> list[Array]:
    cuts = sorted({0, len(series), *(c for v in labels.values() for c in v)})
    out = []
    for start, stop in itertools.pairwise(cuts):
        out.extend(series[i : i + width] for i in range(start, stop - width + 1))
    return out


def real_sampler(n: int, m: int) -> Sampler:
    pool, weights = real_windows(n, m)

    def sample(rng: np.random.Generator, c: int, k: int, n_: int, m_: int) -> tuple[Array, Array]:
        picked = pool[rng.choice(len(pool), size=(c, k), p=weights)]
        return picked[..., :n_], picked[..., n_ : n_ + m_]

    return sample


def scenarios(n: int, m: int) -> list[Scenario]:
    found = [
        Scenario("lognormal-0.5%", lognormal(0.005)),
        Scenario("lognormal-2%", lognormal(0.02), note="the target scenario"),
        Scenario("lognormal-5%", lognormal(0.05)),
        Scenario("outliers-2%", with_outliers(0.02), note="5 % of values 10–50 % slower"),
        Scenario("bimodal-2%", bimodal(0.02), note="20 % of values in a mode 8 % slower"),
        Scenario(
            "shared-factor",
            lognormal(0.015),
            shared_cv=0.015,
            note="1.5 % per metric + 1.5 % shared by all metrics of a repeat",
        ),
    ]
    if TCPD.is_dir():
        found.append(
            Scenario(
                "real-tcpd", real_sampler(n, m), note="TCPD windows between labelled change points"
            )
        )
    return found


# --------------------------------------------------------------------------- peer detectors
# Each takes baseline (…, n) and candidate (…, m) raw values, most recent baseline run last,
# and returns True where it would raise a *regression* (slower) alarm.


def conbench_z(base: Array, cand: Array) -> NDArray[np.bool_]:
    """Conbench lookback z-score: (contender − history mean) / history sd > 5, ≤ 100 commits."""
    hist = base[..., -100:]
    z = (cand.mean(-1) - hist.mean(-1)) / hist.std(-1, ddof=1)
    return np.asarray(z > 5.0)


def conbench_pairwise(base: Array, cand: Array) -> NDArray[np.bool_]:
    """Conbench pairwise percent change against the baseline commit's result > 5 %."""
    return np.asarray(cand.mean(-1) / base[..., -1] - 1 > 0.05)


def bencher_t(base: Array, cand: Array) -> NDArray[np.bool_]:
    """Bencher t-test threshold: last 64 values, upper boundary 0.99 (mean + t₀.₉₉,ₙ₋₁ · sd)."""
    hist = base[..., -64:]
    dof = hist.shape[-1] - 1
    limit = hist.mean(-1) + stats.t.ppf(0.99, dof) * hist.std(-1, ddof=1)
    return np.asarray(cand.mean(-1) > limit)


def asv_compare(base: Array, cand: Array) -> NDArray[np.bool_]:
    """asv compare: median ratio > factor 1.1 and Mann–Whitney U p < 0.002 (two-sided)."""
    shape = base.shape[:-1]
    b2, c2 = base.reshape(-1, base.shape[-1]), cand.reshape(-1, cand.shape[-1])
    ratio = np.median(c2, -1) / np.median(b2, -1)
    p = np.ones(len(b2))
    big = ratio > 1.1  # asv only asks the test when the factor is exceeded
    if big.any():
        p[big] = stats.mannwhitneyu(c2[big], b2[big], axis=-1, method="auto").pvalue
    return (big & (p < 0.002)).reshape(shape)


def github_action_benchmark(base: Array, cand: Array) -> NDArray[np.bool_]:
    """github-action-benchmark: current / previous > alert-threshold 200 %."""
    return np.asarray(cand.mean(-1) / base[..., -1] > 2.0)


def codspeed(base: Array, cand: Array) -> NDArray[np.bool_]:
    """CodSpeed: change against the base run > 10 % regression threshold."""
    return np.asarray(cand.mean(-1) / base[..., -1] - 1 > 0.10)


def rustc_perf(base: Array, cand: Array) -> NDArray[np.bool_]:
    """rustc-perf: change vs parent > Q3 + 3·IQR of |relative changes| over the last 30 commits."""
    hist = base[..., -30:]
    deltas = np.sort(np.abs(hist[..., 1:] / hist[..., :-1] - 1), axis=-1)
    half = deltas.shape[-1] // 2
    q1 = np.median(deltas[..., :half], axis=-1)
    q3 = np.median(deltas[..., -half:], axis=-1)
    return np.asarray(cand.mean(-1) / base[..., -1] - 1 > q3 + 3 * (q3 - q1))


PEERS: dict[str, Callable[[Array, Array], NDArray[np.bool_]]] = {
    "Conbench z-score (>5, 100 commits)": conbench_z,
    "Conbench pairwise (5 %)": conbench_pairwise,
    "Bencher t-test (64, 0.99)": bencher_t,
    "asv (×1.1 and MWU p<0.002)": asv_compare,
    "github-action-benchmark (200 %)": github_action_benchmark,
    "CodSpeed (10 %)": codspeed,
    "rustc-perf (IQR fence, 30)": rustc_perf,
}


# --------------------------------------------------------------------------- perfci variants


@dataclass(frozen=True)
class Variant:
    name: str
    options: CompareOptions


VARIANTS = (
    Variant(
        "perfci compare_run() default (Student t + MWU guard, shared factor removed)",
        CompareOptions(remove_shared_factor=True),
    ),
    Variant(
        "perfci compare() default (no factor removal)", CompareOptions(remove_shared_factor=False)
    ),
    Variant(
        "perfci, FDR alpha 0.01 (fewer alarms)",
        CompareOptions(remove_shared_factor=True, alpha=0.01),
    ),
    # Lower FDR levels, to compare with the quieter peers at an equal false-alarm rate.
    Variant("perfci, FDR alpha 0.02", CompareOptions(remove_shared_factor=True, alpha=0.02)),
    Variant(
        "perfci, FDR alpha 0.001 (quiet)", CompareOptions(remove_shared_factor=True, alpha=0.001)
    ),
    Variant(
        "perfci, FDR alpha 0.0001 (silent)", CompareOptions(remove_shared_factor=True, alpha=0.0001)
    ),
    Variant("perfci, MWU guard 0.01", CompareOptions(rank_guard=0.01)),
    Variant("perfci, Student t on logs (no guard)", CompareOptions(method="student")),
    Variant("perfci, Welch t on logs", CompareOptions(method="welch")),
    Variant("perfci, Mann–Whitney + HL", CompareOptions(method="mannwhitney")),
)


@dataclass
class NullState:
    """A chunk of null comparisons as perfci saw them: p-values and the removed column shifts."""

    p_value: Array
    base_shift: Array
    cand_shift: Array


def perfci_null(base: Array, cand: Array, options: CompareOptions) -> tuple[Array, NullState]:
    """Regression alarms (c, k) of perfci on null comparisons, and state reused for power."""
    c, k, n = base.shape
    m = cand.shape[-1]
    bl, cl = pstats.safe_log(base), pstats.safe_log(cand)
    base_shift, cand_shift = np.zeros((c, n)), np.zeros((c, m))
    if options.remove_shared_factor:
        factor = noise.estimate_shared_factor(bl, cl)
        assert factor is not None
        base_shift, cand_shift = factor.baseline, factor.candidate
        bl, cl = bl - base_shift[:, None, :], cl - cand_shift[:, None, :]
    result = shift_test(bl.reshape(c * k, n), cl.reshape(c * k, m), options)
    p = result.p_value.reshape(c, k)
    alarms = _regressions(result, pstats.benjamini_hochberg(p).reshape(-1), options)
    return alarms.reshape(c, k), NullState(p, base_shift, cand_shift)


def perfci_changed(
    base: Array, cand: Array, state: NullState, options: CompareOptions
) -> NDArray[np.bool_]:
    """Alarms on one changed metric per comparison, BH-adjusted with that comparison's nulls."""
    bl = pstats.safe_log(base) - state.base_shift
    cl = pstats.safe_log(cand) - state.cand_shift
    result = shift_test(bl, cl, options)
    family = np.concatenate([state.p_value[:, 1:], result.p_value[:, None]], axis=1)
    q = pstats.benjamini_hochberg(family)[:, -1]
    return _regressions(result, q, options)


def _regressions(result: pstats.ShiftTest, q: Array, options: CompareOptions) -> NDArray[np.bool_]:
    change, low, high = (np.expm1(a) for a in (result.estimate, result.ci_low, result.ci_high))
    verdict = decide(change, low, high, q, np.zeros(len(q), bool), options)
    return np.asarray(verdict == "regression")


# --------------------------------------------------------------------------- the experiment


@dataclass
class Tally:
    """Alarm counts of one detector in one scenario."""

    false_alarms: float = 0.0
    comparisons: int = 0
    hits: Array = field(default_factory=lambda: np.zeros(len(EFFECTS)))
    trials: int = 0

    @property
    def false_alarm_rate(self) -> float:
        return self.false_alarms / max(self.comparisons, 1)

    @property
    def power(self) -> Array:
        return self.hits / max(self.trials, 1)


def run_scenario(
    scenario: Scenario, args: argparse.Namespace, rng: np.random.Generator
) -> tuple[dict[str, Tally], float]:
    """Simulate the scenario in chunks; returns tallies per detector and the noise CV (log sd)."""
    names = [v.name for v in VARIANTS] + list(PEERS)
    tallies = {name: Tally() for name in names}
    sds = []
    n, m, k = args.baseline, args.repeats, args.metrics
    for start in range(0, args.comparisons, args.chunk):
        c = min(args.chunk, args.comparisons - start)
        col_b, col_c = _column_factors(rng, scenario.shared_cv, c, n, m)
        base, cand = scenario.sample(rng, c, k, n, m)
        base, cand = base * col_b[:, None, :], cand * col_c[:, None, :]
        sds.append(np.std(np.log(base), axis=-1, ddof=1).mean())
        states = _tally_nulls(tallies, base, cand)
        _tally_power(tallies, states, scenario, rng, (c, n, m), (col_b, col_c))
    return tallies, float(np.mean(sds))


def _column_factors(
    rng: np.random.Generator, cv: float, c: int, n: int, m: int
) -> tuple[Array, Array]:
    return np.exp(rng.normal(0, cv, (c, n))), np.exp(rng.normal(0, cv, (c, m)))


def _tally_nulls(tallies: dict[str, Tally], base: Array, cand: Array) -> dict[str, NullState]:
    states = {}
    for variant in VARIANTS:
        alarms, states[variant.name] = perfci_null(base, cand, variant.options)
        _add_nulls(tallies[variant.name], alarms)
    for name, detector in PEERS.items():
        _add_nulls(tallies[name], detector(base, cand))
    return states


def _add_nulls(tally: Tally, alarms: NDArray[np.bool_]) -> None:
    tally.false_alarms += float(alarms.sum())
    tally.comparisons += alarms.shape[0]


def _tally_power(
    tallies: dict[str, Tally],
    states: dict[str, NullState],
    scenario: Scenario,
    rng: np.random.Generator,
    shape: tuple[int, int, int],
    columns: tuple[Array, Array],
) -> None:
    c, n, m = shape
    for index, effect in enumerate(EFFECTS):
        base, cand = scenario.sample(rng, c, 1, n, m)
        base = base[:, 0, :] * columns[0]
        cand = cand[:, 0, :] * columns[1] * (1 + effect)
        for variant in VARIANTS:
            hits = perfci_changed(base, cand, states[variant.name], variant.options)
            tallies[variant.name].hits[index] += hits.sum()
        for name, detector in PEERS.items():
            tallies[name].hits[index] += detector(base, cand).sum()
    for tally in tallies.values():
        tally.trials += c


def mde(power: Array) -> float:
    """Smallest effect with power ≥ 90 %, linearly interpolated on the grid (inf if none)."""
    above = np.flatnonzero(power >= POWER)
    if len(above) == 0:
        return math.inf
    i = above[0]
    if i == 0:
        return float(EFFECTS[0])
    x0, x1, y0, y1 = EFFECTS[i - 1], EFFECTS[i], power[i - 1], power[i]
    return float(x0 + (POWER - y0) * (x1 - x0) / (y1 - y0))


def theory(cv: float, args: argparse.Namespace, alpha: float) -> tuple[float, Array, float]:
    """MDE, power curve and false alarms of a one-sided z-test with known CV at level α₁.

    α₁ = alpha / (2 · metrics): perfci's per-metric one-sided level for a lone change (BH's
    first threshold, two-sided test); it also gives alpha/2 false alarms per comparison.
    """
    a1 = alpha / (2 * args.metrics)
    se = cv * math.sqrt(1 / args.baseline + 1 / args.repeats)
    z_a = stats.norm.ppf(1 - a1)
    limit = math.expm1((z_a + stats.norm.ppf(POWER)) * se)
    power = stats.norm.sf(z_a - np.log1p(EFFECTS) / se)
    return limit, power, a1 * args.metrics


# --------------------------------------------------------------------------- reporting


def _pct(value: float) -> str:
    return "> 20 %" if math.isinf(value) else f"{100 * value:.1f} %"


def scenario_table(
    scenario: Scenario, tallies: dict[str, Tally], cv: float, args: argparse.Namespace
) -> list[str]:
    limit, power, fa = theory(cv, args, CompareOptions().alpha)
    level = CompareOptions().alpha / (2 * args.metrics)
    idx = [int(np.argmin(np.abs(EFFECTS - e))) for e in REPORTED]
    lines = [
        f"#### {scenario.name} — {scenario.note or 'log-normal noise'} "
        f"(measured log-sd {100 * cv:.2f} %)",
        "",
        "| Detector | False alarms / comparison | Power +2 % | Power +5 % | Power +10 % "
        "| MDE @90 % |",
        "|---|---:|---:|---:|---:|---:|",
        f"| Theoretical limit (z, known CV, α₁={level:.0e})"
        f" | {fa:.3f} | " + " | ".join(f"{power[i]:.2f}" for i in idx) + f" | {_pct(limit)} |",
    ]
    for name, tally in tallies.items():
        p = tally.power
        lines.append(
            f"| {name} | {tally.false_alarm_rate:.3f} | "
            + " | ".join(f"{p[i]:.2f}" for i in idx)
            + f" | {_pct(mde(p))} |"
        )
    return [*lines, ""]


def target_check(tallies: dict[str, Tally], cv: float, args: argparse.Namespace) -> list[str]:
    """The issue's targets, evaluated on the lognormal-2% scenario."""
    limit = theory(cv, args, CompareOptions().alpha)[0]
    ours = tallies[VARIANTS[0].name]
    our_mde, our_fa = mde(ours.power), ours.false_alarm_rate
    lines = [
        "Targets (lognormal-2 %, 5 candidate repeats, 30 baseline runs):",
        "",
        f"- false alarms ≤ 0.05 per 500-metric comparison: {our_fa:.3f} → "
        f"{'met' if our_fa <= 0.05 else 'NOT met'}",
        f"- MDE within 1.3× the theoretical limit ({_pct(limit)}; 1.3× = {_pct(1.3 * limit)})"
        f": {_pct(our_mde)} = {our_mde / limit:.2f}× → "
        f"{'met' if our_mde <= 1.3 * limit else 'NOT met'}",
    ]
    for name in PEERS:
        peer = tallies[name]
        peer_mde = mde(peer.power)
        smaller = our_mde < peer_mde
        fa_ok = our_fa <= peer.false_alarm_rate
        lines.append(
            f"- vs {name}: MDE {_pct(our_mde)} vs {_pct(peer_mde)} "
            f"({'smaller' if smaller else 'NOT smaller'}), false alarms {our_fa:.3f} vs "
            f"{peer.false_alarm_rate:.3f} ({'equal or lower' if fa_ok else 'higher'})"
        )
    return [*lines, ""]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--comparisons",
        type=int,
        default=1000,
        help="null comparisons per scenario (also power trials per effect)",
    )
    parser.add_argument("--metrics", type=int, default=500, help="metrics per comparison")
    parser.add_argument("--baseline", type=int, default=30, help="baseline runs")
    parser.add_argument("--repeats", type=int, default=5, help="candidate repeats")
    parser.add_argument("--chunk", type=int, default=50, help="comparisons simulated at once")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--scenarios", nargs="*", help="names to run (default: all)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    out = [
        f"Command: `.venv/bin/python benchmarks/detection.py {' '.join(argv or sys.argv[1:])}`"
        f" — {args.comparisons} comparisons × {args.metrics} metrics per scenario, "
        f"{args.baseline} baseline runs, {args.repeats} candidate repeats, seed {args.seed}; "
        f"machine: {platform.machine()} {platform.processor() or ''} "
        f"Python {platform.python_version()}, numpy {np.__version__}.",
        "",
    ]
    for scenario in scenarios(args.baseline, args.repeats):
        if args.scenarios and scenario.name not in args.scenarios:
            continue
        t0 = time.perf_counter()
        tallies, cv = run_scenario(scenario, args, rng)
        out += scenario_table(scenario, tallies, cv, args)
        if scenario.name == "lognormal-2%":
            out += target_check(tallies, cv, args)
        print(f"[{scenario.name}: {time.perf_counter() - t0:.1f} s]", file=sys.stderr)
    out.append(f"Total wall time: {time.perf_counter() - started:.0f} s.")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
