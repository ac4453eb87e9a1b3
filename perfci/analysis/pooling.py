"""The step judged together with its parts: its own change pooled with its kernels'.

A step's time is its GPU work (kernels, copies, collectives) plus the host's gaps between
them. Its own run value carries every part's noise and the gaps'; the sum of its parts,
measured in the same repeats, carries the parts' noise alone. Where the two agree, each is an
estimate of the step's change, and their inverse-variance combination is sharper than either:
in ``benchmarks/step_bound.py``'s world (a step with noise of its own), half of the kernels
+10 % is found in 94.7 % of runs on the step alone and in 99.95 % pooled.

How, per comparison (:func:`pooled_step`):

1. The parts' total per repeat is added as a hidden series (:func:`with_step_parts`), so it is
   summarised, screened and aligned exactly as the step is, and split off again before
   anything is judged (:func:`split_parts`).
2. Both are taken beyond the run's machine factor. The parts' change becomes a change of the
   step by their share ``π`` of it: ``log(1 + π · (e^d − 1))`` (the gaps unchanged beyond the
   factor).
3. Their covariance is estimated from the baseline runs (the step contains its parts, so
   their errors are strongly correlated), and the pair is combined with the weights that
   minimise the variance of the combination (e.g. Hartung, Knapp & Sinha 2008, *Statistical
   Meta-Analysis with Applications*, §4: two correlated estimators of one quantity).
4. When the two disagree beyond their joint noise (a two-sided 1 % test of the difference),
   the gaps moved — a host-side slowdown, a new synchronisation — and the step is judged on
   its own numbers alone, so pooling never hides a change the kernels do not show.

The step itself is kept out of the other metrics' variance moderation (a sum of hundreds of
parts is far quieter than any of them; :func:`perfci.analysis.prediction.prediction`).
Without GPU parts (a CPU profile, whose operators nest inside one another and do not add up to
the step) the step is judged on its own.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np
from numpy.typing import NDArray

from perfci.analysis import prediction
from perfci.analysis.factor import MachineFactor
from perfci.analysis.runs import RunTable, runs_at, stacked_totals
from perfci.analysis.stats import norm_ppf
from perfci.analysis.steps import primary_step_in
from perfci.core.model import Device, MetricKind, SeriesKey

__all__ = [
    "PARTS_NAME",
    "PooledStep",
    "StepParts",
    "pool_primary_step",
    "pooled_step",
    "split_parts",
    "with_step_parts",
]

FloatArray = NDArray[np.float64]
Baseline = Mapping[SeriesKey, Sequence[Sequence[float]]]
Candidate = Mapping[SeriesKey, Sequence[float]]

#: The hidden series' name (never shown: it is split off before anything is judged).
PARTS_NAME = "\x00parts of the step"
#: The kinds of GPU time that make up a step's work.
_PARTS = frozenset({MetricKind.KERNEL, MetricKind.MEMORY, MetricKind.COMM})
#: Fewest parts for their total to say more than one part does.
_MIN_PARTS = 2
#: Fewest baseline runs with both the step and its parts for a covariance worth using.
_MIN_RUNS = 5
#: The step's own change and its parts' must agree at this two-sided level to be pooled.
_AGREEMENT_LEVEL = 0.01


@dataclass(frozen=True, slots=True)
class StepParts:
    """The parts' total of the primary step, split off the run table."""

    step: SeriesKey
    base: FloatArray  # log value per baseline run (NaN where absent)
    cand: float
    within_var: float
    base_repeats: FloatArray
    cand_repeats: float


@dataclass(frozen=True, slots=True)
class PooledStep:
    """The step's change beyond the run factor, pooled with its parts' (log scale)."""

    estimate: float
    se: float
    dof: float
    #: The weight on the step's own estimate (1 when the two disagreed and were not pooled).
    own_weight: float
    agreed: bool
    share: float


