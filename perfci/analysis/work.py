"""A step for profiles that have none: the summed time of their GPU work.

Many profiles hold no iteration (``nsys stats`` without NVTX steps, nvprof, Nsight Compute, a
DeepSpeed comm log). Without a step, nothing judges the run as a whole: a kernel replaced by a
slower one under another name is one ``missing`` and one ``new`` line, and no attribution says
what explains a change. So :func:`with_work_step` adds, per section, a ``step`` series named
:data:`WORK_NAME`: each repeat's summed kernel, copy and collective time on the GPU. It is the
primary step of such a comparison, judged, gated and explained like any other. Same-runner
A/B pairs get the same line per pair (:func:`with_paired_work_step`).

A part absent from a run adds nothing to it (the kernel did not run, or fell out of a table's
top rows, which is then noise of the total); a part with fewer repeats than the run's others
adds its mean for the missing ones.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from perfci.analysis.runs import runs_at, stacked_totals
from perfci.core.model import Device, MetricKind, SeriesKey

__all__ = ["WORK_NAME", "with_paired_work_step", "with_work_step"]

#: The added step's name.
WORK_NAME = "GPU work (kernels + copies + collectives)"
#: The kinds of GPU time that make up the work, one after another on a stream.
_PARTS = frozenset({MetricKind.KERNEL, MetricKind.MEMORY, MetricKind.COMM})
#: Fewest parts for a total to say more than its one part does.
_MIN_PARTS = 2

Baseline = Mapping[SeriesKey, Sequence[Sequence[float]]]
Candidate = Mapping[SeriesKey, Sequence[float]]
Pairs = Mapping[SeriesKey, Sequence[float | None]]


def with_work_step(
    baseline: Baseline, candidate: Candidate
) -> tuple[Baseline, Candidate, list[str]]:
    """``baseline`` and ``candidate`` with a work step per section when neither has a step;
    the notes saying so. Unchanged when any step series exists or the GPU work has fewer than
    two parts."""
    sections = _work_sections([*baseline, *candidate])
    if not sections:
        return baseline, candidate, []
    base = dict(baseline)
    cand = dict(candidate)
    runs = max((len(v) for v in baseline.values()), default=0)
    for work, found in sections.items():
        series = [baseline.get(k, ()) for k in found]
        base[work] = stacked_totals(series, runs) or [
            _total(runs_at(series, j, runs)) for j in range(runs)
        ]
        cand[work] = _total([candidate.get(k, ()) for k in found])
    return base, cand, [_NOTE.format(each="repeat")]


def with_paired_work_step(base: Pairs, pr: Pairs) -> tuple[Pairs, Pairs, list[str]]:
    """:func:`with_work_step` for same-runner A/B pairs (one value per pair, ``None`` where a
    part is absent): each pair's summed GPU time on either side."""
    sections = _work_sections([*base, *pr])
    if not sections:
        return base, pr, []
    base_out, pr_out = dict(base), dict(pr)
    pairs = max((len(v) for v in (*base.values(), *pr.values())), default=0)
    for work, found in sections.items():
        base_out[work] = [_pair_total(base, found, k) for k in range(pairs)]
        pr_out[work] = [_pair_total(pr, found, k) for k in range(pairs)]
    return base_out, pr_out, [_NOTE.format(each="process")]


_NOTE = (
    "No step time in these profiles: the step line is " + WORK_NAME + ", each {each}'s summed "
    "GPU time, so that a change of the whole (a kernel replaced by a slower one under another "
    "name) is judged and explained."
)


def _work_sections(keys: Sequence[SeriesKey]) -> dict[SeriesKey, list[SeriesKey]]:
    """Per section with at least two GPU time parts and no step: its work step's key and parts.
    Empty when any step series exists."""
    if any(k.kind is MetricKind.STEP for k in keys):
        return {}
    parts: dict[str, list[SeriesKey]] = {}
    for key in dict.fromkeys(keys):
        if key.kind in _PARTS and key.is_time and key.device is Device.GPU:
            parts.setdefault(key.section, []).append(key)
    return {
        SeriesKey(MetricKind.STEP, WORK_NAME, device=Device.GPU, section=section): found
        for section, found in parts.items()
        if len(found) >= _MIN_PARTS
    }


def _pair_total(side: Pairs, parts: Sequence[SeriesKey], k: int) -> float | None:
    """One process's sum over the parts it has (NaN and ``None`` absent); ``None`` if none."""
    present = [
        float(v)
        for key in parts
        if k < len(values := side.get(key, ())) and (v := values[k]) is not None and v == v
    ]
    return sum(present) if present else None


def _total(parts: Sequence[Sequence[float]]) -> list[float]:
    """Each repeat's sum over the parts present in the run; ``[]`` when none is."""
    present = [list(p) for p in parts if len(p)]
    if not present:
        return []
    repeats = max(len(p) for p in present)
    totals = [0.0] * repeats
    for values in present:
        filler = statistics.fmean(values)
        for i in range(repeats):
            totals[i] += values[i] if i < len(values) else filler
    return totals
