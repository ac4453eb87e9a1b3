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
from typing import Any

from perfci.core.json_finite import finite_json

__all__ = ["json_text"]


def json_text(value: Any) -> str:
    """``json.dumps(value)`` with every non-finite float written as ``null``."""
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError:  # a NaN or an infinity somewhere (the rare case: a second pass)
        return json.dumps(finite_json(value), allow_nan=False)
