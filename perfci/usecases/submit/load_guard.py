"""What the host's load leaves undecided: lines a neighbour's load could have moved.

A neighbour's load slows some metrics far more than others (a loaded 2-core runner made the
example's large operators 40–140 % slower and its small ones no slower), so neither the run
factor nor the metrics themselves can tell it from a change of the code. Two cases:

- **Every candidate repeat ran on a busy host** and its step moved (issue 12): the lines that
  moved are inconclusive, not regressions or improvements, and each needs one more repeat,
  so adaptive repeats keep going for a quiet one.
- **The candidate's load lay outside what the baseline runs saw** (issue 30): a baseline built
  on a busy runner and a pull request run on a quiet one read as a speed-up of everything the
  load touched (the example's step −59 … −75 % on unchanged code). The lines the difference
  can explain are inconclusive: what got faster on a quieter host, what got slower on a
  busier one. The other way round the load only hides a change, and the verdict stands. On
  a GPU run only the host's own times and the step can move with the host's load; the
  GPU's times keep their verdicts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from perfci.analysis.gating import gpu_run, host_timing
from perfci.analysis.judge import run_verdict
from perfci.core.model import MetricComparison, MetricKind, RunComparison, Verdict
from perfci.integrations.machine.judge import LoadShift

__all__ = ["undecided_on_a_busy_host", "undecided_on_a_load_change"]

_DECIDED = (Verdict.REGRESSION, Verdict.IMPROVEMENT)


def undecided_on_a_busy_host(result: RunComparison, words: str) -> None:
    """Every repeat ran on a busy host: what moved is inconclusive, and the note says why."""
    moved = _undecide(result, lambda m: m.verdict in _DECIDED, more_repeats=True)
    if not moved:
        return
    result.notes.append(
        f"Every repeat of this run ran on a busy host ({words}) and its step moved with the "
        f"load: a neighbour's load slows some metrics far more than others, so it cannot be "
        f"told from a change of the code, and the {moved} line(s) that moved are "
        "inconclusive, not regressions or improvements. Rerun on a quiet runner, or compare "
        "on this one with `perfci check --ab` (both sides share the load)."
    )


def undecided_on_a_load_change(result: RunComparison, shift: LoadShift) -> None:
    """The candidate's load lay outside the baseline's: the lines it can explain are
    inconclusive (see the module docstring), and the note says why."""
    suspect = Verdict.IMPROVEMENT if shift.quieter else Verdict.REGRESSION
    on_gpu = gpu_run(m.series for m in result.metrics if m.series is not None)

    def movable(m: MetricComparison) -> bool:
        if m.verdict is not suspect or m.series is None:
            return m.series is None and m.verdict is suspect  # the machine factor
        return not on_gpu or m.series.kind is MetricKind.STEP or host_timing(m.series, on_gpu)

    moved = _undecide(result, movable, more_repeats=False)
    if not moved:
        return
    way, other = ("faster", "quieter") if shift.quieter else ("slower", "busier")
    result.notes.append(
        f"This run's host was {other} than the baseline runs' ({shift.words()}): load is "
        f"not one factor on every metric, so the {moved} line(s) that ran {way} may have "
        f"done so for that alone and are inconclusive. Compare on one runner with "
        "`perfci check --ab` (both sides share the load), or let the baseline grow on "
        "runners like this one."
    )


def _undecide(
    result: RunComparison, which: Callable[[MetricComparison], bool], *, more_repeats: bool
) -> int:
    """Make the lines ``which`` picks inconclusive (and the run's verdict follow); how many."""
    picked = [m for m in result.metrics if m.verdict in _DECIDED and which(m)]
    if not picked:
        return 0
    keys = {m.key for m in picked}
    result.metrics = [
        replace(
            m,
            verdict=Verdict.INCONCLUSIVE,
            repeats_needed=m.n_candidate + 1 if more_repeats else m.repeats_needed,
        )
        if m.key in keys
        else m
        for m in result.metrics
    ]
    factor = result.shared_factor
    if factor is not None and factor.verdict in _DECIDED and which(factor):
        result.shared_factor = replace(factor, verdict=Verdict.INCONCLUSIVE)
    result.verdict = run_verdict(result.metrics, primary=result.primary_step)
    return len(picked)
