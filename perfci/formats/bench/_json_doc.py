"""JSON result files of the benchmark harnesses: loading one whole, peeking at its start.

The sniffers see only the first 256 KiB of a file, which may cut a JSON document anywhere;
:func:`leading_items` and :func:`first_element` decode what is complete at its start, so that a
sniffer can check the shape of the first entries without the rest.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

from perfci.core.compat import UTC, parse_iso_datetime
from perfci.core.errors import ParseError
from perfci.formats._textio import open_maybe_gzip

_DECODER = json.JSONDecoder()
_SPACE = " \t\r\n"
#: A byte-order mark some Windows tools write before the JSON text.
_BOM = "\ufeff"


def load(path: Path, *, format: str) -> Any:
    """The JSON document in ``path`` (plain or gzip); a ``ParseError`` with the line if invalid."""
    # Inflated within _textio's caps: a gzip bomb stops with InputTooLarge (issue 13).
    with json_errors(path, format=format), open_maybe_gzip(path, format=format) as handle:
        return json.load(handle)


def load_benchmarks(path: Path, *, format: str, tool: str) -> dict[str, Any]:
    """The JSON object of ``path`` that holds a ``benchmarks`` array, as ``tool`` writes it
    (Google Benchmark, pytest-benchmark); a ``ParseError`` naming ``tool`` for anything else."""
    doc = load(path, format=format)
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise ParseError(
            f"expected a JSON object with a 'benchmarks' array ({tool})",
            source=str(path),
            format=format,
        )
    return doc


@contextmanager
def json_errors(path: Path, *, format: str) -> Iterator[None]:
    """Turn the JSON decoder's errors raised inside the block into a ``ParseError`` naming
    ``path`` and the line."""
    try:
        yield
    except json.JSONDecodeError as exc:
        raise ParseError(
            f"invalid JSON: {exc.msg} (column {exc.colno})",
            source=str(path),
            line=exc.lineno,
            format=format,
        ) from exc
    except UnicodeDecodeError as exc:
        raise ParseError(
            f"not UTF-8 JSON text: {exc.reason}", source=str(path), format=format
        ) from exc
    except RecursionError as exc:
        raise ParseError("JSON nested too deeply", source=str(path), format=format) from exc


def number(value: object) -> float | None:
    """``value`` as a finite float when it is a JSON number (not a boolean), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        result = float(value)
    except OverflowError:  # an integer literal beyond the float range
        return None
    return result if math.isfinite(result) else None


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _SPACE:
        pos += 1
    return pos


def _start(text: str, opener: str) -> int | None:
    """The index just after ``opener`` when the text (after a BOM and blanks) starts with it."""
    pos = _skip_space(text, 1 if text.startswith(_BOM) else 0)
    return pos + 1 if text.startswith(opener, pos) else None


def _decode(text: str, pos: int) -> tuple[Any, int]:
    return _DECODER.raw_decode(text, _skip_space(text, pos))


def leading_items(text: str, *, limit: int) -> list[tuple[str, Any]]:
    """The first ``limit`` complete key/value pairs of the JSON object ``text`` starts with.

    Fewer where the text ends (a cut head) or stops being JSON; none when it is no object.
    """
    pos = _start(text, "{")
    items: list[tuple[str, Any]] = []
    while pos is not None and len(items) < limit:
        try:
            key, pos = _decode(text, pos)
            pos = _skip_space(text, pos)
            if not isinstance(key, str) or not text.startswith(":", pos):
                break
            value, pos = _decode(text, pos + 1)
        except (ValueError, RecursionError):
            break
        items.append((key, value))
        pos = _skip_space(text, pos)
        pos = pos + 1 if text.startswith(",", pos) else None
    return items


def first_element(text: str) -> tuple[bool, Any]:
    """``(True, element)`` for the first complete element of the JSON array ``text`` starts
    with; ``(False, None)`` when it is no array, is empty or its first element is cut short."""
    pos = _start(text, "[")
    if pos is None:
        return False, None
    try:
        element, _ = _decode(text, pos)
    except (ValueError, RecursionError):
        return False, None
    return True, element


class ShapeError(Exception):
    """Valid JSON that is not the shape its format expects; :func:`shape_errors` names the file."""


@contextmanager
def shape_errors(path: Path, *, format: str) -> Iterator[None]:
    """Turn a :class:`ShapeError` raised inside the block into a ``ParseError`` naming ``path``."""
    try:
        yield
    except ShapeError as exc:
        raise ParseError(str(exc), source=str(path), format=format) from exc


def describe(value: object) -> str:
    """What a JSON value is, for an error message: ``a string "abc"``, ``an array``, ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({json.dumps(value)})"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string {json.dumps(shown)}"
    return "an array" if isinstance(value, list) else "an object"


def required_number(fields: Mapping[str, Any], key: str, where: str) -> float:
    """``fields[key]`` as a finite number, else a ``ShapeError`` saying what ``where`` holds."""
    raw = fields.get(key)
    value = number(raw)
    if value is None:
        got = "it is missing" if key not in fields else f"got {describe(raw)}"
        raise ShapeError(f"{where}: {key!r} must be a finite number; {got}")
    return value


def scaled(value: float, factor: int, where: str = "") -> float:
    """``value * factor`` rounded once from the exact decimal product.

    ``15.59886232309509`` s becomes exactly ``15598862323.09509`` ns, not the float product
    that is off in its last bit. A product beyond the largest float (``1e308`` GiB) is a
    ``ShapeError``: it would be stored as infinity.
    """
    product = float(Decimal(repr(value)) * factor)
    if math.isinf(product):
        raise ShapeError(
            f"{where}{': ' if where else ''}the number {value!r} is too large once converted "
            f"(× {factor:,}): beyond the largest number perfci can store"
        )
    return product


def iso_time(value: object) -> str | None:
    """``value`` as an ISO 8601 time with its offset (UTC when it names none: the naive UTC
    of ``datetime.utcnow().isoformat()``), or None when it is no such text."""
    if not isinstance(value, str):
        return None
    try:
        moment = parse_iso_datetime(value)
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).isoformat()
