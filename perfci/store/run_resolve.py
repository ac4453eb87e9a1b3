"""The ids a run's rows need, found or created, and the run and profile rows inserted.

Two paths, one result: on PostgreSQL one statement does it all (:data:`_PG_RESOLVE`), since
each round trip is a sizeable share of an ingest; on SQLite, in-process, a statement each.
Both are safe against concurrent ingests: every insert is ``ON CONFLICT DO NOTHING`` and the
loser reads the winner's row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, select, update
from sqlalchemy.orm import Session

from perfci.core.compat import UTC, parse_iso_datetime
from perfci.core.errors import ConfigError, StorageError
from perfci.core.fingerprint import fingerprint_hash
from perfci.core.model import Profile, RunContext
from perfci.core.storable import storable_text
from perfci.store import _bulk, partitions
from perfci.store.json_text import json_text
from perfci.store.prepared import PreparedRun
from perfci.store.schema import (
    Benchmark,
    Commit,
    Environment,
    ProfileRow,
    Project,
    Run,
    SeriesSet,
    unpack_series_ids,
)


@dataclass(frozen=True, slots=True)
class NewRun:
    """The run :func:`perfci.store.runs.write_run` stores: the run ``key`` of ``benchmark``,
    made at ``created_at``, whose list of series hashes to ``list_hash``."""

    context: RunContext
    benchmark: str
    prepared: PreparedRun
    key: str
    created_at: datetime
    list_hash: str


# A run's ids: (run, benchmark, series ids in the order of the keys when the benchmark knows
# this list of series, else None); None for all when the run is already stored.
Resolved = tuple[int, int, list[int] | None] | None

# PostgreSQL: everything an ingest needs before its COPY in ONE statement, since each round
# trip is a sizeable share of a whole ingest (benchmarks/store_speed.py): get-or-create
# project, benchmark, environment and commit, insert the run and its profiles, and fetch the
# ids of the run's list of series (series_set), and whether the month partition of sample the
# run's rows go to exists (issue 17). Each insert selects FROM the previous step's
# result, so every ingest takes the locks of new rows in the same order (project, benchmark,
# environment, commit, run) and concurrent first ingests cannot deadlock. A name inserted
# concurrently by an uncommitted transaction is neither in this statement's snapshot nor
# inserted (ON CONFLICT waits for it, then does nothing): the chain comes back empty and the
# statement is run again, which then sees it.
_PG_RESOLVE = """
WITH
p_old AS (SELECT id FROM project WHERE name = %(project)s::varchar),
p_new AS (
    INSERT INTO project (name, created_at)
    SELECT %(project)s::varchar, %(created_at)s::timestamptz
    WHERE NOT EXISTS (SELECT FROM p_old)
    ON CONFLICT (name) DO NOTHING RETURNING id),
p AS (SELECT id FROM p_old UNION ALL SELECT id FROM p_new),
b_old AS (
    SELECT benchmark.id FROM benchmark JOIN p ON benchmark.project_id = p.id
    WHERE benchmark.name = %(benchmark)s::varchar),
b_new AS (
    INSERT INTO benchmark (project_id, name)
    SELECT p.id, %(benchmark)s::varchar FROM p WHERE NOT EXISTS (SELECT FROM b_old)
    ON CONFLICT (project_id, name) DO NOTHING RETURNING id),
b AS (SELECT id FROM b_old UNION ALL SELECT id FROM b_new),
e_old AS (SELECT id FROM environment WHERE fingerprint = %(fingerprint)s::varchar),
e_new AS (
    INSERT INTO environment (fingerprint, "values", created_at)
    SELECT %(fingerprint)s::varchar, %(environment)s::json, %(created_at)s::timestamptz
    FROM b WHERE NOT EXISTS (SELECT FROM e_old)
    ON CONFLICT (fingerprint) DO NOTHING RETURNING id),
e AS (SELECT id FROM e_old UNION ALL SELECT id FROM e_new),
c_old AS (
    SELECT "commit".id, "commit".committed_at FROM "commit" JOIN p ON "commit".project_id = p.id
    WHERE "commit".sha = %(sha)s::varchar),
c_new AS (
    INSERT INTO "commit" (project_id, sha, committed_at)
    SELECT p.id, %(sha)s::varchar, %(committed_at)s::timestamptz FROM p, e
    WHERE %(sha)s::varchar IS NOT NULL AND NOT EXISTS (SELECT FROM c_old)
    ON CONFLICT (project_id, sha) DO NOTHING RETURNING id),
