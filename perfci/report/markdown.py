"""A comparison as GitHub Markdown: the pull-request comment and the job summary.

The comment starts with a hidden marker (:func:`comment_marker`) by which
:class:`perfci.integrations.github.client.GitHubClient` finds and edits it in place. The verdict
comes first, then what was decided (regressions, improvements, the gated lines found
unchanged); the full table of metrics sits in a collapsed ``<details>`` section, decided lines
first, with the ungated inconclusive lines folded apart in one more (issue 36: they were a wall
of a few µs each before the lines that decided). The full table is the only part cut when the
comment would exceed GitHub's size limit, the folded lines first.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import jinja2

from perfci.core.model import KNOWN_UNITS, Contribution, MetricComparison, RunComparison, Verdict
from perfci.core.repro import Repro
from perfci.report import formatting as fmt
from perfci.report import sentences
from perfci.report._markdown_env import markdown_template
from perfci.report.escape import md_code, md_escape, md_link, visible
from perfci.report.repro import render_repro

__all__ = ["MAX_COMMENT_CHARS", "comment_marker", "render_comment", "render_summary"]

#: GitHub refuses comment bodies over 65,536 characters; keep a margin for what we cannot
#: count exactly (GitHub's own normalisation of line endings).
MAX_COMMENT_CHARS = 65_536
_BUDGET = MAX_COMMENT_CHARS - 512
#: Names in the summary tables; the full table below shows them whole.
NAME_LEN = 120
_BLANK_LINES = re.compile(r"\n{3,}")
_TRUNCATED = "\n\n… (the rest of this report was cut to fit GitHub's comment size limit)\n"


def comment_marker(benchmark: str) -> str:
    """The hidden first line that identifies this benchmark's comment on a pull request.

    The name is percent-encoded outside a small safe set, so it cannot end the HTML comment
    (``-->``) and two benchmarks never share a marker.
    """
    return f"<!-- perfci:benchmark={quote(benchmark, safe='._~/:+=@')} -->"


def render_comment(
    result: RunComparison,
    *,
    marker: str | None = None,
    run_url: str | None = None,
    max_rows: int = 10,
    repro: Repro | None = None,
) -> str:
    """The pull-request comment for ``result``.

    Parameters
    ----------
    result
        The comparison to report.
    marker
        Hidden first line; :func:`comment_marker` of the benchmark when ``None``.
    run_url
        Link to the CI run; ``result.ci_url`` when ``None``.
    max_rows
        Rows of each summary table (contributors, regressions, improvements).
    repro
        The repro bundle (commands, environment, where the profiles are), shown collapsed
        before the footer; none when ``None``.

    Returns
    -------
    str
        Markdown under :data:`MAX_COMMENT_CHARS` characters. When the full table does not fit,
        its quietest rows (unchanged first) are left out and the comment says how many.
    """
    context = _context(result, run_url=run_url, max_rows=max_rows, summary=False)
    context["repro"] = render_repro(repro, result) if repro is not None else None
    context["marker"] = marker if marker is not None else comment_marker(result.benchmark)
    return _fit(lambda limit: _render(context, details_limit=limit), len(context["all_rows"]))


def render_summary(
    result: RunComparison,
    *,
    run_url: str | None = None,
    max_rows: int = 10,
    repro: Repro | None = None,
) -> str:
    """A shorter report for ``$GITHUB_STEP_SUMMARY``: the comment without its full table."""
    context = _context(result, run_url=run_url, max_rows=max_rows, summary=True)
    context["repro"] = render_repro(repro, result) if repro is not None else None
    context["marker"] = None
    return _render(context, details_limit=0)


def _context(
    result: RunComparison, *, run_url: str | None, max_rows: int, summary: bool
) -> dict[str, Any]:
    by_key = {m.key: m for m in result.metrics}
    shown, folded = fmt.decided_first(result.metrics)
    contributions = [
        (c, by_key.get(c.key))
        for c in result.contributions[:max_rows]
        if fmt.explains_change(result)
    ]
    return {
        "result": result,
        "summary": summary,
        "headline": str(fmt.HEADLINES[result.verdict]),
        "step": fmt.primary_step(result),
        "steps": sorted(result.steps, key=lambda m: (-(m.baseline_median or 0.0), m.key))[
            :max_rows
        ],
        "shared": result.shared_factor,
        "measures": fmt.headline_measures(result)[:max_rows],
        "counts": sentences.counts_sentence(result.metrics),
        "rerun": sentences.rerun_sentence(result),
        "answer": sentences.step_answer(result),
        "unsettled": sentences.unsettled_sentence(result),
        "contributions": contributions,
        "renamed": fmt.replacements(result.metrics)[:max_rows],
        "sections": _sections(result, max_rows),
        "all_rows": shown + folded,
        "shown_summary": fmt.shown_summary(len(shown), len(folded)),
        "folded_summary": fmt.folded_summary(len(folded)),
        "host_keys": fmt.host_side_keys(result.metrics),
        "name_len": NAME_LEN,
        "footer": _footer(result, run_url or result.ci_url),
    }


def _sections(
    result: RunComparison, max_rows: int
) -> list[tuple[str, list[MetricComparison], int]]:
    """(title, top rows, rows left out) for what was decided: regressions, improvements and
    the gated lines found unchanged, when there are any."""
    out = []
    for title, rows in (
        ("Regressions", fmt.by_impact(result.metrics, Verdict.REGRESSION)),
        ("Improvements", fmt.by_impact(result.metrics, Verdict.IMPROVEMENT)),
        ("Unchanged gated lines", fmt.unchanged_gated(result)),
    ):
        if rows:
            out.append((title, rows[:max_rows], max(0, len(rows) - max_rows)))
    return out


def _footer(result: RunComparison, url: str | None) -> list[str]:
    parts = []
    if url:
        parts.append(md_link("CI run", url))
    if result.commit:
        parts.append(f"commit {md_escape(fmt.short_sha(result.commit))}")
    if result.branch:
        parts.append(f"branch {md_escape(visible(result.branch), max_len=100)}")
    return parts


def _render(context: dict[str, Any], *, details_limit: int) -> str:
    rows = context["all_rows"][:details_limit]  # the folded lines last: cut first
    body = _template().render(
        **context,
        details=[m for m in rows if not fmt.folded(m)],
        folded_rows=[m for m in rows if fmt.folded(m)],
        details_hidden=len(context["all_rows"]) - len(rows),
    )
    # Optional blocks leave runs of blank lines; Markdown ignores them, readers of diffs don't.
    return _BLANK_LINES.sub("\n\n", body)


def _fit(render: Callable[[int], str], total: int) -> str:
    """The rendering with the most full-table rows that fits the budget (binary search)."""
    body = render(total)
    if _size(body) <= _BUDGET:
        return body
    low, high = 0, total - 1  # invariant: the answer lies in [low, high]
    while low < high:
        middle = (low + high + 1) // 2
        if _size(render(middle)) <= _BUDGET:
            low = middle
        else:
            high = middle - 1
    body = render(low)
    return body if _size(body) <= _BUDGET else _hard_cut(body)


def _hard_cut(body: str) -> str:
    """Last resort (huge notes or environment): cut at a line end; the verdict is at the top."""
    keep = body[: _BUDGET - len(_TRUNCATED) * 2]
    while _size(keep) > _BUDGET - len(_TRUNCATED) * 2:
        keep = keep[: len(keep) * 9 // 10]
    cut = keep.rfind("\n")
    return (keep[:cut] if cut > 0 else keep) + _TRUNCATED


def _size(text: str) -> int:
    """Length as GitHub counts it (UTF-16 code units: an emoji outside the BMP counts twice)."""
    return len(text.encode("utf-16-le")) // 2


@jinja2.pass_context
def _verdict(context: jinja2.runtime.Context, metric: MetricComparison) -> str:
    label = str(fmt.LABELS[metric.verdict])
    decided = metric.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)
    if decided and metric.key in context.get("host_keys", ()):
        return f"{label} (CPU side, not gating)"
    if metric.verdict is Verdict.REGRESSION and not metric.gated:
        return f"{label} (not gating)"
    return label


def _measured(metric: MetricComparison, number: float | None) -> str:
    # A free unit is the source's string (it may hold "|" or "*"): escaped like names. The
    # known units print as numbers and symbols only.
    shown = fmt.measured(metric, number)
    if metric.series is None or metric.series.unit in KNOWN_UNITS:
        return shown
    return md_escape(shown, mid_line=True)


@jinja2.pass_context
def _name(context: jinja2.runtime.Context, item: MetricComparison | Contribution) -> str:
    if isinstance(item, Contribution):
        # A renamed kernel's contribution is its paired line's: say which name it replaces.
        line = next((m for c, m in context.get("contributions", ()) if c is item), None)
        if line is not None:
            return fmt.name_of(line)
        return item.series.display_name if item.series else item.key
    return fmt.name_of(item)


def _code(text: str, max_len: int | None = None) -> str:
    return md_code(visible(text), max_len=max_len)


def _kind(item: MetricComparison | Contribution) -> str:
    if isinstance(item, Contribution):
        kind = item.series.kind.value if item.series else item.key.split(":", 1)[0]
    else:
        kind = fmt.kind_of(item)
    return md_escape(visible(kind))


@functools.cache
def _template() -> jinja2.Template:
    return markdown_template(
        "comment.md.j2",
        {
            "qval": fmt.qvalue,
            "interval": fmt.interval,
            "verdict": _verdict,
            "name": _name,
            "code": _code,
            "kind": _kind,
            "val": _measured,
            "better": fmt.direction,
        },
    )
