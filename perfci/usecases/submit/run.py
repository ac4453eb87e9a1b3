"""Submit a run: store it, compare it with its baseline, keep the comparison as reported.

The one sequence behind ``perfci check`` (local store) and the HTTP upload of ``perfci serve``,
so that the command line and the service can never disagree about a verdict.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from perfci.analysis.compare import CompareOptions
from perfci.core.errors import ConfigError, KeyTaken
from perfci.core.model import Profile, RunComparison, RunContext, Verdict
from perfci.core.settings import Settings
from perfci.core.transfer import comparison_from_dict
from perfci.report.json_report import comparison_to_json
from perfci.store.comparisons import add_comparison, latest_comparison_document
from perfci.store.work import Session, unit_of_work
from perfci.usecases.submit.compare import compare_stored_run
from perfci.usecases.submit.ingest import IngestResult, ingest_run


@dataclass(frozen=True, slots=True)
class SubmitResult:
    """The stored run and its comparison; ``ingest.created`` is False for a retried upload."""

    ingest: IngestResult
    comparison: RunComparison
    #: ``comparison`` as the JSON text stored for it (``ComparisonPublic``), when this
    #: submission stored it: an answer that carries the comparison sends it as it is rather
    #: than encoding it a second time.
    document: str | None = None


def compare_options(settings: Settings) -> CompareOptions:
    """The comparator's options from the configured thresholds."""
    return CompareOptions(
        delta=settings.delta,
        alpha=settings.alpha,
        min_baseline=settings.min_baseline_runs,
        gate_share=settings.gate_share,
    )


def submit_run(
    session: Session,
    *,
    context: RunContext,
    benchmark: str,
    repeats: Sequence[Sequence[Profile]],
    settings: Settings,
    baseline_branch: str | None = None,
    idempotency_key: str | None = None,
) -> SubmitResult:
    """Ingest ``repeats`` as one run, compare it, store and return the comparison.

    The run and its comparison are ONE transaction (issue 13: as two commits, a kill or a
    database stop between them left runs that were never compared): nothing is stored unless
    both are. A run that was already stored (a retried CI job or upload) is not compared
    again: the comparison it got the first time is returned, so a retry reports the same
    verdict; the same run key with other numbers is a :class:`~perfci.core.errors.RunConflict`.
    ``idempotency_key`` (an HTTP client's ``Idempotency-Key``) replaces the run key derived
    from the context.
    """
    submit = functools.partial(
        _submit, session, context, benchmark, repeats, settings, baseline_branch, idempotency_key
    )
    try:
        return submit()
    except KeyTaken:
        # A concurrent upload of the same run committed first: ours was rolled back whole,
        # and the second pass finds theirs (and its comparison) like any retry.
        return submit()


def _submit(
    session: Session,
    context: RunContext,
    benchmark: str,
    repeats: Sequence[Sequence[Profile]],
    settings: Settings,
    baseline_branch: str | None,
    idempotency_key: str | None,
) -> SubmitResult:
    with unit_of_work(session):
        ingest = ingest_run(
            session,
            context=context,
            benchmark=benchmark,
            repeats=repeats,
            idempotency_key=idempotency_key,
        )
        stored = None if ingest.created else latest_comparison(session, ingest.run_id)
        if stored is not None:
            return SubmitResult(ingest, stored)  # a retry: nothing new to keep
        result, document = _compare_and_save(
            session,
            ingest.run_id,
            settings=settings,
            baseline_branch=baseline_branch,
            merge_base=context.merge_base,
            keep_arrays=ingest.created,
        )
    return SubmitResult(ingest, result, document)


def compare_run_now(
    session: Session,
    run_id: int,
    *,
    settings: Settings,
    baseline_branch: str | None = None,
    merge_base: str | None = None,
) -> RunComparison:
    """Compare a stored run with its baseline as of now, and store that comparison (with the
    unit of work the caller has open, else on its own)."""
    return _compare_and_save(
        session, run_id, settings=settings, baseline_branch=baseline_branch, merge_base=merge_base
    )[0]


def _compare_and_save(
    session: Session,
    run_id: int,
    *,
    settings: Settings,
    baseline_branch: str | None,
    merge_base: str | None,
    keep_arrays: bool = False,
) -> tuple[RunComparison, str]:
    """:func:`compare_run_now`, and the JSON document it stored. ``keep_arrays``: the run was
    stored in this transaction (:func:`compare_stored_run`)."""
    result = compare_stored_run(
        session,
        run_id,
        options=compare_options(settings),
        branch=baseline_branch,
        default_branch=settings.baseline_branch,
        baseline_runs=settings.baseline_runs,
        merge_base=merge_base,
        keep_arrays=keep_arrays,
    )
    return result, save_comparison(session, result)


def save_comparison(session: Session, result: RunComparison) -> str:
    """Store ``result`` for its run (with the unit of work the caller has open, else on its
    own); returns the JSON document stored (``comparison_to_json``)."""
    if result.run_id is None:
        raise ValueError("a comparison can only be stored for a stored run")
    document = comparison_to_json(result)
    with unit_of_work(session):
        add_comparison(
            session,
            run_id=result.run_id,
            baseline_branch=result.baseline.branch if result.baseline else "",
            verdict=result.verdict.value,
            regressions=sum(m.verdict is Verdict.REGRESSION for m in result.metrics),
            document=document,
        )
    return document


def latest_comparison(session: Session, run_id: int) -> RunComparison | None:
    """The most recent stored comparison of run ``run_id``, if any."""
    found = latest_comparison_document(session, run_id)
    return None if found is None else comparison_from_dict(found)


def submit_remote(
    settings: Settings, *, context: RunContext, benchmark: str, repeats: Sequence[Sequence[Profile]]
) -> SubmitResult:
    """:func:`submit_run` on a perfci server (remote mode: the runner holds no DB credentials).

    The server runs the same sequence and answers with the comparison; the upload carries an
    Idempotency-Key derived from its content, so a retried CI job gets the same run back.
    """
    # lazy: requests only in remote mode
    from perfci.integrations.remote import comparison_of, upload_run

    if settings.server_url is None:
        raise ConfigError("remote mode needs a server URL (PERFCI_SERVER_URL)")
    if settings.token is None:
        raise ConfigError(
            f"PERFCI_SERVER_URL is set ({settings.server_url}) but PERFCI_TOKEN "
            "is not: create an upload token with `perfci token create`"
        )
    answer = upload_run(
        settings.server_url,
        settings.token.get_secret_value(),
        project=context.project,
        benchmark=benchmark,
        context=context,
        repeats=repeats,
    )
    ingest = IngestResult(
        run_id=int(answer["run_id"]),
        created=bool(answer["created"]),
        series=int(answer.get("series", 0)),
        samples=int(answer.get("samples", 0)),
    )
    return SubmitResult(ingest, comparison_of(answer))