c AS (SELECT id FROM c_old UNION ALL SELECT id FROM c_new),
r AS (
    INSERT INTO run (project_id, benchmark_id, environment_id, commit_id, branch, base_branch,
                     merge_base, pr_number, ci_provider, ci_run_id, ci_run_attempt, ci_url,
                     repeats, created_at, idempotency_key, ordered_at)
    SELECT p.id, b.id, e.id, (SELECT id FROM c), %(branch)s::varchar,
           %(base_branch)s::varchar, %(merge_base)s::varchar, %(pr_number)s::int4,
           %(ci_provider)s::varchar, %(ci_run_id)s::varchar, %(ci_run_attempt)s::int4,
           %(ci_url)s::text, %(repeats)s::int4, %(created_at)s::timestamptz, %(key)s::varchar,
           -- The run's time: its commit's (stored, else this run's), else when stored.
           COALESCE((SELECT committed_at FROM c_old),
                    CASE WHEN %(sha)s::varchar IS NOT NULL THEN %(committed_at)s::timestamptz END,
                    %(created_at)s::timestamptz)
    FROM p, b, e
    WHERE %(sha)s::varchar IS NULL OR EXISTS (SELECT FROM c)
    ON CONFLICT (project_id, benchmark_id, idempotency_key) DO NOTHING RETURNING id),
c_time AS (
    -- A commit first seen without its time (a bare --commit) gets it from a later run.
    UPDATE "commit" SET committed_at = %(committed_at)s::timestamptz
    FROM c_old
    WHERE "commit".id = c_old.id AND c_old.committed_at IS NULL
      AND %(committed_at)s::timestamptz IS NOT NULL),
r_time AS (
    -- ... and so do the runs already stored for it (this run was written with it above).
    UPDATE run SET ordered_at = %(committed_at)s::timestamptz
    FROM c_old
    WHERE run.commit_id = c_old.id AND c_old.committed_at IS NULL
      AND %(committed_at)s::timestamptz IS NOT NULL),
f AS (
    INSERT INTO profile (run_id, repeat, label, format, source, steps, metadata)
    SELECT r.id, x.repeat, x.label, x.format, x.source, x.steps, x.metadata
    FROM r, json_to_recordset(%(profiles)s::json) AS x(
        repeat int4, label varchar, format varchar, source text, steps int4, metadata json))
SELECT (SELECT id FROM p), (SELECT id FROM b), (SELECT id FROM e), (SELECT id FROM c),
       (SELECT id FROM r),
       (SELECT series_ids FROM series_set
        WHERE benchmark_id = (SELECT id FROM b) AND list_hash = %(list_hash)s::varchar
          AND EXISTS (SELECT FROM r)),
       to_regclass(%(partition)s::text) IS NOT NULL
"""
_PG_RESOLVE_TRIES = 3


def resolve_postgres(session: Session, run: NewRun) -> Resolved:
    context, benchmark, prepared, created_at = (
        run.context,
        run.benchmark,
        run.prepared,
        run.created_at,
    )
    month = partitions.Month.of(created_at)
    params = {
        "project": context.project,
        "benchmark": benchmark,
        "fingerprint": fingerprint_hash(context.environment),
        "environment": json_text(dict(context.environment)),
        "sha": context.commit or None,
        "committed_at": parse_time(context.commit_time),
        **_context_columns(context),
        "repeats": prepared.repeats,
        "created_at": _utc(created_at),
        "key": run.key,
        "profiles": json_text(_profile_rows(prepared.profiles)),
        "list_hash": run.list_hash,
        "partition": month.qualified,
    }
    with _bulk.driver_cursor(session, _PG_RESOLVE) as cursor:
        for _ in range(_PG_RESOLVE_TRIES):
            cursor.execute(_PG_RESOLVE, params, binary=True)
            project_id, benchmark_id, environment_id, commit_id, run_id, packed_ids, ready = (
                cursor.fetchone()
            )
            if None in (project_id, benchmark_id, environment_id) or (
                params["sha"] is not None and commit_id is None
            ):
                continue  # lost a race to create one of them: run again, it is visible now
            break
        else:
            raise StorageError(
                f"could not resolve the project, benchmark, environment and commit of "
                f"the run of {benchmark!r}: they kept being created concurrently"
            )
    if run_id is None:
        return None
    if not ready:
        # A month without a partition (an old run imported, or no `perfci db maintain` for
        # months): made in this transaction, so an ingest never fails for want of one.
        partitions.create_partition(session, month)
    return run_id, benchmark_id, None if packed_ids is None else unpack_series_ids(packed_ids)


#: The context's fields that ``run`` has a column of the same name for: stored as they are.
_CONTEXT_COLUMNS = tuple(f.name for f in fields(RunContext) if f.name in Run.__table__.c)


def _context_columns(context: RunContext) -> dict[str, Any]:
    return {name: getattr(context, name) for name in _CONTEXT_COLUMNS}


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)


def resolve_generic(session: Session, run: NewRun) -> Resolved:
    """Ids, get-or-create, one statement each (SQLite: in-process, statements are cheap)."""
    context, created_at = run.context, run.created_at
    project_id = _get_or_create(
        session, Project, {"name": context.project}, {"created_at": created_at}
    )
    benchmark_id = _get_or_create(
        session, Benchmark, {"project_id": project_id, "name": run.benchmark}, {}
    )
    environment_id = _get_or_create(
        session,
        Environment,
        {"fingerprint": fingerprint_hash(context.environment)},
        {"values": dict(context.environment), "created_at": created_at},
    )
    commit_id, committed_at = _commit_id(session, project_id, context)
    ids = (project_id, benchmark_id, environment_id, commit_id)
    run_id = _insert_run(session, run, ids, ordered_at=committed_at or created_at)
    if run_id is None:
        return None
    rows = [{"run_id": run_id, **row} for row in _profile_rows(run.prepared.profiles)]
    session.execute(table_of(ProfileRow).insert(), rows)
    table = table_of(SeriesSet)
    packed_ids = session.execute(
        select(table.c.series_ids).where(
            table.c.benchmark_id == benchmark_id, table.c.list_hash == run.list_hash
        )
    ).scalar()
    return run_id, benchmark_id, None if packed_ids is None else unpack_series_ids(packed_ids)


def _get_or_create(
    session: Session, model: Any, match: dict[str, Any], extra: dict[str, Any]
) -> int:
    """The id of the row matching ``match``, inserting it (race-safe) when absent."""
    table = table_of(model)
    query = select(table.c.id).where(*(table.c[k] == v for k, v in match.items()))
    found = session.execute(query).scalar()
    if found is None:
        _bulk.insert_rows_ignore(session, table, [{**match, **extra}], list(match))
        found = session.execute(query).scalar_one()
    return int(found)


def _commit_id(
    session: Session, project_id: int, context: RunContext
) -> tuple[int | None, datetime | None]:
    """The run's commit id (None without a commit) and the commit's time, if known."""
    if not context.commit:
        return None, None
    committed_at = parse_time(context.commit_time)
    table = table_of(Commit)
    query = select(table.c.id, table.c.committed_at).where(
        table.c.project_id == project_id, table.c.sha == context.commit
    )
    found = session.execute(query).first()
    if found is None:
        _bulk.insert_rows_ignore(
            session,
            table,
            [{"project_id": project_id, "sha": context.commit, "committed_at": committed_at}],
            ["project_id", "sha"],
        )
        found = session.execute(query).one()
    if found.committed_at is None and committed_at is not None:
        # A commit first seen without its time (a bare --commit) gets it from a later run.
        session.execute(
            update(table)
            .where(table.c.id == found.id, table.c.committed_at.is_(None))
            .values(committed_at=committed_at)
        )
        # ... and so do the runs already stored for it: their time is the commit's now.
        runs = table_of(Run)
        session.execute(
            update(runs).where(runs.c.commit_id == found.id).values(ordered_at=committed_at)
        )
    return int(found.id), found.committed_at or committed_at


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = parse_iso_datetime(value.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"commit time {value!r} is not an ISO 8601 date") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _insert_run(
    session: Session, run: NewRun, ids: tuple[int, int, int, int | None], ordered_at: datetime
) -> int | None:
    """Insert the run (project, benchmark, environment and commit ids); None when stored."""
    values = dict(
        zip(("project_id", "benchmark_id", "environment_id", "commit_id"), ids, strict=True),
        **_context_columns(run.context),
        idempotency_key=run.key,
        repeats=run.prepared.repeats,
        created_at=run.created_at,
        ordered_at=ordered_at,
    )
    statement = _bulk.insert_ignore(
        session, table_of(Run), ["project_id", "benchmark_id", "idempotency_key"]
    )
    run_id = session.execute(statement.values(**values).returning(Run.id)).scalar()
    return None if run_id is None else int(run_id)


def _profile_rows(profiles: Iterable[tuple[int, Profile]]) -> list[dict[str, Any]]:
    """The ``profile`` rows of a run's profiles, but for the run's id. Their texts are what
    every store keeps (:func:`~perfci.core.storable.storable_text`): a label that names no
    series (one profile a repeat), the file and the format only describe the profile."""
    return [
        {
            "repeat": repeat,
            "label": storable_text(p.label[:255]),
            "format": storable_text(p.format),
            "source": storable_text(p.source),
            "steps": p.steps,
            "metadata": p.metadata,
        }
        for repeat, p in profiles
    ]


def table_of(model: Any) -> Table:
    """The Core table of an ORM model (typed as the ``Table`` it always is here)."""
    return cast(Table, model.__table__)
