"""Hostile inputs of the data path (issue 13): every one is refused cleanly or survived.

One suite that a future change cannot skip silently: nothing here has a skip condition except
the PostgreSQL parametrisation of the store fixtures, and
:func:`test_this_suite_cannot_be_skipped` checks that it stays so.

- bad values (negative, overflowing, infinite) are refused and nothing is written, and a
  run stored with one by an older perfci is left out of baselines, reports and charts;
- a run and its comparison are stored in one transaction;
- a gzip bomb stops while streaming, with the file and the cap named;
- edge weeks, malformed database URLs and a missing server extra give a message and exit 2;
- a retried run with other numbers is a conflict naming the stored run;
- names holding text-direction controls are shown, never obeyed.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from db_fixtures import make_context
from deadlines import scaled
from rich.console import Console
from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session

from perfci.analysis.compare import compare_run
from perfci.cli.main import main
from perfci.core.errors import ConfigError, InputTooLarge, InvalidValue, NotFoundError, RunConflict
from perfci.core.jsondoc import to_document
from perfci.core.model import BaselineInfo, Metric, MetricKind, Profile, RunContext, SeriesKey
from perfci.core.settings import Settings
from perfci.formats._textio import InflateLimits, inflate_limits, iter_lines, open_capped
from perfci.formats.registry import parse_file
from perfci.integrations.remote import upload_run
from perfci.report.console import print_comparison
from perfci.report.markdown import render_comment
from perfci.report.weekly_html import render_html
from perfci.report.weekly_markdown import render_markdown, render_slack
from perfci.store import db, engines, queries
from perfci.store.queries import HistoryPoint
from perfci.store.samples import run_samples, run_samples_checked
from perfci.store.schema import ProfileRow, Run, Sample
from perfci.store.schema_service import AuditEvent, Comparison
from perfci.usecases.browse.runs import DELETE_ACTION, delete_run
from perfci.usecases.submit import run as submit_module
from perfci.usecases.submit.ingest import ingest_run
from perfci.usecases.submit.prepare import CHECKED_CHUNK
from perfci.usecases.submit.run import submit_run
from perfci.usecases.weekly.report import build_weekly_report
from perfci.usecases.weekly.weeks import week_bounds

T0 = datetime(2026, 3, 2, tzinfo=UTC)  # a Monday
RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: "gemm\u202enrek" reads "gemmkern" reversed


def _count(session: Session, model: type) -> int:
    return int(session.execute(select(func.count()).select_from(model)).scalar_one())


def _run(
    name_ns: dict[str, float], *, steps: list[float] | None = None, label: str = "p"
) -> list[Profile]:
    """One repeat: kernels ``name → total ns`` and a step metric with ``steps`` samples."""
    metrics = [
        Metric(MetricKind.KERNEL, name, calls=1, total_ns=value) for name, value in name_ns.items()
    ]
    if steps is not None:
        metrics.append(Metric(MetricKind.STEP, "step", samples_ns=steps))
    return [Profile(label=label, format="test", source=f"{label}.json", metrics=metrics)]


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _table_counts(url: str) -> dict[str, int]:
    engine = engines.make_engine(url)
    try:
        with engine.connect() as connection:
            return {
                table: int(connection.execute(text(f'SELECT count(*) FROM "{table}"')).scalar_one())
                for table in ("run", "sample", "profile", "comparison")
            }
    finally:
        engine.dispose()


# --- 1. bad values: refused before anything is written ---------------------------------------


BAD_REPEATS = {
    "negative samples": (_run({"k": 5.0}, steps=[-5.0, -5.0, -5.0]), "samples_ns #0", "-5.0"),
    "absurdly large": (_run({"k": 5.0}, steps=[1.7e308]), "samples_ns #0", "1.7e+308"),
    # The mean of these would overflow; the bound refuses the first sample before that.
    "overflowing mean": (_run({"k": 5.0}, steps=[1.7e308, 1.7e308]), "samples_ns #0", "1.7e+308"),
    "beyond any duration": (_run({"k": 2e18}), "total_ns", "2e+18"),
    "negative total": (_run({"k": -5.0}), "total_ns", "-5.0"),
    "infinite total": (_run({"k": float("inf")}), "total_ns", "inf"),
    "NaN total": (_run({"k": float("nan")}), "total_ns", "nan"),
    # Divided by the steps as its row is built, it would overflow rather than be refused.
    "a total of 401 digits": (_run({"k": 10**400}, steps=[10.0]), "total_ns", "(401 digits)"),
    "huge calls": (
        [
            Profile(
                label="p",
                format="test",
                source="p.json",
                metrics=[Metric(MetricKind.KERNEL, "k", calls=10**400, total_ns=1.0)],
            )
        ],
        "calls",
        "1000",
    ),
}


@pytest.mark.parametrize("case", list(BAD_REPEATS))
def test_a_bad_value_is_refused_naming_it_and_nothing_is_written(
    session: Session, case: str
) -> None:
    repeat, field, shown = BAD_REPEATS[case]
    good = _run({"k": 5.0}, steps=[10.0, 10.0, 10.0])
    with pytest.raises(InvalidValue) as caught:
        ingest_run(session, context=make_context(), benchmark="b", repeats=[good, repeat])
    message = str(caught.value)
    assert "profile 'p' (p.json, repeat 2)" in message
    assert field in message and shown in message and "finite, non-negative" in message
    assert "'kernel:gpu:k'" in message or "'step:gpu:step'" in message
    assert (_count(session, Run), _count(session, Sample)) == (0, 0)


def test_a_bad_value_after_thousands_of_good_rows_writes_nothing(session: Session) -> None:
    """A run's sample rows are checked as they are written, a chunk at a time while the
    database stores the chunks before it: a bad value in the third chunk rolls back the two
    already sent, and the session stores the next run as usual."""
    names = {f"k{i}": 5.0 for i in range(CHECKED_CHUNK * 2 + 10)}
    bad = f"k{CHECKED_CHUNK * 2 + 5}"
    with pytest.raises(InvalidValue) as caught:
        ingest_run(
            session,
            context=make_context(),
            benchmark="b",
            repeats=[_run({**names, bad: -1.0})],
        )
    assert f"'kernel:gpu:{bad}', total_ns is -1.0" in str(caught.value)
    assert (_count(session, Run), _count(session, Sample)) == (0, 0)
    stored = ingest_run(session, context=make_context(), benchmark="b", repeats=[_run(names)])
    assert (stored.created, _count(session, Sample)) == (True, len(names))


_SEP = "\x1f"


def _profiles(*by_label: tuple[str, list[Metric]]) -> list[Profile]:
    """One repeat of a profile per label."""
    return [
        Profile(label=label, format="test", source=f"{label}.json", metrics=metrics)
        for label, metrics in by_label
    ]


def _kernel(name: str, scope: str | None = None) -> Metric:
    return Metric(MetricKind.KERNEL, name, scope=scope, calls=1, total_ns=1e5)


@pytest.mark.parametrize(
    ("repeat", "named"),
    [
        # Scope "s␟" with name "n", and scope "s" with name "␟n": the same digest.
        (
            _profiles(("p", [_kernel("n", scope="s" + _SEP), _kernel(_SEP + "n", scope="s")])),
            "kernel 'n', scope 's\\x1f'",
        ),
        (_profiles(("p", [_kernel("gemm"), _kernel("ge" + _SEP + "mm")])), "kernel 'ge\\x1fmm'"),
        # Two profiles in one repeat: each label is its series' section.
        (
            _profiles(("rank" + _SEP + "0", [_kernel("gemm")]), ("rank1", [_kernel("gemm")])),
            "kernel 'gemm', profile 'rank\\x1f0'",
        ),
    ],
    ids=["scope-and-name", "name", "label"],
)
def test_a_key_part_holding_the_separator_is_refused_and_nothing_is_written(
    session: Session, repeat: list[Profile], named: str
) -> None:
    """Series are digested with their parts joined by U+001F: a part holding it could digest
    like another series, of the run (a unique-key error from the database, before) or of the
    benchmark's history (the values filed under that series)."""
    with pytest.raises(ConfigError) as caught:
        ingest_run(session, context=make_context(), benchmark="b", repeats=[repeat])
    assert named in str(caught.value) and "U+001F" in str(caught.value)
    assert (_count(session, Run), _count(session, Sample)) == (0, 0)
    stored = ingest_run(session, context=make_context(), benchmark="b", repeats=[_run({"n": 1e5})])
    assert stored.created


