"""Trend plots as SVG text, for inlining into the weekly HTML report.

matplotlib through its object API: a bare ``Figure`` renders with the SVG backend whatever the
global backend is, and without pyplot there is no global figure state (safe in a server
thread). The output is deterministic, so reports can be diffed and golden-tested:
``svg.hashsalt`` fixes the element ids, the ``Date`` metadata is left out, and text is kept as
``<text>`` (``svg.fonttype = none``) rather than glyph paths, which is also several times
smaller. Names never reach the plot: the report's headings carry them, escaped.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from matplotlib import dates as mdates
from matplotlib import rc_context
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from perfci.core.compat import UTC

__all__ = ["step_trend_svg"]

_RC: dict[str, Any] = {
    "svg.hashsalt": "perfci",
    "svg.fonttype": "none",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "date.epoch": "1970-01-01T00:00:00",
}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: What matplotlib writes before the <svg> element; an inlined SVG must start at <svg>.
_PROLOGUE = re.compile(r"^.*?(?=<svg)", re.S)

VALUE_COLOUR = "#4c72b0"
LEVEL_COLOUR = "#dd8452"
CHANGE_COLOUR = "#c44e52"
PERIOD_SHADE = "#eeeeee"
#: The narrowest time axis drawn (10 minutes): runs seconds apart still read as separate.
MIN_SPAN_DAYS = 10 / (24 * 60)


def step_trend_svg(
    times: Sequence[datetime],
    values_ns: Sequence[float],
    levels_ns: Sequence[float],
    change_times: Sequence[datetime],
    *,
    period: tuple[datetime, datetime] | None = None,
    width_in: float = 8.0,
    height_in: float = 2.6,
) -> str:
    """The step-time trend: one dot per run, the fitted levels, change points as vertical lines.

    Parameters
    ----------
    times, values_ns, levels_ns
        One entry per run, oldest first: its time, its step time and its segment's level (ns).
    change_times
        Times of the first run of each new level.
    period
        The report's period, shaded.

    Returns
    -------
    str
        An ``<svg>`` element (no XML prologue), the same bytes for the same input.
    """
    if not (len(times) == len(values_ns) == len(levels_ns)):
        raise ValueError("times, values and levels must have one entry per run")
    with rc_context(_RC):  # type: ignore[arg-type]  # str keys, checked by matplotlib
        figure = Figure(figsize=(width_in, height_in))
        axes = figure.add_subplot()
        _draw(axes, times, values_ns, levels_ns, change_times, period)
        figure.tight_layout()
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    return _PROLOGUE.sub("", buffer.getvalue(), count=1).strip()


def _draw(
    axes: Axes,
    times: Sequence[datetime],
    values_ns: Sequence[float],
    levels_ns: Sequence[float],
    change_times: Sequence[datetime],
    period: tuple[datetime, datetime] | None,
) -> None:
    scale, unit = _unit(max(values_ns, default=0.0))
    if period is not None:
        axes.axvspan(
            _days(period[0]), _days(period[1]), color=PERIOD_SHADE, zorder=0, label="this period"
        )
    x = [_days(t) for t in times]
    axes.plot(
        x,
        [v / scale for v in values_ns],
        "o",
        markersize=3,
        color=VALUE_COLOUR,
        label="step time (median of repeats)",
        zorder=2,
    )
    axes.step(
        x,
        [v / scale for v in levels_ns],
        where="post",
        color=LEVEL_COLOUR,
        linewidth=1.2,
        label="level",
        zorder=3,
    )
    for moment in change_times:
        axes.axvline(_days(moment), color=CHANGE_COLOUR, linestyle="--", linewidth=1.0, zorder=4)
    if change_times:
        axes.plot([], [], color=CHANGE_COLOUR, linestyle="--", label="change point")
    axes.set_ylabel(f"step time ({unit})")
    if x:
        axes.set_xlim(*_x_limits(x, period))
    locator = mdates.AutoDateLocator(minticks=3, maxticks=8)  # type: ignore[no-untyped-call]
    axes.xaxis.set_major_locator(locator)
    # Days for a history of weeks, hours for runs of one day: labels that tell ticks apart.
    axes.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    axes.grid(axis="y", color="#dddddd", linewidth=0.6)
    if times:
        # Above the axes, so that it never hides the newest points.
        axes.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), fontsize=7, frameon=False, ncols=4)


def _x_limits(x: Sequence[float], period: tuple[datetime, datetime] | None) -> tuple[float, float]:
    """The time axis scaled to the data: its span plus a margin, never less than
    ``MIN_SPAN_DAYS``, so that runs minutes apart get an axis of minutes.

    Without this, matplotlib widens a zero span (one run, or runs of one commit time) to four
    years (issue 16: "2025–2029 with all points in one column").
    """
    low, high = min(x), max(x)
    if period is not None:
        low, high = min(low, _days(period[0])), max(high, _days(period[1]))
    margin = max((high - low) * 0.05, (MIN_SPAN_DAYS - (high - low)) / 2)
    return low - margin, high + margin


def _days(moment: datetime) -> float:
    """matplotlib's date number (days since the epoch set in ``_RC``), for aware datetimes."""
    aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return (aware - _EPOCH).total_seconds() / 86_400.0


def _unit(largest_ns: float) -> tuple[float, str]:
    """A scale and unit that keep the axis numbers short."""
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if largest_ns >= scale:
            return scale, unit
    return 1.0, "ns"
