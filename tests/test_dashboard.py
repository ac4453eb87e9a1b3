"""The dashboard at a glance (issue 16.5): every page at desktop and phone widths in headless
Chromium, without horizontal overflow; verdicts as text badges, not emoji; names shown with
their invisible characters visible; the project page's latest step time from the base branch,
pull-request runs apart; a chart whose time axis fits runs of one day; ``perfci project``.

A real server on SQLite, seeded through the HTTP API. The browser tests skip without Chromium
(``apt-get install chromium``), except in CI. ``PERFCI_SCREENSHOT_DIR`` keeps the screenshots.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import numpy as np
import pytest
from conftest import chromium_or_skip
from db_fixtures import create_sqlite
from deadlines import scaled
from server_process import ServerProcess, start_server
from test_server_api import make_token, run_body, seed_history, upload

from perfci.cli.main import main
from perfci.report.plots import step_trend_svg
from perfci.store import db, engines

PROJECT = "acme/dash"
#: A name with a right-to-left override: it must read "<U+202E>" on every page, never reversed.
HOSTILE_PROJECT = "acme/\u202etxt.exe"
HOSTILE_BENCHMARK = "bench\u202egnp.evil"
EMOJI = ("❌", "✅", "🟢", "⚠", "ℹ", "🆕", "➖")
WIDTHS = {"desktop": 1280, "phone": 390}


@dataclass(frozen=True)
class Dashboard:
    server: ServerProcess
    url: str  # the database
    pr_run: int
    last_main_run: int
    burst_runs: list[int]


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    folder = tmp_path_factory.mktemp("dashboard")
    url = create_sqlite(folder)
    server = start_server(url, log_dir=folder, env={"PERFCI_MIN_BASELINE_RUNS": "3"})
    try:
        engine = engines.make_engine(url)
        token = make_token(engine, PROJECT, "upload,read")
        hostile = make_token(engine, HOSTILE_PROJECT, "upload,read")
        engine.dispose()
        pr_run = seed_history(server, PROJECT, token, runs=8)
        burst = _seed_burst(server, token)
        _seed_hostile(server, hostile)
        for name in (PROJECT, HOSTILE_PROJECT):
            assert main(["project", "update", name, "--public", "--database-url", url]) == 0
        yield Dashboard(
            server=server, url=url, pr_run=pr_run, last_main_run=pr_run - 1, burst_runs=burst
        )
    finally:
        server.stop()


def _seed_burst(server: ServerProcess, token: str) -> list[int]:
    """4 runs of one commit on one day: they share the commit's time."""
    rng = np.random.default_rng(7)
    when = datetime(2026, 11, 23, 9, 30, tzinfo=UTC)
    ids = []
    for i in range(4):
        response = upload(
            server,
            PROJECT,
            token,
            run_body("burst", sha="b" * 40, branch="main", when=when, rng=rng, ci=f"burst-{i}"),
        )
        assert response.status_code == 201, response.text
        ids.append(int(response.json()["run_id"]))
    return ids


def _seed_hostile(server: ServerProcess, token: str) -> None:
    rng = np.random.default_rng(9)
    start = datetime(2026, 2, 1, tzinfo=UTC)
    for i in range(4):
        body = run_body(
            HOSTILE_BENCHMARK,
            sha=f"{i + 1:040x}",
            branch="main\u202e",
            when=start + timedelta(hours=i),
            rng=rng,
        )
        response = upload(server, quote(HOSTILE_PROJECT, safe="/"), token, body)
        assert response.status_code == 201, response.text


def _pages(d: Dashboard) -> dict[str, str]:
    hostile = quote(HOSTILE_PROJECT, safe="/")
    return {
        "index": "/",
        "login": "/login",
        "project": f"/p/{PROJECT}",
        "benchmark": f"/p/{PROJECT}/b/gpt",
        "burst": f"/p/{PROJECT}/b/burst",
        "run-regression": f"/runs/{d.pr_run}",
        "run-main": f"/runs/{d.last_main_run}",
        "run-uncompared": f"/runs/{d.burst_runs[0]}",
        "not-found": "/runs/999999",
        "hostile-project": f"/p/{hostile}",
        "hostile-benchmark": f"/p/{hostile}/b/{quote(HOSTILE_BENCHMARK, safe='')}",
    }