_NUL, _LONE = "\x00", "\ud800"  # what no store keeps in a text: NUL, half a surrogate pair


@pytest.mark.parametrize(
    ("repeat", "named"),
    [
        (_profiles(("p", [_kernel("ge" + _NUL + "mm")])), "kernel 'ge\\x00mm': it holds U+0000"),
        (
            _profiles(("p", [_kernel("gemm", scope="s" + _LONE)])),
            "kernel 'gemm', scope 's\\ud800': it holds U+D800",
        ),
        (
            _profiles(("rank" + _NUL, [_kernel("gemm")]), ("rank1", [_kernel("gemm")])),
            "kernel 'gemm', profile 'rank\\x00': it holds U+0000",
        ),
        (
            _profiles(("p", [Metric(MetricKind.MEASURE, "mem", unit="GiB" + _NUL, value=3.0)])),
            "measure 'mem': its unit 'GiB\\x00' holds U+0000",
        ),
    ],
    ids=["name", "scope", "label", "unit"],
)
def test_a_series_holding_text_no_store_keeps_is_refused_and_nothing_is_written(
    session: Session, repeat: list[Profile], named: str
) -> None:
    """PostgreSQL keeps no NUL in a text (the write failed as a storage error, "as if the
    database were down": a 503 from the service) and no driver encodes a lone surrogate,
    which a JSON profile holds as an escape (a traceback on SQLite too). A series' name is
    what its values are filed under: refused, on both stores alike, naming the series."""
    with pytest.raises(ConfigError) as caught:
        ingest_run(session, context=make_context(), benchmark="b", repeats=[repeat])
    assert named in str(caught.value), caught.value
    assert (_count(session, Run), _count(session, Sample)) == (0, 0)


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("branch", "\udcff", "the run's branch '\\udcff' holds U+DCFF"),
        ("project", "acme" + _NUL, "the run's project 'acme\\x00' holds U+0000"),
        ("ci_url", "https://ci/" + _LONE, "the run's ci url 'https://ci/\\ud800' holds U+D800"),
    ],
    ids=["branch", "project", "ci_url"],
)
def test_a_run_named_with_text_no_store_keeps_is_refused_and_nothing_is_written(
    session: Session, field: str, value: str, named: str
) -> None:
    """Bytes of another encoding in a command-line argument or an environment variable (a CI
    branch name) reach Python as lone surrogates: the store's driver failed to encode them (a
    traceback, "internal error in perfci")."""
    context = dataclasses.replace(make_context(), **{field: value})
    with pytest.raises(ConfigError) as caught:
        ingest_run(session, context=context, benchmark="b", repeats=[_run({"k": 1e5})])
    assert named in str(caught.value), caught.value
    assert (_count(session, Run), _count(session, Sample)) == (0, 0)


