"""Retention (issue 17): ``perfci db prune`` rolls a year of runs up and every weekly report and
chart of the base branch still reads the same, the space is given back, base-branch runs can
stay whole for longer, and a pruned run still serves as a baseline and as an idempotent retry.

The store holds a year of runs ingested through the real use case: a ``main`` run every third
day and a pull request's run every week, three repeats each, a step and four kernels with
lognormal noise, and a +8 % step (one kernel slower) from day 200. Everything runs on SQLite and
PostgreSQL.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from db_fixtures import make_context
from sqlalchemy import Engine, func, select, text
from sqlalchemy.orm import Session, sessionmaker

from perfci.cli.main import main
from perfci.core.model import Metric, MetricKind, Profile, SeriesKey
from perfci.store import engines, partitions, queries
from perfci.store.samples import run_samples_checked
from perfci.store.schema import Run, Sample, SampleSummary
from perfci.usecases.admin.prune import prune_store
from perfci.usecases.browse import pages as browse
from perfci.usecases.submit.compare import compare_stored_run
from perfci.usecases.submit.ingest import ingest_run
from perfci.usecases.weekly.report import build_weekly_report
from perfci.usecases.weekly.report_json import report_to_dict

PROJECT, BENCHMARK = "acme/model", "train"
T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)  # a Monday
NOW = T0 + timedelta(days=364)
KERNELS = {"gemm": 5e6, "softmax": 2e6, "layernorm": 1e6, "memcpy_h2d": 0.5e6}
STEP = SeriesKey(kind=MetricKind.STEP, name="train_step")
SLOW_FROM = 200  # day from which softmax (and so the step) is slower


def _profile(day: int, rng: np.random.Generator) -> Profile:
    kernels = {
        name: level * (1.4 if name == "softmax" and day >= SLOW_FROM else 1.0)
        for name, level in KERNELS.items()
    }
    noisy = {name: value * float(rng.lognormal(0, 0.01)) for name, value in kernels.items()}
    step = sum(noisy.values()) * 1.05
    metrics = [Metric(kind=MetricKind.STEP, name="train_step", calls=1, total_ns=step)]
    metrics += [
        Metric(kind=MetricKind.KERNEL, name=name, calls=10, total_ns=value)
        for name, value in noisy.items()
    ]
    return Profile(label="p", format="synthetic", source=f"day{day}.txt", metrics=metrics, steps=1)


def _ingest(sessions: sessionmaker[Session], day: int, rng: np.random.Generator, **ctx: Any) -> int:
    when = T0 + timedelta(days=day)
    with sessions() as session:
        result = ingest_run(
            session,
            context=make_context(
                commit=f"{day:040x}",
                commit_time=when.isoformat(),
                ci_provider="test",
                ci_run_id=f"{ctx.get('branch', 'main')}-{day}",
                ci_run_attempt=1,
                **ctx,
            ),
            benchmark=BENCHMARK,
            repeats=[[_profile(day, rng)] for _ in range(3)],
            created_at=when,
        )
    return result.run_id


def _fill(url: str) -> dict[str, list[int]]:
    """A year of runs; their ids by kind ("main", "pr")."""
    rng = np.random.default_rng(17)
    engine = engines.make_engine(url)
    sessions = engines.make_sessionmaker(engine)
    ids: dict[str, list[int]] = {"main": [], "pr": []}
    try:
        for day in range(0, 364):
            if day % 3 == 0:
                ids["main"].append(_ingest(sessions, day, rng, branch="main"))
            if day % 7 == 1:
                pr = {"branch": f"feature-{day}", "pr_number": day, "base_branch": "main"}
                ids["pr"].append(_ingest(sessions, day, rng, **pr))
    finally:
        engine.dispose()
    return ids


@pytest.fixture
def year(migrated_url: str) -> Iterator[tuple[str, dict[str, list[int]], Engine]]:
    ids = _fill(migrated_url)
    engine = engines.make_engine(migrated_url)
    yield migrated_url, ids, engine
    engine.dispose()


def _weeks() -> list[tuple[datetime, datetime]]:
    return [(T0 + timedelta(weeks=w), T0 + timedelta(weeks=w + 1)) for w in range(52)]


def _everything_the_base_branch_shows(engine: Engine) -> dict[str, Any]:
    """Every weekly report of the year, the dashboard's step chart, the step's history as
    per-run medians, and the series list of each run of main."""
    with Session(engine) as session:
        reports = [
            report_to_dict(
                build_weekly_report(
                    session, project=PROJECT, since=since, until=until, branch="main", record=False
                )
            )
            for since, until in _weeks()
        ]
        _, chart = browse.step_history(session, PROJECT, BENCHMARK, branch="main")
        history = queries.series_history(
            session, project=PROJECT, benchmark=BENCHMARK, series=STEP, branch="main"
        )
    return {
        "reports": reports,
        "chart": [(p.run_id, p.value_ns, p.time) for p in chart],
        "history": [(p.run_id, statistics.median(p.values)) for p in history],
    }


def _counts(engine: Engine) -> tuple[int, int, int]:
    """(raw samples, summaries, pruned runs)."""
    with Session(engine) as session:
        return (
            session.execute(select(func.count()).select_from(Sample)).scalar_one(),
            session.execute(select(func.count()).select_from(SampleSummary)).scalar_one(),
            session.execute(
                select(func.count()).select_from(Run).where(Run.pruned_at.is_not(None))
            ).scalar_one(),
        )


@pytest.mark.slow
def test_a_pruned_year_answers_every_weekly_report_and_chart_of_main_alike(
    year: tuple[str, dict[str, list[int]], Engine],
) -> None:
    url, ids, engine = year
    before = _everything_the_base_branch_shows(engine)
    assert sum(len(r["benchmarks"]) for r in before["reports"]) >= 50
    assert any(r["change_points"] for r in before["reports"])  # the day-200 step is found
    assert len(before["history"]) == len(ids["main"]) == 122

    report = prune_store(url, keep="90d", now=NOW)

    # Runs stored before 2025-10-06 (NOW - 90 d) go, a whole month at a time: Jan..Sep 2025.
    assert [str(m.month) for m in report.months] == [f"2025-{m:02d}" for m in range(1, 10)]
    raw, summaries, pruned = _counts(engine)
    old = [r for r in ids["main"] + ids["pr"] if _day_of(engine, r) < datetime(2025, 10, 1)]
    assert pruned == len(old) == sum(m.runs for m in report.months)
    assert summaries == 5 * len(old)  # one per run and series
    assert raw == 15 * (len(ids["main"]) + len(ids["pr"]) - len(old))  # 5 series × 3 repeats
    assert sum(m.samples for m in report.months) == 15 * len(old)

    after = _everything_the_base_branch_shows(engine)
    assert after == before  # the same numbers, to the last bit


def _day_of(engine: Engine, run_id: int) -> datetime:
    with Session(engine) as session:
        found = session.execute(select(Run.created_at).where(Run.id == run_id)).scalar_one()
    return found.replace(tzinfo=None)


@pytest.mark.slow
def test_prune_frees_the_space_and_drops_whole_months(
    year: tuple[str, dict[str, list[int]], Engine],
) -> None:
    url, _, engine = year
    with Session(engine) as session:
        months_before = {str(p.month) for p in partitions.list_partitions(session)}
    report = prune_store(url, keep="90d", now=NOW)
    samples_before, summaries_before = report.bytes_before
    samples_after, summaries_after = report.bytes_after
    assert samples_after < samples_before * 0.40  # 3 of 12 months of raw samples left
    assert summaries_after > summaries_before
    assert report.freed > 0.4 * samples_before
    if engine.dialect.name == "postgresql":
        assert all(m.action == "dropped" and m.bytes_after == 0 for m in report.months)
        with Session(engine) as session:
            months_after = {str(p.month) for p in partitions.list_partitions(session)}
        assert months_before - months_after == {f"2025-{m:02d}" for m in range(1, 10)}
    else:
        assert all(m.action == "deleted" for m in report.months)

    again = prune_store(url, keep="90d", now=NOW)  # nothing left to do
    assert all(m.runs == 0 for m in again.months)
    assert again.bytes_after == report.bytes_after or engine.dialect.name == "sqlite"


@pytest.mark.slow
def test_base_branch_runs_can_keep_their_repeats_longer(
    year: tuple[str, dict[str, list[int]], Engine],
) -> None:
    url, ids, engine = year
    report = prune_store(url, keep="90d", keep_base="320d", now=NOW)
    # Jan 2025 is past both periods; Feb..Sep only past the pull requests' one.
    assert {m.scope for m in report.months if str(m.month) == "2025-01"} == {"all"}
    assert {m.scope for m in report.months if str(m.month) != "2025-01"} == {"not-base"}
    with Session(engine) as session:
        history = queries.series_history(
            session, project=PROJECT, benchmark=BENCHMARK, series=STEP, branch="main"
        )
        pruned = set(session.execute(select(Run.id).where(Run.pruned_at.is_not(None))).scalars())
    january = {r for r in ids["main"] if _day_of(engine, r) < datetime(2025, 2, 1)}
    assert pruned & set(ids["main"]) == january  # main's later runs keep their three repeats
    assert {len(p.values) for p in history if p.run_id not in january} == {3}
    assert {len(p.values) for p in history if p.run_id in january} == {1}
    old_prs = {r for r in ids["pr"] if _day_of(engine, r) < datetime(2025, 10, 1)}
    assert old_prs <= pruned
    if engine.dialect.name == "postgresql":
        rewritten = [m for m in report.months if m.scope == "not-base"]
        assert {m.action for m in rewritten} == {"rewritten"}
        # A month here is one heap page: the space shows on a real store (benchmarks/).
        assert all(m.bytes_after is not None and m.bytes_before for m in rewritten)
        assert all(m.bytes_after <= m.bytes_before for m in rewritten)  # type: ignore[operator]
        with Session(engine) as session:  # the swapped partition is a partition like the others
            names = {p.name for p in partitions.list_partitions(session)}
            indexes = (
                session.execute(
                    text(
                        "SELECT indexname FROM pg_indexes WHERE schemaname = 'perfci_partitions' "
                        "AND tablename = 'sample_y2025m05'"
                    )
                )
                .scalars()
                .all()
            )
        assert "sample_y2025m05" in names and indexes == ["sample_y2025m05_pkey"]

    # Later, the base branch's own period passes too.
    later = prune_store(url, keep="90d", keep_base="320d", now=NOW + timedelta(days=150))
    assert any(m.scope == "all" and m.runs for m in later.months)


@pytest.mark.slow
def test_a_pruned_run_serves_as_a_baseline_run_of_one_repeat_with_a_note(
    year: tuple[str, dict[str, list[int]], Engine],
) -> None:
    url, ids, engine = year
    prune_store(url, keep="90d", now=NOW)
    sessions = engines.make_sessionmaker(engine)
    new_run = _ingest(
        sessions,
        364,
        np.random.default_rng(3),
        branch="feature-x",
        pr_number=999,
        base_branch="main",
    )
    with sessions() as session:
        result = compare_stored_run(session, new_run, baseline_runs=60)
        checked = run_samples_checked(session, result.baseline.run_ids)
    summarised = set(checked.summarised)
    # The last 60 main runs reach back past October; the comparison keeps those since the
    # day-200 change (day 201 on): days 201..267 (to Sep 30) are summaries, 23 runs.
    assert result.baseline.runs == 55 and len(summarised) == 23
    assert summarised <= set(ids["main"])
    assert all(
        len(v) == 1
        for key, per_run in checked.samples.items()
        for r, v in per_run.items()
        if r in summarised
    )
    assert "23 of the 55 baseline runs are older than the raw-sample retention" in " ".join(
        result.notes
    )
    step = next(
        m for m in result.metrics if m.series is not None and m.series.kind is MetricKind.STEP
    )
    assert step.verdict.value in {"unchanged", "improvement", "regression", "inconclusive"}


def test_a_retry_of_a_pruned_run_is_the_stored_run(migrated_url: str) -> None:
    engine = engines.make_engine(migrated_url)
    sessions = engines.make_sessionmaker(engine)
    try:
        run_id = _ingest(sessions, 10, np.random.default_rng(5), branch="main")
        prune_store(migrated_url, keep="30d", now=NOW)
        assert _counts(engine) == (0, 5, 1)
        rng = np.random.default_rng(5)  # the same numbers again
        with sessions() as session:  # the same CI run id and attempt
            again = ingest_run(
                session,
                context=make_context(
                    commit=f"{10:040x}",
                    commit_time=(T0 + timedelta(days=10)).isoformat(),
                    ci_provider="test",
                    ci_run_id="main-10",
                    ci_run_attempt=1,
                    branch="main",
                ),
                benchmark=BENCHMARK,
                repeats=[[_profile(10, rng)] for _ in range(3)],
                created_at=T0 + timedelta(days=10),
            )
        assert (again.run_id, again.created) == (run_id, False)
    finally:
        engine.dispose()


def test_dry_run_changes_nothing_and_the_cli_says_what_it_would_do(
    migrated_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = engines.make_engine(migrated_url)
    sessions = engines.make_sessionmaker(engine)
    rng = np.random.default_rng(9)
    try:
        for day in (0, 3, 40):
            _ingest(sessions, day, rng, branch="main")
        code = main(["db", "prune", "--keep", "30d", "--dry-run", "--database-url", migrated_url])
        assert code == 0
        out = capsys.readouterr().out
        assert _counts(engine) == (45, 0, 0)
        assert "raw samples kept 30 days" in out and "would prune" in out
        # 2025-01 holds days 0 and 3; NOW is far past it, and past Feb (day 40) too.
        assert "2025-01: " in out and "2 runs, 30 samples" in out
        assert "2025-02: " in out and "1 runs, 15 samples" in out
        code = main(["db", "prune", "--keep", "30d", "--database-url", migrated_url])
        out = capsys.readouterr().out
        assert code == 0 and "pruned: samples" in out
        assert _counts(engine) == (0, 15, 3)
    finally:
        engine.dispose()


def test_prune_without_a_period_is_refused(
    migrated_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", "prune", "--database-url", migrated_url]) == 2
    assert "say how long raw samples are kept" in capsys.readouterr().err
    assert main(["db", "prune", "--keep", "3 months", "--database-url", migrated_url]) == 2
    assert "not a period" in capsys.readouterr().err


def test_deleting_a_pruned_run_deletes_its_summaries(migrated_url: str) -> None:
    from perfci.usecases.browse.runs import delete_run

    engine = engines.make_engine(migrated_url)
    sessions = engines.make_sessionmaker(engine)
    try:
        run_id = _ingest(sessions, 10, np.random.default_rng(5), branch="main")
        kept = _ingest(sessions, 300, np.random.default_rng(6), branch="main")
        prune_store(migrated_url, keep="30d", now=T0 + timedelta(days=320))
        assert _counts(engine) == (15, 5, 1)
        with sessions() as session:
            deleted = delete_run(session, run_id=run_id, actor="test")
        assert (deleted.samples, deleted.profiles) == (5, 3)  # its summaries, one per series
        assert _counts(engine) == (15, 0, 0)
        with sessions() as session:
            assert delete_run(session, run_id=kept, actor="test").samples == 15
        assert _counts(engine) == (0, 0, 0)
    finally:
        engine.dispose()


def test_every_base_branch_keeps_its_repeats_not_only_the_configured_default(
    migrated_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 31: ``--keep-base`` kept only the baseline branch's runs; ``master`` and
    ``release/*`` were rolled up. Base branches are the ``base_branches`` patterns."""
    engine = engines.make_engine(migrated_url)
    sessions = engines.make_sessionmaker(engine)
    rng = np.random.default_rng(3)
    try:
        runs = {
            branch: _ingest(sessions, 10, rng, branch=branch)
            for branch in ("main", "master", "release/1.2", "feature-x")
        }
        runs["pr"] = _ingest(sessions, 11, rng, branch="fix", pr_number=5, base_branch="main")
        args = ["db", "prune", "--keep", "30d", "--keep-base", "3650d"]
        assert main([*args, "--dry-run", "--database-url", migrated_url]) == 0
        out = capsys.readouterr().out
        assert "base branches: main, master, release/*" in out
        assert _counts(engine) == (75, 0, 0)  # a dry run
        prune_store(migrated_url, keep="30d", keep_base="3650d", now=T0 + timedelta(days=200))
        with Session(engine) as session:
            pruned = set(
                session.execute(select(Run.id).where(Run.pruned_at.is_not(None))).scalars()
            )
        assert pruned == {runs["feature-x"], runs["pr"]}
        # The patterns are a setting: a repository whose releases are `stable-*`.
        monkeypatch.setenv("PERFCI_BASE_BRANCHES", "trunk, stable-*")
        later = prune_store(
            migrated_url, keep="30d", keep_base="3650d", now=T0 + timedelta(days=200)
        )
        assert later.base_branches == ("main", "trunk", "stable-*")  # the baseline branch too
        with Session(engine) as session:
            pruned = set(
                session.execute(select(Run.id).where(Run.pruned_at.is_not(None))).scalars()
            )
        assert pruned == {runs["feature-x"], runs["pr"], runs["master"], runs["release/1.2"]}
    finally:
        engine.dispose()
