"""JSON cannot hold NaN or ±inf, which Python's ``json`` reads and writes: free-form values
from a profile's source (a Google Benchmark context, a trace's metadata) are made JSON-safe by
writing them as ``None`` (``null``), as the comparison documents do (:mod:`.transfer`)."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["finite_json"]


def finite_json(value: Any) -> Any:
    """``value`` (dicts, lists and tuples walked) with every non-finite float as ``None``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(item) for item in value]
    return value
