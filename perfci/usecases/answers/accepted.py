"""What a later check of a pull request makes of its acceptances (issue 34).

A check of a pull request on which a regression was accepted shows the acceptance at the top
of its comment, and passes (exit code 0, status ``success``) while every gated regression is
one of the accepted lines; a regression elsewhere still fails it, and the comment says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from perfci.core.answers import Acceptance, covers
from perfci.core.model import RunComparison, RunContext
from perfci.core.settings import Settings
from perfci.report.answers import acceptance_block, status_text

__all__ = ["AcceptedView", "accepted_view", "check_acceptances", "is_accepted"]


@dataclass(frozen=True, slots=True)
class AcceptedView:
    """How an accepted check is shown: the comment's block, and, when the acceptances hold
    every gated regression, the status description that replaces the verdict's."""

    block: str
    covered: bool
    description: str


def is_accepted(result: RunComparison, acceptances: Sequence[Acceptance]) -> bool:
    """Whether ``acceptances`` hold every gated regression of ``result`` (one at least)."""
    return covers(acceptances, [m.key for m in result.gated_regressions])


def accepted_view(result: RunComparison, acceptances: Sequence[Acceptance]) -> AcceptedView | None:
    """The acceptance as the check's comment and status show it; ``None`` without one."""
    if not acceptances:
        return None
    accepted = {key for a in acceptances for key in a.keys}
    uncovered = sum(m.key not in accepted for m in result.gated_regressions)
    latest = acceptances[-1]
    return AcceptedView(
        block=acceptance_block(acceptances, uncovered=uncovered),
        covered=is_accepted(result, acceptances),
        description=status_text(latest.actor, latest.reason),
    )


def check_acceptances(settings: Settings, context: RunContext, benchmark: str) -> list[Acceptance]:
    """The acceptances of ``benchmark`` on the check's pull request, read from its store.

    None outside a pull request, and none in remote mode (the server keeps no answers yet).
    """
    if context.pr_number is None or settings.server_url:
        return []
    # lazy: the store only for a pull request checked locally; `perfci publish` opens none
    from perfci.store.db import open_store
    from perfci.store.work import reading
    from perfci.usecases.answers.answer import acceptances

    store = open_store(settings)
    try:
        with store.sessions() as session, reading(session):
            return acceptances(session, context.project, context.pr_number, benchmark)
    finally:
        store.close()
