"""A run's values kept as arrays (``run_arrays``, issue 35): what comparisons read of a baseline
run, always the numbers of its ``sample`` rows.

Every test runs on SQLite and, when ``PERFCI_TEST_POSTGRES_URL`` is set, on PostgreSQL.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from db_fixtures import create_postgres, drop_postgres, make_context
from deadlines import Deadline, scaled
from sqlalchemy import Engine, delete, func, select, text, update
from sqlalchemy.orm import Session

from perfci.cli.main import main
from perfci.core.model import Metric, MetricKind, Profile
from perfci.core.settings import Settings
from perfci.store import arrays_backfill, engines, queries, samples
from perfci.store.samples import CheckedSamples, RunValues, run_samples_checked
from perfci.store.schema import Run, RunArrays, Sample
from perfci.usecases.admin.arrays import keep_missing_arrays
from perfci.usecases.admin.prune import prune_store
from perfci.usecases.browse.runs import delete_run
from perfci.usecases.submit.ingest import ingest_run
from perfci.usecases.submit.run import compare_run_now, submit_run

T0 = datetime(2026, 1, 5, 6, tzinfo=UTC)


def _repeat(rng: np.random.Generator, run: int, repeat: int) -> list[Profile]:
    """One repeat of a run whose shape varies with ``run`` and ``repeat``, as real ones do.

    - the kernels in another order every other run, so that a run's series ids are not in
      its write order (the arrays are kept in write order, the rows read in id order);
    - one kernel only in some repeats (a ragged run);
    - one kernel listed twice in a repeat of every third run (its samples hold the sums);
    - a copy with bytes and no time (no value: not compared);
    - an operator with per-step totals (a fastest-step value), and a step with samples.
    """

    def kernel(name: str, ns: float) -> Metric:
        return Metric(MetricKind.KERNEL, name, calls=4, total_ns=ns * rng.lognormal(0, 0.02))

    metrics = [kernel(f"gemm<{i}, float>", 1e6 * (i + 1)) for i in range(6)]
    if run % 2:
        metrics.reverse()
    if repeat != 1:
        metrics.append(kernel("late_kernel", 3e5))
    if run % 3 == 0 and repeat == 0:
        metrics.append(kernel("gemm<2, float>", 5e4))
    totals = [float(v) for v in 2e6 * rng.lognormal(0, 0.05, 4)]
    steps = [float(v) for v in 3e7 * rng.lognormal(0, 0.01, 4)]
    metrics += [
        Metric(MetricKind.MEMORY, "HtoD", calls=2, bytes=4e6),
        Metric(MetricKind.OP, "aten::mm", calls=8, total_ns=sum(totals), step_totals_ns=totals),
        Metric(MetricKind.STEP, "step", samples_ns=steps),
    ]
    return [Profile(label="p", format="test", source="p.json", metrics=metrics, steps=4)]


def _submit(session: Session, rng: np.random.Generator, run: int, branch: str = "main") -> int:
    result = submit_run(
        session,
        context=make_context(
            commit=f"{run:040x}",
            branch=branch,
            commit_time=(T0 + timedelta(hours=run)).isoformat(),
        ),
        benchmark="b",
        repeats=[_repeat(rng, run, r) for r in range(3)],
        settings=Settings(),
    )
    return result.ingest.run_id


def _arrays(session: Session) -> int:
    return int(session.execute(select(func.count()).select_from(RunArrays)).scalar_one())


def _read(session: Session, run_ids: list[int]) -> CheckedSamples:
    checked = run_samples_checked(session, run_ids)
    assert checked.samples, "nothing read"
    return checked


def _in_order(checked: CheckedSamples) -> list[object]:
    """Everything read, in the order it came: dict equality alone ignores order, and the
    order of series and runs is what the comparison lists its lines in."""
    return [
        [(key, list(by_run.items())) for key, by_run in part.items()]
        for part in (checked.samples, checked.fastest)
    ] + [checked.skipped, checked.summarised]


def test_a_run_submitted_keeps_its_values_as_arrays_that_read_as_its_rows(
    session: Session,
) -> None:
    """Runs read from their arrays give exactly what their rows give: the same series in the
    same order, the same values in repeat order, the same fastest-step values."""
    rng = np.random.default_rng(7)
    ids = [_submit(session, rng, run) for run in range(7)]
    assert _arrays(session) == len(ids)
    # From the second run on: its kernels are listed in the reverse order of their ids (the
    # first run created them), so its arrays hold them out of the order its rows read in.
    read = ids[1:]
    from_arrays = _read(session, read)
    fastest = next(v for k, v in from_arrays.fastest.items() if k.name == "aten::mm")
    assert [len(values) for values in fastest.values()] == [3] * len(read)
    # Every other run without its arrays: each run is read from one or the other.
    session.execute(delete(RunArrays).where(RunArrays.run_id.in_(ids[1::2])))
    mixed = _read(session, read)
    session.execute(delete(RunArrays))
    from_rows = _read(session, read)
    assert _in_order(from_arrays) == _in_order(from_rows)
    assert _in_order(mixed) == _in_order(from_rows)
    copies = [k for k in from_rows.samples if k.name == "HtoD"]
    assert copies == []  # bytes only: no value to compare, from either source
    ragged = next(v for k, v in from_rows.samples.items() if k.name == "late_kernel")
    assert {len(values) for values in ragged.values()} == {2}
    summed = next(v for k, v in from_rows.samples.items() if k.name == "gemm<2, float>")
    assert summed[ids[3]][0] > summed[ids[3]][1]  # listed twice in the first repeat of run 3


def test_one_series_of_a_long_history_is_read_from_rows(session: Session) -> None:
    """The weekly report reads one series of every run: its rows, not every run's arrays."""
    rng = np.random.default_rng(8)
    ids = [_submit(session, rng, run) for run in range(4)]
    every = _read(session, ids)
    step = next(k for k in every.samples if k.kind is MetricKind.STEP)
    headline = queries.series_ids_of_kinds(
        session, project="acme/model", benchmark="b", kinds=frozenset({MetricKind.STEP})
    )
    only = run_samples_checked(session, ids, series_ids=headline)
    assert list(only.samples) == [step] and only.samples[step] == every.samples[step]