def test_a_profile_describing_itself_with_such_text_is_stored_with_it_marked(
    session: Session,
) -> None:
    """A profile's metadata, file name, format and (one profile a repeat) label only describe
    it: a corrupted Nsight Compute report whose host name read NUL + ".0.1" was answered 503
    on PostgreSQL (benchmarks/service_fuzz.py). Each such character is stored as U+FFFD, keys
    included, on both stores; an escaped backslash and an emoji stay as they were."""
    profile = Profile(
        label="l" + _NUL,
        format="test",
        source="rank" + "\udcff" + ".json",
        metrics=[_kernel("gemm")],
        metadata={"host": _NUL + ".0.1", "k" + _LONE: [_LONE, 1], "kept": "\\u0000 \U0001f600"},
    )
    stored = ingest_run(session, context=make_context(), benchmark="b", repeats=[[profile]])
    row = session.execute(select(ProfileRow).where(ProfileRow.run_id == stored.run_id)).scalar_one()
    assert (row.label, row.format, row.source) == ("l\ufffd", "test", "rank\ufffd.json")
    assert row.meta == {
        "host": "\ufffd.0.1",
        "k\ufffd": ["\ufffd", 1],
        "kept": "\\u0000 \U0001f600",
    }


def test_a_command_given_bytes_that_are_not_utf8_says_so(
    capsys: pytest.CaptureFixture[str], migrated_url: str
) -> None:
    """Python reads an argument of another encoding as lone surrogates (here as they arrive
    from ``perfci project create $'acme/m\\xff'``): the driver could not encode them, and the
    command ended in a traceback and "internal error in perfci". Nothing is written."""
    code, _, err = _cli(capsys, "project", "create", "acme/m\udcff", "--database-url", migrated_url)
    assert code == 2, err
    assert "is not UTF-8 text: it holds U+DCFF" in err and "Traceback" not in err
    engine = engines.make_engine(migrated_url)
    try:
        with engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM project")).scalar_one() == 0
    finally:
        engine.dispose()


def test_a_bad_value_under_a_stored_runs_key_is_refused_as_bad(session: Session) -> None:
    """No row of a run whose key is stored already is written, so none is checked on its way:
    the run is checked whole, and the bad value is the answer rather than the conflict."""
    context = make_context(ci_run_id="42")
    ingest_run(session, context=context, benchmark="b", repeats=[_run({"k": 5.0})])
    with pytest.raises(InvalidValue, match=r"total_ns is -5\.0"):
        ingest_run(session, context=context, benchmark="b", repeats=[_run({"k": -5.0})])
    assert (_count(session, Run), _count(session, Sample)) == (1, 1)


def _bench(**fields: object) -> list[Profile]:
    """One repeat of a benchmark case (``bench``) and a headline value (``measure``)."""
    return [
        Profile(
            label="p",
            format="test",
            source="p.json",
            metrics=[
                Metric(MetricKind.BENCH, "case", calls=3, total_ns=3e6, samples_ns=[1e6] * 3),
                Metric(MetricKind.MEASURE, "tput", unit="tokens/s", value=50.0, total_ns=1.0),
                Metric(MetricKind.BENCH, "bad", calls=3, total_ns=3e6, **fields),  # type: ignore[arg-type]
            ],
        )
    ]


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"samples_ns": [-1e6, -1e6, -1e6]}, "samples_ns #0"),
        ({"unit": "tokens/s", "value": -50.0}, "value is -50.0"),
        ({"unit": "tokens/s", "samples": [50.0, float("nan")]}, "samples #1"),
        ({"step_totals_ns": [1e6, -1.0]}, "step_totals_ns #1"),
    ],
)
def test_a_bad_number_never_disarms_the_check_whatever_its_kind(
    session: Session, fields: dict[str, object], named: str
) -> None:
    """A ``bench`` or ``measure`` metric with a ``total_ns`` once kept negative samples: the
    run was stored, and a pull request 2x slower carrying one got ``no-baseline`` (issue 31)."""
    good = _bench(samples_ns=[1e6] * 3)
    for day in range(3):
        submit_run(
            session,
            context=make_context(commit=f"base{day}"),
            benchmark="b",
            repeats=[good, good],
            settings=Settings(),
        )
    stored = (_count(session, Run), _count(session, Sample))
    slower = _bench(**fields)
    for metric in slower[0].metrics[:1]:
        metric.samples_ns = [2e6] * 3  # the pull request: 2x slower
    with pytest.raises(InvalidValue) as caught:
        submit_run(
            session,
            context=make_context(commit="pr", branch="feature", pr_number=1, base_branch="main"),
            benchmark="b",
            repeats=[slower, slower],
            settings=Settings(),
        )
    assert "'bench:gpu:bad'" in str(caught.value) and named in str(caught.value)
    assert (_count(session, Run), _count(session, Sample)) == stored


