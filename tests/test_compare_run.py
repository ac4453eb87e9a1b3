"""compare_run: per-run summaries, gating, the run verdict, attribution and the shared factor."""

from __future__ import annotations

import math

import numpy as np
import pytest

from perfci.analysis.compare import CompareOptions, compare_run
from perfci.analysis.paired import compare_paired
from perfci.core.model import Device, MetricKind, SeriesKey, Verdict

STEP = SeriesKey(MetricKind.STEP, "train_step")
FWD_STEP = SeriesKey(MetricKind.STEP, "forward_step")
GEMM = SeriesKey(MetricKind.KERNEL, "ampere_sgemm_128x64_tn")
SOFTMAX = SeriesKey(MetricKind.KERNEL, "softmax<float>")
TINY = SeriesKey(MetricKind.KERNEL, "fill_kernel")
MEMCPY = SeriesKey(MetricKind.MEMORY, "memcpy HtoD")
FORWARD = SeriesKey(MetricKind.RANGE, "forward")
LAUNCH = SeriesKey(MetricKind.API, "cudaLaunchKernel")

# Per-step ns of a plausible step: gemm 60 %, softmax 20 %, memcpy 5 %, a 0.1 % fill kernel.
LEVELS = {
    STEP: 10e6,
    FWD_STEP: 4e6,
    GEMM: 6e6,
    SOFTMAX: 2e6,
    TINY: 1e4,
    MEMCPY: 5e5,
    FORWARD: 8e6,
    LAUNCH: 3e5,
}


Runs = tuple[dict[SeriesKey, list[list[float]]], dict[SeriesKey, list[float]]]


def _runs(
    rng: np.random.Generator, slow: dict[SeriesKey, float], runs: int = 30, repeats: int = 5
) -> Runs:
    baseline = {
        key: (level * np.exp(rng.normal(0, 0.01, (runs, 3)))).tolist()
        for key, level in LEVELS.items()
    }
    candidate = {
        key: (level * (1 + slow.get(key, 0.0)) * np.exp(rng.normal(0, 0.01, repeats))).tolist()
        for key, level in LEVELS.items()
    }
    return baseline, candidate


def test_a_slower_gemm_fails_the_run_and_explains_the_step_change() -> None:
    rng = np.random.default_rng(42)
    baseline, candidate = _runs(rng, {GEMM: 0.10, STEP: 0.06, FORWARD: 0.075})
    result = compare_run(baseline, candidate, benchmark="gpt-small")
    lines = {m.series: m for m in result.metrics}
    assert result.verdict is Verdict.REGRESSION and result.benchmark == "gpt-small"
    assert lines[GEMM].verdict is Verdict.REGRESSION and lines[GEMM].gated
    assert lines[STEP].verdict is Verdict.REGRESSION and lines[STEP].share_of_step == 1.0
    assert lines[GEMM].share_of_step == pytest.approx(
        lines[GEMM].baseline_median / lines[STEP].baseline_median
    )
    assert not lines[TINY].gated and not lines[LAUNCH].gated
    assert lines[SOFTMAX].verdict is Verdict.UNCHANGED
    top = result.contributions[0]
    step_delta = lines[STEP].candidate_median - lines[STEP].baseline_median
    assert top.series == GEMM
    assert top.delta_ns == pytest.approx(lines[GEMM].candidate_median - lines[GEMM].baseline_median)
    assert top.share == pytest.approx(top.delta_ns / step_delta)
    kinds = [c.series.kind for c in result.contributions if c.series]
    assert kinds.index(MetricKind.RANGE) > kinds.index(MetricKind.MEMORY)
    assert any("train_step" in note for note in result.notes)


def test_baseline_runs_are_summarised_by_their_median() -> None:
    baseline = {STEP: [[100.0, 101.0, 500.0], [99.0, 100.0, 100.0], [100.0, 102.0, 98.0]]}
    result = compare_run(baseline, {STEP: [100.0, 100.5]}, benchmark="b")
    [line] = result.metrics
    assert line.n_baseline == 3
    # Run values 101, 100, 100 (medians of three repeats: the 500 ns repeat is gone); the
    # baseline is their geometric mean, the basis the change is computed on.
    assert line.baseline_median == pytest.approx(math.exp(np.mean(np.log([101, 100, 100]))))
    assert line.change == pytest.approx(line.candidate_median / line.baseline_median - 1)


