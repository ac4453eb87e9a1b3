"""The weekly report reads each run's medians from the database, not its repeats (issue 35):
the medians are ``statistics.median`` of the repeats bit for bit (odd and even counts, ties,
pruned runs, runs with a bad value left out and named), and a report built from them is the
report built from every raw sample, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import statistics
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from db_fixtures import make_context, make_profile
from sqlalchemy import text
from sqlalchemy.orm import Session
from test_weekly import PROJECT, ingest_history, profile, w04

from perfci.core.model import Profile
from perfci.store.samples import CheckedSamples, run_medians_checked, run_samples_checked
from perfci.usecases.submit.ingest import ingest_run
from perfci.usecases.weekly import report as weekly
from perfci.usecases.weekly.report import build_weekly_report, report_to_dict

__all__ = ["profile"]  # the fixture, imported for pytest

T0 = datetime(2025, 3, 3, 12, 0, tzinfo=UTC)


def _ingest(session: Session, i: int, values: list[dict[str, float]]) -> int:
    return ingest_run(
        session,
        context=make_context(commit=f"{i:040x}", ci_run_id=f"ci-{i}"),
        benchmark="train",
        repeats=[[make_profile(v)] for v in values],
        created_at=T0 + timedelta(days=i),
    ).run_id


def _medians_of(checked: CheckedSamples) -> dict[tuple[str, int], float]:
    return {
        (key.key, run_id): statistics.median(values)
        for key, by_run in checked.samples.items()
        for run_id, values in by_run.items()
    }


def _prune(session: Session, run_id: int) -> None:
    """What ``perfci db prune`` leaves of a run: its medians in ``sample_summary``."""
    rows = session.execute(
        text("SELECT series_id, value FROM sample WHERE run_id = :r AND value IS NOT NULL"),
        {"r": run_id},
    ).all()
    by_series: dict[int, list[float]] = {}
    for series_id, value in rows:
        by_series.setdefault(series_id, []).append(value)
    for series_id, values in by_series.items():
        session.execute(
            text(
                "INSERT INTO sample_summary (run_id, series_id, median, spread, count) "
                "VALUES (:r, :s, :m, :p, :c)"
            ),
            {
                "r": run_id,
                "s": series_id,
                "m": statistics.median(values),
                "p": max(values) - min(values),
                "c": len(values),
            },
        )
    session.execute(text("DELETE FROM sample WHERE run_id = :r"), {"r": run_id})


def test_the_medians_are_statistics_median_of_the_repeats(session: Session) -> None:
    rng = np.random.default_rng(3)
    runs = []
    for i, repeats in enumerate([1, 2, 3, 4, 5, 6, 2, 3]):
        values = [
            {"gemm": float(v), "relu": 0.1 + float(w), "tie": 7.0}
            for v, w in zip(rng.lognormal(3, 1, repeats), rng.random(repeats), strict=True)
        ]
        runs.append(_ingest(session, i, values))
    _prune(session, runs[3])
    postgres = session.get_bind().dialect.name == "postgresql"
    bad = ["-1.0", "'Infinity'::float8", "'NaN'::float8"] if postgres else ["-1.0", "9e999"]
    for run_id, value in zip(runs[5:], bad, strict=False):
        session.execute(
            text(f"UPDATE sample SET value = {value} WHERE run_id = :r AND repeat = 1"),
            {"r": run_id},
        )
    old = run_samples_checked(session, runs)
    new = run_medians_checked(session, runs)
    assert new.skipped == old.skipped == sorted(runs[5 : 5 + len(bad)])
    assert new.summarised == old.summarised == [runs[3]]
    medians = _medians_of(new)
    assert medians == _medians_of(old)  # exact equality, float for float
    assert all(len(v) == 1 for by_run in new.samples.values() for v in by_run.values())
    assert len(medians) == 3 * (len(runs) - len(bad))


def test_a_weekly_report_from_the_medians_is_the_one_from_every_sample(
    session: Session, profile: Profile, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest_history(session, profile, repeats=3)
    ingest_history(session, profile, repeats=4, benchmark="eval", seed=11, change_at=None)
    since, until = w04()
    new = report_to_dict(
        build_weekly_report(session, project=PROJECT, since=since, until=until, record=False)
    )
    monkeypatch.setattr(weekly, "run_medians_checked", run_samples_checked)  # the old reader
    old = report_to_dict(
        build_weekly_report(session, project=PROJECT, since=since, until=until, record=False)
    )
    assert new == old
    assert new["benchmarks"] and any(b["change_points"] for b in new["benchmarks"])
