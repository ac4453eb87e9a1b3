"""Verdicts that answer (issue 30): unchanged when nothing changed, the step judged with its
parts, a broad change that leaves the untouched lines alone, runs that are only ever left out
for being slower, and what an inconclusive run could have seen.

The worlds are simulated with fixed seeds (deterministic outcomes): a step that is what a
profiler measures, its kernels' time plus the host's gaps between them, which carry noise of
their own. The rates behind these behaviours are measured in ``benchmarks/answers.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from perfci.analysis import gating, moderation, pooling
from perfci.analysis.compare import compare_run
from perfci.analysis.estimate import MetricEstimate
from perfci.analysis.judge import judge_estimates
from perfci.core.model import MetricKind, RunComparison, SeriesKey, Verdict
from perfci.report.console import print_comparison
from perfci.report.markdown import render_comment

STEP = SeriesKey(MetricKind.STEP, "train_step")
KERNELS = [SeriesKey(MetricKind.KERNEL, f"kernel_{i}") for i in range(80)]
SHARES = np.array([0.9 * 0.95**i for i in range(len(KERNELS))])
SHARES = 0.95 * SHARES / SHARES.sum()
STEP_NS = 20e6

Baseline = dict[SeriesKey, list[list[float]]]
Candidate = dict[SeriesKey, list[float]]


def _run(
    rng: np.random.Generator,
    repeats: int,
    *,
    change: np.ndarray | None = None,
    gaps_change: float = 0.0,
    factor: float | None = None,
) -> np.ndarray:
    """One run: kernels with 2 % repeats, 1 % run levels and a 1.5 % machine factor; the
    step their sum plus 5 % of gaps with 5 % run noise of their own."""
    shared = rng.normal(0, 0.015) if factor is None else factor
    effect = np.zeros(len(KERNELS)) if change is None else change
    logs = (
        np.log(SHARES * STEP_NS)[:, None]
        + effect[:, None]
        + rng.normal(0, 0.01, (len(KERNELS), 1))
        + rng.normal(0, 0.02, (len(KERNELS), repeats))
        + shared
    )
    kernels = np.exp(logs)
    gaps = 0.05 * STEP_NS * math.exp(rng.normal(0, 0.05) + shared + gaps_change)
    gaps = gaps * np.exp(rng.normal(0, 0.02, repeats))
    return np.vstack([kernels.sum(axis=0) + gaps, kernels])


def _world(
    seed: int, *, change: np.ndarray | None = None, gaps_change: float = 0.0, runs: int = 30
) -> tuple[Baseline, Candidate]:
    rng = np.random.default_rng(seed)
    keys = [STEP, *KERNELS]
    history = [_run(rng, 5) for _ in range(runs)]
    cand = _run(rng, 5, change=change, gaps_change=gaps_change)
    baseline = {k: [run[i].tolist() for run in history] for i, k in enumerate(keys)}
    return baseline, {k: cand[i].tolist() for i, k in enumerate(keys)}


def _line(result: RunComparison, key: SeriesKey):  # type: ignore[no-untyped-def]
    return next(m for m in result.metrics if m.series == key)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_unchanged_code_is_called_unchanged(seed: int) -> None:
    """Before, the step's variance was moderated together with its kernels', each ten times
    noisier than their sum: its interval came out near ±2.4 % and almost every unchanged
    run was inconclusive."""
    result = compare_run(*_world(seed), benchmark="b")
    step = _line(result, STEP)
    assert step.verdict is Verdict.UNCHANGED
    assert result.verdict is Verdict.UNCHANGED
    assert result.margin == 0.02
    assert step.adjusted_ci_high - step.adjusted_ci_low < 0.02


def test_the_step_keeps_its_own_variance_only_when_many_runs_show_it_is_quieter() -> None:
    """The step takes no part in the moderation's prior and keeps its own variance when it
    lies far below the others' (thirty runs show a sum of kernels is quieter than any of
    them); with four runs nobody can tell a quiet step from a lucky one, and it is moderated
    towards the others."""
    rng = np.random.default_rng(11)
    for runs, kept in ((30, True), (4, False)):
        kernels = 0.014**2 * rng.chisquare(runs - 1, 200) / (runs - 1)
        s2 = np.append(kernels, 0.003**2)
        dof = np.full(s2.size, runs - 1.0)
        apart = np.zeros(s2.size, dtype=bool)
        apart[-1] = True
        post, post_dof = moderation.squeeze_variances(s2, dof, apart=apart)
        if kept:
            assert post[-1] == s2[-1] and post_dof[-1] == runs - 1
        else:
            assert post[-1] > 4 * s2[-1] and post_dof[-1] > runs - 1
        # The step takes no part in the prior: the kernels' posteriors are as without it.
        alone, _ = moderation.squeeze_variances(s2[:-1], dof[:-1])
        np.testing.assert_allclose(post[:-1], alone)


def test_a_change_of_the_gaps_alone_is_judged_on_the_step_s_own_numbers() -> None:
    """Pooling must never hide what the kernels do not show: the gaps between kernels take
    60 % longer (the step +3 %), every kernel unchanged."""
    result = compare_run(*_world(5, gaps_change=math.log(1.6)), benchmark="b")
    step = _line(result, STEP)
    assert step.verdict is Verdict.REGRESSION
    assert step.adjusted_change == pytest.approx(step.change, abs=0.015)
    assert any("moved apart from its GPU work" in n for n in result.notes)


def test_pooling_sharpens_the_step_when_its_parts_agree() -> None:
    baseline, candidate = _world(6)
    table_with = pooling.with_step_parts(baseline, candidate)
    assert pooling.parts_key(STEP) in table_with[0]
    result = compare_run(baseline, candidate, benchmark="b")
    step = _line(result, STEP)
    assert any("judged on its own change and its GPU work" in n for n in result.notes)
    # The pooled interval (tested) is narrower than the step's own plain one.
    assert step.adjusted_ci_high - step.adjusted_ci_low < 0.5 * (step.ci_high - step.ci_low)
    assert pooling.parts_key(STEP).key not in {m.key for m in result.metrics}


def test_half_the_kernels_slower_leaves_the_untouched_ones_alone() -> None:
    """A broad change's many discoveries used to loosen the bar (Benjamini–Hochberg) until
    untouched lines beside them were called regressions too."""
    n = len(KERNELS)
    moved = np.zeros(n, dtype=bool)
    moved[::2] = True
    change = np.where(moved, math.log(1.10), 0.0)
    for seed in (7, 8):
        result = compare_run(*_world(seed, change=change), benchmark="b")
        assert _line(result, STEP).verdict is Verdict.REGRESSION
        untouched = [_line(result, k).verdict for k, m in zip(KERNELS, moved, strict=True) if not m]
        assert Verdict.REGRESSION not in untouched
        assert Verdict.IMPROVEMENT not in untouched


def test_holm_does_not_let_many_discoveries_loosen_the_bar() -> None:
    """Fifty lines that moved far, and one untouched line at p ≈ 0.003: weighted BH calls it
    changed (its bar rises with the discoveries), weighted Holm keeps each line's own bar."""
    p = np.array([1e-12] * 50 + [0.003] + [0.5] * 49)
    estimate = np.ones(100)
    weights = np.ones(100)
    assert gating.directional_bh(p, estimate, weights)[50] <= 0.05
    assert gating.directional_holm(p, estimate, weights)[50] > 0.05
    held = gating.weighted_holm(np.array([0.001, 0.02, np.nan]), np.array([2.0, 1.0, 1.0]))
    assert held[0] == pytest.approx(0.001 / 2 * 3)  # first step: p / w · Σw
    assert held[1] == pytest.approx(0.02 / 1 * 1)  # the next: over the weight still untested
    assert math.isnan(held[2])


