"""Ingest a run: parsed profiles + run context → one transaction in the store.

Idempotent: a run is identified by its key (commit + CI run id + attempt, or the content when
there is no CI run id), unique in the database, so the same run ingested twice, even by two
processes at once, is stored once; the same key with different numbers is a
:class:`~perfci.core.errors.RunConflict` naming the stored run. Every value must be finite and
non-negative (:func:`~perfci.usecases.submit.prepare.check_values`), checked as the run's sample
rows are written; a bad one rolls the transaction back, so bad input writes nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import fields
from datetime import datetime
from pathlib import Path

from perfci.core.allocation import no_cycle_collection
from perfci.core.compat import UTC
from perfci.core.errors import ConfigError, DatabaseFailure, KeyTaken, RunConflict
from perfci.core.model import KEY_SEPARATOR, Profile, RunContext
from perfci.core.storable import unstorable
from perfci.store.prepared import PreparedRun, RowCheck, cell_values
from perfci.store.runs import IngestResult, storage_error, stored_run, write_run
from perfci.store.work import Session, reading, unit_of_work
from perfci.usecases.submit.prepare import check_values, checks_while_written, prepare_run
from perfci.usecases.submit.repeats import parse_repeats

# IngestResult is the store's; it is named here because a dozen callers take it with ingest_run.
__all__ = ["IngestResult", "ingest_prepared", "ingest_run", "parse_and_ingest", "run_key"]


def ingest_run(
    session: Session,
    *,
    context: RunContext,
    benchmark: str,
    repeats: Sequence[Sequence[Profile]],
    idempotency_key: str | None = None,
    created_at: datetime | None = None,
) -> IngestResult:
    """Store one run of ``benchmark`` in one unit of work (committed here, or with the unit
    of work the caller has open: the run and its comparison are stored together).

    Parameters
    ----------
    session
        The store's session; what this writes is rolled back on any error.
    context
        Project, commit, branch, CI ids and the environment fingerprint of the run.
    benchmark
        The benchmark's name within the project.
    repeats
        The profiles of each repeat, in repeat order. A repeat with several profiles (e.g.
        forward / backward / train sections) keys its series by section = profile label.
    idempotency_key
        Overrides the run key derived from the context (and the content, without a CI run id).
    created_at
        When the run was made (default: now); tests and imports of old runs pass it.

    Raises
    ------
    ConfigError
        Empty repeats, or two profiles with the same label in one repeat; a series' name,
        scope, profile label or unit, or the run's project, benchmark, commit, branch or CI
        fields holding text no store keeps (:mod:`perfci.core.storable`).
    InvalidValue
        A value is not finite, is negative, or overflows; nothing was written.
    RunConflict
        The run's key (CI run id and attempt, or ``idempotency_key``) is stored with other
        numbers; ``run_id`` names the stored run.
    StorageError
        The database failed; nothing was written.
    """
    # A run's cells are tens of thousands of tuples: built with the collector walking every
    # live object meanwhile (an import's or a benchmark's history of runs) they cost several
    # times themselves (benchmarks/store_speed.py).
    with no_cycle_collection():
        prepared = prepare_run(repeats)
        check_rows = checks_while_written(prepared)
    return ingest_prepared(
        session,
        context=context,
        benchmark=benchmark,
        prepared=prepared,
        idempotency_key=idempotency_key,
        created_at=created_at,
        check_rows=check_rows,
    )


def ingest_prepared(
    session: Session,
    *,
    context: RunContext,
    benchmark: str,
    prepared: PreparedRun,
    idempotency_key: str | None = None,
    created_at: datetime | None = None,
    check_rows: RowCheck | None = None,
) -> IngestResult:
    """:func:`ingest_run` for a run already prepared: checked (:func:`check_values`; an import
    that checks every run before its first write prepares each once), or with ``check_rows``
    (:func:`checks_while_written`) checking its sample rows as they are written. Where no row
    is written (the run's key is stored already) the run is then checked whole before the
    stored run is answered, so a bad run is refused either way."""
    _check_names(context, benchmark, idempotency_key)
    key = idempotency_key or run_key(context, prepared)
    try:
        with unit_of_work(session):
            result = write_run(
                session,
                context=context,
                benchmark=benchmark,
                prepared=prepared,
                key=key,
                created_at=created_at or datetime.now(UTC),
                check_rows=check_rows,
            )
    except RunConflict:
        if check_rows is not None:
            check_values(prepared)  # a bad value is the answer, before the conflict
        raise
    except KeyTaken as exc:
        if check_rows is not None:
            check_values(prepared)
        # A concurrent ingest of the same run committed between our checks: keep theirs.
        with reading(session):
            existing = stored_run(
                session, context=context, benchmark=benchmark, key=key, prepared=prepared
            )
        if existing is None:
            raise storage_error(benchmark, prepared, exc.reason) from exc
        return existing
    except DatabaseFailure as exc:
        raise storage_error(benchmark, prepared, exc.reason) from exc
    if check_rows is not None and not result.created:
        check_values(prepared)  # no row was written, so none was checked
    return result


def _check_names(context: RunContext, benchmark: str, idempotency_key: str | None) -> None:
    """Refuse a run whose project, benchmark, commit, branch or CI fields hold text no store
    keeps (:mod:`perfci.core.storable`): a command-line argument or an environment variable
    that is not UTF-8 arrives as lone surrogates, which neither store's driver can encode
    (a traceback, before), and PostgreSQL refuses NUL (a storage error, as if the database
    were down). The environment only describes the runner: its JSON keeps such text marked.
    """
    named = {
        field.name: value
        for field in fields(RunContext)
        if isinstance(value := getattr(context, field.name), str)
    }
    named.update({"benchmark": benchmark, "idempotency key": idempotency_key or ""})
    for what, text in named.items():
        bad = unstorable(text)
        if bad is not None:
            raise ConfigError(
                f"the run's {what.replace('_', ' ')} {text!r} holds {bad}, which perfci cannot "
                "store"
            )


def parse_and_ingest(
    session: Session,
    files: Sequence[Path],
    *,
    benchmark: str,
    context: RunContext,
    format: str | None = None,
    repeat: int | None = None,
) -> IngestResult:
    """Parse ``files`` and ingest them as one run; a bad file stops before anything is written.

    With ``repeat=None`` each file is one repeat; with ``repeat=N`` the files hold N repeats,
    split into N consecutive groups of equal size (``r0_fwd r0_bwd r1_fwd r1_bwd``, N=2).
    """
    repeats = parse_repeats(files, format=format, repeat=repeat)
    return ingest_run(session, context=context, benchmark=benchmark, repeats=repeats)


def run_key(context: RunContext, prepared: PreparedRun) -> str:
    """The idempotency key: the CI invocation when known, else the run's content.

    Without a CI run id, ingesting the same files again is the same run, while new
    measurements at the same commit (a laptop re-run) are a new one.
    """
    commit = context.commit or ""
    if context.ci_run_id:
        provider = context.ci_provider or "ci"
        return f"ci:{provider}:{context.ci_run_id}:{context.ci_run_attempt or 0}:{commit}"[:255]
    digest = hashlib.sha256()
    for parts in sorted(prepared.cells):
        digest.update(KEY_SEPARATOR.join(parts).encode())
        for repeat, values in cell_values(prepared.cells[parts]):
            # The plain tuple's repr: the keys of runs stored before Values was named. Without
            # the fastest-step value (revision 0007), which derives from the per-step totals
            # the other numbers sum: the same files keep the key they were stored under.
            digest.update(repr((repeat, tuple(values)[:-1])).encode())
    return f"content:{commit}:{digest.hexdigest()}"
