"""The weekly trend report: change points on main, the kernels behind them, alerts, posting.

Histories are built from a REAL parsed profile (seed 001, nvprof of llm.c GPT-2 training)
ingested as daily runs on ``main`` through the ingest use case: every metric times lognormal
noise (CV 1 %), and from run 25 on one named kernel × 1.3, with the step time longer by exactly
that kernel's added time. Everything runs on SQLite and PostgreSQL, against a real loopback
GitHub API (github_fake) and a real loopback Slack webhook.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import threading
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer
from conftest import seed
from github_fake import TOKEN, FakeGitHub, github_server
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from perfci.analysis.trends import zoom_columns
from perfci.analysis.values import per_step_ns
from perfci.cli import alerts_cmd, report_cmd
from perfci.core.model import Metric, MetricKind, Profile, RunContext
from perfci.formats.registry import parse_file
from perfci.integrations.slack import SlackError, post_slack
from perfci.report.weekly_html import render_html
from perfci.report.weekly_markdown import (
    issue_title,
    render_markdown,
    render_slack,
    weekly_marker,
)
from perfci.store import engines
from perfci.usecases.browse.alerts import list_alerts, set_alert_status
from perfci.usecases.submit.ingest import ingest_run
from perfci.usecases.weekly.report import build_weekly_report
from perfci.usecases.weekly.report_json import report_to_dict
from perfci.usecases.weekly.weeks import week_bounds

__all__ = ["github_server"]  # the fixture, imported for pytest

# --- history helpers (also used by test_weekly_browser.py) ------------------------------------

#: A Monday: day 21 starts ISO week 2024-W04 (days 21–27), day 28 starts W05.
T0 = datetime(2024, 1, 1, 9, 0, tzinfo=UTC)
KERNEL = "softmax_forward_kernel5(float*, float, float const *, int, int)"
PROJECT = "acme/gpt2"
BENCHMARK = "train_gpt2cu"
ENVIRONMENT = {"gpu": "Tesla V100-SXM2-16GB", "cuda": "12.1", "driver": "535.54"}
NOISE_CV = 0.01


def kernel_step_share(profile: Profile, factor: float) -> tuple[float, float]:
    """(added ns per step, relative step-time change) when ``KERNEL`` is ``factor`` × slower."""
    kernel = profile.find(MetricKind.KERNEL, KERNEL)
    step = next(m for m in profile.metrics if m.kind is MetricKind.STEP)
    assert kernel is not None
    added = (factor - 1.0) * (per_step_ns(kernel, profile.steps) or 0.0)
    return added, added / (per_step_ns(step, profile.steps) or 1.0)


def varied(profile: Profile, rng: np.random.Generator, *, factor: float = 1.0) -> Profile:
    """``profile`` with every metric × lognormal noise, ``KERNEL`` × ``factor`` and the step
    samples longer by the kernel's added time per step."""
    added, _ = kernel_step_share(profile, factor)
    sigma = float(np.sqrt(np.log1p(NOISE_CV**2)))
    metrics = []
    for metric in profile.metrics:
        noise = float(rng.lognormal(0.0, sigma))
        slower = metric.kind is MetricKind.KERNEL and metric.name == KERNEL and not metric.scope
        metrics.append(
            _scaled(
                metric,
                noise * (factor if slower else 1.0),
                added if metric.kind is MetricKind.STEP else 0.0,
            )
        )
    return dataclasses.replace(profile, metrics=metrics, warnings=[])


def _scaled(metric: Metric, factor: float, add_ns: float) -> Metric:
    def times(value: float | None) -> float | None:
        return None if value is None else value * factor

    samples = (
        [s * factor + add_ns for s in metric.samples_ns] if metric.samples_ns is not None else None
    )
    return dataclasses.replace(
        metric,
        total_ns=times(metric.total_ns),
        self_ns=times(metric.self_ns),
        avg_ns=times(metric.avg_ns),
        min_ns=times(metric.min_ns),
        max_ns=times(metric.max_ns),
        std_ns=times(metric.std_ns),
        median_ns=times(metric.median_ns),
        samples_ns=samples,
        attrs=dict(metric.attrs),
    )


