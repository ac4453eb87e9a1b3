"""The CLI's rough edges of issue 16.4, each checked the way a user meets it.

``--help`` in a pipe, ``markdown`` and ``md`` spelled either way, a SQLite URL into a folder that
does not exist, ``perfci ingest`` outside a git checkout, profiles of unrelated formats given as
repeats, the weekly report's label (and the week arithmetic at year boundaries) and its coverage
of days without runs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from deadlines import scaled
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from perfci.cli import report_cmd
from perfci.cli.main import main
from perfci.core.errors import ConfigError
from perfci.core.model import Metric, MetricKind, Profile
from perfci.core.weekly import Coverage, DayCount, WeeklyReport
from perfci.report.weekly_html import render_html
from perfci.report.weekly_markdown import render_markdown, weekly_marker
from perfci.store.engines import make_engine
from perfci.store.schema import Run
from perfci.usecases.check.repeats import check_repeats_match
from perfci.usecases.weekly.report import build_weekly_report
from perfci.usecases.weekly.weeks import iso_week, period_label, week_bounds

REPO = Path(__file__).resolve().parents[1]


def _profile_doc(path: Path, kernel_ns: float, *, extra: str | None = None) -> Path:
    metrics = [
        {"kind": "step", "name": "step", "calls": 3, "total_ns": 3 * kernel_ns * 1.5},
        {"kind": "kernel", "name": "gemm", "calls": 30, "total_ns": 3 * kernel_ns},
        {"kind": "kernel", "name": "softmax", "calls": 30, "total_ns": kernel_ns},
    ]
    if extra:
        metrics.append({"kind": "kernel", "name": extra, "calls": 3, "total_ns": 1e5})
    doc = {
        "perfci_version": "0",
        "schema_version": 1,
        "profiles": [
            {
                "label": "tiny",
                "format": "perfci",
                "source": path.name,
                "steps": 3,
                "metrics": metrics,
            }
        ],
    }
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _runs(url: str) -> list[tuple[str | None, str | None]]:
    from perfci.store.schema import Commit

    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                select(Run.branch, Commit.sha).outerjoin(Commit, Run.commit_id == Commit.id)
            ).all()
            return [(branch, sha) for branch, sha in rows]
    finally:
        engine.dispose()


# --- --help in a pipe ---------------------------------------------------------------------------


def test_help_in_a_pipe_is_not_cut_at_80_columns() -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("COLUMNS", "TERMINAL_WIDTH", "GITHUB_ACTIONS", "FORCE_COLOR")
    }
    done = subprocess.run(
        [sys.executable, "-m", "perfci.cli.main", "check", "--help"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=scaled(120),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout, done.stdout
    for option in (
        "--fail-on-regression",
        "--no-fail-on-regression",
        "--baseline-branch",
        "--markdown-out",
    ):
        assert option in done.stdout


@pytest.mark.parametrize("command", [[], ["check"], ["compare"], ["db", "upgrade"]])
def test_help_shows_no_type_on_a_plain_flag(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 36: "--ab <bool>" read as if the flag took a value; the values keep their types.
    from perfci.cli.main import main

    assert main([*command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "<bool>" not in out and "--help" in out
    if command == ["check"]:
        assert re.search(r"--ab\s+Same-runner", out) and re.search(r"--json-out\s+<path>", out)


# --- markdown / md -------------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["markdown", "md", "MD"])
def test_report_accepts_both_markdown_spellings(
    spelling: str, tmp_path: Path, outside_git: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert (
        main(
            [
                "report",
                "--format",
                spelling,
                "--format",
                "md",
                "--project",
                "acme/x",
                "--out",
                str(tmp_path / "out"),
                "--database-url",
                url,
            ]
        )
        == 0
    )
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert len(written) == 1 and written[0].endswith(".md"), written


def test_report_names_the_spellings_it_accepts(
    tmp_path: Path, outside_git: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert (
        main(
            [
                "report",
                "--format",
                "pdf",
                "--project",
                "acme/x",
                "--out",
                str(tmp_path),
                "--database-url",
                url,
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "--format 'pdf'" in err and "markdown" in err and "md" in err
    assert not (tmp_path / "store.db").exists()  # refused before the store was opened


def test_compare_prints_markdown_under_every_spelling(
    tmp_path: Path, outside_git: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    common = ["--benchmark", "tiny", "--project", "acme/x", "--database-url", url]
    for run in range(2):
        files = [
            str(_profile_doc(tmp_path / f"r{run}-{r}.json", 1e6 * (1 + 0.01 * r))) for r in range(2)
        ]
        assert (
            main(["ingest", *files, *common, "--branch", "main", "--commit", f"{run + 1:040x}"])
            == 0
        )
    capsys.readouterr()
    outputs = []
    for flags in (["--markdown"], ["--md"], ["--format", "markdown"], ["-f", "md"]):
        assert main(["compare", "--run", "2", "--database-url", url, *flags]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0].startswith("<!-- perfci:benchmark=tiny -->")
    assert all(out == outputs[0] for out in outputs)
    assert main(["compare", "--run", "2", "--database-url", url, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == 2
    assert main(["compare", "--run", "2", "--database-url", url, "--format", "md", "--json"]) == 2


# --- SQLite folders -----------------------------------------------------------------------------


def test_sqlite_url_into_a_missing_folder_is_refused(
    tmp_path: Path, outside_git: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nonexistent" / "dir"
    profile = _profile_doc(tmp_path / "p.json", 1e6)
    code = main(
        [
            "ingest",
            str(profile),
            "--benchmark",
            "tiny",
            "--database-url",
            f"sqlite:///{missing / 'x.db'}",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert f"the folder {missing} of the SQLite database" in err and "does not exist" in err
    assert not (tmp_path / "nonexistent").exists()


def test_only_the_default_perfci_folder_is_created(tmp_path: Path, outside_git: Path) -> None:
    profile = _profile_doc(tmp_path / "p.json", 1e6)
    assert main(["ingest", str(profile), "--benchmark", "tiny"]) == 0
    assert (outside_git / ".perfci" / "perfci.db").is_file()
    nested = tmp_path / "elsewhere" / ".perfci" / "perfci.db"  # a .perfci/ beside another tree
    (tmp_path / "elsewhere").mkdir()
    assert (
        main(
            ["ingest", str(profile), "--benchmark", "tiny", "--database-url", f"sqlite:///{nested}"]
        )
        == 0
    )
    assert nested.is_file()


# --- ingest outside a git checkout ---------------------------------------------------------------


def test_ingest_outside_git_warns_and_stores_no_baseline_run(
    tmp_path: Path, outside_git: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    profile = _profile_doc(tmp_path / "p.json", 1e6)
    assert main(["ingest", str(profile), "--benchmark", "tiny", "--database-url", url]) == 0
    err = capsys.readouterr().err
    assert "warning: no git checkout" in err and "never be part of a baseline" in err
    assert "--branch and --commit" in err
    assert _runs(url) == [(None, None)]

    assert (
        main(
            [
                "ingest",
                str(profile),
                "--benchmark",
                "tiny",
                "--database-url",
                url,
                "--branch",
                "main",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "refusing to store a run of the baseline branch 'main' without its commit" in err
    assert "--commit" in err
    assert _runs(url) == [(None, None)]  # nothing written

    assert (
        main(
            [
                "ingest",
                str(profile),
                "--benchmark",
                "tiny",
                "--database-url",
                url,
                "--branch",
                "main",
                "--commit",
                "a" * 40,
            ]
        )
        == 0
    )
    assert "warning" not in capsys.readouterr().err
    assert sorted(_runs(url), key=str) == sorted([(None, None), ("main", "a" * 40)], key=str)


def test_ingest_in_a_checkout_has_no_warning(
    tmp_path: Path, outside_git: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for args in (
        ["init", "-q", "-b", "main"],
        ["-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "--allow-empty", "-m", "x"],
    ):
        subprocess.run(["git", *args], cwd=outside_git, check=True, capture_output=True)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    profile = _profile_doc(tmp_path / "p.json", 1e6)
    assert main(["ingest", str(profile), "--benchmark", "tiny", "--database-url", url]) == 0
    assert "warning" not in capsys.readouterr().err
    ((branch, sha),) = _runs(url)
    assert branch == "main" and sha is not None and len(sha) == 40


# --- mismatched repeats -----------------------------------------------------------------------


def test_profiles_of_unrelated_formats_are_refused_as_repeats(
    tmp_path: Path, outside_git: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    perfci_json = _profile_doc(tmp_path / "r0.json", 1e6)
    megatron = tmp_path / "rank0.txt"
    megatron.write_text(
        "".join(
            f"rank:0:forward_step(stage_id=0,batch_id={i},mg_state=steady,duration={5.0 + i},"
            "sub_operations=[])\n"
            for i in range(3)
        ),
        encoding="utf-8",
    )
    code = main(
        [
            "ingest",
            str(perfci_json),
            str(megatron),
            "--benchmark",
            "tiny",
            "--database-url",
            url,
            "--branch",
            "pr",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "not profiles of one workload" in err
    assert "repeat 1 (" in err and "r0.json" in err and "perfci" in err and "gemm" in err
    assert "repeat 2 (" in err and "rank0.txt" in err and "megatron_trace" in err
    assert "forward_step" in err and "0 metric(s) in common" in err
    assert not (tmp_path / "store.db").exists()


def _made(fmt: str, names: list[str], label: str = "p") -> Profile:
    return Profile(
        label=label,
        format=fmt,
        source=f"{label}.{fmt}",
        metrics=[Metric(kind=MetricKind.KERNEL, name=n, total_ns=1.0) for n in names],
    )


def test_repeats_of_one_workload_may_differ_a_little() -> None:
    names = [f"k{i}" for i in range(10)]
    # A kernel that comes and goes between repeats, in one format ...
    check_repeats_match([[_made("nsys_stats", names)], [_made("nsys_stats", names[:9])]])
    # ... and the same profile exported twice (nsys stats text and its SQLite export).
    check_repeats_match([[_made("nsys_stats", names)], [_made("nsys_sqlite", names[1:])]])
    with pytest.raises(ConfigError, match="0 metric"):
        check_repeats_match([[_made("nsys_stats", names)], [_made("nsys_stats", ["other"])]])
    with pytest.raises(ConfigError, match="repeat 3"):  # every repeat against the first
        check_repeats_match(
            [[_made("a", names)], [_made("a", names)], [_made("b", [*names[:2], "x", "y", "z"])]]
        )


# --- the weekly report's label and the week arithmetic ----------------------------------------


@pytest.mark.parametrize(
    ("day", "week"),
    [
        (date(2020, 12, 28), "2020-W53"),
        (date(2021, 1, 3), "2020-W53"),
        (date(2021, 1, 4), "2021-W01"),
        (date(2025, 12, 29), "2026-W01"),
        (date(2026, 1, 4), "2026-W01"),
        (date(2026, 12, 31), "2026-W53"),
        (date(2027, 1, 3), "2026-W53"),
        (date(2027, 1, 4), "2027-W01"),
        (date(2026, 11, 23), "2026-W48"),
    ],
)
def test_iso_week_at_year_boundaries(day: date, week: str) -> None:
    assert iso_week(day) == week


@pytest.mark.parametrize(
    ("week", "monday"),
    [
        ("2020-W53", date(2020, 12, 28)),
        ("2021-W01", date(2021, 1, 4)),
        ("2026-W01", date(2025, 12, 29)),
        ("2026-W53", date(2026, 12, 28)),
        ("2026-w48", date(2026, 11, 23)),
    ],
)
def test_week_bounds_at_year_boundaries(week: str, monday: date) -> None:
    start, end = week_bounds(week)
    assert start == datetime(monday.year, monday.month, monday.day, tzinfo=UTC)
    assert end - start == timedelta(days=7)
    assert period_label(start, end) == week.upper()


def test_a_week_that_does_not_exist_is_refused() -> None:
    with pytest.raises(ConfigError, match="2021-W53"):
        week_bounds("2021-W53")  # 2021 has 52 ISO weeks


@pytest.mark.parametrize(
    ("since", "now", "label"),
    [
        # The issue's case: 30 days up to Monday 2026-11-23 (W48) is not W45, its middle.
        ("30d", datetime(2026, 11, 23, 13, 50, tzinfo=UTC), "2026-W47"),
        ("30d", datetime(2026, 11, 27, 13, 50, tzinfo=UTC), "2026-W48"),
        ("7d", datetime(2026, 11, 23, 6, tzinfo=UTC), "2026-W47"),  # Monday morning: last week
        ("7d", datetime(2021, 1, 4, 6, tzinfo=UTC), "2020-W53"),
        ("30d", datetime(2026, 1, 8, tzinfo=UTC), "2026-W01"),
        ("2w", datetime(2027, 1, 6, 12, tzinfo=UTC), "2026-W53"),  # 4.5 of the last 7 days
        ("36h", datetime(2025, 12, 29, 20, tzinfo=UTC), "2026-W01"),
    ],
)
def test_rolling_periods_are_labelled_by_their_last_week(
    since: str, now: datetime, label: str
) -> None:
    assert period_label(*report_cmd.period(since, None, now=now)) == label


def test_the_label_keys_the_issue_the_report_edits(session: Session) -> None:
    start, until = report_cmd.period("30d", None, now=datetime(2026, 11, 23, 13, 50, tzinfo=UTC))
    report = build_weekly_report(session, project="acme/x", since=start, until=until)
    assert report.week == "2026-W47"
    markdown = render_markdown(report)
    assert markdown.startswith(weekly_marker("acme/x", "2026-W47"))
    assert session.scalar(select(func.count()).select_from(Run)) == 0


# --- coverage: empty stretches collapse -------------------------------------------------------


def _report_with_runs_on(run_days: set[int]) -> WeeklyReport:
    since = datetime(2026, 10, 24, tzinfo=UTC)
    days = [
        DayCount(since.date() + timedelta(days=i), 2 if i in run_days else 0) for i in range(30)
    ]
    coverage = Coverage(
        runs=2 * len(run_days), days=days, days_without_runs=[d.day for d in days if not d.runs]
    )
    return WeeklyReport(
        project="acme/x",
        branch="main",
        week="2026-W47",
        since=since,
        until=since + timedelta(days=30),
        history_since=since,
        coverage=coverage,
    )


def test_coverage_collapses_stretches_of_days_without_runs() -> None:
    report = _report_with_runs_on({0, 9, 17, 18})  # Sat 10-24, Mon 11-02, Tue 11-10, Wed 11-11
    stretches = [
        (s.first.isoformat(), s.last.isoformat(), s.runs) for s in report.coverage.stretches()
    ]
    assert stretches == [
        ("2026-10-24", "2026-10-24", 2),
        ("2026-10-25", "2026-11-01", 0),
        ("2026-11-02", "2026-11-02", 2),
        ("2026-11-03", "2026-11-09", 0),
        ("2026-11-10", "2026-11-10", 2),
        ("2026-11-11", "2026-11-11", 2),
        ("2026-11-12", "2026-11-22", 0),
    ]
    html = render_html(report)
    table = html[html.index('id="coverage-days"') : html.index('id="coverage-environments"')]
    assert table.count("<tr") == 1 + 7  # the header and seven rows, not 30
    assert 'Tue 2026-11-03 … Mon 2026-11-09</td><td class="num">no runs (7 days)' in table
    markdown = render_markdown(report)
    assert (
        "Days without runs: Sun 10-25 … Sun 11-01 (8 days), Tue 11-03 … Mon 11-09 "
        "(7 days), Thu 11-12 … Sun 11-22 (11 days)."
    ) in markdown


def test_one_or_two_empty_days_stay_days() -> None:
    report = _report_with_runs_on(set(range(30)) - {3, 7, 8})
    assert [s.first.isoformat() for s in report.coverage.empty_stretches()] == [
        "2026-10-27",
        "2026-10-31",
        "2026-11-01",
    ]
    assert "Days without runs: Tue 10-27, Sat 10-31, Sun 11-01." in render_markdown(report)