def with_step_parts(baseline: Baseline, candidate: Candidate) -> tuple[Baseline, Candidate]:
    """``baseline`` and ``candidate`` with a hidden series: each repeat's summed GPU work in
    the primary step's section. Unchanged when there is no step or fewer than two parts."""
    # Lazily: only the step series' values are read (10,000 series × 150 values otherwise).
    step = primary_step_in(
        {k: chain.from_iterable(runs) for k, runs in baseline.items() if k.is_time}
    )
    if step is None:
        return baseline, candidate
    parts = [
        k
        for k in dict.fromkeys([*baseline, *candidate])
        if k.kind in _PARTS and k.is_time and k.device is Device.GPU and k.section == step.section
    ]
    if len(parts) < _MIN_PARTS:
        return baseline, candidate
    key = parts_key(step)
    runs = max((len(v) for v in baseline.values()), default=0)
    base = dict(baseline)
    cand = dict(candidate)
    series = [baseline.get(k, ()) for k in parts]  # one lookup per key: hashing keys is slow
    base[key] = stacked_totals(series, runs) or [
        _total(runs_at(series, j, runs)) for j in range(runs)
    ]
    cand[key] = _total([candidate.get(k, ()) for k in parts])
    return base, cand


def parts_key(step: SeriesKey) -> SeriesKey:
    return SeriesKey(MetricKind.KERNEL, PARTS_NAME, device=Device.GPU, section=step.section)


def split_parts(table: RunTable) -> tuple[RunTable, StepParts | None]:
    """The table without the hidden parts row, and that row (``None`` when absent)."""
    rows = [i for i, k in enumerate(table.keys) if k.name == PARTS_NAME]
    if not rows:
        return table, None
    i = rows[0]
    keep = [j for j in range(len(table.keys)) if j != i]
    step = next(
        (k for k in table.keys if k.kind is MetricKind.STEP and k.section == table.keys[i].section),
        None,
    )
    found = None
    if step is not None and math.isfinite(float(table.cand[i])):
        found = StepParts(
            step=step,
            base=table.base[i].copy(),
            cand=float(table.cand[i]),
            within_var=float(table.within_var[i]),
            base_repeats=table.base_repeats[i].copy(),
            cand_repeats=float(table.cand_repeats[i]),
        )
    trimmed = dataclasses.replace(
        table,
        keys=[table.keys[j] for j in keep],
        base=table.base[keep],
        cand=table.cand[keep],
        within_var=table.within_var[keep],
        base_repeats=table.base_repeats[keep],
        cand_repeats=table.cand_repeats[keep],
        base_few=None if table.base_few is None else table.base_few[keep],
    )
    return trimmed, found


def pooled_step(
    step_base: FloatArray,
    step_cand: float,
    parts: StepParts,
    *,
    step_se: float,
    parts_se: float,
    factors: FloatArray | None,
    factor: float,
    factor_se: float,
    dof: float,
) -> PooledStep | None:
    """The step's change beyond the run factor, pooled with its parts' (see the module doc).

    ``step_base``/``parts.base`` are the baseline runs' log values, ``factors`` the baseline
    runs' machine factors (``None``: none taken out), ``factor``/``factor_se`` the
    candidate's; ``step_se``/``parts_se`` the two prediction standard errors on the basis
    beyond the baseline's factors. ``None`` when too few runs hold both.
    """
    both = np.isfinite(step_base) & np.isfinite(parts.base)
    k = int(both.sum())
    if k < _MIN_RUNS or not (step_se > 0 and parts_se > 0):
        return None
    shift = np.zeros(len(step_base)) if factors is None else factors
    s = step_base[both] - shift[both]
    p = parts.base[both] - shift[both]
    cov = float(np.cov(s, p, ddof=1)[0, 1]) * (1 + 1 / k)
    share = min(math.exp(float(np.mean(parts.base[both])) - float(np.mean(step_base[both]))), 1.0)
    own = step_cand - float(np.mean(s)) - factor
    raw = parts.cand - float(np.mean(p)) - factor
    from_parts = math.log1p(share * math.expm1(raw))
    slope = share * math.exp(raw) / (1 + share * math.expm1(raw))
    v_own = step_se**2 + factor_se**2
    v_parts = slope**2 * (parts_se**2 + factor_se**2)
    c = slope * (cov + factor_se**2)
    v_diff = v_own + v_parts - 2 * c
    if v_diff <= 0:
        return None
    agreed = abs(own - from_parts) <= norm_ppf(1 - _AGREEMENT_LEVEL / 2) * math.sqrt(v_diff)
    weight = min(max((v_parts - c) / v_diff, 0.0), 1.0) if agreed else 1.0
    estimate = weight * own + (1 - weight) * from_parts
    var = weight**2 * v_own + (1 - weight) ** 2 * v_parts + 2 * weight * (1 - weight) * c
    return PooledStep(
        estimate=estimate,
        se=math.sqrt(max(var, 0.0)),
        dof=dof,
        own_weight=weight,
        agreed=agreed,
        share=share,
    )