def day(index: int) -> datetime:
    return T0 + timedelta(days=index)


def ingest_history(
    session: Session,
    profile: Profile,
    *,
    runs: int = 40,
    change_at: int | None = 25,
    factor: float = 1.3,
    repeats: int = 2,
    seed: int = 7,
    benchmark: str = BENCHMARK,
    project: str = PROJECT,
    skip_days: Iterable[int] = (),
) -> list[int]:
    """``runs`` daily runs (commits c000, c001 …, one day apart); returns their run ids."""
    rng = np.random.default_rng(seed)
    skipped = set(skip_days)
    ids = []
    for i in range(runs):
        if i in skipped:
            continue
        slower = factor if change_at is not None and i >= change_at else 1.0
        context = RunContext(
            project=project,
            commit=f"c{i:03d}",
            branch="main",
            commit_time=day(i).isoformat(),
            environment=dict(ENVIRONMENT),
        )
        result = ingest_run(
            session,
            context=context,
            benchmark=benchmark,
            repeats=[[varied(profile, rng, factor=slower)] for _ in range(repeats)],
            created_at=day(i) + timedelta(hours=1),
        )
        ids.append(result.run_id)
    return ids


@pytest.fixture(scope="module")
def profile() -> Profile:
    """Seed 001 (nvprof), parsed once."""
    (parsed,) = parse_file(seed("001"))
    return parsed


def w04() -> tuple[datetime, datetime]:
    return week_bounds("2024-W04")  # days 21–27: the change at run 25 is in this week


def w05() -> tuple[datetime, datetime]:
    return week_bounds("2024-W05")  # days 28–34


# --- the report ---------------------------------------------------------------------------------


def test_change_point_is_found_dated_sized_and_explained(
    session: Session, profile: Profile
) -> None:
    ingest_history(session, profile)
    since, until = w04()[0], w05()[1]  # two weeks: the change and enough runs after it
    report = build_weekly_report(session, project=PROJECT, since=since, until=until)

    assert report.week == "2024-W05"  # the week of the period's middle
    (trend,) = report.benchmarks
    assert trend.step is not None and trend.step.kind is MetricKind.STEP
    assert trend.runs_in_period == 14
    assert [p.commit for p in trend.points] == [f"c{i:03d}" for i in range(35)]
    (cp,) = trend.period_change_points
    assert cp.in_period and not cp.late
    assert cp.commit in {"c024", "c025", "c026"}
    assert cp.previous_commit == f"c{int(cp.commit[1:]) - 1:03d}"
    _, expected = kernel_step_share(profile, 1.3)
    assert cp.change == pytest.approx(expected, abs=0.006)
    assert cp.p_value < 0.001
    top = cp.contributors[0]
    assert top.name == KERNEL and top.kind == "kernel"
    assert top.delta_ns == pytest.approx(0.3 * top.before_ns, rel=0.1)
    assert 0.75 < top.share < 1.25
    assert abs(top.delta_ns) > 3 * max(abs(c.delta_ns) for c in cp.contributors[1:])
    assert cp.alert_id is not None and cp.alert_status == "open"
    # The period straddles the change, so the slower kernel's share of step time grew most.
    assert trend.share_movers[0].name == KERNEL and trend.share_movers[0].change > 0
    assert trend.noise is not None and trend.noise.step_cv is not None
    assert 0.002 < trend.noise.step_cv < 0.03
    assert report.coverage.runs == 14 and report.coverage.days_without_runs == []
    assert [e.runs for e in report.coverage.environments] == [14]