# --- the HTML, without a browser ------------------------------------------------------------


def test_a_benchmark_named_with_a_slash_has_its_page(dashboard: Dashboard) -> None:
    engine = engines.make_engine(dashboard.url)
    token = make_token(engine, PROJECT, "upload")
    engine.dispose()
    body = run_body(
        "llm/70b",
        sha="c" * 40,
        branch="main",
        when=datetime(2026, 11, 20, tzinfo=UTC),
        rng=np.random.default_rng(3),
    )
    assert upload(dashboard.server, PROJECT, token, body).status_code == 201
    page = _get(dashboard, f"/p/{PROJECT}/b/{quote('llm/70b', safe='')}")
    assert "llm/70b" in page


def _get(d: Dashboard, path: str) -> str:
    response = httpx.get(f"{d.server.url}{path}", timeout=scaled(60))
    assert response.status_code in (200, 404), response.text
    return response.text


def test_project_page_shows_the_base_branch_latest_and_pr_runs_apart(d: Dashboard) -> None:
    html = _get(d, f"/p/{PROJECT}")
    row = re.search(r'<tr><td><a href="/p/acme/dash/b/gpt">gpt</a></td>(.*?)</tr>', html, re.S)
    assert row is not None, html
    latest = re.search(r'class="num latest"><a href="/runs/(\d+)">([^<]+)</a>', row.group(1))
    elsewhere = re.search(
        r'class="elsewhere"><a href="/runs/(\d+)">([^<]+)</a>\s*'
        r'<span class="muted">([^<]+)</span>',
        row.group(1),
    )
    assert latest is not None and elsewhere is not None, row.group(1)
    # main's newest run (10 ms per step), not the slower pull request's (11.2 ms) ...
    assert int(latest.group(1)) == d.last_main_run
    assert float(latest.group(2).split()[0]) == pytest.approx(10.0, rel=0.03)
    # ... which is shown apart, with its branch.
    assert int(elsewhere.group(1)) == d.pr_run and elsewhere.group(3) == "slow-pr"
    assert float(elsewhere.group(2).split()[0]) == pytest.approx(11.2, rel=0.03)
    assert "latest on main" in html


def test_the_api_still_reports_the_newest_run_of_any_branch(d: Dashboard) -> None:
    response = httpx.get(f"{d.server.url}/api/v1/projects/{PROJECT}/benchmarks", timeout=scaled(60))
    gpt = next(b for b in response.json()["benchmarks"] if b["name"] == "gpt")
    assert gpt["latest_step_ns"] == pytest.approx(11.2e6, rel=0.05)


def test_verdicts_are_text_badges_not_emoji(d: Dashboard) -> None:
    run = _get(d, f"/runs/{d.pr_run}")
    assert '<span class="badge badge-regression">Regression</span>' in run
    assert '<span class="badge badge-regression">regression</span>' in run
    assert '<span class="badge badge-unchanged">unchanged</span>' in run
    benchmark = _get(d, f"/p/{PROJECT}/b/gpt")
    assert 'class="badge badge-' in benchmark
    for path in _pages(d).values():
        page = _get(d, path)
        assert not [e for e in EMOJI if e in page], path


def test_names_show_their_invisible_characters_in_pages_and_titles(d: Dashboard) -> None:
    for path in (_pages(d)["index"], _pages(d)["hostile-project"], _pages(d)["hostile-benchmark"]):
        page = _get(d, path)
        assert "\u202e" not in page, path
        assert "&lt;U+202E&gt;" in page, path
    benchmark = _get(d, _pages(d)["hostile-benchmark"])
    title = re.search(r"<title>(.*?)</title>", benchmark, re.S)
    assert title is not None
    assert title.group(1) == "bench&lt;U+202E&gt;gnp.evil · acme/&lt;U+202E&gt;txt.exe · perfci"
    assert "main&lt;U+202E&gt;" in benchmark  # the branch column too


