"""Same-runner A/B comparison: base and pull request measured in alternating pairs.

``perfci check --ab`` runs the merge-base and the pull request one after the other on the same
runner, pair after pair. Whatever the machine does to both members of a pair (another card of
the same model, a noisy neighbour, a clock that drifts over the job) cancels in the pair's
difference, so the comparison is a paired one:

1. Per metric and pair ``k``, the difference of logs ``d_k = log(pr_k) − log(base_k)``; a pair
   where either side lacks the metric is dropped.
2. The change is the mean difference ``d̄`` with standard error ``s_d / √n`` and ``n − 1``
   degrees of freedom (the paired t-test), the variances ``s_d²`` moderated across the
   metrics of the run (:func:`perfci.analysis.moderation.squeeze_variances`, limma's
   empirical Bayes) so that five pairs still give usable intervals; from four pairs on, as
   fewer are too few for the prior's fit under heavy-tailed noise (see :func:`_moderate`).
3. The values shown are on the same basis: ``baseline`` is the geometric mean of the base
   side over the kept pairs and ``candidate = baseline · exp(d̄)``, so ``candidate / baseline
   − 1`` is exactly the printed change.
4. Pairing does not cancel what differs between the two processes of a pair: on a shared
   runner one process runs a few percent faster or slower than the next in every metric at
   once (±5 % between processes of the example on a loaded 2-core VM). With 20 or more time
   metrics complete in 3 or more pairs, each process's factor is estimated within its own
   side, where the code is the same in every process (:mod:`.paired_stats`), and taken out;
   what stays common to all metrics, the factor between the two sides, is estimated like
   history mode's run factor and judged as its own line. Operators, kernels and ranges are
   then also judged beyond it (its own interval is a fraction as wide). The step and other
   headline values are judged on their own numbers; so is everything when fewer than
   :data:`.paired_stats.MIN_MOVING_TOGETHER` of the metrics move with the factor (they do not move
   together: half of them changed, say), or when the factor itself moved beyond what the
   processes vary by (both sides ran here, alternately: that is the code's doing).
5. :func:`perfci.analysis.judge.judge_estimates` tests, adjusts (weighted Benjamini–Hochberg),
   applies the practical margin and gates, exactly as history mode does.

A kernel only on the base side and the one new kernel of its family on the pull request's
side are one renamed kernel (:mod:`perfci.analysis.renames`), compared as one metric.
Other metrics only on the pull request's side are ``new``, only on the base side ``missing``; a
metric with fewer than two complete pairs is ``inconclusive`` (two pairs needed). Values must
be finite and non-negative (``None`` or NaN mark a missing value); zeros are handled by
:func:`perfci.analysis.stats.safe_log`'s small offset.

References: Student (1908), *Biometrika* 6:1 (the paired t); Smyth (2004), *SAGMB* 3(1):3
(moderated variances); Kalibera & Jones (2013), "Rigorous benchmarking in reasonable time",
ISMM '13 (randomised, interleaved execution of the compared versions).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from perfci.analysis import stats
from perfci.analysis.engine import CompareOptions
from perfci.analysis.estimate import MetricEstimate
from perfci.analysis.factor import factor_notes
from perfci.analysis.gating import HEADLINE_KINDS
from perfci.analysis.judge import judge_estimates
from perfci.analysis.moderation import squeeze_variances
from perfci.analysis.paired_stats import (
    PairedStats,
    ProcessFactors,
    paired_stats,
    process_factors,
)
from perfci.analysis.renames import any_value, mark_renames, pair_renamed
from perfci.analysis.stats import FloatArray
from perfci.analysis.work import with_paired_work_step
from perfci.core.model import MetricComparison, RunComparison, SeriesKey, Verdict

__all__ = [
    "MAX_PAIRS_NEEDED",
    "MIN_MODERATED_DOF",
    "compare_paired",
    "pairs_needed",
]

#: More pairs than this are never suggested: the change is then too close to the margin for
#: any affordable number of pairs to settle it.
MAX_PAIRS_NEEDED = 200
#: Fewest degrees of freedom (pairs − 1) whose variance takes part in the moderation.
MIN_MODERATED_DOF = 3


def compare_paired(
    base: Mapping[SeriesKey, Sequence[float | None]],
    pr: Mapping[SeriesKey, Sequence[float | None]],
    *,
    benchmark: str,
    options: CompareOptions | None = None,
    notes: Sequence[str] = (),
) -> RunComparison:
    """Compare a pull request with its base from alternating same-runner pairs.

    Parameters
    ----------
    base, pr
        Per series, one value per pair (e.g. ns per step); index ``k`` of every list is pair
        ``k`` on both sides. ``None`` or NaN marks a pair where the metric is absent.
    benchmark
        Name copied into the result.
    options
        Thresholds; :class:`CompareOptions` defaults when ``None``. ``moderate`` switches the
        moderation of variances across metrics.
    notes
        Lines for the report, kept first.

    Returns
    -------
    RunComparison
        As :func:`perfci.analysis.compare.compare_run` returns it: verdicts, q-values, gating,
        the run verdict and the attribution of the step's change; ``n_baseline`` and
        ``n_candidate`` are the numbers of complete pairs; ``repeats_needed`` on an
        inconclusive line is the number of pairs that would settle it.
    """
    options = options or CompareOptions()
    base, renamed, rename_notes = pair_renamed(base, pr, any_value, any_value)
    base, pr, work_notes = with_paired_work_step(base, pr)
    notes = [*notes, *work_notes]
    keys = sorted({*base, *pr}, key=lambda k: k.key)
    found: dict[SeriesKey, PairedStats] = {}
    untested: list[MetricComparison] = []
    for key in keys:
        if key not in pr:
            untested.append(_untested(key, Verdict.MISSING, base[key], None))
        elif key not in base:
            untested.append(_untested(key, Verdict.NEW, None, pr[key]))
        else:
            paired = paired_stats(base[key], pr[key], key=key.key)
            if paired is None or paired.n < 2:
                untested.append(
                    _untested(
                        key,
                        Verdict.INCONCLUSIVE,
                        base[key],
                        pr[key],
                        pairs=0 if paired is None else paired.n,
                    )
                )
            else:
                found[key] = paired
    machine = process_factors(found, base, pr, options)

    def judge(*, beyond: bool) -> RunComparison:
        return judge_estimates(
            _estimates(found, options, machine, beyond=beyond),
            benchmark=benchmark,
            options=options,
            notes=notes,
            untested=untested,
            factor=machine.factor.to_estimate()
            if machine is not None and machine.factor is not None and beyond
            else None,
        )

    result = judge(beyond=True)
    line = result.shared_factor
    if machine is not None and line is not None:
        if line.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT):
            # Both sides ran here, alternately: every metric moving together beyond what
            # the runner's processes vary by is the code's doing. Each metric is judged on
            # its own numbers.
            result = judge(beyond=False)
        result.notes.extend(factor_notes(line, machine.factor))
    mark_renames(result, renamed, rename_notes)
    return result


def _estimates(
    found: Mapping[SeriesKey, PairedStats],
    options: CompareOptions,
    machine: ProcessFactors | None = None,
    *,
    beyond: bool = False,
) -> list[MetricEstimate]:
    """One estimate per metric with at least two pairs, variances moderated together.

    With ``machine``, a metric it covers has its variance in two parts: its own (residual,
    moderated across those metrics) and the part every metric shares (the processes' factor
    difference, ``pairs − 1`` degrees of freedom), combined with Satterthwaite's degrees of
    freedom. Moderating the plain variances instead would treat that shared part as known
    from every metric when it is known from the pairs only, and overstate the confidence.
    With ``beyond`` and a factor line, operators, kernels and ranges are also judged beyond
    the factor: their change less it, on their own variance.
    """
    if not found:
        return []
    rows = list(found.values())
    var = np.array([r.var for r in rows], dtype=np.float64)
    dof = np.array([r.n - 1 for r in rows], dtype=np.float64)
    if options.moderate:
        var, dof = _moderate(var, dof)
    own: dict[SeriesKey, tuple[float, float]] = {}
    if machine is not None:
        keys = list(machine.residual_var)
        r_var = np.array([machine.residual_var[k] for k in keys], dtype=np.float64)
        r_dof = np.array([found[k].n - 1 for k in keys], dtype=np.float64)
        if options.moderate:
            r_var, r_dof = _moderate(r_var, r_dof)
        own = dict(zip(keys, zip(r_var.tolist(), r_dof.tolist(), strict=True), strict=True))
    factor = machine.factor if machine is not None and beyond else None
    margin = math.log1p(options.delta)
    z = stats.norm_ppf(0.5 + options.confidence / 2)
    out = []
    for (key, row), s2, d in zip(found.items(), var.tolist(), dof.tolist(), strict=True):
        baseline = math.exp(row.log_base)
        extra: dict[str, float | None] = {}
        tested, tested_var = row.mean, s2  # what the pairs-needed plan is for
        if machine is not None and key in own:
            r2, r_d = own[key]
            s2, d = _satterthwaite(machine.common_var, machine.pairs - 1, r2, r_d)
            tested_var = s2
            if factor is not None and key.kind not in HEADLINE_KINDS:
                tested, tested_var = row.mean - factor.change, r2
                extra = {
                    "adjusted_log_change": tested,
                    "adjusted_se": math.sqrt(r2 / row.n + factor.se**2),
                    "adjusted_dof": r_d,
                }
        out.append(
            MetricEstimate(
                series=key,
                baseline=baseline,
                candidate=baseline * math.exp(row.mean),
                log_change=row.mean,
                se=math.sqrt(s2 / row.n),
                dof=d,
                n_baseline=row.n,
                n_candidate=row.n,
                repeats_needed=pairs_needed(tested, tested_var, row.n, margin=margin, z=z),
                adjusted_log_change=extra.get("adjusted_log_change"),
                adjusted_se=extra.get("adjusted_se"),
                adjusted_dof=extra.get("adjusted_dof"),
            )
        )
    return out


def _satterthwaite(v1: float, d1: float, v2: float, d2: float) -> tuple[float, float]:
    """The sum of two independent variance estimates and its Welch–Satterthwaite dof."""
    total = v1 + v2
    denominator = (v1**2 / d1 if d1 > 0 else 0.0) + (v2**2 / d2 if d2 > 0 else 0.0)
    return total, (total**2 / denominator if denominator > 0 else max(d1, d2))


def _moderate(var: FloatArray, dof: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Moderated variances of the metrics with at least :data:`MIN_MODERATED_DOF` dof.

    Variances from two or three pairs are too skewed for the prior's fit when the noise has
    heavy tails (a loaded runner's): with t(3) noise on 13 metrics, moderating them gave
    10.6 % and 8 % unchanged runs with a false verdict at alpha 5 %, against 2.6 % and 3 %
    for their plain paired t; from four pairs on, moderated, 4.7 % (1,000 runs each). Metrics
    with fewer pairs keep their own variance and degrees of freedom.
    """
    rows = dof >= MIN_MODERATED_DOF
    if not rows.any():
        return var, dof
    var, dof = var.copy(), dof.copy()
    var[rows], dof[rows] = squeeze_variances(var[rows], dof[rows])
    return var, dof


