"""A small Chrome trace read whole with the standard library's ``json``.

``perfci parse`` of a 10 KB trace should start about as fast as the CLI framework alone (issue
33); the streaming reader's ``msgspec`` and the large-trace reduction's numpy would take longer
to import than the file takes to read. A file of at most ``SMALL_BYTES`` (inflated) is therefore
decoded at once and its events checked field by field as ``_chrome_stream``'s decoder checks
them.

This reader only ever answers for a trace that is valid JSON with events of the expected
types. Everything else (a syntax error, a bare ``inf`` or ``nan``, a wrongly typed field, a
duplicated key, a number out of range, a lone surrogate) returns ``None``, and the streaming
reader reads the file again and says what is wrong, with its line: so whichever reader runs, a
file gives the same profile or the same error (``tests/test_format_chrome_trace.py`` runs
every test with both readers, ``tests/test_chrome_readers.py`` compares them on real traces).
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfci.formats._textio import open_maybe_gzip

#: The largest inflated file read whole (about 1,500 events). ``json`` decodes at a tenth of
#: ``msgspec``'s speed: beyond this, the streaming reader's import pays for itself.
SMALL_BYTES = 256 << 10

_EVENTS_KEY = b'"traceEvents"'
# What ``json`` reads and ``msgspec`` refuses: a lone surrogate (a ``\ud800``-``\udfff``
# escape), or a number that may lie beyond a double, which ``json`` reads as infinity: where a
# JSON value starts, an exponent of 100 or more, or 100 digits in a row (a double ends near
# 1e308). A name that looks so only sends the file to the other reader.
_NOT_PLAIN = re.compile(
    rb"\\u[dD][89a-fA-F]"
    rb"|(?<=[:,\[\s])-?[0-9]+(?:\.[0-9]*)?[eE]\+?0*[1-9][0-9]{2}"
    rb"|[0-9]{100}"
)
# The keys of ``args`` behind ``Args``' fields, in their order.
_ARGS = ("bytes", "Total Allocated", "Total Reserved", "Device Type", "Device Id")


class _NotPlain(Exception):
    """The file is not one this reader answers for: the streaming reader takes it."""


@dataclass(slots=True)
class Args:
    """``_chrome_types.TraceArgs``."""

    bytes: Any = None
    total_allocated: Any = None
    total_reserved: Any = None
    device_type: Any = None
    device_id: Any = None


@dataclass(slots=True)
class Event:
    """``_chrome_types.TraceEvent``."""

    ph: str | None = None
    name: str | None = None
    cat: str | None = None
    ts: Any = None
    dur: float | None = None
    pid: Any = None
    args: Args | None = None


@dataclass(frozen=True, slots=True)
class SmallTrace:
    """What ``_chrome_stream.read_trace`` gives, and the events it would hand over."""

    top: dict[str, Any]  # the top-level object, "traceEvents" set to None
    bare: bool  # a bare JSON array of events (the legacy autograd profiler)
    events: list[Event]


def read_small_trace(path: Path, *, format: str) -> SmallTrace | None:
    """The whole trace when it is small and plain (see the module docstring), else ``None``."""
    try:
        if path.stat().st_size > SMALL_BYTES:  # larger inflated too: not read twice
            return None
        with open_maybe_gzip(path, format=format) as handle:
            data = handle.read(SMALL_BYTES + 1)
    except (OSError, EOFError, zlib.error):
        return None
    if len(data) > SMALL_BYTES or _NOT_PLAIN.search(data):
        return None
    try:
        return _trace(data)
    # ValueError: json's errors and bad UTF-8 among them; OverflowError: an integer dur
    # beyond a double.
    except (_NotPlain, ValueError, OverflowError, RecursionError):
        return None


def _trace(data: bytes) -> SmallTrace:
    document = json.loads(
        data.decode("utf-8-sig"),  # strict UTF-8 (json's own decoding lets surrogates pass)
        parse_constant=_refuse,
        object_pairs_hook=_unique_keys,
    )
    if isinstance(document, list):
        return SmallTrace(top={}, bare=True, events=_events(document))
    if not isinstance(document, dict) or data.count(_EVENTS_KEY) != 1:
        raise _NotPlain
    raw = document.get("traceEvents")
    if not isinstance(raw, list):
        raise _NotPlain
    document["traceEvents"] = None
    return SmallTrace(top=document, bare=False, events=_events(raw))


def _events(raw: list[Any]) -> list[Event]:
    events = []
    for item in raw:
        if not isinstance(item, dict):
            raise _NotPlain
        get = item.get
        ph, name, cat, dur, args = get("ph"), get("name"), get("cat"), get("dur"), get("args")
        if not (_text(ph) and _text(name) and _text(cat)):
            raise _NotPlain
        if dur is not None:
            if isinstance(dur, bool) or not isinstance(dur, int | float):
                raise _NotPlain
            dur = float(dur)
        if args is not None:
            if not isinstance(args, dict):
                raise _NotPlain
            args = Args(*map(args.get, _ARGS))
        events.append(Event(ph, name, cat, get("ts"), dur, get("pid"), args))
    return events


def _text(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _refuse(constant: str) -> Any:
    raise _NotPlain(constant)  # NaN, Infinity: the streaming reader reads them, with a warning


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # msgspec checks every occurrence of a repeated field; json keeps the last one only.
    document = dict(pairs)
    if len(document) != len(pairs):
        raise _NotPlain
    return document
