"""Dashboard pages: server-rendered HTML (Jinja2, autoescaped), no JavaScript.

``/`` projects · ``/p/{project}`` benchmarks with their latest step time and a sparkline ·
``/p/{project}/b/{benchmark}`` step-time history with change points, and its runs ·
``/runs/{id}`` a run's comparison. Public projects are open; a private one needs a read
token, given once at ``/login`` and kept in an HttpOnly cookie.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape

from perfci.core.errors import AuthError
from perfci.core.model import RunComparison, RunInfo, Verdict
from perfci.core.transfer import comparison_from_dict
from perfci.report import formatting as fmt
from perfci.report import sentences
from perfci.report.escape import safe_url, visible
from perfci.report.plots import step_trend_svg
from perfci.server import auth
from perfci.server.deps import TOKEN_COOKIE, CookieTokenDep, ReadSessionDep, SessionDep, SettingsDep
from perfci.server.schemas import INT32
from perfci.server.security import require_same_origin
from perfci.usecases.admin.tokens import authenticate
from perfci.usecases.browse import pages as browse
from perfci.usecases.browse.pages import StepPoint

router = APIRouter(include_in_schema=False, default_response_class=HTMLResponse)

TEMPLATES = Path(__file__).parent / "templates"
#: Rows of the comparison table; the rest are counted, not shown (the JSON API has them all).
MAX_ROWS = 300
#: Characters of a metric's name shown in a table cell; the whole name is its title (a
#: templated CUDA kernel's name runs to thousands).
NAME_CUT = 160


def make_templates() -> Jinja2Templates:
    """The page templates, always autoescaped (names come from the code under test).

    Every value a template prints goes through :func:`_shown` (Jinja's ``finalize``): names
    of projects, benchmarks, branches and kernels reach the page, its title included, with
    their invisible format characters (U+202E …) shown, so none can reverse the text around it.
    """
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(
            enabled_extensions=("html",), default_for_string=True, default=True
        ),
        finalize=_shown,
    )
    env.filters.update(
        project_url=lambda name: "/p/" + quote(name, safe="/"),
        segment=lambda name: quote(name, safe=""),
        duration=fmt.duration,
        pct=fmt.pct,
        short_sha=fmt.short_sha,
        safe_url=safe_url,
        label=verdict_badge,
        badge=verdict_badge,
    )
    return Jinja2Templates(env=env)


def _shown(value: Any) -> Any:
    """What a template prints: text through ``visible()``; markup made here left as it is."""
    return value if isinstance(value, Markup) or not isinstance(value, str) else visible(value)


def verdict_badge(verdict: Verdict | str | None, *, headline: bool = False) -> Markup:
    """A verdict as a text badge, coloured by CSS.

    Not the emoji of the comments and the terminal: a server's Chromium without an emoji
    font draws them as empty boxes (issue 16), and a badge reads the same everywhere.
    """
    if not verdict:
        return Markup(escape(fmt.NO_VALUE))
    value = Verdict(verdict)
    words = (fmt.HEADLINES if headline else fmt.LABELS)[value].words
    return Markup('<span class="badge badge-{}">{}</span>').format(value.value, words)


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> Response:
    templates: Jinja2Templates = request.app.state.templates
    return templates.TemplateResponse(request, template, context, status_code=status_code)


def render_error(request: Request, status: int, message: str) -> Response:
    """An error as a page (the JSON handlers' twin for browsers)."""
    return render(request, "error.html", status, status=status, message=message)


@router.get("/")
def index(request: Request, reads: ReadSessionDep, token: CookieTokenDep) -> Response:
    projects = [
        p
        for p in browse.list_projects(reads)
        if p.public or (token is not None and token.project == p.name)
    ]
    return render(request, "index.html", projects=projects, token=token)


@router.get("/login")
def login_form(request: Request, token: CookieTokenDep) -> Response:
    return render(request, "login.html", token=token, message=None)


@router.post("/login")
def login(
    request: Request, session: SessionDep, token: Annotated[str, Form(max_length=200)]
) -> Response:
    try:
        # Login CSRF: another site must not log a visitor in with a token of its choosing.
        require_same_origin(request)
        info = authenticate(session, token.strip())
    except AuthError as exc:
        return render(request, "login.html", exc.status, token=None, message=str(exc))
    if not info.allows("read"):
        return render(
            request, "login.html", 403, token=None, message="this token lacks the 'read' scope"
        )
    response = RedirectResponse("/p/" + quote(info.project, safe="/"), status_code=303)
    response.set_cookie(
        TOKEN_COOKIE,
        token.strip(),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        max_age=30 * 24 * 3600,
    )
    return response


@router.post("/logout")
def logout(request: Request) -> Response:
    try:
        # Logout CSRF: another site must not log a visitor out (checked as login checks).
        require_same_origin(request, action="log out")
    except AuthError as exc:
        return render_error(request, exc.status, str(exc))
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(TOKEN_COOKIE)
    return response


# A benchmark name may hold "/" (llm/70b): the path converter keeps it whole; the project is
# matched up to the last "/b/".
@router.get("/p/{project:path}/b/{benchmark:path}")
def benchmark_page(
    request: Request,
    project: str,
    benchmark: str,
    session: SessionDep,
    reads: ReadSessionDep,
    settings: SettingsDep,
    token: CookieTokenDep,
    branch: str | None = None,
) -> Response:
    auth.require_read(session, token, project)
    chosen = (branch or settings.baseline_branch)[:255]
    series, points = browse.step_history(reads, project, benchmark, branch=chosen)
    if not points and branch is None:
        chosen, (series, points) = "", browse.step_history(reads, project, benchmark, branch=None)
    runs = browse.benchmark_runs(reads, project, benchmark)
    verdicts = browse.verdicts(reads, [r.id for r in runs])
    # Every listed run's step, pull requests' too: the chart holds the base branch's only.
    step_of = browse.step_times(reads, project, benchmark, [r.id for r in runs])
    chart, changes = _chart(points)
    return render(
        request,
        "benchmark.html",
        project=project,
        benchmark=benchmark,
        branch=chosen,
        series=series,
        points=points,
        chart=chart,
        changes=changes,
        runs=runs,
        verdicts=verdicts,
        step_of=step_of,
        token=token,
    )


@router.get("/p/{project:path}")
def project_page(
    request: Request,
    project: str,
    session: SessionDep,
    reads: ReadSessionDep,
    settings: SettingsDep,
    token: CookieTokenDep,
) -> Response:
    auth.require_read(session, token, project)
    benchmarks = browse.list_benchmarks(reads, project, branch=settings.baseline_branch)
    sparks = {b.name: sparkline(b.trend_ns) for b in benchmarks}
    return render(
        request,
        "project.html",
        project=project,
        benchmarks=benchmarks,
        sparks=sparks,
        branch=settings.baseline_branch,
        token=token,
    )


@router.get("/runs/{run_id}")
def run_page(request: Request, run_id: int, session: SessionDep, token: CookieTokenDep) -> Response:
    if not 1 <= run_id <= INT32:
        return render_error(request, 404, f"no run with id {run_id}")
    auth.require_read(session, token, browse.project_of_run(session, run_id))
    detail = browse.run_detail(session, run_id)
    result = comparison_from_dict(detail.comparison) if detail.comparison else None
    return render(request, "run.html", token=token, **run_page_context(detail.run, result))


def run_page_context(run: RunInfo, result: RunComparison | None) -> dict[str, Any]:
    """What the run page shows: the decided lines first, the ungated inconclusive ones in a
    folded block under one summary line (as in the comment), at most ``MAX_ROWS`` rows."""
    shown, folded = fmt.decided_first(result.metrics) if result else ([], [])
    rows = shown[:MAX_ROWS]
    folded_rows = folded[: MAX_ROWS - len(rows)]
    return {
        "run": run,
        "result": result,
        "rows": rows,
        "folded_rows": folded_rows,
        "folded_summary": fmt.folded_summary(len(folded)),
        "hidden": len(shown) + len(folded) - len(rows) - len(folded_rows),
        "fmt": fmt,
        "sentences": sentences,
        "headline": verdict_badge(result.verdict, headline=True) if result else None,
        "contributions": result.contributions[:20] if result else [],
        "by_key": {m.key: m for m in result.metrics} if result else {},
        "renamed": fmt.replacements(result.metrics)[:20] if result else [],
        "name_cut": NAME_CUT,
    }


def _chart(points: Sequence[StepPoint]) -> tuple[str | None, list[tuple[StepPoint, float]]]:
    """The step-time chart (inline SVG) and the change points found in it."""
    if not points:
        return None, []
    values = [p.value_ns for p in points]
    found = browse.step_changes(list(points))
    levels, changes = found.levels, found.changes
    times = [p.time for p in points]
    if len(set(times)) < len(times):
        # Runs of one commit share its time and would stack in one column: when they were
        # stored tells them apart (the points keep their commit order).
        stored = [p.stored_at or p.time for p in points]
        if stored == sorted(stored):
            times = stored
    when = {p.run_id: t for p, t in zip(points, times, strict=True)}
    svg = step_trend_svg(
        times, values, levels, [when[p.run_id] for p, _ in changes], width_in=9.0, height_in=3.0
    )
    return svg, changes


def sparkline(values: Sequence[float], *, width: int = 120, height: int = 24) -> str | None:
    """A tiny trend line as an inline SVG (numbers only, no text: nothing to escape)."""
    if len(values) < 2:
        return None
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    step = (width - 4) / (len(values) - 1)
    coords = " ".join(
        f"{2 + i * step:.1f},{height - 2 - (v - low) / span * (height - 4):.1f}"
        for i, v in enumerate(values)
    )
    last_x, last_y = coords.rsplit(" ", 1)[-1].split(",")
    return (
        f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} '
        f'{height}" role="img" aria-label="step time trend">'
        f'<polyline fill="none" stroke="#4c72b0" stroke-width="1.5" points="{coords}"/>'
        f'<circle cx="{last_x}" cy="{last_y}" r="2" fill="#4c72b0"/></svg>'
    )