def _total(parts: Sequence[Sequence[float]]) -> list[float]:
    """Each repeat's sum over the parts present; ``[]`` unless every repeat has them all.

    A part missing from some repeat would make the total jump between repeats for no reason
    of the step's: such a run gives no total, and pooling leaves it out.
    """
    present = [p for p in parts if len(p)]
    if not present:
        return []
    repeats = len(present[0])
    if any(len(p) != repeats for p in present):
        return []
    # Summed part after part, in order: ``cumsum`` adds sequentially (``sum`` would add
    # pairwise for some shapes), so each total is the float Python's ``sum`` gives.
    return np.cumsum(np.array(present, dtype=np.float64), axis=0)[-1].tolist()  # type: ignore[no-any-return]


def pool_primary_step(
    table: RunTable,
    rows: list[int],
    parts: StepParts | None,
    basis: prediction.Basis,
    found: MachineFactor | None,
    factors: np.ndarray | None,
) -> tuple[int, PooledStep] | None:
    """The primary step's row (in ``rows``) and its change pooled with its parts', if any;
    a note in ``table.notes`` saying how it was judged.

    ``basis`` is the prediction the step was judged on (beyond the baseline runs' factors
    when ``found``, the candidate's factor, was estimated; then ``factors`` are those).
    """
    if parts is None:
        return None
    at = next((n for n, i in enumerate(rows) if table.keys[i] == parts.step), None)
    if at is None:
        return None
    shift = factors if found is not None and factors is not None else None
    base = parts.base[None, :] - (shift[None, :] if shift is not None else 0.0)
    own = prediction.prediction(
        base,
        np.array([parts.cand]),
        np.array([parts.within_var]),
        parts.base_repeats[None, :],
        np.array([parts.cand_repeats]),
        moderate=False,
    )
    i = rows[at]
    pooled = pooled_step(
        table.base[i],
        float(table.cand[i]),
        parts,
        step_se=float(basis.se[at]),
        parts_se=float(own.se[0]),
        factors=shift,
        factor=found.candidate if found is not None else 0.0,
        factor_se=found.se if found is not None else 0.0,
        dof=float(min(basis.dof[at], own.dof[0])),
    )
    if pooled is None:
        return None
    table.notes.append(_note(pooled, parts.step))
    return at, pooled


def _note(pooled: PooledStep, step: SeriesKey) -> str:
    if not pooled.agreed:
        return (
            f"{step.display_name} moved apart from its GPU work (the host's gaps between "
            "kernels changed, or a synchronisation): it is judged on its own numbers alone."
        )
    return (
        f"{step.display_name} is judged on its own change and its GPU work's together: "
        f"kernels, copies and collectives hold {pooled.share:.0%} of it, and "
        f"{pooled.own_weight:.0%} of the weight is on the step's own numbers (the column "
        "Beyond run factor)."
    ).replace("%", " %")
