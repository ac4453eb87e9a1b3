"""The weekly report as GitHub Markdown (an issue body) and as a short Slack message.

The issue body starts with a hidden marker per project and week (:func:`weekly_marker`), by which
:meth:`perfci.integrations.github.client.GitHubClient.create_or_update_issue` finds the week's issue
and edits it in place. Every name from the store (benchmarks, kernels, environments, branches)
passes through :func:`perfci.report.escape.md_escape`; Slack text through :func:`slack_escape`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import jinja2

from perfci.core.units import format_value
from perfci.report import formatting as fmt
from perfci.report._markdown_env import markdown_template
from perfci.report.escape import md_escape, md_link, safe_url, shorten, visible
from perfci.report.repro import ab_command, bisect_command, code_block

if TYPE_CHECKING:
    from perfci.core.weekly import BenchmarkTrend, ChangePointReport, WeeklyReport

__all__ = [
    "MAX_ISSUE_CHARS",
    "environment_label",
    "issue_title",
    "render_markdown",
    "render_slack",
    "slack_escape",
    "weekly_marker",
]

#: GitHub's limit on issue bodies, less a margin for its own line-ending normalisation.
MAX_ISSUE_CHARS = 65_536 - 512
NAME_LEN = 100
_BLANK_LINES = re.compile(r"\n{3,}")
_TRUNCATED = "\n\n… (the rest of this report was cut to fit GitHub's issue size limit)\n"
#: Row limits tried in turn until the body fits: (change points, contributors, other rows).
_LIMITS = ((30, 5, 10), (15, 3, 5), (5, 3, 3), (3, 1, 1))


def weekly_marker(project: str, week: str) -> str:
    """``<!-- perfci:weekly=PROJECT:YYYY-Www -->``; the project is percent-encoded outside a safe
    set, so that it cannot end the HTML comment and two projects never share a marker."""
    return f"<!-- perfci:weekly={quote(project, safe='._~/+=@')}:{quote(week, safe='-')} -->"


def issue_title(project: str, week: str) -> str:
    """The issue's title: ``perfci weekly report PROJECT YYYY-Www`` (plain text, not Markdown)."""
    return f"perfci weekly report {_plain(project)} {_plain(week)}"


def environment_label(values: Mapping[str, str], *, limit: int = 60) -> str:
    """``gpu=H100, torch=2.4.0``: the fingerprint in a few words (raw text, escape it)."""
    text = ", ".join(f"{k}={v}" for k, v in sorted(values.items())) or "default"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_markdown(
    report: WeeklyReport, *, repo: str | None = None, server_url: str = "https://github.com"
) -> str:
    """The issue body for ``report``, under :data:`MAX_ISSUE_CHARS` characters.

    ``repo`` (``OWNER/NAME``) turns commit ranges into compare links on ``server_url``.
    Long reports keep fewer rows per table; the change points come first and go last.
    """
    context = _context(report, repo=repo, server_url=server_url)
    body = ""
    for change_points, contributors, rows in _LIMITS:
        body = _render(context, change_points=change_points, contributors=contributors, rows=rows)
        if _size(body) <= MAX_ISSUE_CHARS:
            return body
    cut = body[: MAX_ISSUE_CHARS - len(_TRUNCATED) * 2]
    return cut[: cut.rfind("\n")] + _TRUNCATED


def render_slack(report: WeeklyReport, *, link: str | None = None, max_rows: int = 5) -> str:
    """A short Slack ``mrkdwn`` message: the headline and the largest change points."""
    found = report.change_points()
    lines = [
        f"*perfci weekly report {slack_escape(report.project)} {report.week}* "
        f"(branch {slack_escape(report.branch)}, {report.since:%Y-%m-%d} – "
        f"{_last_day(report):%Y-%m-%d}): {_count(len(found), 'change point')}, "
        f"{_count(report.coverage.runs, 'run')}."
    ]
    for trend, cp in found[:max_rows]:
        top = cp.contributors[0].name if cp.contributors else None
        because = f" — mostly {slack_escape(top, max_len=80)}" if top else ""
        lines.append(
            f"• {slack_escape(trend.benchmark, max_len=80)}: step time "
            f"{fmt.pct(cp.change)} at {_commits(cp)}{because}"
        )
    if len(found) > max_rows:
        lines.append(f"… and {len(found) - max_rows} more")
    url = safe_url(link)
    if url:
        lines.append(f"<{url}|Full report>")
    return "\n".join(lines)


