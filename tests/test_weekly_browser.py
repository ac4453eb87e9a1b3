"""The weekly HTML report in a real browser: headless Chromium (Debian's) through Playwright.

Skipped with the reason when Chromium is absent on a laptop; a failure in CI (CI=true), where
scripts/test installs it (as root with apt-get).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import chromium_or_skip
from sqlalchemy.orm import Session
from test_weekly import KERNEL, PROJECT, ingest_history, w05
from test_weekly import profile as profile  # the module-scoped fixture

from perfci.core.model import Profile
from perfci.report.weekly_html import render_html
from perfci.usecases.weekly.report import build_weekly_report

NAME = 'gpt2 <img src=x onerror="document.title=1"> & co'

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, headless=True, args=["--no-sandbox"]
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_html_report_shows_plot_and_tables(
    session: Session, profile: Profile, browser: Any, tmp_path: Path
) -> None:
    ingest_history(session, profile, benchmark=NAME)
    since, until = w05()
    report = build_weekly_report(session, project=PROJECT, since=since, until=until)
    path = tmp_path / "weekly.html"
    path.write_text(render_html(report), encoding="utf-8")

    page = browser.new_page()
    try:
        page.goto(path.as_uri())
        assert page.title() == "perfci weekly report acme/gpt2 2024-W05"  # no script ran
        assert page.locator("img").count() == 0
        svg = page.locator("section.benchmark figure svg")
        assert svg.count() == 1 and svg.first.is_visible()
        box = svg.first.bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 100
        assert page.locator("section.benchmark h2").first.inner_text().startswith(NAME)

        rows = page.locator("#change-points tbody tr")
        assert rows.count() == 1
        cells = rows.first.locator("td").all_inner_texts()
        assert cells[0] == NAME
        assert cells[2].split(" ")[0] in {"c023..c024", "c024..c025", "c025..c026"}
        assert cells[5] == "+3.2 %" and cells[7] == KERNEL and cells[8].endswith("open")

        top = page.locator("table.contributors tbody tr").first.locator("td").all_inner_texts()
        assert top[0] == KERNEL and top[1] == "kernel"
        assert page.locator("#coverage-days tbody tr").count() == 7
        assert page.locator("#coverage-environments tbody tr").count() == 1
        assert page.locator("#alerts tbody tr").count() == 1
        assert page.locator("table.noise tbody tr").count() >= 1
    finally:
        page.close()


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("width", [1280, 390])
def test_html_report_fits_desktop_and_phone(
    session: Session, profile: Profile, browser: Any, tmp_path: Path, width: int
) -> None:
    ingest_history(session, profile, benchmark=NAME)
    since, until = w05()
    path = tmp_path / "weekly.html"
    path.write_text(
        render_html(build_weekly_report(session, project=PROJECT, since=since, until=until)),
        encoding="utf-8",
    )
    page = browser.new_page(viewport={"width": width, "height": 900})
    try:
        page.goto(path.as_uri())
        page.screenshot(path=str(tmp_path / f"weekly-{width}.png"), full_page=True)
        scroll, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert scroll <= inner, f"the report is {scroll} px wide at {width} px"
    finally:
        page.close()