def test_an_unchanged_run_is_unchanged_and_no_history_is_no_baseline() -> None:
    rng = np.random.default_rng(1)
    baseline, candidate = _runs(rng, {}, repeats=10)
    result = compare_run(baseline, candidate, benchmark="b")
    assert result.verdict in {Verdict.UNCHANGED, Verdict.INCONCLUSIVE}
    assert not result.gated_regressions
    fresh = compare_run({}, candidate, benchmark="b")
    assert fresh.verdict is Verdict.NO_BASELINE
    assert {m.verdict for m in fresh.metrics} == {Verdict.NEW}


def test_a_first_run_names_its_step_and_never_says_it_has_none() -> None:
    # Issue 36: a first run (no baseline) said "No step time in these profiles" beside its
    # step row; the longest step series is its step by this run's values.
    _, candidate = _runs(np.random.default_rng(4), {}, repeats=3)
    fresh = compare_run({}, candidate, benchmark="b")
    assert fresh.verdict is Verdict.NO_BASELINE
    assert fresh.primary_step == STEP.key
    assert not any("No step time" in note for note in fresh.notes)
    assert any(note.startswith("Primary step: train_step") for note in fresh.notes)


@pytest.mark.parametrize(
    ("baseline", "candidate"),
    [({}, {STEP: []}), ({STEP: []}, {STEP: []}), ({STEP: [[]]}, {STEP: []})],
    ids=["no-history", "no-runs", "an-empty-run"],
)
def test_series_without_a_single_value_are_no_baseline_not_a_crash(
    baseline: dict[SeriesKey, list[list[float]]], candidate: dict[SeriesKey, list[float]]
) -> None:
    """Found by feeding compare_run odd shapes: with no value anywhere, summarising the runs
    reduced an empty matrix and raised a bare ValueError out of the public API."""
    result = compare_run(baseline, candidate, benchmark="b")
    assert result.verdict is Verdict.NO_BASELINE
    assert not result.gated_regressions


def test_primary_step_is_the_longest_step_series() -> None:
    rng = np.random.default_rng(3)
    baseline, candidate = _runs(rng, {FWD_STEP: 0.2})
    result = compare_run(baseline, candidate, benchmark="b")
    lines = {m.series: m for m in result.metrics}
    assert lines[FWD_STEP].verdict is Verdict.REGRESSION and lines[FWD_STEP].gated
    assert lines[FWD_STEP].share_of_step == pytest.approx(
        lines[FWD_STEP].baseline_median / lines[STEP].baseline_median
    )
    assert result.verdict is Verdict.REGRESSION


def test_shared_factor_becomes_its_own_gated_line() -> None:
    rng = np.random.default_rng(9)
    keys = [SeriesKey(MetricKind.KERNEL, f"k{i}") for i in range(40)]
    run_factor = np.exp(rng.normal(0, 0.01, (30, 1)))
    baseline = {
        k: (1e5 * run_factor * np.exp(rng.normal(0, 0.005, (30, 3)))).tolist() for k in keys
    }
    candidate = {k: (1.08e5 * np.exp(rng.normal(0, 0.005, 5))).tolist() for k in keys}
    result = compare_run(
        baseline,
        candidate,
        benchmark="b",
        options=CompareOptions(remove_shared_factor=True, gate_share=0.0),
    )
    assert result.shared_factor is not None and result.shared_factor.gated
    assert result.shared_factor.verdict is Verdict.REGRESSION
    assert result.shared_factor.change == pytest.approx(0.08, abs=0.02)
    assert result.verdict is Verdict.REGRESSION
    assert not result.regressions  # no kernel moved beyond the common shift


