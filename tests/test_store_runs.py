"""The store's half of an ingest (store.runs.write_run): it writes, the caller commits.

Also pins what must not move when the code does: the content key of a run without a CI run id
(runs stored by earlier versions are recognised by it) and how a series listed twice in one
repeat is summed.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from db_fixtures import make_context, make_profile
from sqlalchemy import text

from perfci.core.errors import RunConflict
from perfci.core.model import Metric, MetricKind, Profile
from perfci.store import engines
from perfci.store.prepared import Values, merge_values, sample_rows, values_of
from perfci.store.runs import stored_run, write_run
from perfci.usecases.submit.ingest import run_key
from perfci.usecases.submit.prepare import check_values, prepare_run

_WHEN = datetime(2025, 3, 1, tzinfo=UTC)


def _counts(url: str) -> dict[str, int]:
    engine = engines.make_engine(url)
    try:
        with engine.connect() as connection:
            return {
                table: int(connection.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())
                for table in ("project", "run", "profile", "series", "sample")
            }
    finally:
        engine.dispose()


def test_write_run_leaves_commit_and_rollback_to_the_caller(migrated_url: str) -> None:
    prepared = prepare_run(
        [[make_profile({"a": 1.0, "b": 2.0})], [make_profile({"a": 1.5, "b": 2.5})]]
    )
    check_values(prepared)
    engine = engines.make_engine(migrated_url)
    try:
        with engines.make_sessionmaker(engine)() as session:
            written = write_run(
                session,
                context=make_context(),
                benchmark="b",
                prepared=prepared,
                key="k1",
                created_at=_WHEN,
            )
            assert (written.created, written.series, written.samples) == (True, 2, 4)
            session.rollback()  # the caller's choice: nothing of the run survives it
        assert _counts(migrated_url) == dict.fromkeys(
            ("project", "run", "profile", "series", "sample"), 0
        )
        with engines.make_sessionmaker(engine)() as session:
            write_run(
                session,
                context=make_context(),
                benchmark="b",
                prepared=prepared,
                key="k1",
                created_at=_WHEN,
            )
            session.commit()
        assert _counts(migrated_url) == {
            "project": 1,
            "run": 1,
            "profile": 2,
            "series": 2,
            "sample": 4,
        }
    finally:
        engine.dispose()


def test_stored_run_answers_a_retry_and_refuses_other_numbers(migrated_url: str) -> None:
    prepared = prepare_run([[make_profile({"a": 1.0})]])
    engine = engines.make_engine(migrated_url)
    try:
        with engines.make_sessionmaker(engine)() as session:
            assert (
                stored_run(
                    session, context=make_context(), benchmark="b", key="k", prepared=prepared
                )
                is None
            )
            first = write_run(
                session,
                context=make_context(),
                benchmark="b",
                prepared=prepared,
                key="k",
                created_at=_WHEN,
            )
            session.commit()
            again = stored_run(
                session, context=make_context(), benchmark="b", key="k", prepared=prepared
            )
            assert again is not None
            assert (again.run_id, again.created, again.samples) == (first.run_id, False, 1)
            other = prepare_run([[make_profile({"a": 2.0})]])
            with pytest.raises(RunConflict, match=rf"run {first.run_id} .*1 of 1 samples"):
                stored_run(session, context=make_context(), benchmark="b", key="k", prepared=other)
            with pytest.raises(RunConflict, match=r"branch 'main', not 'dev'"):
                stored_run(
                    session,
                    context=make_context(branch="dev"),
                    benchmark="b",
                    key="k",
                    prepared=prepared,
                )
    finally:
        engine.dispose()


def _profile_listing_an_api_twice() -> Profile:
    return Profile(
        label="b",
        format="synthetic",
        source="f.txt",
        steps=4,
        metrics=[
            Metric(
                kind=MetricKind.KERNEL,
                name="gemm",
                calls=8,
                total_ns=4000.0,
                avg_ns=500.0,
                min_ns=400.0,
                max_ns=600.0,
            ),
            Metric(kind=MetricKind.API, name="cudaLaunchKernel", calls=3, total_ns=30.0),
            Metric(kind=MetricKind.API, name="cudaLaunchKernel", calls=2, total_ns=12.0, bytes=7.0),
            Metric(
                kind=MetricKind.STEP,
                name="step",
                samples_ns=[100.0, 110.0, 120.0],
                calls=3,
                total_ns=330.0,
            ),
        ],
    )


def test_the_content_key_of_a_run_without_ci_ids_is_unchanged() -> None:
    # Computed by the ingest before Values was named: a laptop re-run of stored files must
    # still be recognised as the stored run, not stored a second time.
    profile = _profile_listing_an_api_twice()
    prepared = prepare_run([[profile], [profile]])
    assert run_key(make_context(commit="a" * 40), prepared) == (
        "content:" + "a" * 40 + ":0373788059742e4d6c1e324703b35cdeed0493da0bf6f6cfd9b75e09fc92e735"
    )


def test_a_series_listed_twice_in_a_repeat_is_one_summed_sample() -> None:
    prepared = prepare_run([[_profile_listing_an_api_twice()]])
    assert prepared.merges and prepared.samples == 3
    rows = {row[1]: row for row in sample_rows(prepared, 7, [10, 11, 12], 20_000)}
    # calls and times add, the average is recomputed, the spread and median are unknown
    assert rows[11] == (
        *(7, 11, 0, 20_000),
        *(42.0 / 4, 5, 42.0, None, 42.0 / 5, None, None, None, None, 7.0, None),
    )
    assert rows[10][:6] == (7, 10, 0, 20_000, 1000.0, 8)


@pytest.mark.parametrize("steps", [None, 4], ids=["no steps", "4 steps"])
def test_each_sample_row_holds_the_numbers_values_of_gives(steps: int | None) -> None:
    """``sample_rows`` computes a row's numbers inline, once per stored sample: for every shape
    of metric they are the numbers ``values_of`` gives (what the content key hashes)."""
    metrics = [
        Metric(
            MetricKind.KERNEL,
            "total",
            calls=4,
            total_ns=400.0,
            avg_ns=100.0,
            min_ns=90.0,
            max_ns=110.0,
            std_ns=5.0,
            median_ns=99.0,
        ),
        Metric(MetricKind.KERNEL, "avg and calls, no total", calls=4, avg_ns=100.0),
        Metric(MetricKind.OP, "per step", calls=2, total_ns=300.0, step_totals_ns=[1e2, 2e2]),
        Metric(MetricKind.STEP, "step", samples_ns=[10.0, 11.0, 12.0], warmup=1),
        Metric(MetricKind.STEP, "step, average only", calls=2, avg_ns=7.0),
        Metric(MetricKind.BENCH, "case", calls=3, total_ns=3e6, samples_ns=[1e6, 2e6, 3e6]),
        Metric(MetricKind.MEASURE, "rate", unit="tokens/s", value=50.0),
        Metric(MetricKind.MEASURE, "rates", unit="tokens/s", samples=[4.0, 5.0, 6.0], warmup=1),
        Metric(MetricKind.MEMORY, "bytes only", bytes=1024.0),
    ]
    profile = Profile(label="p", format="test", source="p.json", metrics=metrics, steps=steps)
    prepared = prepare_run([[profile], [profile]])
    assert not prepared.merges
    rows = list(sample_rows(prepared, 7, list(range(len(metrics))), 20_000))
    expected = [
        (7, series, repeat, 20_000, *values_of(metric, steps))
        for series, metric in enumerate(metrics)
        for repeat in (0, 1)
    ]
    assert rows == expected
    assert rows[0][4] == (100.0 if steps else 400.0)  # not only alike: the time per step
    assert rows[4][14] == 100.0  # the fastest step of the per-step totals


def test_merged_values_keep_the_extremes_and_drop_what_the_parts_cannot_tell() -> None:
    a = Values(1.0, 2, 10.0, None, 5.0, 4.0, 6.0, 0.5, 5.0, None, 0.8)
    b = Values(3.0, 1, 20.0, 2.0, 20.0, 3.0, 9.0, 0.1, 20.0, 8.0, 2.5)
    merged = merge_values(a, b)
    assert merged == Values(
        value=4.0,
        calls=3,
        total_ns=30.0,
        self_ns=2.0,
        avg_ns=10.0,
        min_ns=3.0,
        max_ns=9.0,
        std_ns=None,
        median_ns=None,
        bytes=8.0,
        fastest=None,
    )