def test_arrays_are_kept_only_for_a_run_stored_in_the_same_transaction(
    session: Session,
) -> None:
    """A run ingested without a comparison has none, and comparing it later keeps none: its
    rows are committed, and another transaction may be pruning or deleting them."""
    rng = np.random.default_rng(9)
    _submit(session, rng, 0)
    stored = ingest_run(
        session,
        context=make_context(commit="1" * 40, commit_time=(T0 + timedelta(hours=1)).isoformat()),
        benchmark="b",
        repeats=[_repeat(rng, 1, r) for r in range(3)],
    )
    session.commit()
    compare_run_now(session, stored.run_id, settings=Settings())
    session.commit()
    assert _arrays(session) == 1
    assert session.execute(select(RunArrays.run_id)).scalar_one() != stored.run_id


def test_a_retried_upload_keeps_no_second_copy(session: Session) -> None:
    rng = np.random.default_rng(10)
    repeats = [_repeat(rng, 0, r) for r in range(3)]
    context = make_context(commit="2" * 40, ci_provider="test", ci_run_id="7", ci_run_attempt=1)
    first, again = (
        submit_run(session, context=context, benchmark="b", repeats=repeats, settings=Settings())
        for _ in range(2)
    )
    assert (first.ingest.created, again.ingest.created) == (True, False)
    assert _arrays(session) == 1


