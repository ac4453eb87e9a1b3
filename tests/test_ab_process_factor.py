"""Same-runner A/B on a runner whose speed varies from one process to the next.

Pairing cancels what both processes of a pair share, not what differs between them: on a
loaded VM one process of the example ran ±5 % faster or slower than the next in every operator
at once (``benchmarks/RESULTS.md``). :func:`compare_paired` estimates each process's factor
within its own side and judges operators beyond it; these tests pin what that may and may not do.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from perfci.analysis.engine import CompareOptions
from perfci.analysis.paired import compare_paired
from perfci.core.model import MetricKind, SeriesKey, Verdict

STEP = SeriesKey(kind=MetricKind.STEP, name="step")
OPS = [SeriesKey(kind=MetricKind.OP, name=f"aten::op_{i}") for i in range(40)]
DECIDED = (Verdict.REGRESSION, Verdict.IMPROVEMENT)


def process_run(
    changes: dict[int, float],
    *,
    pairs: int = 6,
    process_sd: float = 0.05,
    noise_sd: float = 0.01,
    seed: int = 0,
) -> tuple[dict[SeriesKey, list[float]], dict[SeriesKey, list[float]]]:
    """Base and PR values per pair: every process (each side of each pair) its own speed,
    shared by its metrics, plus noise per value; operator ``i`` of the PR × ``changes[i]``."""
    rng = np.random.default_rng(seed)
    levels = 1e5 * np.exp(rng.normal(0, 1.0, len(OPS)))
    sides = []
    for change in ({}, changes):
        speed = np.exp(rng.normal(0, process_sd, pairs))
        factor = np.array([change.get(i, 1.0) for i in range(len(OPS))])
        values = (levels * factor)[:, None] * speed[None, :]
        values = values * np.exp(rng.normal(0, noise_sd, values.shape))
        side = {key: values[i].tolist() for i, key in enumerate(OPS)}
        side[STEP] = values.sum(axis=0).tolist()
        sides.append(side)
    return sides[0], sides[1]


def lines(result: object) -> dict[str, object]:
    return {m.key: m for m in result.metrics}  # type: ignore[attr-defined]


def test_one_operator_6_percent_slower_is_found_beyond_the_processes_speed() -> None:
    base, pr = process_run({7: 1.06}, seed=1)
    result = compare_paired(base, pr, benchmark="b")
    changed = lines(result)[OPS[7].key]
    assert changed.verdict is Verdict.REGRESSION
    assert changed.adjusted_change == pytest.approx(0.06, abs=0.02)
    # The printed change stays the plain paired mean, checkable from the two values shown.
    diffs = np.log(pr[OPS[7]]) - np.log(base[OPS[7]])
    assert changed.change == pytest.approx(math.expm1(diffs.mean()))
    assert changed.candidate_median / changed.baseline_median - 1 == pytest.approx(changed.change)
    assert result.shared_factor is not None
    others = [m for m in result.metrics if m.key != OPS[7].key and m.verdict in DECIDED]
    assert others == []
    # The plain paired t on the same values sees the processes' ±5 % and cannot tell.
    plain = compare_paired(
        base, pr, benchmark="b", options=CompareOptions(remove_shared_factor=False)
    )
    assert lines(plain)[OPS[7].key].verdict is Verdict.INCONCLUSIVE
    assert plain.shared_factor is None


def test_an_operator_whose_own_numbers_went_down_is_not_called_a_regression() -> None:
    # Here the pull request's processes happened to run 5 % faster as a whole: beyond that,
    # the operator is 5 % slower, but its own numbers (the two values printed) went down.
    base, pr = process_run({7: 1.06}, seed=0)
    changed = lines(compare_paired(base, pr, benchmark="b"))[OPS[7].key]
    assert changed.change < 0 < 0.04 < changed.adjusted_change
    assert changed.verdict is Verdict.INCONCLUSIVE


def test_unchanged_code_on_a_wobbly_runner_calls_nothing_changed() -> None:
    for seed in range(5):
        base, pr = process_run({}, seed=seed)
        result = compare_paired(base, pr, benchmark="b")
        assert [m.key for m in result.metrics if m.verdict in DECIDED] == [], seed
        assert result.verdict not in DECIDED


def test_the_step_is_judged_on_its_own_numbers() -> None:
    base, pr = process_run({7: 1.06})
    step = lines(compare_paired(base, pr, benchmark="b"))[STEP.key]
    assert step.adjusted_change is None
    assert step.verdict is not Verdict.UNCHANGED or step.ci_high < 0.02


def test_half_the_operators_moved_is_not_taken_for_the_machine() -> None:
    moved = {i: 1.10 for i in range(0, len(OPS), 2)}
    base, pr = process_run(moved, process_sd=0.01, seed=2)
    result = compare_paired(base, pr, benchmark="b")
    assert result.shared_factor is None  # the metrics do not move together
    found = lines(result)
    assert all(found[OPS[i].key].verdict is Verdict.REGRESSION for i in moved)
    untouched = [found[k.key] for i, k in enumerate(OPS) if i not in moved]
    assert not [m for m in untouched if m.verdict is Verdict.IMPROVEMENT]
    assert found[STEP.key].verdict is Verdict.REGRESSION


@pytest.mark.parametrize("process_sd", [0.005, 0.01])
def test_everything_slower_beyond_the_processes_spread_is_the_code(process_sd: float) -> None:
    base, pr = process_run(dict.fromkeys(range(len(OPS)), 1.06), process_sd=process_sd)
    result = compare_paired(base, pr, benchmark="b")
    found = lines(result)
    # Judged on their own numbers: every operator and the step are regressions, none is
    # "unchanged beyond the factor"; the comment says why.
    assert all(found[k.key].verdict is Verdict.REGRESSION for k in [STEP, *OPS])
    assert all(found[k.key].adjusted_change is None for k in OPS)
    assert any("the code's doing" in note for note in result.notes)
