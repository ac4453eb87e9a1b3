"""Adaptive repeats: the fixed plan of looks, and ``perfci check`` running more repeats (history
mode) or more pairs (``--ab``) only while that can settle the verdict.

The benchmark is ``ab_repo``'s real script; ``sequence.json`` / ``noise.json`` give chosen
processes a deterministic GEMM multiplier, so that the first look is inconclusive for want of
data whatever the machine's speed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ab_repo import assert_cleaned, check_ab, clean_env, git, make_repo
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from perfci.cli.main import main
from perfci.core.model import MetricComparison, RunComparison, Verdict
from perfci.store.engines import make_engine
from perfci.store.schema import Run, RunArrays
from perfci.store.schema_service import Comparison
from perfci.usecases.check import looks as adaptive

__all__ = ["clean_env"]  # a fixture, imported for its name


# --- the plan ---------------------------------------------------------------------------------


def test_the_plan_is_fixed_up_front_and_spends_alpha_evenly() -> None:
    plan = adaptive.plan_looks(5, None)
    assert plan.sizes == (5, 10, 15) and plan.looks == 3
    assert plan.alpha(0.05) == pytest.approx(0.05 / 3)
    assert adaptive.plan_looks(5, 12).sizes == (5, 10, 12)
    assert adaptive.plan_looks(3, 3).sizes == (3,)  # max = repeats: adaptive repeats off
    assert adaptive.plan_looks(5, 2).sizes == (5,)
    assert adaptive.plan_looks(5, 2).alpha(0.05) == 0.05


def _result(verdict: Verdict, *lines: MetricComparison) -> RunComparison:
    return RunComparison(benchmark="b", verdict=verdict, metrics=list(lines))


def _line(verdict: Verdict, needed: int | None = None, *, gated: bool = True) -> MetricComparison:
    return MetricComparison(key="k", verdict=verdict, gated=gated, repeats_needed=needed)


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        (
            _result(Verdict.REGRESSION, _line(Verdict.REGRESSION), _line(Verdict.INCONCLUSIVE, 6)),
            adaptive.REGRESSION_FOUND,
        ),
        (
            _result(
                Verdict.UNCHANGED,
                _line(Verdict.UNCHANGED),
                _line(Verdict.INCONCLUSIVE, 8, gated=False),
            ),
            adaptive.DECIDED,
        ),
        (_result(Verdict.NO_BASELINE, _line(Verdict.NO_BASELINE)), adaptive.NO_BASELINE),
        # An unchanged step does not hide a gated kernel that more repeats would settle.
        (
            _result(Verdict.UNCHANGED, _line(Verdict.UNCHANGED), _line(Verdict.INCONCLUSIVE, 9)),
            None,
        ),
        (
            _result(
                Verdict.IMPROVEMENT, _line(Verdict.IMPROVEMENT), _line(Verdict.INCONCLUSIVE, 9)
            ),
            None,
        ),
        (_result(Verdict.INCONCLUSIVE, _line(Verdict.INCONCLUSIVE, None)), adaptive.NOT_BY_REPEATS),
        (_result(Verdict.INCONCLUSIVE, _line(Verdict.INCONCLUSIVE, 40)), adaptive.NOT_BY_REPEATS),
    ],
)
def test_when_to_stop(result: RunComparison, reason: str | None) -> None:
    plan = adaptive.plan_looks(5, None)
    assert (
        adaptive.next_reason(
            result, done=5, plan=plan, seconds_per_repeat=1.0, spent=5.0, budget=None
        )
        == reason
    )


def test_the_budget_and_the_maximum_stop_the_loop() -> None:
    plan = adaptive.plan_looks(5, None)
    open_run = _result(Verdict.INCONCLUSIVE, _line(Verdict.INCONCLUSIVE, 12))
    assert (
        adaptive.next_reason(
            open_run, done=5, plan=plan, seconds_per_repeat=2.0, spent=10.0, budget=20.0
        )
        is None
    )  # 5 more repeats: 10 s, fits exactly
    assert (
        adaptive.next_reason(
            open_run, done=5, plan=plan, seconds_per_repeat=2.0, spent=10.0, budget=19.0
        )
        == adaptive.OVER_BUDGET
    )
    assert (
        adaptive.next_reason(
            open_run, done=15, plan=plan, seconds_per_repeat=2.0, spent=30.0, budget=None
        )
        == adaptive.AT_MAXIMUM
    )


def test_the_note_says_what_ran_and_why_it_stopped() -> None:
    plan = adaptive.plan_looks(5, None)
    note = adaptive.note(done=10, plan=plan, looks=2, alpha=0.05, reason=adaptive.DECIDED)
    assert note == (
        "Adaptive repeats: 10 of at most 15 run, 2 looks of 3 planned (after 5, "
        "10, 15); each look tested at alpha 0.05/3 = 0.017; stopped: every gated "
        "metric is decided."
    )


# --- history mode -----------------------------------------------------------------------------

BASELINE_RUNS = 8


def _history(repo: Path, url: str, monkeypatch: pytest.MonkeyPatch, *, noise: float) -> None:
    """Baseline runs of two repeats each on ``main~1``, checked out, then back to ``feature``.

    Every run's GEMM repeats are ``1 + noise`` and ``1 - noise``: run values agree, but a
    two-repeat candidate is uncertain by the within-run spread, which more repeats shrink.
    """
    sequence = [1 + noise, 1 - noise] * BASELINE_RUNS + [1 + noise, 1 - noise]
    (repo / "sequence.json").write_text(json.dumps(sequence), encoding="utf-8")
    git(repo, "checkout", "-q", "main~1")
    sha = git(repo, "rev-parse", "HEAD")
    for run in range(BASELINE_RUNS):
        monkeypatch.setenv("RUN_SEED", str(run))
        assert (
            main(
                [
                    "check",
                    "--database-url",
                    url,
                    "--branch",
                    "main",
                    "--commit",
                    sha,
                    "--ci-run-id",
                    f"main-{run}",
                    "--repeats",
                    "2",
                    "--max-repeats",
                    "2",
                ]
            )
            == 0
        )
    git(repo, "checkout", "-q", "feature")
    monkeypatch.setenv("RUN_SEED", "pr")


def _count(url: str, model: type[Run] | type[Comparison] | type[RunArrays]) -> int:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return int(connection.execute(select(func.count()).select_from(model)).scalar_one())
    finally:
        engine.dispose()


def _check(url: str, report: Path, *args: str) -> int:
    return main(
        [
            "check",
            "--database-url",
            url,
            "--base-branch",
            "main",
            "--pr",
            "7",
            "--ci-run-id",
            "job-1",
            "--repeats",
            "2",
            "--json-out",
            str(report),
            *args,
        ]
    )


def test_an_inconclusive_first_look_runs_more_repeats_until_decided(
    tmp_path: Path, clean_env: Path, migrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path, {})
    monkeypatch.chdir(repo)
    _history(repo, migrated_url, monkeypatch, noise=0.01)
    report = tmp_path / "report.json"

    assert _check(migrated_url, report, "--max-repeats", "8") == 0

    result = json.loads(report.read_text(encoding="utf-8"))
    assert result["verdict"] == "unchanged"
    ran = {m["n_candidate"] for m in result["metrics"]}
    assert len(ran) == 1 and 2 < ran.pop() <= 8
    assert "stopped: every gated metric is decided" in result["notes"][-1]
    assert "alpha 0.05/4" in result["notes"][-1]
    # The looks were rolled back: one more run and one more comparison, the final ones, and
    # the values of that one run kept as arrays (those of the looks went with them).
    assert _count(migrated_url, Run) == BASELINE_RUNS + 1
    assert _count(migrated_url, Comparison) == BASELINE_RUNS + 1
    assert _count(migrated_url, RunArrays) == BASELINE_RUNS + 1


def test_a_decided_first_look_runs_no_more_repeats(
    tmp_path: Path, clean_env: Path, migrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path, {"gemm": 3.0})
    monkeypatch.chdir(repo)
    _history(repo, migrated_url, monkeypatch, noise=0.01)
    report = tmp_path / "report.json"

    assert _check(migrated_url, report, "--max-repeats", "8") == 1

    result = json.loads(report.read_text(encoding="utf-8"))
    assert result["verdict"] == "regression"
    assert {m["n_candidate"] for m in result["metrics"]} == {2}
    assert "2 of at most 8 run, 1 look of 4 planned" in result["notes"][-1]
    assert not (repo / ".perfci" / "runs" / "tiny" / "more-1").exists()
    assert _count(migrated_url, Run) == BASELINE_RUNS + 1


# --- A/B mode ---------------------------------------------------------------------------------


def test_ab_runs_more_pairs_until_decided_and_stores_them_once(
    tmp_path: Path, clean_env: Path, migrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first three pull-request processes are ±2 % noisy in their GEMM: too wide to decide.
    repo = make_repo(tmp_path, {}, {"noise.json": {"pr": [1.02, 0.98, 1.02]}})
    monkeypatch.chdir(repo)
    report = tmp_path / "report.json"

    assert check_ab(repo, migrated_url, "--max-repeats", "12", "--json-out", str(report)) == 0

    result = json.loads(report.read_text(encoding="utf-8"))
    assert result["verdict"] == "unchanged"
    pairs = {m["n_candidate"] for m in result["metrics"]}
    assert len(pairs) == 1 and 3 < pairs.pop() <= 12
    assert "Adaptive pairs" in result["notes"][-1]
    assert "stopped: every gated metric is decided" in result["notes"][-1]
    assert _count(migrated_url, Run) == 2
    assert_cleaned(repo, clean_env)


def test_ab_with_a_decided_first_look_runs_no_more_pairs(
    tmp_path: Path, clean_env: Path, migrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path, {"gemm": 3.0})
    monkeypatch.chdir(repo)
    report = tmp_path / "report.json"

    assert check_ab(repo, migrated_url, "--max-repeats", "12", "--json-out", str(report)) == 1

    result = json.loads(report.read_text(encoding="utf-8"))
    assert {m["n_candidate"] for m in result["metrics"]} == {3}
    assert "3 of at most 12 run, 1 look of 4 planned" in result["notes"][-1]
    assert sorted(p.name for p in (repo / ".perfci" / "runs" / "tiny" / "ab").iterdir()) == [
        "base-0",
        "base-1",
        "base-2",
        "pr-0",
        "pr-1",
        "pr-2",
    ]


def test_budget_is_a_setting_like_the_others(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from perfci.core.settings import get_settings

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PERFCI_BUDGET", "30")
    (tmp_path / "pyproject.toml").write_text(
        "[tool.perfci]\nmax-repeats = 12\nab-pairs = 4\n", encoding="utf-8"
    )
    settings = get_settings({"ab_pairs": 6})  # a flag wins over the file
    assert (settings.budget, settings.max_repeats, settings.ab_pairs) == (30.0, 12, 6)


def test_a_tentative_look_is_kept_only_when_asked(migrated_url: str) -> None:
    from db_fixtures import make_context, make_profile

    from perfci.core.settings import Settings
    from perfci.store.db import open_store
    from perfci.usecases.submit.ingest import ingest_run

    def ingest(session: Session, sha: str) -> None:
        ingest_run(
            session,
            context=make_context(commit=sha),
            benchmark="b",
            repeats=[[make_profile({"gemm": 1e6})]],
        )

    store = open_store(Settings(database_url=migrated_url))
    try:
        with store.tentative() as work:  # a look that another batch follows
            ingest(work.session, "a" * 40)
        assert _count(migrated_url, Run) == 0
        with pytest.raises(RuntimeError), store.tentative() as work:
            ingest(work.session, "b" * 40)
            work.keep = True
            raise RuntimeError("the look failed")
        assert _count(migrated_url, Run) == 0
        with store.tentative() as work:  # the final look
            ingest(work.session, "c" * 40)
            work.keep = True
        assert _count(migrated_url, Run) == 1
    finally:
        store.close()