def test_deleting_a_run_deletes_its_arrays(session: Session) -> None:
    rng = np.random.default_rng(11)
    ids = [_submit(session, rng, run) for run in range(2)]
    delete_run(session, run_id=ids[0], actor="test")
    assert session.execute(select(RunArrays.run_id)).scalars().all() == [ids[1]]


@pytest.mark.parametrize("branch", ["main", "feature"])
def test_pruning_a_run_deletes_its_arrays_and_it_reads_as_its_summaries(
    migrated_url: str, branch: str
) -> None:
    engine = engines.make_engine(migrated_url)
    sessions = engines.make_sessionmaker(engine)
    try:
        rng = np.random.default_rng(12)
        with sessions() as session:
            ids = [_submit(session, rng, run, branch=branch) for run in range(3)]
            assert _arrays(session) == 3
        now = datetime.now(UTC)
        prune_store(migrated_url, keep="30d", now=now.replace(year=now.year + 1))
        with sessions() as session:
            assert _arrays(session) == 0
            checked = run_samples_checked(session, ids)
        assert checked.summarised == sorted(ids)
        assert all(len(v) == 1 for per_run in checked.samples.values() for v in per_run.values())
    finally:
        engine.dispose()


# --- runs stored without arrays: perfci db arrays ------------------------------------------


def _ingest(session: Session, rng: np.random.Generator, run: int) -> int:
    """A run stored as ``perfci ingest`` stores it: rows, no arrays."""
    return ingest_run(
        session,
        context=make_context(
            commit=f"{run:040x}", commit_time=(T0 + timedelta(hours=run)).isoformat()
        ),
        benchmark="b",
        repeats=[_repeat(rng, run, r) for r in range(3)],
    ).run_id


def _stored_arrays(session: Session) -> dict[int, tuple[bytes, bytes, bytes | None]]:
    rows = session.execute(
        select(RunArrays.run_id, RunArrays.series_ids, RunArrays.value, RunArrays.fastest)
    )
    return {run_id: (series, value, fastest) for run_id, series, value, fastest in rows}


@pytest.fixture
def store(migrated_url: str) -> Iterator[tuple[str, Callable[[], Session]]]:
    """A database of this test's own (commits are real), its URL and a session maker."""
    engine = engines.make_engine(migrated_url)
    try:
        yield migrated_url, engines.make_sessionmaker(engine)
    finally:
        engine.dispose()


def test_runs_stored_without_arrays_get_the_very_arrays_an_upload_keeps(
    store: tuple[str, Callable[[], Session]],
) -> None:
    """Uploaded runs whose arrays are gone get the same bytes back; ingested runs get arrays
    that read as their rows; a second pass finds nothing to do."""
    migrated_url, sessions = store
    rng = np.random.default_rng(13)
    with sessions() as session:
        uploaded = [_submit(session, rng, run) for run in range(4)]
        ingested = [_ingest(session, rng, run) for run in range(4, 7)]
        kept_by_upload = _stored_arrays(session)
        assert sorted(kept_by_upload) == uploaded
        session.execute(delete(RunArrays).where(RunArrays.run_id.in_(uploaded[1:])))
        session.commit()
        from_rows = _read(session, [*uploaded, *ingested])
    seen: list[tuple[int, int]] = []
    report = keep_missing_arrays(
        migrated_url, batch=2, progress=lambda done, missing: seen.append((done, missing))
    )
    assert (report.missing, report.kept, report.left_out) == (6, 6, 0)
    assert seen == [(2, 6), (4, 6), (6, 6)]
    with sessions() as session:
        now_kept = _stored_arrays(session)
        assert sorted(now_kept) == sorted([*uploaded, *ingested])
        assert {run: now_kept[run] for run in uploaded} == kept_by_upload
        assert _in_order(_read(session, [*uploaded, *ingested])) == _in_order(from_rows)
    again = keep_missing_arrays(migrated_url)
    assert (again.missing, again.kept, again.left_out) == (0, 0, 0)