def pairs_needed(mean: float, var: float, n: int, *, margin: float, z: float) -> int | None:
    """Pairs that would make the interval narrow enough to settle the verdict.

    The target half-width is the distance from the estimate to the margin ``log(1 + δ)``, at
    least half the margin (the same target history mode uses); ``None`` when more than
    :data:`MAX_PAIRS_NEEDED` pairs would be needed. Always more than the ``n`` already run.
    """
    width = max(abs(abs(mean) - margin), margin / 2)
    if var <= 0:
        return n + 1
    needed = math.ceil(var * (z / width) ** 2)
    if not math.isfinite(needed) or needed > MAX_PAIRS_NEEDED:
        return None
    return max(needed, n + 1)


def _untested(
    key: SeriesKey,
    verdict: Verdict,
    base: Sequence[float | None] | None,
    pr: Sequence[float | None] | None,
    *,
    pairs: int = 0,
) -> MetricComparison:
    """A line decided without a test: new, missing, or too few complete pairs."""
    return MetricComparison(
        key=key.key,
        verdict=verdict,
        baseline_median=_median(base),
        candidate_median=_median(pr),
        n_baseline=pairs if base is not None and pr is not None else _count(base),
        n_candidate=pairs if base is not None and pr is not None else _count(pr),
        series=key,
        repeats_needed=2 if verdict is Verdict.INCONCLUSIVE else None,
    )


def _count(values: Sequence[float | None] | None) -> int:
    return 0 if values is None else sum(1 for v in values if v is not None and v == v)


def _median(values: Sequence[float | None] | None) -> float | None:
    present = [float(v) for v in values or () if v is not None and v == v]
    return float(np.median(present)) if present else None
