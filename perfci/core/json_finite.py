"""JSON cannot hold NaN or ±inf, which Python's ``json`` reads and writes: free-form values
from a profile's source (a Google Benchmark context, a trace's metadata) are made JSON-safe by
writing them as ``None`` (``null``), as the comparison documents do (:mod:`.transfer`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

__all__ = ["finite_json"]


def finite_json(value: Any, *, strings: Callable[[str], str] | None = None) -> Any:
    """``value`` (dicts, lists and tuples walked) with every non-finite float as ``None``, and
    every string (keys included) passed through ``strings`` when given."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return value if strings is None else strings(value)
    if isinstance(value, dict):
        keys = (
            value.keys()
            if strings is None
            else (strings(k) if isinstance(k, str) else k for k in value)
        )
        return {
            key: finite_json(item, strings=strings)
            for key, item in zip(keys, value.values(), strict=True)
        }
    if isinstance(value, list | tuple):
        return [finite_json(item, strings=strings) for item in value]
    return value