def test_a_long_history_reads_the_kernels_around_its_change_and_says_the_same(
    session: Session, profile: Profile
) -> None:
    """Issue 35: a history of more than four zoom windows reads every run's step time and the
    kernels of only the runs the report looks at; it finds what reading everything finds."""
    ingest_history(session, profile, runs=120, change_at=70, seed=11)
    since, until = day(113), day(120)
    reports = [
        build_weekly_report(
            session,
            project=PROJECT,
            since=since,
            until=until,
            history_weeks=18,
            record=False,
            zoom_window=window,
        )
        for window in (10, None)
    ]
    (zoomed,), (whole,) = (r.benchmarks for r in reports)

    def located(trend: Any) -> list[tuple[Any, ...]]:
        return [(c.commit, c.change, c.p_value, c.in_period) for c in trend.change_points]

    assert len(zoomed.points) == 120
    assert [(p.commit, p.value, p.level) for p in zoomed.points] == [
        (p.commit, p.value, p.level) for p in whole.points
    ]
    assert located(zoomed) == located(whole)
    (change,) = whole.change_points
    (zoomed_change,) = zoomed.change_points
    assert change.commit in {"c069", "c070", "c071"}
    top, zoomed_top = change.contributors[0], zoomed_change.contributors[0]
    assert zoomed_top.name == top.name == KERNEL
    assert zoomed_top.delta_ns == pytest.approx(top.delta_ns, rel=0.05)
    # The kernel's levels come from the 10 runs on each side of the change, not all 120.
    assert zoomed_top.before_ns != top.before_ns
    assert zoomed.share_movers == whole.share_movers
    assert (zoomed.new_kernels, zoomed.vanished_kernels) == (
        whole.new_kernels,
        whole.vanished_kernels,
    )
    assert zoomed.noise is not None and whole.noise is not None
    assert (zoomed.noise.step_cv, zoomed.noise.segment_runs) == (
        whole.noise.step_cv,
        whole.noise.segment_runs,
    )
    assert zoomed.noise.noisiest


def test_late_change_is_reported_the_week_after_and_alerted_once(
    session: Session, profile: Profile
) -> None:
    ingest_history(session, profile)
    # Three runs of the new level at the end of W04 are not yet significant ...
    assert (
        build_weekly_report(session, project=PROJECT, since=w04()[0], until=w04()[1]).alerts == []
    )
    # ... so W05 reports it, although it began before W05.
    first = build_weekly_report(session, project=PROJECT, since=w05()[0], until=w05()[1])
    (cp,) = first.benchmarks[0].period_change_points
    assert cp.late and not cp.in_period and cp.commit in {"c024", "c025", "c026"}
    (alert,) = first.alerts
    assert (alert.commit, alert.status, alert.benchmark) == (cp.commit, "open", BENCHMARK)
    again = build_weekly_report(session, project=PROJECT, since=w05()[0], until=w05()[1])
    assert [a.id for a in again.alerts] == [alert.id]
    assert len(list_alerts(session, project=PROJECT)) == 1

    dismissed = set_alert_status(session, alert.id, "dismissed", note="expected: new softmax")
    assert dismissed.status == "dismissed" and dismissed.note == "expected: new softmax"
    rerun = build_weekly_report(session, project=PROJECT, since=w05()[0], until=w05()[1])
    assert rerun.benchmarks[0].period_change_points[0].alert_status == "dismissed"
    # W06 knew it already from W05's history: nothing new to report.
    w06 = build_weekly_report(
        session, project=PROJECT, since=w05()[1], until=w05()[1] + timedelta(days=7)
    )
    assert w06.benchmarks[0].period_change_points == [] and w06.alerts == []
    assert [(a.id, a.status) for a in list_alerts(session, project=PROJECT)] == [
        (alert.id, "dismissed")
    ]
    assert list_alerts(session, project=PROJECT, status="open") == []


def test_flat_noisy_history_has_no_change_point(session: Session, profile: Profile) -> None:
    ingest_history(session, profile, runs=35, change_at=None, seed=11, skip_days=[23, 24])
    since, until = w04()
    report = build_weekly_report(session, project=PROJECT, since=since, until=until)
    (trend,) = report.benchmarks
    assert trend.change_points == [] and report.alerts == []
    assert report.change_points() == []
    assert [d.isoformat() for d in report.coverage.days_without_runs] == [
        "2024-01-24",
        "2024-01-25",
    ]
    assert trend.noise is not None and trend.noise.segment_runs == 26
    assert trend.noise.step_cv == pytest.approx(0.01, abs=0.006)
    markdown = render_markdown(report)
    assert "No change of step-time level" in markdown
    assert "Wed 01-24, Thu 01-25" in markdown


