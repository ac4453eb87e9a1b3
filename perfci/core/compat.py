"""What perfci uses of Python 3.11, given on Python 3.10 too (what GPU runner images ship).

Every other module takes these names from here, not from the standard library, so that the
day 3.10 is dropped this module is the one place to simplify. ``tests/test_python310.py``
checks that nothing else in the package needs a newer Python (vermin, and mypy run for 3.10).
``tomllib`` has a module of its own, :mod:`perfci.core.tomlcompat` (only the settings need it).
"""

from __future__ import annotations

import re
import sys
from datetime import datetime, timezone
from typing import overload

#: ``datetime.UTC`` (3.11) is this same object.
UTC = timezone.utc

if sys.version_info >= (3, 11):  # vermin: these lines only run on 3.11 and newer
    from enum import StrEnum  # novermin
    from typing import Self  # novermin
else:  # pragma: no cover - exercised on Python 3.10 (scripts/check-install --python)
    from enum import Enum

    from typing_extensions import Self

    class StrEnum(str, Enum):
        """``enum.StrEnum``: members are strings, and ``str()`` and ``format()`` give the value."""

        def __str__(self) -> str:
            return str.__str__(self)

        def __format__(self, spec: str) -> str:
            return str.__format__(str(self), spec)


__all__ = [
    "UTC",
    "Self",
    "StrEnum",
    "compile_linear",
    "parse_iso_datetime",
    "without_possessive",
]

# 3.10's fromisoformat reads only what isoformat() writes: no "Z", exactly 3 or 6 digits of
# fraction. These two are what JSON documents of other tools carry.
_FRACTION = re.compile(r"(\d\d:\d\d:\d\d)[.,](\d+)")


def parse_iso_datetime(text: str) -> datetime:
    """``datetime.fromisoformat`` as Python 3.11 reads it (a ``Z`` suffix, any fraction).

    ValueError for text that is not an ISO 8601 date or time, as the standard function gives.
    """
    if sys.version_info >= (3, 11):
        return datetime.fromisoformat(text)
    value = text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text
    value = _FRACTION.sub(lambda m: f"{m[1]}.{(m[2] + '000000')[:6]}", value, count=1)
    return datetime.fromisoformat(value)


_QUANTIFIER_BRACES = re.compile(r"\{\d*(?:,\d*)?\}")


def without_possessive(pattern: str) -> str:
    """``pattern`` with its possessive quantifiers (``*+``, ``++``, ``?+``, ``{m,n}+``) made
    greedy and its atomic groups ``(?>…)`` plain ``(?:…)``: what Python 3.10's ``re`` reads.

    The package's patterns use them only where backtracking into them can never produce a
    match (``\\s++(\\S++)``, the first ``] with [`` taken for good), so both forms match the
    same text; only their worst-case time differs (linear, issue 31, on 3.11 and newer).
    """
    out: list[str] = []
    i = 0
    class_start = -1  # where the character class being read opened; -1 outside one
    after_quantifier = False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            after_quantifier = False
            continue
        if class_start >= 0:
            out.append(char)
            # "[]…]" and "[^]…]": a "]" first in the class is a member, not its end.
            first = class_start + (2 if pattern[class_start + 1 : class_start + 2] == "^" else 1)
            if char == "]" and i != first:
                class_start = -1
            i += 1
            continue
        if char == "+" and after_quantifier:
            i += 1  # the possessive mark: dropped
            after_quantifier = False
            continue
        if char == "[":
            class_start = i
            out.append(char)
            i += 1
            after_quantifier = False
            continue
        if pattern.startswith("(?>", i):
            out.append("(?:")
            i += 3
            after_quantifier = False
            continue
        if char == "(" and pattern.startswith("(?", i):
            out.append("(?")
            i += 2  # "(?" is a group's opening, never a "?" quantifier
            after_quantifier = False
            continue
        if char == "{":
            braces = _QUANTIFIER_BRACES.match(pattern, i)
            if braces and braces.group() != "{}":
                out.append(braces.group())
                i = braces.end()
                after_quantifier = True
                continue
        out.append(char)
        i += 1
        after_quantifier = char in "*+?"
    return "".join(out)


@overload
def compile_linear(pattern: str, flags: int = 0) -> re.Pattern[str]: ...
@overload
def compile_linear(pattern: bytes, flags: int = 0) -> re.Pattern[bytes]: ...


def compile_linear(pattern: str | bytes, flags: int = 0) -> re.Pattern[str] | re.Pattern[bytes]:
    """``re.compile`` of a pattern written with possessive quantifiers or atomic groups (linear
    on hostile input): as written on Python 3.11 and newer, ``without_possessive`` on 3.10."""
    if sys.version_info >= (3, 11):
        return re.compile(pattern, flags)
    if isinstance(pattern, bytes):  # pragma: no cover
        return re.compile(without_possessive(pattern.decode("latin-1")).encode("latin-1"), flags)
    return re.compile(without_possessive(pattern), flags)  # pragma: no cover
