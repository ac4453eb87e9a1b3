"""Keeping a large store in shape (issue 17): ``perfci db prune``, ``maintain``, ``partitions``.

- :func:`prune_store` rolls the raw samples of runs older than the retention period up into
  one summary per run and series (:mod:`perfci.store.retention`), a month per transaction, and
  says how much space it freed. On SQLite it vacuums the file afterwards, which is what gives
  the space back to the disk there.
- :func:`maintain_store` is the periodic job (cron, a Kubernetes CronJob): it makes the
  partitions of the coming months and prunes when a retention period is configured.
- :func:`partitions_of` lists the partitions with their sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from perfci.core.compat import UTC
from perfci.core.errors import ConfigError, DatabaseFailure, StorageError
from perfci.core.settings import Settings, get_settings, redact_url
from perfci.store import partitions, retention
from perfci.store.arrays_backfill import count_runs_without_arrays
from perfci.store.db import Store, open_store
from perfci.store.work import unit_of_work

__all__ = [
    "MaintainReport",
    "PruneReport",
    "maintain_store",
    "partitions_of",
    "prune_store",
]


@dataclass(frozen=True, slots=True)
class PruneReport:
    """What a prune did, month by month, and the space of samples and summaries around it."""

    url: str
    dialect: str
    dry_run: bool
    keep_days: int
    keep_base_days: int | None
    #: The base-branch patterns whose pushes keep their raw samples for ``keep_base_days``
    #: (besides the branches pull requests target).
    base_branches: tuple[str, ...]
    cutoff: datetime
    base_cutoff: datetime
    months: list[retention.MonthResult]
    bytes_before: tuple[int, int]  # (samples, summaries)
    bytes_after: tuple[int, int]

    @property
    def freed(self) -> int:
        """Bytes given back: samples removed less summaries added."""
        return sum(self.bytes_before) - sum(self.bytes_after)


@dataclass(frozen=True, slots=True)
class MaintainReport:
    """What ``perfci db maintain`` did: partitions made, and the prune when one is set."""

    url: str
    created: list[partitions.Month]
    partitions: list[partitions.Partition]
    prune: PruneReport | None = None
    notes: list[str] = field(default_factory=list)


def prune_store(
    database_url: str | None,
    *,
    keep: str | int | None = None,
    keep_base: str | int | None = None,
    dry_run: bool = False,
    now: datetime | None = None,
) -> PruneReport:
    """Roll up the raw samples of runs older than ``keep`` (days, ``"90d"``, ``"12w"``).

    ``keep`` and ``keep_base`` default to the settings ``keep_samples`` and
    ``keep_base_samples``; without either, :class:`ConfigError` (pruning is never implied).

    Raises
    ------
    ConfigError
        No retention period, or a malformed one.
    StorageError
        The database failed on a month; the months before it are pruned, the rest not.
    """
    settings = get_settings(
        {"database_url": database_url, "keep_samples": keep, "keep_base_samples": keep_base}
    )
    return _prune(settings, dry_run=dry_run, now=now or datetime.now(UTC))


def maintain_store(
    database_url: str | None, *, ahead: int | None = None, now: datetime | None = None
) -> MaintainReport:
    """Make the partitions of the current month and ``ahead`` more (default: the setting
    ``partitions_ahead``), then prune if ``keep_samples`` is set; a note says how many runs
    have no arrays (``perfci db arrays``, :mod:`perfci.usecases.admin.arrays`)."""
    settings = get_settings({"database_url": database_url, "partitions_ahead": ahead})
    moment = now or datetime.now(UTC)
    store = open_store(settings)
    try:
        try:
            with store.sessions() as session, unit_of_work(session):
                created = partitions.ensure_ahead(session, moment, settings.partitions_ahead)
        except DatabaseFailure as exc:
            raise StorageError(f"could not make partitions: {exc.reason}") from exc
        try:
            with store.sessions() as session, unit_of_work(session, keep=False):
                without_arrays = count_runs_without_arrays(session)
        except DatabaseFailure as exc:
            raise StorageError(f"could not count the runs without arrays: {exc.reason}") from exc
    finally:
        store.close()
    notes = []
    if without_arrays:
        notes.append(
            f"{without_arrays:,} run{'s' * (without_arrays != 1)} stored without the arrays "
            "baselines are read from (by `perfci ingest`, `perfci import`, or before revision "
            "0010): `perfci db arrays` gives them theirs"
        )
    if store.dialect != "postgresql":
        notes.append("SQLite has no partitions: nothing to make ahead")
    pruned = None
    if settings.keep_samples is not None:
        pruned = _prune(settings, dry_run=False, now=moment)
    else:
        notes.append("no retention period set (keep_samples): nothing pruned")
    return MaintainReport(
        url=redact_url(store.url),
        created=created,
        partitions=partitions_of(database_url),
        prune=pruned,
        notes=notes,
    )


def partitions_of(database_url: str | None) -> list[partitions.Partition]:
    """The partitions of ``sample``, oldest first (none on SQLite)."""
    store = open_store(get_settings({"database_url": database_url}))
    try:
        with store.sessions() as session:
            return partitions.list_partitions(session)
    finally:
        store.close()


def _prune(settings: Settings, *, dry_run: bool, now: datetime) -> PruneReport:
    if settings.keep_samples is None:
        raise ConfigError(
            "say how long raw samples are kept: `perfci db prune --keep 90d`, or the "
            "keep_samples setting (PERFCI_KEEP_SAMPLES, [tool.perfci] keep-samples)"
        )
    policy = retention.Policy(
        keep=timedelta(days=settings.keep_samples),
        keep_base=(
            timedelta(days=settings.keep_base_samples) if settings.keep_base_samples else None
        ),
        base_branches=tuple(dict.fromkeys([settings.baseline_branch, *settings.base_branches])),
    )
    store = open_store(settings)
    try:
        with store.sessions() as session:
            before = retention.sample_bytes(session)
            months = retention.plan(session, policy, now)
        results = [_prune_month(store, month, policy, now, dry_run) for month in months]
        if store.dialect == "sqlite" and not dry_run and any(r.samples for r in results):
            retention.vacuum_sqlite(store.engine)
        with store.sessions() as session:
            after = retention.sample_bytes(session)
    finally:
        store.close()
    cutoff, base_cutoff = policy.cutoffs(now)
    return PruneReport(
        url=redact_url(store.url),
        dialect=store.dialect,
        dry_run=dry_run,
        keep_days=settings.keep_samples,
        keep_base_days=settings.keep_base_samples,
        base_branches=policy.base_branches,
        cutoff=cutoff,
        base_cutoff=base_cutoff,
        months=results,
        bytes_before=before,
        bytes_after=after,
    )


def _prune_month(
    store: Store, month: retention.MonthPlan, policy: retention.Policy, now: datetime, dry: bool
) -> retention.MonthResult:
    """One month in one transaction: committed, or rolled back for a dry run or an error."""
    try:
        with store.sessions() as session, unit_of_work(session, keep=not dry):
            return retention.prune_month(session, month, policy, now, dry_run=dry)
    except DatabaseFailure as exc:
        raise StorageError(
            f"could not prune {month.month}: {exc.reason}; the months before it "
            "are pruned, and running the prune again goes on from there"
        ) from exc
