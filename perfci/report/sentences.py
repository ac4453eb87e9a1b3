"""What a comparison means, in the sentences every renderer prints: the verdicts counted, the
step's answer against the margin, what this run could not settle, the re-run hint and the
baseline in words. Numbers and ordering are ``formatting``'s."""

from __future__ import annotations

from collections.abc import Iterable

from perfci.core.model import MetricComparison, RunComparison, Verdict
from perfci.report.formatting import LABELS, counts, folded, host_side, pct, primary_step

_PLURALS = {
    Verdict.REGRESSION: "regressions",
    Verdict.IMPROVEMENT: "improvements",
    Verdict.INCONCLUSIVE: "inconclusive",
    Verdict.UNCHANGED: "unchanged",
    Verdict.NEW: "new",
    Verdict.MISSING: "missing",
    Verdict.NO_BASELINE: "no baseline",
}
_SINGULARS = {Verdict.REGRESSION: "regression", Verdict.IMPROVEMENT: "improvement"}


def counts_sentence(metrics: Iterable[MetricComparison]) -> str:
    """``2 regressions, 1 improvement, 40 unchanged, 9 inconclusive (7 not gating)``; on a
    GPU run, how many of the regressions and improvements are the CPU's times
    (``5 regressions (4 CPU-side)``)."""
    every = list(metrics)
    host = host_side(every)
    parts = []
    for verdict, count in counts(every).items():
        word = _SINGULARS.get(verdict, _PLURALS[verdict]) if count == 1 else _PLURALS[verdict]
        on_cpu = sum(1 for m in every if m.verdict is verdict and host(m))
        if verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT) and on_cpu:
            word += " (all CPU-side)" if on_cpu == count else f" ({on_cpu} CPU-side)"
        ungated = sum(1 for m in every if m.verdict is verdict and folded(m))
        if ungated:
            word += " (none gating)" if ungated == count else f" ({ungated} not gating)"
        parts.append(f"{count} {word}")
    return ", ".join(parts) if parts else "no metrics"


def margin_words(margin: float) -> str:
    """``0.02`` as ``±2 %``."""
    return f"±{margin * 100:g} %"


def step_answer(result: RunComparison) -> str | None:
    """What the step's verdict means against the margin, in one sentence.

    ``Unchanged: the interval lies inside the ±2 % margin.``; for an inconclusive step, the
    smallest change this run could have seen and what would settle it.
    """
    step = primary_step(result)
    margin = result.margin
    if step is None or margin is None or step.change is None:
        return None
    bound = margin_words(margin)
    if step.verdict is Verdict.UNCHANGED:
        return f"Unchanged: its interval lies inside the {bound} margin."
    if step.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT):
        way = "slower" if (step.adjusted_change or step.change) > 0 else "faster"
        return f"{LABELS[step.verdict].words.capitalize()}: {way} beyond the {bound} margin."
    if step.verdict is not Verdict.INCONCLUSIVE:
        return None
    seen = (
        f" At this run's noise, a change of ±{pct(step.detectable_change, signed=False)} or "
        "more would have been found (four times in five)."
        if step.detectable_change is not None
        else ""
    )
    settle = (
        f" About {step.repeats_needed} repeats would settle it"
        if step.repeats_needed
        else " More repeats alone would not settle it"
    )
    return (
        f"Inconclusive: its interval reaches past the {bound} margin.{seen}{settle}; "
        "a same-runner A/B (`perfci check --ab`) takes the runner's noise out."
    )


def unsettled_sentence(result: RunComparison) -> str | None:
    """Gated lines besides the step that this run could not settle, and what it could see."""
    step = primary_step(result)
    lines = [
        m
        for m in result.metrics
        if m.gated
        and m.verdict is Verdict.INCONCLUSIVE
        and (step is None or m.key != step.key)
        and m.detectable_change is not None
    ]
    if not lines or result.margin is None:
        return None
    low = min(m.detectable_change or 0.0 for m in lines)
    high = max(m.detectable_change or 0.0 for m in lines)
    seen = (
        pct(low, signed=False)
        if round(low, 3) == round(high, 3)
        else (f"{pct(low, signed=False)}–{pct(high, signed=False)}")
    )
    count = f"{len(lines)} gated line{'s' if len(lines) != 1 else ''}"
    return (
        f"{count} could not be settled to {margin_words(result.margin)} at this run's "
        f"noise: a change of ±{seen} or more on them would have been found (four times in "
        "five)."
    )


def rerun_hint(result: RunComparison) -> int | None:
    """The largest number of repeats an inconclusive gated metric asks for, if any.

    A line that asks for no more than one repeat beyond the ones it had gives no hint: that is
    what a busy host's lines ask of adaptive repeats (``load_guard``: one more, for a quiet
    one), and "re-run with about 16 repeats" after 15 is no advice (issue 36); the run's note
    says why those lines are open instead.
    """
    needed = [
        m.repeats_needed
        for m in result.metrics
        if m.gated
        and m.verdict is Verdict.INCONCLUSIVE
        and m.repeats_needed
        and m.repeats_needed > m.n_candidate + 1
    ]
    return max(needed) if needed else None


def rerun_sentence(result: RunComparison) -> str | None:
    """The re-run hint as a sentence (in repeats, or pairs for a same-runner A/B run)."""
    needed = rerun_hint(result)
    if needed is None:
        return None
    unit = "pairs" if is_ab(result) else "repeats"
    return f"Re-run with about {needed} {unit} to settle the inconclusive lines."


def is_ab(result: RunComparison) -> bool:
    """Whether ``result`` is a same-runner A/B comparison (``--ab``): its baseline is pairs."""
    return result.baseline is not None and result.baseline.pairs is not None


def baseline_words(result: RunComparison) -> str | None:
    """``4 runs of main`` or, for ``--ab``, ``A/B: 5 pairs against main``."""
    base = result.baseline
    if base is None:
        return None
    if base.pairs is not None:
        return f"A/B: {base.pairs} pair{'' if base.pairs == 1 else 's'} against {base.branch}"
    return f"{base.runs} run{'' if base.runs == 1 else 's'} of {base.branch}"