def slack_escape(text: object, *, max_len: int | None = None) -> str:
    """Text safe in Slack ``mrkdwn``: ``&<>`` as entities (Slack's own rule), so a name can make
    no link or mention, and formatting characters neutralised with a zero-width joiner."""
    raw = visible(text)  # invisible format characters (U+202E ...) as <U+XXXX>, issue 13
    if max_len is not None:
        raw = shorten(raw, max_len)
    raw = raw.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([*_~`])", "\\1\u200d", raw)


# --- internals --------------------------------------------------------------------------------


def _plain(text: str) -> str:
    return visible(text)


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _last_day(report: WeeklyReport) -> datetime:
    """The period's last day (``until`` is exclusive)."""
    return report.until - timedelta(microseconds=1)


def _commits(cp: ChangePointReport) -> str:
    return f"{fmt.short_sha(cp.previous_commit)}..{fmt.short_sha(cp.commit)}"


def _context(report: WeeklyReport, *, repo: str | None, server_url: str) -> dict[str, Any]:
    trends = report.benchmarks
    return {
        "report": report,
        "marker": weekly_marker(report.project, report.week),
        "last_day": _last_day(report),
        "found": report.change_points(),
        "measures": report.measure_changes(),
        "movers": [(t, m) for t in trends for m in t.share_movers],
        "appeared": [t for t in trends if t.new_kernels or t.vanished_kernels],
        "noisy": [t for t in trends if t.noise is not None],
        "benchmark_count": len({t.benchmark for t in trends}),
        "name_len": NAME_LEN,
        "compare": functools.partial(_compare_link, repo=repo, server_url=server_url),
        "repro": _repro,
    }


def _compare_link(cp: ChangePointReport, *, repo: str | None, server_url: str) -> str:
    text = _commits(cp)
    if not repo or not cp.commit:
        return md_escape(text)
    base = server_url.rstrip("/")
    if cp.previous_commit:
        url = (
            f"{base}/{quote(repo)}/compare/{quote(cp.previous_commit, safe='')}..."
            f"{quote(cp.commit, safe='')}"
        )
    else:
        url = f"{base}/{quote(repo)}/commit/{quote(cp.commit, safe='')}"
    return md_link(text, url)


def _render(context: dict[str, Any], **limits: int) -> str:
    body = _template().render(**context, **limits)
    return _BLANK_LINES.sub("\n\n", body)


def _size(text: str) -> int:
    """Length as GitHub counts it (UTF-16 code units)."""
    return len(text.encode("utf-16-le")) // 2


def _pvalue(value: float | None) -> str:
    if value is None:
        return fmt.NO_VALUE
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def _cv(value: float | None) -> str:
    return fmt.NO_VALUE if value is None else f"{value * 100:.1f} %"


def _repro(trend: BenchmarkTrend, cp: ChangePointReport) -> str:
    """The commands of one change point: its two commits as an A/B, and the bisection."""
    good, bad = str(cp.previous_commit), str(cp.commit)
    lines = [
        *ab_command(trend.benchmark, commit=bad, base=good),
        bisect_command(trend.benchmark, good=good, bad=bad),
    ]
    return code_block(lines)


@functools.cache
def _template() -> jinja2.Template:
    return markdown_template(
        "weekly.md.j2",
        {
            "pval": _pvalue,
            "cv": _cv,
            "val": lambda value, unit: md_escape(format_value(value, unit), mid_line=True),
            "env": lambda values: md_escape(visible(environment_label(values))),
        },
    )