def test_sums_of_a_series_listed_twice_are_checked_too(session: Session) -> None:
    # Two entries of one kernel in one repeat are summed at ingest: each is in range, their
    # sum is beyond the largest number perfci stores.
    repeat = [
        Profile(
            label="p",
            format="test",
            source="p.json",
            metrics=[
                Metric(MetricKind.KERNEL, "k", calls=1, total_ns=6e17),
                Metric(MetricKind.KERNEL, "k", calls=1, total_ns=6e17),
            ],
        )
    ]
    with pytest.raises(InvalidValue, match="sum of its entries"):
        ingest_run(session, context=make_context(), benchmark="b", repeats=[repeat])
    assert _count(session, Run) == 0


def test_submit_refuses_a_bad_value_before_storing(session: Session) -> None:
    with pytest.raises(InvalidValue):
        submit_run(
            session,
            context=make_context(),
            benchmark="b",
            repeats=[_run({"k": -1.0})],
            settings=Settings(),
        )
    assert (_count(session, Run), _count(session, Comparison)) == (0, 0)


def test_cli_ingest_of_a_bad_value_exits_2_and_stores_nothing(
    migrated_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good, bad = tmp_path / "r0.json", tmp_path / "r1.json"
    good.write_text(json.dumps(to_document(_run({"gemm": 5.0}, steps=[10.0, 11.0]))))
    bad.write_text(json.dumps(to_document(_run({"gemm": 5.0}, steps=[1.7e308, 1.7e308]))))
    code, _, err = _cli(
        capsys,
        "ingest",
        str(good),
        str(bad),
        "-b",
        "b",
        "--project",
        "p",
        "--commit",
        "abc",
        "--branch",
        "main",
        "--database-url",
        migrated_url,
    )
    assert code == 2
    assert "'step:gpu:step'" in err and "1.7e+308" in err and "nothing was stored" in err
    assert "Traceback" not in err
    assert _table_counts(migrated_url)["run"] == 0


def test_a_run_without_a_single_metric_is_refused_and_nothing_stored(
    migrated_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An MLPerf summary of blank lines parses (the reader says it holds no result) but holds
    nothing to store: before, an empty run was stored and stood in the baseline."""
    rule = "=" * 48
    empty = tmp_path / "mlperf_log_summary.txt"
    empty.write_text(f"{rule}\nMLPerf Results Summary\n{rule}\n" + (" " * 2048 + "x\n") * 4)
    code, _, err = _cli(
        capsys,
        "ingest",
        str(empty),
        "-b",
        "b",
        "--project",
        "p",
        "--commit",
        "abc",
        "--branch",
        "main",
        "--database-url",
        migrated_url,
    )
    assert code == 2, err
    assert "no metrics in" in err and "nothing to store" in err
    assert "holds no throughput or latency result" in err
    assert _table_counts(migrated_url)["run"] == 0


# --- 1. a bad value stored by an older perfci: skipped with a note ----------------------------


def _history(session: Session, runs: int = 6, *, benchmark: str = "b") -> list[int]:
    rng = np.random.default_rng(3)
    ids = []
    for i in range(runs):
        context = make_context(commit=f"c{i:03d}", commit_time=(T0 + timedelta(days=i)).isoformat())
        step = [float(v) for v in 1e7 * np.exp(rng.normal(0, 0.01, 3))]
        result = ingest_run(
            session,
            context=context,
            benchmark=benchmark,
            repeats=[_run({"gemm": 5e6 * (1 + 0.01 * i)}, steps=step) for _ in range(2)],
            created_at=T0 + timedelta(days=i, hours=1),
        )
        ids.append(result.run_id)
    return ids


def _spoil(session: Session, run_id: int, value: float) -> None:
    """What a perfci older than issue 13 could store: a bad value, written directly."""
    session.execute(update(Sample).where(Sample.run_id == run_id).values(value=value))
    session.flush()


@pytest.mark.parametrize("value", [-5.0, float("inf")])
def test_a_stored_bad_run_is_left_out_of_the_baseline_with_its_id(
    session: Session, value: float
) -> None:
    ids = _history(session)
    _spoil(session, ids[2], value)
    checked = run_samples_checked(session, ids)
    assert checked.skipped == [ids[2]]
    assert all(ids[2] not in by_run for by_run in checked.samples.values())
    assert all(len(by_run) == len(ids) - 1 for by_run in checked.samples.values())
    assert ids[2] not in next(iter(run_samples(session, ids).values()))
    # The next upload of the benchmark is compared, not refused (it was 400 before).
    pr = make_context(
        commit="f" * 40,
        branch="pr",
        base_branch="main",
        ci_run_id="pr1",
        commit_time=(T0 + timedelta(days=9)).isoformat(),
    )
    result = submit_run(
        session,
        context=pr,
        benchmark="b",
        settings=Settings(),
        repeats=[_run({"gemm": 5e6}, steps=[1e7, 1e7, 1e7])] * 2,
    )
    assert result.ingest.created and result.comparison.metrics


def test_the_weekly_report_leaves_a_stored_bad_run_out_with_a_note(session: Session) -> None:
    ids = _history(session, runs=8)
    _spoil(session, ids[3], -5.0)
    report = build_weekly_report(
        session, project="acme/model", since=T0, until=T0 + timedelta(days=8), branch="main"
    )
    (trend,) = report.benchmarks
    assert any(f"run {ids[3]}" in note and "perfci runs delete" in note for note in trend.notes)
    assert len(trend.points) == len(ids) - 1


def test_a_chart_leaves_points_with_bad_values_out() -> None:
    now = T0
    points = [
        HistoryPoint(run_id=i, commit=None, commit_time=None, created_at=now, values=values)
        for i, values in enumerate([[1.0, 2.0], [-5.0], [float("inf")], [3.0]])
    ]
    kept, skipped = queries.drop_bad_points(points)
    assert [p.run_id for p in kept] == [0, 3] and skipped == [1, 2]


def test_the_dashboard_chart_and_series_api_leave_a_stored_bad_run_out(session: Session) -> None:
    from perfci.usecases.browse import pages as browse

    ids = _history(session)
    _spoil(session, ids[4], float("inf"))
    series, points = browse.step_history(session, "acme/model", "b", branch="main")
    assert series is not None and [p.run_id for p in points] == ids[:4] + ids[5:]
    history = browse.series_history(session, "acme/model", "b", series=series, branch="main")
    assert ids[4] not in [p.run_id for p in history] and len(history) == len(ids) - 1


# --- 1. a run and its comparison: one transaction ---------------------------------------------


def test_a_failure_between_compare_and_save_leaves_nothing(
    migrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = db.open_store(Settings(database_url=migrated_url))

    def crash(*_args: object, **_kwargs: object) -> int:
        raise RuntimeError("injected: the process dies between compare and save")

    try:
        monkeypatch.setattr(submit_module, "save_comparison", crash)
        with store.sessions() as session, pytest.raises(RuntimeError, match="injected"):
            submit_run(
                session,
                context=make_context(ci_run_id="9"),
                benchmark="b",
                repeats=[_run({"k": 5.0})],
                settings=Settings(),
            )
        assert _table_counts(migrated_url) == {"run": 0, "sample": 0, "profile": 0, "comparison": 0}
        monkeypatch.undo()
        with store.sessions() as session:
            result = submit_run(
                session,
                context=make_context(ci_run_id="9"),
                benchmark="b",
                repeats=[_run({"k": 5.0})],
                settings=Settings(),
            )
        assert result.ingest.created
        assert _table_counts(migrated_url) == {"run": 1, "sample": 1, "profile": 1, "comparison": 1}
    finally:
        store.close()


# --- 1. deleting a run, audited ---------------------------------------------------------------


def test_delete_run_removes_everything_of_the_run_and_audits_it(session: Session) -> None:
    first = submit_run(
        session,
        context=make_context(ci_run_id="1"),
        benchmark="b",
        repeats=[_run({"k": 5.0, "j": 1.0})] * 2,
        settings=Settings(),
    )
    other = ingest_run(
        session,
        context=make_context(project="other/b", ci_run_id="1"),
        benchmark="b",
        repeats=[_run({"k": 5.0})],
    )
    run_id = first.ingest.run_id
    with pytest.raises(NotFoundError) as hidden:
        delete_run(session, run_id=run_id, actor="token:ci", project="other/b")
    with pytest.raises(NotFoundError) as missing:
        delete_run(session, run_id=999_999, actor="token:ci", project="other/b")
    assert str(hidden.value).replace(str(run_id), "N") == str(missing.value).replace("999999", "N")
    deleted = delete_run(session, run_id=run_id, actor="cli:ops", project="acme/model")
    assert (deleted.samples, deleted.profiles, deleted.comparisons) == (4, 2, 1)
    assert session.execute(select(Run.id)).scalars().all() == [other.run_id]
    for model in (Sample, ProfileRow):
        assert (
            session.execute(
                select(func.count()).select_from(model).where(model.run_id == run_id)
            ).scalar_one()
            == 0
        )
    assert _count(session, Comparison) == 0
    (event,) = session.execute(select(AuditEvent)).scalars().all()
    assert (event.actor, event.action, event.project, event.target) == (
        "cli:ops",
        DELETE_ACTION,
        "acme/model",
        f"run {run_id}",
    )
    assert event.detail["samples"] == 4 and event.detail["benchmark"] == "b"
    with pytest.raises(NotFoundError):
        delete_run(session, run_id=run_id, actor="cli:ops")


def test_cli_runs_delete_asks_then_deletes(
    migrated_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = db.open_store(Settings(database_url=migrated_url))
    try:
        with store.sessions() as session:
            run_id = ingest_run(
                session, context=make_context(), benchmark="b", repeats=[_run({"k": 5.0})]
            ).run_id
    finally:
        store.close()
    code, out, _ = _cli(
        capsys,
        "runs",
        "list",
        "-b",
        "b",
        "--project",
        "acme/model",
        "--database-url",
        migrated_url,
        "--json",
    )
    assert code == 0 and [r["id"] for r in json.loads(out)] == [run_id]
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    code, _, err = _cli(capsys, "runs", "delete", str(run_id), "--database-url", migrated_url)
    assert code == 2 and "not deleted" in err
    assert _table_counts(migrated_url)["run"] == 1
    code, _, err = _cli(
        capsys, "runs", "delete", str(run_id), "--yes", "--database-url", migrated_url
    )
    assert code == 0 and f"deleted run {run_id}" in err
    assert _table_counts(migrated_url)["run"] == 0
    code, _, err = _cli(
        capsys, "runs", "delete", str(run_id), "--yes", "--database-url", migrated_url
    )
    assert code == 2 and f"no run with id {run_id}" in err


# --- 2. gzip bombs ----------------------------------------------------------------------------


def _bomb(
    path: Path,
    inflated_mib: int,
    *,
    head: bytes = b'{"traceEvents": [',
    tail: bytes = b"]}",
    filler: bytes = b" ",
) -> Path:
    """``head`` + ``inflated_mib`` MiB of ``filler`` + ``tail``, gzip-compressed as it goes
    (the test never holds the inflated bytes either)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: a gzip container
    block = filler * ((1 << 20) // len(filler))
    with path.open("wb") as handle:
        handle.write(packer.compress(head))
        for _ in range(inflated_mib):
            handle.write(packer.compress(block))
        handle.write(packer.compress(tail) + packer.flush())
    return path


@pytest.fixture(scope="module")
def bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 128 KB .json.gz that inflates to 128 MiB (a valid, if empty, Chrome trace)."""
    return _bomb(tmp_path_factory.mktemp("bomb") / "trace.json.gz", 128)


@pytest.mark.parametrize(
    "command",
    [
        ["parse"],
        ["ingest", "-b", "b", "--project", "p", "--commit", "c", "--branch", "main"],
        ["check", "-b", "b", "--project", "p", "--commit", "c", "--branch", "main"],
    ],
)
def test_cli_refuses_a_gzip_bomb_while_streaming(
    bomb: Path, migrated_url: str, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert bomb.stat().st_size < 1 << 20
    files = ["--profile", str(bomb)] if command[0] == "check" else [str(bomb)]
    database = [] if command[0] == "parse" else ["--database-url", migrated_url]
    code, _, err = _cli(capsys, *command, *files, *database)
    assert code == 2, err
    assert str(bomb) in err and "inflates more than 200 times" in err and "Traceback" not in err
    if database:
        assert _table_counts(migrated_url)["run"] == 0


def test_the_inflated_size_cap_names_the_limit(bomb: Path) -> None:
    limits = InflateLimits(max_bytes=8 << 20, max_ratio=1e9)
    with inflate_limits(limits), pytest.raises(InputTooLarge) as caught:
        parse_file(bomb)
    assert str(bomb) in str(caught.value) and "beyond 8.0 MiB" in str(caught.value)


def test_line_streams_of_a_bomb_stop_at_the_cap(tmp_path: Path) -> None:
    path = _bomb(tmp_path / "log.txt.gz", 64, head=b"", tail=b"", filler=b"\n")
    lines = 0
    with pytest.raises(InputTooLarge, match="inflates more than 200 times"):
        for _ in iter_lines(path, format="test"):
            lines += 1
    assert 0 < lines < 64 << 20  # it stopped while streaming, after the free first MiB


def test_a_text_reader_over_open_capped_stops_and_closes_its_file(tmp_path: Path) -> None:
    path = _bomb(tmp_path / "log.txt.gz", 64, head=b"", tail=b"", filler=b"x" * 99 + b"\n")
    raw = path.open("rb")
    reader = io.TextIOWrapper(
        open_capped(raw, source=str(path), close_raw=True), encoding="utf-8", errors="replace"
    )
    with reader, pytest.raises(InputTooLarge, match=re.escape(str(path))):
        for _ in reader:
            pass
    assert raw.closed


def test_an_ordinary_gzip_profile_still_parses(tmp_path: Path) -> None:
    events = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": f"k{i % 7}",
            "ts": i * 10,
            "dur": 5,
            "pid": 0,
            "tid": 7,
        }
        for i in range(20_000)
    ]
    path = tmp_path / "trace.json.gz"
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)
    path.write_bytes(packer.compress(json.dumps({"traceEvents": events}).encode()) + packer.flush())
    assert parse_file(path)


# --- 6. edge weeks, database URLs, the missing server extra ----------------------------------


@pytest.mark.parametrize("week", ["9999-W52", "0001-W01", "1970-W01"])
def test_edge_weeks_are_a_clear_error(
    week: str, capsys: pytest.CaptureFixture[str], migrated_url: str
) -> None:
    with pytest.raises(ConfigError, match="out of range"):
        week_bounds(week)
    code, _, err = _cli(
        capsys, "report", "--week", week, "--project", "p", "--database-url", migrated_url
    )
    assert code == 2 and week in err and "Traceback" not in err


@pytest.mark.parametrize(
    "url",
    [
        "foo://bar",
        "mysql://admin:hunter2@db/perfci",
        "admin:hunter2@db/perfci",
        "postgresql://u:hunter2@[::1/db",
        "postgresql://u:hunter2@db:notaport/x",
    ],
)
def test_malformed_database_urls_are_a_clear_error(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigError, match="sqlite:///PATH"):
        engines.make_engine(url)
    code, out, err = _cli(capsys, "db", "current", "--database-url", url)
    assert code == 2 and "postgresql://" in err and "sqlite:///" in err
    assert "hunter2" not in out + err and "Traceback" not in err


def test_serve_without_the_server_extra_says_what_to_install(tmp_path: Path) -> None:
    blocker = (
        "import sys\n"
        "class Missing:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('fastapi', 'uvicorn'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Missing())\n"
        "from perfci.cli.main import main\n"
        "sys.exit(main(['serve', '--database-url', 'sqlite:///' + sys.argv[1]]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", blocker, str(tmp_path / "x.db")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=scaled(120),
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "install perfci[server]" in done.stderr and "fastapi" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "x.db").exists()  # refused before opening anything


# --- 7. a retry with other numbers ------------------------------------------------------------


def test_same_key_same_numbers_is_the_stored_run_other_numbers_a_conflict(session: Session) -> None:
    context = make_context(ci_provider="github-actions", ci_run_id="77", ci_run_attempt=1)
    repeats = [_run({"k": 5.0, "j": 1.0}, steps=[9.0, 10.0])]
    first = submit_run(
        session, context=context, benchmark="b", repeats=repeats, settings=Settings()
    )
    again = submit_run(
        session, context=context, benchmark="b", repeats=repeats, settings=Settings()
    )
    assert first.ingest.created and not again.ingest.created
    assert again.ingest.run_id == first.ingest.run_id
    for other in ([_run({"k": 5.5, "j": 1.0}, steps=[9.0, 10.0])], [_run({"k": 5.0})], repeats * 2):
        with pytest.raises(RunConflict) as caught:
            submit_run(session, context=context, benchmark="b", repeats=other, settings=Settings())
        assert caught.value.run_id == first.ingest.run_id
        assert f"run {first.ingest.run_id} " in str(caught.value)
    assert (_count(session, Run), _count(session, Comparison)) == (1, 1)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"commit": "d00d"}, "commit 'c0ffee', not 'd00d'"),
        ({"branch": "feature"}, "branch 'main', not 'feature'"),
        ({"pr_number": 12}, "pr_number none, not 12"),
        ({"ci_run_id": "78"}, "ci_run_id none, not '78'"),
    ],
)
def test_a_key_reused_for_another_commit_branch_or_pull_request_is_a_conflict(
    session: Session, change: dict[str, object], named: str
) -> None:
    """The same Idempotency-Key and numbers for another commit once returned the stored run
    (200), and the new commit's run was lost (issue 31)."""
    repeats = [_run({"k": 5.0}, steps=[9.0, 10.0])]
    first = ingest_run(
        session, context=make_context(), benchmark="b", repeats=repeats, idempotency_key="http:k"
    )
    again = ingest_run(
        session, context=make_context(), benchmark="b", repeats=repeats, idempotency_key="http:k"
    )
    assert again == dataclasses.replace(first, created=False)
    with pytest.raises(RunConflict) as caught:
        ingest_run(
            session,
            context=make_context(**change),
            benchmark="b",
            repeats=repeats,
            idempotency_key="http:k",
        )
    assert caught.value.run_id == first.run_id and named in str(caught.value)
    assert _count(session, Run) == 1


def test_cli_ingest_retry_with_other_numbers_exits_2_naming_the_run(
    migrated_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    same, other = tmp_path / "a.json", tmp_path / "b.json"
    same.write_text(json.dumps(to_document(_run({"gemm": 5.0}))))
    other.write_text(json.dumps(to_document(_run({"gemm": 6.0}))))
    args = [
        "-b",
        "b",
        "--project",
        "p",
        "--commit",
        "abc",
        "--branch",
        "main",
        "--ci-run-id",
        "5",
        "--ci-run-attempt",
        "1",
        "--database-url",
        migrated_url,
        "--json",
    ]
    code, out, _ = _cli(capsys, "ingest", str(same), *args)
    run_id = json.loads(out)["run_id"]
    code, out, _ = _cli(capsys, "ingest", str(same), *args)
    assert code == 0 and json.loads(out) | {"run_id": run_id, "created": False} == json.loads(out)
    code, _, err = _cli(capsys, "ingest", str(other), *args)
    assert code == 2 and f"run {run_id} is already stored" in err and "different data" in err
    assert _table_counts(migrated_url)["run"] == 1


def test_cli_check_retry_with_other_numbers_exits_2_naming_the_run(
    migrated_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    same, other = tmp_path / "a.json", tmp_path / "b.json"
    same.write_text(json.dumps(to_document(_run({"gemm": 5.0}, steps=[9.0, 10.0]))))
    other.write_text(json.dumps(to_document(_run({"gemm": 6.0}, steps=[9.0, 10.0]))))
    args = [
        "-b",
        "b",
        "--project",
        "p",
        "--commit",
        "abc",
        "--branch",
        "main",
        "--ci-run-id",
        "8",
        "--ci-run-attempt",
        "1",
        "--database-url",
        migrated_url,
    ]
    first, _, err = _cli(capsys, "check", "--profile", str(same), *args)
    again, _, _ = _cli(capsys, "check", "--profile", str(same), *args)
    assert (first, again) == (0, 0), err
    code, _, err = _cli(capsys, "check", "--profile", str(other), *args)
    assert code == 2 and "is already stored" in err and "different data" in err
    assert _table_counts(migrated_url)["run"] == 1
    assert _table_counts(migrated_url)["comparison"] == 1


class _Conflict(BaseHTTPRequestHandler):
    """A perfci server that answers every upload 409, as for a conflicting retry."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps(
            {"error": {"message": "run 41 is already stored with different data", "run_id": 41}}
        ).encode()
        self.send_response(409)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def conflict_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Conflict)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_remote_mode_turns_a_409_into_a_conflict_naming_the_run(conflict_server: str) -> None:
    with pytest.raises(RunConflict) as caught:
        upload_run(
            conflict_server,
            "secret-token",
            project="p",
            benchmark="b",
            context=RunContext(project="p"),
            repeats=[_run({"k": 1.0})],
        )
    assert caught.value.run_id == 41 and "run 41" in str(caught.value)
    assert "secret-token" not in str(caught.value)


# --- 8. text-direction controls in names ------------------------------------------------------


@pytest.fixture(scope="module")
def reversed_name() -> str:
    return f"gemm{RLO}lenrek_evil"


def test_a_reversing_name_is_shown_not_obeyed_in_comment_and_console(reversed_name: str) -> None:
    rng = np.random.default_rng(1)
    key = SeriesKey(MetricKind.KERNEL, reversed_name)
    step = SeriesKey(MetricKind.STEP, f"step{RLO}")
    baseline = {k: (1e6 * np.exp(rng.normal(0, 0.01, (10, 3)))).tolist() for k in (key, step)}
    candidate = {k: (1.2e6 * np.exp(rng.normal(0, 0.01, 3))).tolist() for k in (key, step)}
    result = compare_run(baseline, candidate, benchmark=f"bench{RLO}")
    result.baseline = BaselineInfo(f"main{RLO}", 10, "a" * 12, "b" * 12, [1])
    result.branch = f"feature{RLO}x"
    result.notes.append(f"note about {reversed_name}")
    comment = render_comment(result)
    assert RLO not in comment and "U+202E" in comment and "gemm&lt;U+202E&gt;lenrek" in comment
    buffer = io.StringIO()
    print_comparison(result, Console(file=buffer, width=200, color_system=None))
    printed = buffer.getvalue()
    assert RLO not in printed and "gemm<U+202E>lenrek" in printed


def test_a_reversing_name_is_shown_not_obeyed_in_the_weekly_reports(
    session: Session, reversed_name: str
) -> None:
    rng = np.random.default_rng(5)
    for i in range(10):
        slower = 1.4 if i >= 6 else 1.0
        context = make_context(commit=f"c{i:03d}", commit_time=(T0 + timedelta(days=i)).isoformat())
        ingest_run(
            session,
            context=context,
            benchmark=f"bench{RLO}",
            repeats=[
                _run(
                    {
                        reversed_name: 5e6 * slower * float(np.exp(rng.normal(0, 0.005))),
                        "other": 1e6,
                    },
                    steps=[1e7 * slower * float(np.exp(rng.normal(0, 0.005)))] * 3,
                )
                for _ in range(2)
            ],
            created_at=T0 + timedelta(days=i, hours=1),
        )
    report = build_weekly_report(
        session, project="acme/model", since=T0, until=T0 + timedelta(days=10), branch="main"
    )
    markdown, html, slack = render_markdown(report), render_html(report), render_slack(report)
    for shown in (markdown, html, slack):
        assert RLO not in shown and "U+202E" in shown


# --- the suite itself -------------------------------------------------------------------------


def test_this_suite_cannot_be_skipped() -> None:
    source = Path(__file__).read_text(encoding="utf-8")
    for word in (
        "pytest." + "skip",
        "skip" + "if",
        "importor" + "skip",
        "x" + "fail",
        "pytest" + "mark = ",
    ):
        assert word not in source, f"{word} would let this abuse suite be skipped silently"
