"""Store queries: baseline selection, samples, series history, runs in a period."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from db_fixtures import make_context, make_profile
from sqlalchemy.orm import Session

from perfci.core.errors import NotFoundError
from perfci.core.fingerprint import fingerprint_hash
from perfci.core.model import Metric, MetricKind, Profile, SeriesKey
from perfci.store.queries import (
    baseline_run_ids,
    environment_id,
    get_run,
    runs_in_period,
    series_history,
    series_ids_of_kinds,
)
from perfci.store.samples import run_samples, run_samples_checked
from perfci.usecases.submit.ingest import ingest_run

T0 = datetime(2025, 3, 3, 12, 0, tzinfo=UTC)
H100 = {"gpu": "H100", "torch": "2.4.0"}
A100 = {"gpu": "A100", "torch": "2.4.0"}
GEMM = SeriesKey(MetricKind.KERNEL, "gemm")


def _run(
    session: Session,
    *,
    day: float,
    commit: str | None,
    value: float = 1.0,
    branch: str = "main",
    env: dict[str, str] = H100,
    benchmark: str = "train",
    stored_day: float | None = None,
    repeats: int = 1,
) -> int:
    context = make_context(
        commit=commit,
        branch=branch,
        environment=env,
        commit_time=(T0 + timedelta(days=day)).isoformat() if commit else None,
        ci_run_id=f"{benchmark}-{branch}-{day}-{commit}-{stored_day}",
    )
    profiles = [[make_profile({"gemm": value + r, "relu": 2 * value})] for r in range(repeats)]
    created = T0 + timedelta(days=day if stored_day is None else stored_day, hours=1)
    return ingest_run(
        session, context=context, benchmark=benchmark, repeats=profiles, created_at=created
    ).run_id


def _env(session: Session, env: dict[str, str]) -> int:
    found = environment_id(session, fingerprint_hash(env))
    assert found is not None
    return found


def _baseline(session: Session, **kwargs: object) -> list[int]:
    values: dict[str, object] = {
        "project": "acme/model",
        "benchmark": "train",
        "environment_id": _env(session, H100),
        "branch": "main",
    }
    values.update(kwargs)
    return baseline_run_ids(session, **values)  # type: ignore[arg-type]


def test_baseline_order_filters_and_limit(session: Session) -> None:
    old = _run(session, day=1, commit="a1")
    newest = _run(session, day=5, commit="a5")
    middle = _run(session, day=3, commit="a3")
    rerun = _run(session, day=3, commit="a3", stored_day=4)  # same commit, stored later
    no_commit = _run(session, day=2, commit=None)  # ordered by when it was stored
    feature = _run(session, day=6, commit="f6", branch="feature")
    _run(session, day=6, commit="a6", env=A100)
    _run(session, day=7, commit="a7", benchmark="infer")

    assert _baseline(session) == [newest, rerun, middle, no_commit, old]
    assert _baseline(session, limit=2) == [newest, rerun]
    assert _baseline(session, exclude_run_ids=[newest, middle]) == [rerun, no_commit, old]
    # Up to and including the cut-off commit: its own runs (and re-runs) count (issue 12).
    assert _baseline(session, before=T0 + timedelta(days=3)) == [rerun, middle, no_commit, old]
    assert _baseline(session, before=T0 + timedelta(days=2.5)) == [no_commit, old]
    assert _baseline(session, branch="feature") == [feature]
    assert len(_baseline(session, environment_id=None)) == 6
    assert _baseline(session, project="other") == []


def test_run_samples_by_series_run_and_repeat(session: Session) -> None:
    first = _run(session, day=1, commit="a1", value=10.0, repeats=3)
    second = _run(session, day=2, commit="a2", value=20.0, repeats=2)
    _run(session, day=3, commit="a3", value=30.0)
    samples = run_samples(session, [second, first])
    assert samples == {
        GEMM: {first: [10.0, 11.0, 12.0], second: [20.0, 21.0]},
        SeriesKey(MetricKind.KERNEL, "relu"): {first: [20.0] * 3, second: [40.0] * 2},
    }
    assert run_samples(session, []) == {}


def test_a_read_of_some_series_returns_those_of_every_run_and_nothing_else(
    session: Session,
) -> None:
    """A long history's weekly report reads its step times alone first (issue 35)."""

    def stepped(benchmark: str, day: int, step_ns: float) -> int:
        profile = Profile(
            label="p",
            format="synthetic",
            source="p.txt",
            steps=2,
            metrics=[
                Metric(kind=MetricKind.STEP, name="iteration", calls=2, total_ns=2 * step_ns),
                Metric(kind=MetricKind.KERNEL, name="gemm", calls=1, total_ns=step_ns / 2),
            ],
        )
        context = make_context(
            commit=f"{benchmark}{day}",
            commit_time=(T0 + timedelta(days=day)).isoformat(),
            ci_run_id=f"{benchmark}-{day}",
        )
        created = T0 + timedelta(days=day, hours=1)
        return ingest_run(
            session, context=context, benchmark=benchmark, repeats=[[profile]], created_at=created
        ).run_id

    runs = [stepped("train", day, 100.0 + day) for day in range(3)]
    stepped("infer", 0, 50.0)
    step_ids = series_ids_of_kinds(
        session, project="acme/model", benchmark="train", kinds={MetricKind.STEP}
    )
    assert len(step_ids) == 1
    assert series_ids_of_kinds(session, project="acme/model", benchmark="train", kinds=()) == []
    both = series_ids_of_kinds(
        session,
        project="acme/model",
        benchmark="train",
        kinds={MetricKind.STEP, MetricKind.KERNEL},
    )
    assert len(both) == 2 and step_ids[0] in both

    some = run_samples_checked(session, runs, series_ids=step_ids).samples
    every = run_samples(session, runs)
    (key,) = some
    assert key.kind is MetricKind.STEP and key.name == "iteration"
    assert some[key] == every[key] and sorted(some[key]) == runs
    assert run_samples_checked(session, runs, series_ids=[]).samples == {}


