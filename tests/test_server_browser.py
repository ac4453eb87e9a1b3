"""Headless Chromium on the dashboard: log in, project → benchmark (chart) → the regressed run.

Runs against a real server on SQLite with a regression seeded through the API. Skipped when
Chromium is absent, except in CI, where it must be installed.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import chromium_or_skip
from db_fixtures import create_sqlite
from server_process import ServerProcess, start_server
from test_server_api import make_token, seed_history

from perfci.store import engines

pytestmark = pytest.mark.browser
PROJECT = "acme/browser"


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str, int]]:
    chromium_or_skip()
    folder = tmp_path_factory.mktemp("browser")
    url = create_sqlite(folder)
    server = start_server(url, log_dir=folder, env={"PERFCI_MIN_BASELINE_RUNS": "3"})
    engine = engines.make_engine(url)
    token = make_token(engine, PROJECT, "upload,read")
    engine.dispose()
    pr_run = seed_history(server, PROJECT, token, runs=8)
    yield server, token, pr_run
    server.stop()


def test_dashboard_from_login_to_the_regressed_run(seeded: tuple[ServerProcess, str, int]) -> None:
    from playwright.sync_api import sync_playwright

    server, token, pr_run = seeded
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_or_skip(), args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page(java_script_enabled=False)  # usable without JS
            page.goto(f"{server.url}/")
            assert PROJECT not in page.content()  # private until logged in
            page.goto(f"{server.url}/p/{PROJECT}")
            assert "401" in page.locator("h1").inner_text()
            page.goto(f"{server.url}/login")
            page.fill("#token", token)
            page.click("button[type=submit] >> text=Log in")
            page.wait_for_url(f"{server.url}/p/{PROJECT}")
            assert page.locator("h1").inner_text() == PROJECT
            assert page.locator("svg.spark").count() == 1

            page.click("text=gpt")
            page.wait_for_url("**/b/gpt")
            assert page.locator("figure.chart svg").count() == 1
            assert page.locator("table tbody tr").count() >= 9

            page.click(f"a[href='/runs/{pr_run}'] >> nth=0")
            page.wait_for_url(f"**/runs/{pr_run}")
            assert "Regression" in page.locator("h2.verdict-regression").inner_text()
            regressed = page.locator("tr.verdict-regression td.name").all_inner_texts()
            assert "train_step" in regressed
            assert "void at::<lambda(int)>|<script>" in page.content().replace("&lt;", "<").replace(
                "&gt;", ">"
            )
            assert page.locator("script").count() == 0  # the kernel name stayed text
            assert "ampere_sgemm_128x64_tn" in page.locator("table").first.inner_text()
        finally:
            browser.close()
