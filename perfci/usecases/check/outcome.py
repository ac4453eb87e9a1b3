"""What the plain check (:mod:`perfci.usecases.check.run`) and the A/B check
(:mod:`perfci.usecases.check.ab`) share: the run context they detect and the outcome they return.

It sits below both, so that ``run`` dispatches to ``ab`` and nothing imports ``run`` back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from perfci.core.answers import Acceptance
from perfci.core.model import RunComparison, RunContext, Verdict
from perfci.core.settings import Settings
from perfci.integrations.context import detect_run_context, merge_base
from perfci.usecases.answers.accepted import is_accepted
from perfci.usecases.check.spec import BenchmarkSpec, CheckRequest

if TYPE_CHECKING:  # heavy imports stay out of `perfci --help` and of the CLI's import time
    from perfci.usecases.submit.ingest import IngestResult
    from perfci.usecases.submit.run import SubmitResult

__all__ = ["CheckOutcome", "context_of", "exit_code"]


@dataclass(slots=True)
class CheckOutcome:
    """A finished check: what was run, where it is stored, and how it compares."""

    spec: BenchmarkSpec
    settings: Settings
    context: RunContext
    submitted: SubmitResult
    database_url: str
    warnings: list[str] = field(default_factory=list)
    #: The base side's stored run in A/B mode (``--ab``).
    ab_base: IngestResult | None = None
    #: Regressions accepted on this pull request (``/perfci accept``, issue 34).
    acceptances: list[Acceptance] = field(default_factory=list)

    @property
    def comparison(self) -> RunComparison:
        return self.submitted.comparison

    @property
    def exit_code(self) -> int:
        if is_accepted(self.comparison, self.acceptances):
            return 0  # what regresses is what a person with write access accepted
        return exit_code(self.comparison, fail_on_regression=self.settings.fail_on_regression)


def exit_code(result: RunComparison, *, fail_on_regression: bool) -> int:
    """1 for a gated regression (the run verdict) when it should fail the job, else 0."""
    return 1 if fail_on_regression and result.verdict is Verdict.REGRESSION else 0


def context_of(
    settings: Settings, request: CheckRequest, *, env: Mapping[str, str] | None, cwd: Path | None
) -> RunContext:
    """The run context: detected from CI and git, flags applied, merge-base filled in."""
    context = detect_run_context(settings.project, request.context, env=env, cwd=cwd)
    if context.merge_base is None and context.base_branch:
        # A local PR check: history newer than the fork point is not this PR's baseline.
        context.merge_base = merge_base(cwd, context.base_branch, context.commit or "HEAD")
    return context
