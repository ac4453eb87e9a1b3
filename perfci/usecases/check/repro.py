"""The repro bundle of a finished check (:class:`perfci.core.repro.Repro`): its two commits, the
settings its verdict depends on as flags, the environment, and whether to offer a bisection.

The command it gives is always the same-runner A/B (``perfci check --ab``), whatever mode the
check ran in: on a developer's machine there is no history of the base branch to compare with,
and the A/B of the two commits is the comparison that needs none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from perfci.core import private_env
from perfci.core.model import MetricKind, RunComparison, Verdict
from perfci.core.repro import Repro
from perfci.core.settings import Settings

if TYPE_CHECKING:
    from perfci.usecases.check.outcome import CheckOutcome

__all__ = ["repro_flags", "repro_of"]


def repro_of(outcome: CheckOutcome, env: Mapping[str, str] | None = None) -> Repro | None:
    """The bundle of ``outcome``; ``None`` when either commit is unknown (nothing to check out)."""
    result = outcome.comparison
    commit = outcome.context.commit or result.commit
    base = result.baseline.last_commit if result.baseline else None
    if not commit or not base:
        return None
    env = private_env.environ() if env is None else env
    environment = dict(outcome.context.environment)
    if env.get("RUNNER_NAME") and "runner" not in environment:
        environment["runner"] = env["RUNNER_NAME"]
    on_base = outcome.context.pr_number is None and (
        result.baseline is not None and outcome.context.branch == result.baseline.branch
    )
    return Repro(
        benchmark=outcome.spec.name,
        commit=commit,
        base=base,
        flags=repro_flags(outcome.settings),
        environment=environment,
        profiles=f".perfci/runs/{outcome.spec.name}",
        bisect=on_base and result.verdict is Verdict.REGRESSION,
        metric=_bisect_metric(result),
    )


def repro_flags(settings: Settings) -> tuple[str, ...]:
    """The settings a verdict depends on, as the flags that set them."""
    flags = ["--ab-pairs", str(settings.ab_pairs)]
    if settings.max_repeats is not None:
        flags += ["--max-repeats", str(settings.max_repeats)]
    return (*flags, "--delta", f"{settings.delta:g}", "--alpha", f"{settings.alpha:g}")


def _bisect_metric(result: RunComparison) -> str | None:
    """The metric a bisection follows: the step when it regressed, else the first gated line
    that did (a kernel), by its series name."""
    regressed = result.gated_regressions
    if not regressed or any(
        m.series is not None and m.series.kind is MetricKind.STEP for m in regressed
    ):
        return None
    first = regressed[0]
    return first.series.name if first.series is not None else first.key