def test_cpu_only_profiles_say_their_contributors_overlap() -> None:
    rng = np.random.default_rng(5)
    op, rng_range = SeriesKey(MetricKind.OP, "aten::bmm"), SeriesKey(MetricKind.RANGE, "attn")
    levels = {STEP: 10e6, op: 4e6, rng_range: 6e6}
    baseline = {k: (v * np.exp(rng.normal(0, 0.01, (20, 3)))).tolist() for k, v in levels.items()}
    slow = {STEP: 1.2, op: 1.5, rng_range: 1.33}
    candidate = {
        k: (v * slow[k] * np.exp(rng.normal(0, 0.01, 5))).tolist() for k, v in levels.items()
    }
    result = compare_run(baseline, candidate, benchmark="cpu")
    assert result.contributions and result.contributions[0].series in (op, rng_range)
    assert any("no GPU kernels" in note for note in result.notes)
    assert not any("explain 0%" in note for note in result.notes)


def test_a_small_kernel_that_regressed_into_a_gated_share_fails_the_run() -> None:
    """1.5 % of the step, now ten times slower (15 %): gated, even when the step says nothing.

    The step is left unchanged here, as when its own interval is too wide to settle (a loaded
    runner); a tiny kernel five times slower but still under the gate share is reported only.
    """
    bmm, fill = SeriesKey(MetricKind.KERNEL, "bmm"), SeriesKey(MetricKind.KERNEL, "fill")
    rng = np.random.default_rng(8)
    baseline, candidate = _runs(rng, {})
    for key, level, factor in ((bmm, 1.5e5, 10.0), (fill, 1e4, 5.0)):
        baseline[key] = (level * np.exp(rng.normal(0, 0.01, (30, 3)))).tolist()
        candidate[key] = (level * factor * np.exp(rng.normal(0, 0.01, 5))).tolist()
    result = compare_run(baseline, candidate, benchmark="b")
    lines = {m.series: m for m in result.metrics}
    assert lines[bmm].verdict is Verdict.REGRESSION and lines[bmm].gated
    assert lines[bmm].share_of_step == pytest.approx(0.015, rel=0.05)  # the baseline's share
    assert lines[fill].verdict is Verdict.REGRESSION and not lines[fill].gated
    assert lines[STEP].verdict is Verdict.UNCHANGED
    assert result.verdict is Verdict.REGRESSION


def test_without_a_step_the_summed_gpu_work_stands_in_for_it() -> None:
    """nsys stats without NVTX steps, nvprof, Nsight Compute: kernels and copies, no step.

    Before, no kernel could reach the gate share of a step that was not there: a gemm 35 %
    slower, holding most of the GPU time, left the run "no baseline" and the check passed.
    """
    kernels = {key: LEVELS[key] for key in (GEMM, SOFTMAX, TINY, MEMCPY, LAUNCH)}
    work = LEVELS[GEMM] + LEVELS[SOFTMAX] + LEVELS[TINY] + LEVELS[MEMCPY]
    rng = np.random.default_rng(21)

    def runs(slow: dict[SeriesKey, float]) -> Runs:
        baseline, candidate = _runs(rng, slow)
        keep = set(kernels)
        return (
            {k: v for k, v in baseline.items() if k in keep},
            {k: v for k, v in candidate.items() if k in keep},
        )

    result = compare_run(*runs({GEMM: 0.35}), benchmark="kernels-only")
    lines = {m.series: m for m in result.metrics}
    assert result.verdict is Verdict.REGRESSION
    assert lines[GEMM].verdict is Verdict.REGRESSION and lines[GEMM].gated
    # Shares of the summed kernel and copy time; API calls are no part of it and never gate.
    assert lines[GEMM].share_of_step == pytest.approx(LEVELS[GEMM] / work, rel=0.02)
    assert lines[MEMCPY].gated and not lines[TINY].gated and not lines[LAUNCH].gated
    assert any("No step time in these profiles" in note for note in result.notes)

    unchanged = compare_run(*runs({}), benchmark="kernels-only")
    assert unchanged.verdict in (Verdict.UNCHANGED, Verdict.INCONCLUSIVE)


