"""The weekly report as one self-contained HTML file: inline CSS, inline SVG plots, no scripts.

Jinja2 with autoescape on: every name from the store is escaped by the template engine, after
:func:`~perfci.report.escape.visible` has shown its invisible format characters (a kernel name
holding U+202E must not read reversed). The only markup inserted as-is is the SVG that
:mod:`perfci.report.plots` draws from numbers and dates (no names reach the plot).
"""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import TYPE_CHECKING

import jinja2
from markupsafe import Markup

from perfci.core.units import format_value
from perfci.report import formatting as fmt
from perfci.report.escape import visible
from perfci.report.plots import step_trend_svg
from perfci.report.weekly_markdown import environment_label, issue_title

if TYPE_CHECKING:
    from perfci.core.weekly import BenchmarkTrend, WeeklyReport

__all__ = ["render_html", "trend_plot"]

_MICROSECOND = timedelta(microseconds=1)  # `until` is exclusive: its day is not in the period


def render_html(report: WeeklyReport, *, plots: bool = True) -> str:
    """The report as an HTML document (UTF-8 text); ``plots=False`` leaves the SVGs out."""
    figures = [trend_plot(t, report) for t in report.benchmarks] if plots else []
    return _template().render(
        report=report,
        title=issue_title(report.project, report.week),
        found=report.change_points(),
        measures=report.measure_changes(),
        figures=figures,
        last_day=report.until - _MICROSECOND,
    )


def trend_plot(trend: BenchmarkTrend, report: WeeklyReport) -> Markup | None:
    """The step-time plot of ``trend`` as inline SVG, or ``None`` without points."""
    if not trend.points:
        return None
    svg = step_trend_svg(
        [p.time for p in trend.points],
        [p.value for p in trend.points],
        [p.level for p in trend.points],
        [cp.time for cp in trend.change_points],
        period=(report.since, report.until),
    )
    # Drawn from numbers and dates only (see plots.py), so it is trusted markup.
    return Markup(svg)


def _cv(value: float | None) -> str:
    return fmt.NO_VALUE if value is None else f"{value * 100:.1f} %"


def _pvalue(value: float | None) -> str:
    if value is None:
        return fmt.NO_VALUE
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def _anchor(trend: BenchmarkTrend) -> str:
    """A fragment id from the benchmark's position-free identity (escaped by the template)."""
    safe = "".join(c if c.isalnum() else "-" for c in trend.benchmark)[:60]
    return f"b-{safe}-e{trend.environment_id}"


def _finalize(value: object) -> object:
    """Every printed text shown with its invisible characters visible (markup left as is)."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return visible(value)
    return value


@functools.cache
def _template() -> jinja2.Template:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("perfci.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_finalize,
    )
    env.filters.update(
        {
            "pct": fmt.pct,
            "share": fmt.share,
            "dur": fmt.duration,
            "val": format_value,
            "delta": fmt.delta,
            "sha": fmt.short_sha,
            "pval": _pvalue,
            "cv": _cv,
            "anchor": _anchor,
            "env": lambda values, limit=60: environment_label(values, limit=limit),
        }
    )
    return env.get_template("weekly.html.j2")