def test_pruned_runs_and_runs_with_a_bad_value_get_no_arrays(
    store: tuple[str, Callable[[], Session]],
) -> None:
    migrated_url, sessions = store
    rng = np.random.default_rng(14)
    with sessions() as session:
        old = [_ingest(session, rng, run) for run in range(2)]
        session.commit()
    now = datetime.now(UTC)
    prune_store(migrated_url, keep="30d", now=now.replace(year=now.year + 1))
    with sessions() as session:
        bad, good = (_ingest(session, rng, run) for run in range(2, 4))
        # A value stored by a perfci older than the checks at ingest (issue 13).
        session.execute(update(Sample).where(Sample.run_id == bad).values(value=-1.0))
        session.commit()
    dry = keep_missing_arrays(migrated_url, dry_run=True)
    assert (dry.missing, dry.kept, dry.dry_run) == (2, 0, True)
    report = keep_missing_arrays(migrated_url)
    assert (report.missing, report.kept, report.left_out) == (2, 1, 1)
    with sessions() as session:
        assert sorted(_stored_arrays(session)) == [good]
        assert run_samples_checked(session, [*old, bad, good]).skipped == [bad]


def test_arrays_are_written_only_for_runs_still_there_and_unpruned(session: Session) -> None:
    """A prune or a delete may come between the read of a batch and its write (SQLite's reads
    take no lock): the write itself checks that each run is still there and unpruned."""
    rng = np.random.default_rng(15)
    ids = [_ingest(session, rng, run) for run in range(3)]
    held = arrays_backfill.hold_runs(session, [*ids, 10_000])
    assert held == ids  # no such run: not held
    read = samples.arrays_from_rows(session, held)
    session.execute(update(Run).where(Run.id == ids[0]).values(pruned_at=datetime.now(UTC)))
    delete_run(session, run_id=ids[1], actor="test")
    assert arrays_backfill.add_run_arrays(session, read) == 1
    assert sorted(_stored_arrays(session)) == [ids[2]]
    assert arrays_backfill.add_run_arrays(session, read) == 0  # already there


@pytest.mark.postgres
def test_a_run_deleted_while_its_arrays_are_written_leaves_none_behind(
    postgres_admin: Engine,
) -> None:
    """PostgreSQL (row locks; SQLite's writers take turns): a delete that comes while a run
    is held for its arrays waits for the writer, then removes the arrays with the run (it
    locks the run before deleting them; the other way round, the arrays would be written
    after it looked and outlive the run)."""
    url = create_postgres(postgres_admin)
    engine = engines.make_engine(url)
    sessions = engines.make_sessionmaker(engine)
    try:
        with sessions() as session:
            run_id = _ingest(session, np.random.default_rng(16), 0)
            session.commit()
        errors: list[Exception] = []

        def remove() -> None:
            try:
                with sessions() as deleter:
                    delete_run(deleter, run_id=run_id, actor="test")
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        with sessions() as holder:
            assert arrays_backfill.hold_runs(holder, [run_id]) == [run_id]
            read = samples.arrays_from_rows(holder, [run_id])
            deleting = threading.Thread(target=remove)
            deleting.start()
            _wait_for_a_lock_wait(holder, deleting)
            assert arrays_backfill.add_run_arrays(holder, read) == 1
            holder.commit()
        deleting.join(scaled(60))
        assert not deleting.is_alive() and not errors
        with sessions() as session:
            assert _stored_arrays(session) == {}
            assert session.get(Run, run_id) is None
    finally:
        engine.dispose()
        drop_postgres(postgres_admin, url)


