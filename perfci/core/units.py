"""The one place where profiler numbers and units become nanoseconds and bytes.

Decimal arithmetic is used for the conversion so that ``4.91060s`` becomes exactly
``4910600000.0`` ns rather than a float that is off in the last bit.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from perfci.core.compat import compile_linear
from perfci.core.limits import MAX_VALUE

NS_PER_UNIT: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "sec": 1_000_000_000,
    "min": 60_000_000_000,
    "nsecond": 1,
    "usecond": 1_000,
    "msecond": 1_000_000,
    "second": 1_000_000_000,
}

BYTES_PER_UNIT: dict[str, int] = {
    "b": 1,
    "B": 1,
    "byte": 1,
    "bytes": 1,
    "KB": 1024,
    "Kb": 1024,
    "kB": 1024,
    "KiB": 1024,
    "MB": 1024**2,
    "Mb": 1024**2,
    "MiB": 1024**2,
    "GB": 1024**3,
    "Gb": 1024**3,
    "GiB": 1024**3,
    "TB": 1024**4,
    "TiB": 1024**4,
}

MISSING = frozenset({"", "-", "--", "n/a", "N/A", "NaN", "nan", "None", "null"})

# Each run is taken whole (possessive ``*+``): giving part of a run of digits, separators or
# blanks to the next quantifier never lets the rest match, and trying every split of a long
# run took minutes (issue 31).
_DURATION = compile_linear(
    r"^\s*+([-+]?[0-9][0-9,.\u00a0 ]*+(?:[eE][-+]?\d++)?+)\s*+([a-zµμ]*+)\s*+$"
)
_SIZE = compile_linear(r"^\s*+([-+]?[0-9][0-9,.\u00a0]*+(?:[eE][-+]?\d++)?+)\s*+([A-Za-z]*+)\s*+$")


def to_decimal(text: str, *, grouping: str = ",") -> Decimal:
    """Parse a number, stripping thousands ``grouping`` characters (``,``, ``.``, NBSP).

    ``grouping="."`` means a European locale: ``.`` groups and ``,`` is the decimal mark.
    Raises ``ValueError`` on anything that is not a number.
    """
    cleaned = text.strip().replace("\u00a0", "").replace(" ", "")
    if grouping == ".":
        cleaned = cleaned.replace(".", "").replace(",", ".")
    elif grouping:
        cleaned = cleaned.replace(grouping, "")
    try:
        value = Decimal(cleaned)
    except InvalidOperation as exc:
        raise ValueError(f"not a number: {text!r}") from exc
    if not value.is_finite():
        raise ValueError(f"not a finite number: {text!r}")
    return value


def parse_number(text: str, *, grouping: str = ",") -> float | None:
    """A plain number, ``None`` for the placeholders profilers print for "no value"."""
    if text.strip() in MISSING:
        return None
    value = float(to_decimal(text, grouping=grouping))
    if not math.isfinite(value):  # a finite Decimal beyond any float
        raise ValueError(f"{text!r} is too large a number")
    return value


def parse_int(text: str, *, grouping: str = ",") -> int | None:
    """An integer count such as ``1,200``; ``None`` for placeholders."""
    if text.strip() in MISSING:
        return None
    value = to_decimal(text, grouping=grouping)
    if value != value.to_integral_value():
        raise ValueError(f"not an integer: {text!r}")
    return int(value)


def parse_duration(text: str, *, unit: str | None = None, grouping: str = ",") -> float | None:
    """A duration in ns from ``588ns``, ``4.0922ms``, ``1.2s``, or a bare number in ``unit``.

    A unit glued to the number wins over ``unit``. ``None`` for placeholders.
    Raises ``ValueError`` when there is neither a known suffix nor a default unit.
    """
    return _scaled(text, _DURATION, NS_PER_UNIT, ("duration", "time"), unit, grouping)


def scale_to_ns(value: float | Decimal | str, unit: str) -> float:
    """A number given in ``unit`` (``ns``, ``us``, ``ms``, ``s``) as nanoseconds."""
    factor = NS_PER_UNIT.get(unit)
    if factor is None:
        raise ValueError(f"unknown time unit {unit!r}")
    return in_range(float(Decimal(str(value)) * factor), value)


def parse_size(text: str, *, unit: str | None = None, grouping: str = ",") -> float | None:
    """A size in bytes from ``4.50 KB``, ``-540.00 MB``, ``492 b``, or a bare number in ``unit``.

    Binary (1024-based) multiples, as PyTorch and nvprof print them.
    """
    return _scaled(text, _SIZE, BYTES_PER_UNIT, ("size", "size"), unit or "B", grouping)


def _scaled(
    text: str,
    pattern: re.Pattern[str],
    per_unit: dict[str, int],
    names: tuple[str, str],
    unit: str | None,
    grouping: str,
) -> float | None:
    """``text``, a number and an optional unit suffix as ``pattern`` splits them, times the
    factor of its unit (the suffix, else ``unit``) in ``per_unit``; ``None`` for placeholders.

    ``names`` are the quantity's and its units' names in the error messages.
    """
    if text.strip() in MISSING:
        return None
    quantity, units = names
    match = pattern.match(text)
    if not match:
        raise ValueError(f"not a {quantity}: {text!r}")
    number, suffix = match.groups()
    chosen = suffix or unit
    if chosen is None:
        raise ValueError(f"{quantity} without a unit: {text!r}")
    factor = per_unit.get(chosen)
    if factor is None:
        raise ValueError(f"unknown {units} unit {chosen!r} in {text!r}")
    return in_range(float(to_decimal(number, grouping=grouping) * factor), text)


def in_range(value: float, text: object) -> float:
    """``value`` when its magnitude is at most :data:`~perfci.core.limits.MAX_VALUE`; else a
    ``ValueError`` quoting ``text``, the number as the file gives it.

    A time of 1e308 ns, or one whose unit makes it infinite, is no measurement, and the
    sums and means of such numbers overflow (issue 31).
    """
    if not -MAX_VALUE <= value <= MAX_VALUE:  # NaN too
        raise ValueError(f"{text!r} is out of range (at most {MAX_VALUE:g} ns or bytes)")
    return value


def format_ns(ns: float) -> str:
    """A human duration: ``412 ns``, ``3.21 µs``, ``4.09 ms``, ``1.20 s``."""
    magnitude = abs(ns)
    if magnitude < 1_000:
        return f"{ns:.0f} ns"
    if magnitude < 1_000_000:
        return f"{ns / 1_000:.2f} µs"
    if magnitude < 1_000_000_000:
        return f"{ns / 1_000_000:.2f} ms"
    return f"{ns / 1_000_000_000:.3f} s"


_BINARY = ((1024**4, "TiB"), (1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB"))
_SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def format_bytes(size: float) -> str:
    """A human size in binary units: ``512 B``, ``3.50 KiB``, ``1.25 GiB``."""
    for factor, name in _BINARY:
        if abs(size) >= factor:
            return f"{size / factor:.2f} {name}"
    return f"{size:.0f} B"


#: Unit symbols an SI prefix attaches to (``2.5 Gflop/s``); word units take it apart
#: (``12.3 k tokens/s``).
_SYMBOLS = frozenset({"flop", "flop/s", "1/s", "bytes/s", "Hz", "J", "W", "Wh"})


def format_value(value: float, unit: str) -> str:
    """``value`` in ``unit`` as a reader expects it: times and sizes scaled (``4.09 ms``,
    ``1.25 GiB``), rates and counts with an SI prefix (``12.3 k tokens/s``, ``2.5 Gflop/s``),
    percentages as ``85.2 %``, anything else with its unit as the source named it."""
    if unit == "ns":
        return format_ns(value)
    if unit == "bytes":
        return format_bytes(value)
    if unit == "%":
        return f"{value:.1f} %"
    shown = {"1/s": "/s", "count": "", "bytes/s": "B/s"}.get(unit, unit)
    prefix = ""
    for factor, name in _SI:
        if abs(value) >= factor:
            value, prefix = value / factor, name
            break
    number = f"{value:.3g}" if prefix else f"{value:.4g}"
    if unit in _SYMBOLS:
        bare = shown.startswith("/") and not prefix  # "12/s", not "12 /s"
        return f"{number}{shown}" if bare else f"{number} {prefix}{shown}"
    return " ".join(part for part in (number, prefix, shown) if part)
