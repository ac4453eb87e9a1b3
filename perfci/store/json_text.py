"""The text of the store's JSON values: JSON cannot hold NaN or ±inf, so they are written as
``null`` (as the comparison documents write them, :mod:`perfci.core.transfer`).

A profile's metadata is what its file said (a Google Benchmark context, a trace's device
properties), and Python's ``json`` reads ``NaN`` and ``Infinity`` there: written back as they
are, PostgreSQL refused the run's JSON ("invalid input syntax for type json") and the service
answered 503 for a client's file (found by ``benchmarks/service_fuzz.py``), while SQLite kept
a text no other JSON reader takes.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["json_text"]


def json_text(value: Any) -> str:
    """``json.dumps(value)`` with every non-finite float written as ``null``."""
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError:  # a NaN or an infinity somewhere (the rare case: a second pass)
        return json.dumps(_finite(value), allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value