def test_series_history(session: Session) -> None:
    late = _run(session, day=4, commit="a4", value=4.0, repeats=2)
    early = _run(session, day=1, commit="a1", value=1.0)
    middle = _run(session, day=2, commit="a2", value=2.0)
    _run(session, day=3, commit="f3", value=9.0, branch="feature")
    other_env = _run(session, day=3, commit="a3", value=3.0, env=A100)

    history = series_history(
        session, project="acme/model", benchmark="train", series=GEMM, branch="main"
    )
    assert [(p.run_id, p.commit, p.values) for p in history] == [
        (early, "a1", [1.0]),
        (middle, "a2", [2.0]),
        (other_env, "a3", [3.0]),
        (late, "a4", [4.0, 5.0]),
    ]
    assert history[0].commit_time == T0 + timedelta(days=1)
    assert history[0].created_at == T0 + timedelta(days=1, hours=1)

    window = series_history(
        session,
        project="acme/model",
        benchmark="train",
        series=GEMM,
        branch="main",
        since=T0 + timedelta(days=2),
        until=T0 + timedelta(days=4),
        environment_id=_env(session, H100),
    )
    assert [p.run_id for p in window] == [middle]
    unknown = SeriesKey(MetricKind.KERNEL, "gemm", section="fwd")
    assert (
        series_history(
            session, project="acme/model", benchmark="train", series=unknown, branch="main"
        )
        == []
    )


def test_runs_in_period_and_get_run(session: Session) -> None:
    first = _run(session, day=1, commit="a1")
    second = _run(session, day=2, commit="a2", branch="feature")
    third = _run(session, day=3, commit="a3", benchmark="infer")
    _run(session, day=9, commit="a9")

    week = {"project": "acme/model", "since": T0, "until": T0 + timedelta(days=7)}
    assert [r.id for r in runs_in_period(session, **week)] == [first, second, third]
    assert [r.id for r in runs_in_period(session, **week, branch="main")] == [first, third]
    assert [r.id for r in runs_in_period(session, **week, benchmark="infer")] == [third]

    run = get_run(session, second)
    assert (run.project, run.benchmark, run.commit, run.branch, run.repeats) == (
        "acme/model",
        "train",
        "a2",
        "feature",
        1,
    )
    assert run.commit_time == T0 + timedelta(days=2)
    assert run.environment == H100
    with pytest.raises(NotFoundError, match="no run with id 999999"):
        get_run(session, 999_999)


def test_each_run_of_a_period_carries_its_own_environment(session: Session) -> None:
    """The environments' values are read once per environment, not once per run: each run
    still gets its own environment's values, as a dict of its own."""
    on_h100 = [_run(session, day=d, commit=f"h{d}") for d in (1, 2)]
    on_a100 = _run(session, day=3, commit="x3", env=A100)
    week = {"project": "acme/model", "since": T0, "until": T0 + timedelta(days=7)}
    found = {r.id: r for r in runs_in_period(session, **week)}
    assert [found[i].environment for i in [*on_h100, on_a100]] == [H100, H100, A100]
    found[on_h100[0]].environment["gpu"] = "changed"
    assert found[on_h100[1]].environment == H100


def test_runs_by_run_time_follow_the_commit_not_the_storage(session: Session) -> None:
    # Backfilled: commits of days 1 and 2 stored on day 30; a run without a commit time
    # belongs to when it was stored.
    old = _run(session, day=1, commit="b1", stored_day=30)
    older = _run(session, day=2, commit="b2", stored_day=30)
    local = _run(session, day=3, commit=None)
    week = {"project": "acme/model", "since": T0, "until": T0 + timedelta(days=7)}
    assert [r.id for r in runs_in_period(session, **week, by_run_time=True)] == [old, older, local]
    assert [r.id for r in runs_in_period(session, **week)] == [local]
    assert runs_in_period(session, **week, by_run_time=True, branch="feature") == []