def test_judge_uses_holm_for_the_run() -> None:
    """Fifty lines 20 % slower, fifty untouched, and one untouched line 3.4 % up at 1.1 %
    noise (p ≈ 0.003 alone): the fifty discoveries must not carry it over the bar."""
    keys = [SeriesKey(MetricKind.KERNEL, f"k{i}") for i in range(101)]
    moved = [MetricEstimate(k, 1e6, 1.2e6, math.log(1.2), 0.01, 100.0, 30, 5) for k in keys[:50]]
    quiet = [MetricEstimate(k, 1e6, 1e6, 0.0, 0.01, 100.0, 30, 5) for k in keys[50:100]]
    odd = MetricEstimate(keys[100], 1e6, 1.034e6, math.log(1.034), 0.011, 100.0, 30, 5)
    result = judge_estimates([*moved, *quiet, odd], benchmark="b")
    verdicts = {m.key: m.verdict for m in result.metrics}
    assert all(verdicts[k.key] is Verdict.REGRESSION for k in keys[:50])
    assert verdicts[keys[100].key] is Verdict.INCONCLUSIVE


def test_a_run_faster_in_everything_is_kept_in_the_baseline() -> None:
    """Noise only adds time: three baseline runs 30 % faster in everything (the quiet days of
    a busy runner) are the truest level there is, and are kept. Before, they were dropped as
    "wrecked", and the slower rest set a level that the quieter runs fell under."""
    rng = np.random.default_rng(9)
    keys = [STEP, *KERNELS]
    history = [_run(rng, 5, factor=math.log(0.7) if j in (3, 11, 20) else 0.0) for j in range(30)]
    cand = _run(rng, 5, factor=0.0)
    baseline = {k: [run[i].tolist() for run in history] for i, k in enumerate(keys)}
    result = compare_run(baseline, {k: cand[i].tolist() for i, k in enumerate(keys)}, benchmark="b")
    assert sorted(result.baseline_runs_used) == list(range(30))
    assert not any("baseline runs left out" in n for n in result.notes)
    slower = [_run(rng, 5, factor=math.log(1.4) if j in (3, 11) else 0.0) for j in range(30)]
    baseline = {k: [run[i].tolist() for run in slower] for i, k in enumerate(keys)}
    result = compare_run(baseline, {k: cand[i].tolist() for i, k in enumerate(keys)}, benchmark="b")
    assert 3 not in result.baseline_runs_used and 11 not in result.baseline_runs_used


def test_an_inconclusive_step_says_what_the_run_could_have_seen() -> None:
    """Three baseline runs of a noisy step: the interval cannot settle ±2 %, and the answer
    states the smallest change the run could have detected and what would settle it."""
    baseline, candidate = _world(10, runs=3)
    result = compare_run(baseline, candidate, benchmark="b")
    step = _line(result, STEP)
    assert step.verdict is Verdict.INCONCLUSIVE
    assert step.detectable_change is not None and step.detectable_change > 0.02
    decided = [m for m in result.metrics if m.verdict is not Verdict.INCONCLUSIVE]
    assert all(m.detectable_change is None for m in decided)
    comment = render_comment(result)
    shown = f"{step.detectable_change * 100:.1f} %"
    assert "Inconclusive: its interval reaches past the ±2 % margin." in comment
    assert f"a change of ±{shown} or more would have been found" in comment
    assert "`perfci check --ab`" in comment


def test_the_terminal_states_the_answer_too() -> None:
    import io

    from rich.console import Console

    result = compare_run(*_world(1), benchmark="b")
    out = io.StringIO()
    print_comparison(result, Console(file=out, width=200, color_system=None))
    assert "Unchanged: its interval lies inside the ±2 % margin." in out.getvalue()
