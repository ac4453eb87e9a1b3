"""The text of the store's JSON values: what every store can keep, on both stores alike.

- JSON cannot hold NaN or ±inf, so they are written as ``null`` (as the comparison documents
  write them, :mod:`perfci.core.transfer`). A profile's metadata is what its file said (a
  Google Benchmark context, a trace's device properties), and Python's ``json`` reads ``NaN``
  and ``Infinity`` there: written back as they are, PostgreSQL refused the run's JSON
  ("invalid input syntax for type json") and the service answered 503 for a client's file
  (found by ``benchmarks/service_fuzz.py``), while SQLite kept a text no other JSON reader
  takes.
- A string holding NUL or half of a surrogate pair is written with U+FFFD (the replacement
  character) in its place. PostgreSQL keeps neither in a JSON value ("unsupported Unicode
  escape sequence"; a lone surrogate is invalid JSON to it) and SQLite's driver cannot encode
  a lone surrogate: a corrupted profile whose host name read ``\\x00.0.1`` was answered 503
  (``service_fuzz.py`` again), and a JSON profile may hold ``\\ud800`` as an escape. What goes
  here is descriptive (metadata, a profile's label, file and format, the environment), so the
  run is kept with the character marked rather than refused; the text a series is keyed by
  is refused instead (:mod:`perfci.core.storable`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from perfci.core.json_finite import finite_json
from perfci.core.storable import storable_text

__all__ = ["json_text"]
# How json.dumps writes them (and, harmlessly, an escaped backslash before such text, and an
# astral character's pair): only then is the value walked.
_SUSPECT = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


def json_text(value: Any) -> str:
    """``json.dumps(value)`` with every non-finite float written as ``null`` and every
    NUL or lone surrogate as U+FFFD."""
    try:
        text = json.dumps(value, allow_nan=False)
    except ValueError:  # a NaN or an infinity somewhere (the rare case: one walk, below)
        text = None
    if text is not None and _SUSPECT.search(text) is None:
        return text
    return json.dumps(finite_json(value, strings=storable_text), allow_nan=False)
