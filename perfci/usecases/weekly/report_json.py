"""The weekly report as JSON (``perfci report --json``, the server's reports API)."""

from __future__ import annotations

import math
from datetime import date, datetime
from typing import Any

import numpy as np

from perfci.core.answers import BenchmarkAnswers
from perfci.core.model import SeriesKey
from perfci.core.weekly import ShareMove, WeeklyReport

SCHEMA_VERSION = 1


def report_to_dict(report: WeeklyReport) -> dict[str, Any]:
    """``report`` as JSON-ready dicts and lists: dates ISO 8601, NaN/inf as ``null``."""
    data: dict[str, Any] = _plain(report)
    data["schema_version"] = SCHEMA_VERSION
    data["change_points"] = [
        {"benchmark": t.benchmark, "environment_id": t.environment_id, "run_id": cp.run_id}
        for t, cp in report.change_points()
    ]
    return data


def _plain(value: Any) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        out = {name: _plain(getattr(value, name)) for name in value.__dataclass_fields__}
        if isinstance(value, SeriesKey):
            out["key"] = value.key
        if isinstance(value, ShareMove):
            out["change"] = _plain(value.change)
        if isinstance(value, BenchmarkAnswers):
            out["precision"] = _plain(value.precision)
        return out
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, float | np.floating):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, str):
        return str(value)  # StrEnum → its plain value
    return value