def test_new_and_vanished_kernels(session: Session, profile: Profile) -> None:
    gone = "volta_sgemm_64x64_nt"
    extra = Metric(kind=MetricKind.KERNEL, name="flash_fwd_kernel<true>", calls=12, total_ns=3.0e6)
    ingest_history(session, profile, runs=23, change_at=None)
    later = dataclasses.replace(
        profile, metrics=[*(m for m in profile.metrics if m.name != gone), extra]
    )
    ingest_history(session, later, runs=28, change_at=None, skip_days=range(23), seed=3)
    since, until = w04()
    (trend,) = build_weekly_report(
        session, project=PROJECT, since=since, until=until, record=False
    ).benchmarks
    assert trend.new_kernels == ["flash_fwd_kernel<true>"]
    assert gone in trend.vanished_kernels


def test_report_filters_benchmarks_and_is_empty_without_runs(
    session: Session, profile: Profile
) -> None:
    ingest_history(session, profile, runs=28, change_at=None)
    since, until = w04()
    assert (
        build_weekly_report(
            session, project=PROJECT, since=since, until=until, benchmarks=["other"]
        ).benchmarks
        == []
    )
    empty = build_weekly_report(session, project="nobody", since=since, until=until)
    assert empty.benchmarks == [] and empty.coverage.runs == 0 and empty.notes
    assert "No change of step-time level" in render_markdown(empty)
    assert "<h1>" in render_html(empty)


# --- renderers ----------------------------------------------------------------------------------


def test_renderings_escape_names_and_carry_the_marker(session: Session, profile: Profile) -> None:
    ingest_history(session, profile, runs=35, benchmark="gpt2 <b>|x|</b> @team")
    since, until = w05()
    report = build_weekly_report(session, project=PROJECT, since=since, until=until)
    markdown = render_markdown(report, repo="acme/gpt2")
    assert markdown.startswith(weekly_marker(PROJECT, "2024-W05") + "\n")
    assert weekly_marker(PROJECT, "2024-W05") == "<!-- perfci:weekly=acme/gpt2:2024-W05 -->"
    # Fenced code (the repro commands, shell-quoted) is shown as text: no HTML, no mention.
    prose = re.sub(r"^(`{3,})bash\n.*?\n\1$", "", markdown, flags=re.S | re.M)
    assert "<b>" not in prose and "gpt2 &lt;b&gt;\\|x\\|&lt;/b&gt; @\u2060team" in markdown
    assert "-b 'gpt2 <b>|x|</b> @team'" in markdown
    assert "softmax\\_forward\\_kernel5(float\\*, float, float const \\*, int, int)" in markdown
    assert "https://github.com/acme/gpt2/compare/c02" in markdown
    assert len(markdown) < 65_536

    html = render_html(report)
    assert "<b>|x|</b>" not in html and "gpt2 &lt;b&gt;|x|&lt;/b&gt; @team" in html
    assert html.count("<svg") == 1 and "<?xml" not in html
    assert render_html(report) == html  # deterministic, plots included

    data = json.loads(json.dumps(report_to_dict(report)))
    assert data["week"] == "2024-W05" and data["schema_version"] == 1
    (cp,) = [c for c in data["benchmarks"][0]["change_points"] if c["late"]]
    assert cp["contributors"][0]["name"] == KERNEL
    assert data["benchmarks"][0]["step"]["kind"] == "step"

    slack = render_slack(report, link="https://ci.example/report.html")
    assert "&lt;b&gt;" in slack and "<b>" not in slack
    assert slack.endswith("<https://ci.example/report.html|Full report>")
    assert issue_title(PROJECT, "2024-W04") == "perfci weekly report acme/gpt2 2024-W04"


