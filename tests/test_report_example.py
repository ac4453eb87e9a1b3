"""The comment and the run page of the example (examples/gpt's shipped profiles): golden files
for its unchanged and slow-attention runs, which lead with what was decided and fold the
ungated inconclusive lines under one summary line (issue 36).

The runs are stored and compared as ``perfci check --profile`` does (``submit_run``), with fixed
commits, times and environment, so the files change only when the report does. Regenerate with
``PERFCI_UPDATE_GOLDEN=1`` and review the diff.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from db_fixtures import create_sqlite
from server_process import ServerProcess, start_server
from test_report import _golden

from perfci.cli.main import main
from perfci.core.model import RunComparison, RunContext, RunInfo, Verdict
from perfci.core.settings import Settings
from perfci.formats.registry import parse_file
from perfci.report import formatting as fmt
from perfci.report.markdown import render_comment
from perfci.server.pages import make_templates, run_page_context
from perfci.store import engines
from perfci.store.queries import get_run
from perfci.usecases.submit.run import submit_run

PROFILES = Path(__file__).resolve().parents[1] / "examples" / "gpt" / "profiles"
START = datetime(2026, 11, 2, 9, tzinfo=UTC)
Example = dict[str, tuple[RunComparison, RunInfo]]
ENVIRONMENT = {"cpu": "example-cpu", "torch": "2.5.1+cpu"}


def _context(number: int, **overrides: object) -> RunContext:
    values: dict[str, object] = {
        "project": "acme/gpt",
        "commit": str(number % 10) * 40,
        "branch": "main",
        "ci_provider": "github",
        "ci_run_id": f"run-{number}",
        "commit_time": (START + timedelta(hours=number)).isoformat(),
        "environment": ENVIRONMENT,
    }
    values.update(overrides)
    return RunContext(**values)  # type: ignore[arg-type]


def _repeats(folder: str) -> list[list[object]]:
    return [parse_file(p) for p in sorted((PROFILES / folder).glob("*.pt.trace.json.gz"))]


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Example]:
    """The four main runs as the baseline; a pull request that sends main-2's profiles again
    (unchanged code) and one with slow attention."""
    url = create_sqlite(tmp_path_factory.mktemp("example"))
    settings = Settings(database_url=url)
    engine = engines.make_engine(url)
    sessions = engines.make_sessionmaker(engine)
    out: Example = {}
    try:
        for number in range(1, 5):
            with sessions() as session:
                submit_run(
                    session,
                    context=_context(number),
                    benchmark="gpt-tiny",
                    repeats=_repeats(f"main-{number}"),  # type: ignore[arg-type]
                    settings=settings,
                )
        for number, (name, folder) in enumerate(
            (("unchanged", "main-2"), ("slow-attention", "slow-attention")), start=7
        ):
            pr = _context(number, branch=f"feature/{name}", pr_number=number, base_branch="main")
            with sessions() as session:
                done = submit_run(
                    session,
                    context=pr,
                    benchmark="gpt-tiny",
                    repeats=_repeats(folder),  # type: ignore[arg-type]
                    settings=settings,
                )
                run = replace(get_run(session, done.ingest.run_id), created_at=START)
            out[name] = (done.comparison, run)
    finally:
        engine.dispose()
    return url, out


@pytest.fixture(scope="module")
def example(stored: tuple[str, Example]) -> Example:
    return stored[1]


def _page(comparison: RunComparison, run: RunInfo) -> str:
    template = make_templates().env.get_template("run.html")
    return template.render(token=None, **run_page_context(run, comparison))


@pytest.mark.parametrize("name", ["unchanged", "slow-attention"])
def test_the_example_comment_matches_its_golden_file(example: Example, name: str) -> None:
    comparison, _ = example[name]
    _golden(f"comment_example_{name}.md", render_comment(comparison))


@pytest.mark.parametrize("name", ["unchanged", "slow-attention"])
def test_the_example_run_page_matches_its_golden_file(example: Example, name: str) -> None:
    comparison, run = example[name]
    _golden(f"run_page_example_{name}.html", _page(comparison, run))


def _verdicts(rows: list[str]) -> list[str]:
    return [row.rsplit("|", 2)[-2].strip() for row in rows]


@pytest.mark.parametrize("name", ["unchanged", "slow-attention"])
def test_the_comment_leads_with_the_decided_lines_and_folds_the_ungated_inconclusive(
    example: Example, name: str
) -> None:
    comparison, _ = example[name]
    text = render_comment(comparison)
    folded = [m for m in comparison.metrics if fmt.folded(m)]
    assert len(folded) > 20  # the example's wall of small operators
    shown, _ = fmt.decided_first(comparison.metrics)
    blocks = re.findall(r"<details><summary>(.*?)</summary>\n\n(.*?)\n\n</details>", text, re.S)
    titles = [title for title, _ in blocks]
    # The full table first (decided first), then the fold, under one summary line.
    assert titles[:2] == [
        f"{len(shown)} metrics, decided first (the {len(folded)} ungated inconclusive ones "
        "are folded below)",
        f"{len(folded)} inconclusive lines that do not gate: reported only (they cannot fail "
        "the check), too small or too noisy at this run to settle",
    ]
    table, fold = (body.splitlines()[2:] for _, body in blocks[:2])
    assert len(table) == len(shown) and len(fold) == len(folded)
    assert all("inconclusive" in v for v in _verdicts(fold))
    # The full table leads with what was decided: regressions, improvements, gated unchanged.
    lead = sum(
        1
        for m in comparison.metrics
        if m.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)
        or (m.verdict is Verdict.UNCHANGED and m.gated)
    )
    verdicts = _verdicts(table)
    assert all(
        v.split(" ", 1)[1].startswith(("regression", "improvement", "unchanged"))
        for v in verdicts[:lead]
    )
    assert not any(v.endswith(("regression", "improvement")) for v in verdicts[lead:])
    # The tables of what was decided hold no ungated inconclusive line.
    sections = [text.find(f"### {t}\n") for t in ("Regressions", "Improvements", "Unchanged")]
    if any(i >= 0 for i in sections):
        top = text[min(i for i in sections if i >= 0) : text.index("<details>")]
        assert "inconclusive" not in top


def test_the_slow_attention_comment_shows_its_regressions_before_any_table_of_the_rest(
    example: Example,
) -> None:
    comparison, _ = example["slow-attention"]
    assert comparison.verdict is Verdict.REGRESSION
    text = render_comment(comparison)
    assert text.index("### Regressions") < text.index("<details><summary>")


# --- the run page in Chromium ------------------------------------------------------------------

CHROMIUM = os.environ.get("PERFCI_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def served(
    stored: tuple[str, Example], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"Chromium is required in CI but {CHROMIUM} is absent")
        pytest.skip(f"Chromium is absent ({CHROMIUM}); apt-get install chromium")
    url, _ = stored
    assert main(["project", "update", "acme/gpt", "--public", "--database-url", url]) == 0
    server = start_server(url, log_dir=tmp_path_factory.mktemp("server"))
    yield server
    server.stop()


@pytest.mark.browser
@pytest.mark.parametrize("name", ["unchanged", "slow-attention"])
def test_every_column_of_the_run_page_table_shows_in_a_1280_px_window(
    served: ServerProcess, example: Example, name: str, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    _, run = example[name]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            response = page.goto(f"{served.url}/runs/{run.id}")
            assert response is not None and response.status == 200
            shot = tmp_path / f"run-{name}.png"
            page.screenshot(path=str(shot), full_page=True)
            table = page.locator("table.metrics").first
            wrap = page.locator(".table-wrap:has(table.metrics)").first
            scroll, client = wrap.evaluate("e => [e.scrollWidth, e.clientWidth]")
            assert scroll <= client, f"the table scrolls: {scroll} px in {client} px ({shot})"
            headers = table.locator("thead th")
            assert headers.all_inner_texts() == [
                "verdict",
                "kind",
                "metric",
                "baseline",
                "this run",
                "change",
                "95 % CI",
                "q",
                "gates",
            ]
            for index in range(headers.count()):
                box = headers.nth(index).bounding_box()
                assert box is not None and box["width"] > 0
                assert box["x"] >= 0 and box["x"] + box["width"] <= 1280, (index, box, shot)
            # The folded lines are there, under one summary line, and closed.
            folded = page.locator("details.folded")
            assert folded.count() == 1 and folded.get_attribute("open") is None
            assert "inconclusive lines that do not gate" in folded.locator("summary").inner_text()
        finally:
            browser.close()