def test_the_work_step_is_each_repeats_sum_of_its_parts_in_order() -> None:
    """Each repeat's total, part after part (the floats of a plain loop); a part short of
    repeats adds its mean for the missing ones, and a part absent from a run adds nothing."""
    from perfci.analysis.work import WORK_NAME, with_work_step

    a, b, c = (SeriesKey(MetricKind.KERNEL, name, device=Device.GPU) for name in "abc")
    baseline = {a: [[0.1, 0.2], [1e16, 3.0]], b: [[0.2, 0.3], [1.0, 1.0]], c: [[5.0]]}
    candidate = {a: [0.1, 0.7, 0.3], b: [0.2, 0.1, 0.9], c: [1.0, 2.0]}
    base, cand, notes = with_work_step(baseline, candidate)
    work = SeriesKey(MetricKind.STEP, WORK_NAME, device=Device.GPU)
    # Run 0 has no c (aligned on the newest run); in run 1, c's one repeat fills in its mean.
    assert base[work] == [[0.1 + 0.2, 0.2 + 0.3], [1e16 + 1.0 + 5.0, 3.0 + 1.0 + 5.0]]
    assert base[work][0][0] == 0.30000000000000004  # 0.1 + 0.2, not a rounded 0.3
    # Part after part, as a loop adds them: (1e16 + 1) + 5, which differs from 1e16 + (1 + 5).
    assert base[work][1][0] == (1e16 + 1.0) + 5.0 != 1e16 + (1.0 + 5.0)
    assert cand[work] == [0.1 + 0.2 + 1.0, 0.7 + 0.1 + 2.0, 0.3 + 0.9 + 1.5]
    assert notes and WORK_NAME in notes[0]


def test_a_baseline_whose_parts_have_every_repeat_is_summed_in_order_too() -> None:
    """Every part in every run with equal repeats (a stored baseline) is summed as one array
    (issue 35), still part after part."""
    from perfci.analysis.work import WORK_NAME, with_work_step

    a, b, c = (SeriesKey(MetricKind.KERNEL, name, device=Device.GPU) for name in "abc")
    baseline = {
        a: [[1e16, 0.1], [2.0, 0.0]],
        b: [[1.0, 0.2], [2.0, 0.0]],
        c: [[5.0, 0.3], [2.0, 0.0]],
    }
    base, _, _ = with_work_step(baseline, {a: [1.0], b: [1.0], c: [1.0]})
    total = base[SeriesKey(MetricKind.STEP, WORK_NAME, device=Device.GPU)]
    assert total == [[(1e16 + 1.0) + 5.0, (0.1 + 0.2) + 0.3], [6.0, 0.0]]
    assert total[0][0] != 1e16 + (1.0 + 5.0) and total[0][1] != 0.1 + (0.2 + 0.3)
    assert all(isinstance(v, float) for run in total for v in run)


def test_a_cpu_profile_without_a_step_takes_its_longest_range_for_the_work() -> None:
    top, inner = SeriesKey(MetricKind.RANGE, "train"), SeriesKey(MetricKind.OP, "aten::addmm")
    rng = np.random.default_rng(5)
    baseline = {
        top: (1e7 * np.exp(rng.normal(0, 0.01, (20, 3)))).tolist(),
        inner: (4e6 * np.exp(rng.normal(0, 0.01, (20, 3)))).tolist(),
    }
    candidate = {
        top: (1.12e7 * np.exp(rng.normal(0, 0.01, 5))).tolist(),
        inner: (4e6 * 1.3 * np.exp(rng.normal(0, 0.01, 5))).tolist(),
    }
    lines = {m.series: m for m in compare_run(baseline, candidate, benchmark="cpu").metrics}
    # Nested: the operator's share is of the range that holds it, not of their sum.
    assert lines[inner].share_of_step == pytest.approx(0.4, rel=0.03)
    assert lines[inner].gated and lines[inner].verdict is Verdict.REGRESSION