def _wait_for_a_lock_wait(session: Session, worker: threading.Thread) -> None:
    """Until another backend of this database waits for a lock (the delete, blocked)."""
    deadline = Deadline(30)
    query = text(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    while True:
        # The activity view is a snapshot taken once per transaction unless cleared.
        session.execute(text("SELECT pg_stat_clear_snapshot()"))
        if session.execute(query).scalar_one():
            return
        assert worker.is_alive(), "the delete ended without waiting for the held run"
        assert not deadline.expired(), f"no lock wait after {deadline.describe()}"
        time.sleep(0.02)


def test_perfci_db_arrays_says_what_it_did(
    store: tuple[str, Callable[[], Session]], capsys: pytest.CaptureFixture[str]
) -> None:
    migrated_url, sessions = store
    with sessions() as session:
        _ingest(session, np.random.default_rng(17), 0)
        session.commit()
    main(["db", "maintain", "--database-url", migrated_url])
    assert "1 run stored without the arrays" in capsys.readouterr().out  # the daily job says
    main(["db", "arrays", "--dry-run", "--database-url", migrated_url])
    assert "1 run without arrays (dry run: none written)" in capsys.readouterr().out
    main(["db", "arrays", "--database-url", migrated_url])
    out = capsys.readouterr().out
    assert "1 / 1 runs" in out and "kept the arrays of 1 run\n" in out
    assert "password" not in out
    main(["db", "maintain", "--database-url", migrated_url])
    assert "without the arrays" not in capsys.readouterr().out


def _table(shape: dict[int, list[int]], repeats: int, *, fastest: bool = False) -> RunValues:
    """Samples of run → its series, ``repeats`` each, in (run, series, repeat) order."""
    rows = [
        (run, series, repeat)
        for run, all_series in sorted(shape.items())
        for series in sorted(all_series)
        for repeat in range(repeats)
    ]
    values = np.arange(len(rows), dtype=np.float64) * 1.5
    quickest = np.where(np.arange(len(rows)) % 3 == 1, np.nan, values / 2) if fastest else None
    return RunValues(
        np.array([r for r, _, _ in rows], dtype=np.int64),
        np.array([s for _, s, _ in rows], dtype=np.int64),
        values,
        quickest,
    )


@pytest.mark.parametrize(
    ("shape", "repeats", "alike"),
    [
        ({1: [5, 7, 9], 2: [5, 7, 9], 3: [5, 7, 9]}, 3, True),
        ({1: [5, 7, 9], 2: [5, 7, 9]}, 1, True),
        ({4: [8]}, 2, True),
        # Rows of four groups: run 2's two and run 3's two add up to run 1's series.
        ({1: [1, 2, 3, 4], 2: [1, 2], 3: [3, 4]}, 2, False),
        ({1: [5, 7, 9], 2: [5, 9], 3: [5, 7, 9]}, 3, False),
        ({1: [5, 7, 9], 2: [5, 7, 8]}, 2, False),
    ],
)
@pytest.mark.parametrize("fastest", [False, True])
def test_runs_alike_are_grouped_at_once_as_one_by_one(
    monkeypatch: pytest.MonkeyPatch,
    shape: dict[int, list[int]],
    repeats: int,
    alike: bool,
    fastest: bool,
) -> None:
    """A baseline whose runs all hold the same series and repeats is grouped from one array;
    anything else, one (run, series) group at a time: the two give the same lists in order."""
    table = _table(shape, repeats, fastest=fastest)
    changed = (table.runs[1:] != table.runs[:-1]) | (table.series[1:] != table.series[:-1])
    starts = np.concatenate(([0], np.flatnonzero(changed) + 1))
    found = samples._alike_runs(table, starts, table.runs[starts], table.series[starts])
    assert (found is not None) is alike
    at_once = samples._group_samples(table)
    monkeypatch.setattr(samples, "_alike_runs", lambda *_: None)
    one_by_one = samples._group_samples(table)
    for got, want in zip(at_once, one_by_one, strict=True):
        assert [(k, list(v.items())) for k, v in got.items()] == [
            (k, list(v.items())) for k, v in want.items()
        ]
    assert sum(len(v) for by_run in at_once[0].values() for v in by_run.values()) == len(table)
    assert bool(at_once[1]) is fastest
