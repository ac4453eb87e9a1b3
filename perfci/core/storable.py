"""Text no store keeps: NUL (PostgreSQL's text and JSON hold none) and the halves of
surrogate pairs (no UTF-8 encodes one alone, so neither SQLite's driver nor PostgreSQL's takes
it). A Python string holds a surrogate only alone (a pair read from JSON is one character), and
gets one from a JSON escape (``"\\ud800"``) or from bytes that are not UTF-8 decoded with
``surrogateescape`` (command-line arguments, environment variables).

What names a series or a run (a kernel's name, a branch) is refused when it holds one
(:func:`unstorable` says which); what only describes (a profile's metadata and file name) is
kept with U+FFFD in its place (:func:`storable_text`, :mod:`perfci.store.json_text`).
"""

from __future__ import annotations

import re

__all__ = ["REPLACEMENT", "storable_text", "unstorable"]

#: What stands in for a character no store keeps.
REPLACEMENT = "\ufffd"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable_text(text: str) -> str:
    """``text`` with NUL and lone surrogates replaced by U+FFFD."""
    return _UNSTORABLE.sub(REPLACEMENT, text)


def unstorable(text: str) -> str | None:
    """The first character of ``text`` no store keeps, described (``U+0000 (NUL)``), or
    ``None`` when there is none."""
    # A run's keys are one text of 400,000 characters for 10,000 kernels: these tests take
    # microseconds where the pattern's search takes milliseconds.
    if "\x00" not in text and (text.isascii() or _encodes(text)):
        return None
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    code = ord(found.group())
    return f"U+{code:04X} ({'NUL' if code == 0 else 'half of a surrogate pair'})"


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True