def test_the_zoom_keeps_the_period_and_each_changes_nearest_runs_within_its_segments() -> None:
    # Changes at runs 40 and 70 of 100, the period the last 7 runs, 5 runs each side.
    expected = [*range(35, 45), *range(65, 75), *range(92, 100)]
    assert zoom_columns(100, [40, 70], list(range(93, 100)), 5) == expected
    # A window wider than the segments stops at their bounds; the stable level is runs 3-9.
    assert zoom_columns(10, [3], [], 5) == list(range(10))
    # No change: the period, the run before it and the level's last runs.
    assert zoom_columns(50, [], [48, 49], 3) == [47, 48, 49]
    # A short last level is not measured for noise: the longest one is (runs 0-39).
    assert zoom_columns(42, [40], [41], 2) == [38, 39, 40, 41]


def test_week_and_since_periods() -> None:
    assert week_bounds("2024-W04") == (
        datetime(2024, 1, 22, tzinfo=UTC),
        datetime(2024, 1, 29, tzinfo=UTC),
    )
    now = datetime(2024, 3, 4, 6, tzinfo=UTC)
    assert report_cmd.period("36h", None, now=now) == (now - timedelta(hours=36), now)
    assert report_cmd.period(None, None, now=now) == (now - timedelta(days=7), now)
    from perfci.core.errors import ConfigError

    for since, week in (("7x", None), (None, "2024-05"), ("7d", "2024-W04")):
        with pytest.raises(ConfigError):
            report_cmd.period(since, week, now=now)


# --- CLI: report files, GitHub issue, alerts ------------------------------------------------


def _cli() -> typer.Typer:
    app = typer.Typer()
    report_cmd.register(app)
    alerts_cmd.register(app)
    return app