def test_a_chart_of_one_day_has_an_axis_of_hours(d: Dashboard) -> None:
    page = _get(d, f"/p/{PROJECT}/b/burst")
    svg = page[page.index("<svg") : page.index("</svg>")]
    ticks = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    assert not [t for t in ticks if re.fullmatch(r"20\d\d|Jan|Jul", t)], ticks
    assert any(re.fullmatch(r"\d\d:\d\d", t) for t in ticks), ticks


# --- the chart's time axis ---------------------------------------------------------------------


def _ticks(times: list[datetime]) -> list[str]:
    values = [1e7 * (1 + 0.01 * i) for i in range(len(times))]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns when its locator finds no interval
        svg = step_trend_svg(times, values, values, [])
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    # The x tick labels, then the axis' offset label (its day or month, "2026-Nov-23").
    offset = next(i for i, t in enumerate(texts) if t.startswith("2026-"))
    return texts[:offset]


@pytest.mark.parametrize(
    ("offsets", "expected"),
    [
        ([timedelta(0)] * 4, r"\d\d:\d\d"),  # one commit's 4 runs: a column, minutes around it
        ([timedelta(0)], r"\d\d:\d\d"),
        ([timedelta(seconds=15 * i) for i in range(4)], r"\d\d:\d\d"),
        ([timedelta(hours=3 * i) for i in range(4)], r"\d\d:\d\d"),
        ([timedelta(days=4 * i) for i in range(4)], r"\d\d?|Dec"),
    ],
)
def test_the_time_axis_is_scaled_to_the_data(offsets: list[timedelta], expected: str) -> None:
    start = datetime(2026, 11, 23, 9, 30, tzinfo=UTC)
    ticks = _ticks([start + o for o in offsets])
    assert ticks and all(re.fullmatch(expected, t) for t in ticks), ticks


# --- perfci project ------------------------------------------------------------------------------


def test_project_create_and_update_set_who_may_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from perfci.core.settings import Settings
    from perfci.usecases.browse import pages as browse

    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert main(["project", "create", "acme/new", "--database-url", url]) == 0
    assert "acme/new created, private" in capsys.readouterr().out
    assert main(["project", "create", "acme/new", "--database-url", url]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["project", "update", "acme/new", "--public", "--database-url", url]) == 0
    assert "updated, public" in capsys.readouterr().out
    assert main(["project", "update", "acme/none", "--private", "--database-url", url]) == 2
    assert "no project named 'acme/none'" in capsys.readouterr().err
    assert main(["project", "create", "acme/open", "--public", "--database-url", url]) == 0
    store = db.open_store(Settings(database_url=url))
    try:
        with store.sessions() as session:
            found = {p.name: p.public for p in browse.list_projects(session)}
    finally:
        store.close()
    assert found == {"acme/new": True, "acme/open": True}


# --- every page in Chromium, desktop and phone -------------------------------------------------


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    executable = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    kept = os.environ.get("PERFCI_SCREENSHOT_DIR")
    if kept:
        Path(kept).mkdir(parents=True, exist_ok=True)
        return Path(kept)
    return tmp_path_factory.mktemp("screenshots")


PAGE_NAMES = (
    "index",
    "login",
    "project",
    "benchmark",
    "burst",
    "run-regression",
    "run-main",
    "run-uncompared",
    "not-found",
    "hostile-project",
    "hostile-benchmark",
)


@pytest.mark.browser
@pytest.mark.parametrize("width", list(WIDTHS))
@pytest.mark.parametrize("name", PAGE_NAMES)
def test_every_page_fits_the_screen(
    d: Dashboard, chromium: Any, shots: Path, name: str, width: str
) -> None:
    page = chromium.new_page(
        viewport={"width": WIDTHS[width], "height": 900}, java_script_enabled=True
    )
    try:
        response = page.goto(f"{d.server.url}{_pages(d)[name]}")
        assert response is not None and response.status in (200, 404)
        path = shots / f"{name}-{width}.png"
        page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 0
        scroll, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert scroll <= inner, f"{name} at {WIDTHS[width]} px is {scroll} px wide: {path}"
        assert page.locator("h1").count() == 1
    finally:
        page.close()


@pytest.fixture(scope="module")
def d(dashboard: Dashboard) -> Dashboard:
    return dashboard
