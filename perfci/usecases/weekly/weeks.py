"""ISO weeks: the periods the weekly report covers, their bounds, and a period's label."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from perfci.core.compat import UTC
from perfci.core.errors import ConfigError

__all__ = ["WEEK_YEARS", "iso_week", "period_label", "week_bounds"]


def iso_week(moment: datetime | date) -> str:
    """``2024-W05``: the ISO year and week of ``moment``."""
    year, week, _ = moment.isocalendar()
    return f"{year}-W{week:02d}"


#: The years ``--week`` accepts: a report also reads weeks of history before its week and
#: runs are timestamps, so weeks near the ends of the calendar (0001-W01, 9999-W52) overflow
#: (issue 13: an ``OverflowError`` traceback, a 500 from the API).
WEEK_YEARS = (1971, 9998)


def week_bounds(week: str) -> tuple[datetime, datetime]:
    """``[Monday 00:00 UTC, next Monday)`` of ISO week ``YYYY-Www``.

    Raises
    ------
    ConfigError
        Malformed, or a year outside :data:`WEEK_YEARS`.
    """
    try:
        year, number = (int(part) for part in week.strip().upper().split("-W"))
        if not WEEK_YEARS[0] <= year <= WEEK_YEARS[1]:
            raise ConfigError(
                f"week {week!r} is out of range: perfci reports weeks of the "
                f"years {WEEK_YEARS[0]} to {WEEK_YEARS[1]}"
            )
        monday = date.fromisocalendar(year, number, 1)
    except ValueError:
        raise ConfigError(f"week {week!r} is not an ISO week such as 2024-W05") from None
    start = datetime(monday.year, monday.month, monday.day, tzinfo=UTC)
    return start, start + timedelta(days=7)


def period_label(since: datetime, until: datetime) -> str:
    """The label of ``[since, until)``: its last ISO week, ``2026-W47``.

    The label keys the GitHub issue a report edits and names its files, so it must name the
    period's end (issue 16: ``--since 30d`` on 2026-11-23 was labelled by its middle,
    2026-W45, and edited that week's issue). The week is the one holding the middle of the
    period's last 7 days: a rolling "last 7 days" run on Monday morning is last week, the one
    its data come from, and ``--week W`` is ``W``.
    """
    return iso_week(until - min(until - since, timedelta(days=7)) / 2)