def _invoke(args: list[str]) -> Any:
    result = CliRunner().invoke(_cli(), args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def _ingest_committed(url: str, profile: Profile) -> None:
    engine = engines.make_engine(url)
    try:
        with engines.make_sessionmaker(engine)() as session:
            ingest_history(session, profile, runs=35, repeats=1)
    finally:
        engine.dispose()


def test_cli_writes_posts_the_issue_once_and_triages_alerts(
    migrated_url: str,
    profile: Profile,
    tmp_path: Path,
    github_server: FakeGitHub,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _ingest_committed(migrated_url, profile)
    monkeypatch.setenv("PERFCI_GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("PERFCI_GITHUB_API_URL", github_server.url)
    monkeypatch.delenv("GITHUB_REPOSITORY", raising=False)
    args = [
        "report",
        "--week",
        "2024-W05",
        "--project",
        PROJECT,
        "--out",
        str(tmp_path),
        "--post",
        "github-issue",
        "--repo",
        "acme/gpt2",
        "--labels",
        "perf,weekly",
        "--database-url",
        migrated_url,
    ]
    first = _invoke(args)
    paths = [Path(line) for line in first.stdout.split()]
    assert sorted(p.suffix for p in paths) == [".html", ".json", ".md"]
    assert all(p.parent == tmp_path and p.stat().st_size > 0 for p in paths)
    (issue,) = github_server.issues.values()
    assert issue["title"] == "perfci weekly report acme/gpt2 2024-W05"
    assert issue["body"].startswith("<!-- perfci:weekly=acme/gpt2:2024-W05 -->")
    assert {label["name"] for label in issue["labels"]} == {"perf", "weekly"}

    _invoke(args)  # the same week again: edited in place, not a second issue
    assert len(github_server.issues) == 1
    assert len(github_server.requests_to("POST", "/issues$")) == 1
    assert len(github_server.requests_to("PATCH", r"/issues/\d+$")) == 1

    listed = json.loads(
        _invoke(
            ["alerts", "list", "--project", PROJECT, "--json", "--database-url", migrated_url]
        ).stdout
    )
    (alert,) = listed
    assert alert["status"] == "open" and alert["benchmark"] == BENCHMARK
    acked = _invoke(
        ["alerts", "ack", str(alert["id"]), "--note", "looking", "--database-url", migrated_url]
    )
    assert "acknowledged" in acked.stdout
    _invoke(
        [
            "alerts",
            "dismiss",
            str(alert["id"]),
            "--note",
            "expected",
            "--database-url",
            migrated_url,
        ]
    )
    _invoke(args)  # a re-run of the report leaves the triage alone
    listed = json.loads(
        _invoke(
            ["alerts", "list", "--project", PROJECT, "--json", "--database-url", migrated_url]
        ).stdout
    )
    assert [(a["id"], a["status"], a["note"]) for a in listed] == [
        (alert["id"], "dismissed", "expected")
    ]
    assert (
        "dismissed"
        in _invoke(
            [
                "alerts",
                "list",
                "--project",
                PROJECT,
                "--status",
                "dismissed",
                "--database-url",
                migrated_url,
            ]
        ).stdout
    )
    missing = CliRunner().invoke(
        _cli(), ["alerts", "ack", "999999", "--database-url", migrated_url]
    )
    assert missing.exit_code != 0


# --- Slack --------------------------------------------------------------------------------------


class _Slack(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, answers: list[tuple[int, dict[str, str]]]) -> None:
        super().__init__(("127.0.0.1", 0), _SlackHandler)
        self.answers = answers
        self.bodies: list[Any] = []


class _SlackHandler(BaseHTTPRequestHandler):
    server: _Slack
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.server.bodies.append(json.loads(self.rfile.read(length)))
        status, headers = self.server.answers.pop(0) if self.server.answers else (200, {})
        data = b"ok" if status == 200 else b"server_error"
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def slack_server() -> Iterator[_Slack]:
    server = _Slack([])
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


SECRET = "/services/T000/B000/s3cr3t"


def _hook(server: _Slack) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}{SECRET}"


def test_slack_retries_a_500_and_never_logs_the_webhook(
    slack_server: _Slack, caplog: pytest.LogCaptureFixture
) -> None:
    slack_server.answers[:] = [(500, {})]
    waits: list[float] = []
    # INFO: urllib3's own DEBUG lines name every request path, for any client; ours never do.
    with caplog.at_level(logging.INFO):
        post_slack(_hook(slack_server), "*weekly* report", sleep=waits.append)
    assert slack_server.bodies == [{"text": "*weekly* report"}] * 2
    assert len(waits) == 1
    assert "s3cr3t" not in caplog.text and "500" in caplog.text


def test_slack_rate_limit_is_bounded_and_errors_hide_the_secret(slack_server: _Slack) -> None:
    slack_server.answers[:] = [(429, {"Retry-After": "2"})]
    waits: list[float] = []
    post_slack(_hook(slack_server), "hi", sleep=waits.append)
    assert waits == [2.0] and len(slack_server.bodies) == 2

    slack_server.answers[:] = [(429, {"Retry-After": "3600"})]
    with pytest.raises(SlackError, match="rate limiting") as caught:
        post_slack(_hook(slack_server), "hi", sleep=waits.append, max_wait_s=60)
    assert "s3cr3t" not in str(caught.value)

    slack_server.answers[:] = [(400, {})]
    with pytest.raises(SlackError, match="refused"):
        post_slack(_hook(slack_server), "hi", sleep=waits.append)

    closed = f"http://127.0.0.1:1{SECRET}"  # nothing listens on port 1
    with pytest.raises(SlackError, match="kept failing") as caught:
        post_slack(closed, "hi", sleep=lambda _: None, retries=1)
    assert "s3cr3t" not in str(caught.value)


def test_cli_posts_to_slack(
    migrated_url: str,
    profile: Profile,
    tmp_path: Path,
    slack_server: _Slack,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _ingest_committed(migrated_url, profile)
    monkeypatch.setenv("PERFCI_SLACK_WEBHOOK", _hook(slack_server))
    _invoke(
        [
            "report",
            "--week",
            "2024-W05",
            "--project",
            PROJECT,
            "--out",
            str(tmp_path),
            "--format",
            "md",
            "--post",
            "slack",
            "--database-url",
            migrated_url,
        ]
    )
    (body,) = slack_server.bodies
    assert "perfci weekly report acme/gpt2 2024-W05" in body["text"]
    assert "1 change point" in body["text"]
