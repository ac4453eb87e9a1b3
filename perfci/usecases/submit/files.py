"""``perfci ingest``: store parsed profile files as one run, on the perfci server when one is
configured (``server_url``), else in the local store.

Where the run goes is decided here, once, so that the command only maps flags and prints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perfci.core.errors import ConfigError
from perfci.core.settings import get_settings
from perfci.integrations.context import detect_run_context
from perfci.store.db import open_store
from perfci.usecases.submit.ingest import ingest_run

if TYPE_CHECKING:
    from perfci.core.model import Profile, RunContext
    from perfci.usecases.submit.ingest import IngestResult


@dataclass(frozen=True, slots=True)
class StoredFiles:
    """What storing a run gave: the result, the run's project and where it went (a database
    or server URL, unredacted: the shells redact what they print)."""

    result: IngestResult
    project: str
    where: str


def store_profiles(
    repeats: list[list[Profile]],
    *,
    benchmark: str,
    database_url: str | None,
    project: str | None,
    context: Mapping[str, Any],
    warn: Callable[[str], None],
) -> StoredFiles:
    """Store ``repeats`` as one run of ``benchmark`` (idempotent: a second time is a no-op).

    ``context`` holds the flags' run context (``commit``, ``branch``, ``base_branch``,
    ``pr_number``, ``ci_run_id``, ``ci_run_attempt``, ``environment``); the rest is detected
    from CI and git. ``warn`` hears about a run that can never join a baseline.

    Raises
    ------
    ConfigError
        For a run of the baseline branch without its commit: nothing is stored.
    """
    settings = get_settings({"database_url": database_url, "project": project})
    run_context = detect_run_context(settings.project, dict(context))
    _check_provenance(run_context, baseline_branch=settings.baseline_branch, warn=warn)
    if settings.server_url:
        # lazy: remote mode only; a local ingest needs none of the comparison (numpy, scipy)
        from perfci.usecases.submit.run import submit_remote

        remote = submit_remote(settings, context=run_context, benchmark=benchmark, repeats=repeats)
        return StoredFiles(remote.ingest, run_context.project, settings.server_url)
    store = open_store(settings)
    try:
        with store.sessions() as session:
            result = ingest_run(session, context=run_context, benchmark=benchmark, repeats=repeats)
    finally:
        store.close()
    return StoredFiles(result, run_context.project, store.url)


def _check_provenance(
    context: RunContext, *, baseline_branch: str, warn: Callable[[str], None]
) -> None:
    """Warn about a run without branch or commit; refuse one of the baseline branch without
    its commit.

    Outside a git checkout (and CI) nothing says where a run comes from (issue 16). Without a
    branch it is stored but can never join a baseline, which a warning says. A run of the
    baseline branch without a commit would become baseline history nobody can place on the
    branch (the comment's "commits a..b", change points, bisecting), so it is refused.

    Raises
    ------
    ConfigError
        When ``context.branch`` is ``baseline_branch`` and no commit is known.
    """
    if context.commit is None and context.branch == baseline_branch:
        raise ConfigError(
            f"refusing to store a run of the baseline branch {baseline_branch!r} without its "
            f"commit (not in a git checkout?): pass --commit SHA, or ingest from the checkout"
        )
    if context.branch is None:
        warn(
            "warning: no git checkout or CI variables here: the run is stored without "
            f"{'a branch or commit' if context.commit is None else 'a branch'}, so it will "
            f"never be part of a baseline; pass --branch and --commit to store a run of "
            f"{baseline_branch!r}"
        )