def test_a_candidate_of_one_repeat_is_judged_as_one_draw_of_a_run() -> None:
    """One profile file (a harness's single JSON): the run-level prediction interval needs no
    more; until stop 26 it was always inconclusive, and a 35 % slower gemm passed."""
    rng = np.random.default_rng(13)
    baseline, candidate = _runs(rng, {GEMM: 0.35, STEP: 0.21}, repeats=1)
    result = compare_run(baseline, candidate, benchmark="one-file")
    lines = {m.series: m for m in result.metrics}
    assert lines[GEMM].n_candidate == 1
    assert lines[GEMM].verdict is Verdict.REGRESSION and lines[GEMM].repeats_needed is None
    assert result.verdict is Verdict.REGRESSION
    baseline, candidate = _runs(rng, {}, repeats=1)
    unchanged = compare_run(baseline, candidate, benchmark="one-file")
    assert unchanged.verdict is not Verdict.REGRESSION
    # Asking for two repeats, as before, leaves it undecided and says what would settle it.
    two = compare_run(
        baseline, candidate, benchmark="one-file", options=CompareOptions(min_candidate_repeats=2)
    )
    assert {m.repeats_needed for m in two.metrics} == {2}


def test_without_a_step_a_kernel_replaced_by_a_slower_one_fails_on_the_gpu_work() -> None:
    """A kernel replaced by a slower one under another name is a ``missing`` and a ``new``
    line: neither is tested. The GPU work step (their summed time) is, and explains it."""
    old, new = SeriesKey(MetricKind.KERNEL, "gemm_v1"), SeriesKey(MetricKind.KERNEL, "gemm_v2")
    rng = np.random.default_rng(17)
    others = {SOFTMAX: 2e6, MEMCPY: 5e5, TINY: 1e4}
    baseline = {
        key: (level * np.exp(rng.normal(0, 0.01, (20, 5)))).tolist()
        for key, level in {old: 6e6, **others}.items()
    }
    candidate = {
        key: (level * np.exp(rng.normal(0, 0.01, 5))).tolist()
        for key, level in {new: 8e6, **others}.items()
    }
    result = compare_run(baseline, candidate, benchmark="renamed")
    lines = {m.series.name: m for m in result.metrics if m.series is not None}
    work = lines["GPU work (kernels + copies + collectives)"]
    assert work.series is not None and work.series.kind is MetricKind.STEP
    assert work.verdict is Verdict.REGRESSION and work.gated
    assert work.change == pytest.approx(2e6 / 8.51e6, rel=0.05)
    assert lines["gemm_v1"].verdict is Verdict.MISSING and lines["gemm_v2"].verdict is Verdict.NEW
    assert result.verdict is Verdict.REGRESSION
    assert result.contributions and result.contributions[0].series == new
    assert any("the step line is GPU work" in note for note in result.notes)
    # A profile with its own step gets no such line.
    with_step = compare_run(*_runs(rng, {}), benchmark="b")
    assert all(m.series is None or "GPU work" not in m.series.name for m in with_step.metrics)


def test_same_runner_pairs_without_a_step_fail_on_the_gpu_work_too() -> None:
    """``perfci check --ab`` on profiles with no step: the same renamed, slower kernel."""
    old, new = SeriesKey(MetricKind.KERNEL, "gemm_v1"), SeriesKey(MetricKind.KERNEL, "gemm_v2")
    rng = np.random.default_rng(18)
    others = {SOFTMAX: 2e6, MEMCPY: 5e5, TINY: 1e4}
    pairs = 6
    base = {
        key: (level * np.exp(rng.normal(0, 0.01, pairs))).tolist()
        for key, level in {old: 6e6, **others}.items()
    }
    pr: dict[SeriesKey, list[float | None]] = {
        key: (level * np.exp(rng.normal(0, 0.01, pairs))).tolist()
        for key, level in {new: 8e6, **others}.items()
    }
    pr[MEMCPY][2] = None  # a copy absent from one process adds nothing to its total
    result = compare_paired(base, pr, benchmark="renamed")
    lines = {m.series.name: m for m in result.metrics if m.series is not None}
    work = lines["GPU work (kernels + copies + collectives)"]
    assert work.verdict is Verdict.REGRESSION and work.gated
    assert work.n_candidate == pairs
    assert work.change == pytest.approx(2e6 / 8.51e6, rel=0.1)
    assert result.verdict is Verdict.REGRESSION
    assert result.contributions and result.contributions[0].series == new
    assert any("each process's summed GPU time" in note for note in result.notes)
