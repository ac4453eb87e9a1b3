"""A small tokenizer for ``key=value,key=value`` records with nested brackets and quotes.

Echo-style Megatron traces write records such as::

    stage_id=1,input__shape=[2048, 2, 5120],description=model_chunk.finish_grad_sync(), All-reduce
    / reduce-scatter across DP replicas,sub_operations=['k=v,k=v', 'k=v']

Splitting on commas breaks them: commas occur inside ``[]``, ``()``, quoted strings, and even
in unquoted free text (``description``). This module splits at top-level commas only, and joins
a piece that does not start with ``key=`` back onto the previous value, which is how such free
text is written. Errors are ``TokenizeError`` (a ``ValueError``) with the column where the
problem is, so callers can report ``file:line:column``.

Most records need none of that care: values of plain text (with flat ``(...)`` asides), shape
lists ``[2048, 4096]`` and lists of quoted strings without escapes. Those are split by one
regular expression pass in C that also flags any character it cannot place, which is what
keeps 100 MB traces fast; anything else takes the character scanner (``scan_kv``,
``scan_string_list``), and the results are the same.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from perfci.core.compat import compile_linear

_OPENERS = {"[": "]", "(": ")", "{": "}"}
_CLOSERS = frozenset(_OPENERS.values())
_QUOTES = frozenset("'\"")
_KEY = re.compile(r"\s*([A-Za-z_][\w.]*)=")
_INT = re.compile(r"[-+]?[0-9]{1,18}")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"'}

# The fast path's grammar. Possessive quantifiers (*+) keep a failing match linear.
_PLAIN = r"[^,\[\](){}'\"\\]*+"  # no comma, bracket, quote or backslash
_FLAT = r"[^\[\](){}'\"\\]*+"  # the same with commas, inside a bracket pair
# Free text with flat parenthesised asides: "Regular DP sync (non-expert parameters)".
_PLAIN_VALUE = rf"{_PLAIN}(?:\({_FLAT}\){_PLAIN})*+"
_PLAIN_LIST = rf"\[{_FLAT}\]"  # [2048, 4096]
_QUOTED = r"'[^'\\]*+'"  # a quoted string without escapes
_QUOTED_LIST = rf"\[\s*+(?:{_QUOTED}(?:\s*+,\s*+{_QUOTED})*+\s*+)?\]"
_VALUE = rf"(?:{_PLAIN_LIST}|{_QUOTED_LIST}|{_PLAIN_VALUE})"
# One pass splits a simple record: each match is a key=value piece with its comma, or one
# character that is not (then the key is "": the record is not simple).
_PIECES = compile_linear(rf"\s*+([A-Za-z_][\w.]*+)=({_VALUE})(?:,(?!\Z)|\Z)|(?s:.)")
# The same for a list of quoted strings: (content, "") per item, ("", char) otherwise.
_ITEMS = compile_linear(r"\s*+'([^'\\]*+)'\s*+(?:,(?!\s*+\Z)|\Z)|((?s:.))")
# And for a list of quoted key=value records, one pass for all of them: per match either a
# piece (opening quote or "", key, value), or an item's end ("'"), or a stray character.
_UNQUOTED_VALUE = rf"(?:{_PLAIN_LIST}|{_PLAIN_VALUE})"
_RECORD_ITEMS = compile_linear(
    rf"(?:(\s*+')|,)\s*+([A-Za-z_][\w.]*+)=({_UNQUOTED_VALUE})(?=[,'])"
    r"|'\s*+(?:,(?=\s*+')|\Z)|((?s:.))"
)


class TokenizeError(ValueError):
    """Input that is not a well-formed record; ``column`` is 1-based within the text."""

    def __init__(self, message: str, column: int) -> None:
        self.column = column
        super().__init__(f"column {column}: {message}")


@dataclass(slots=True)
class _Scanner:
    """State of one left-to-right scan: bracket stack, quote, and whether a token starts here."""

    stack: list[str]
    quote: str | None = None
    quote_start: int = 0
    escaped: bool = False
    token_start: bool = True

    def feed(self, char: str, index: int) -> None:
        """Advance over ``char``; raises on a closer that does not match its opener."""
        if self.quote is not None:
            self._in_quote(char)
            return
        if char in _QUOTES and self.token_start:
            # A quote only opens a string at the start of a value, so that an apostrophe in
            # free text (``don't``) is not taken for a string that swallows the line.
            self.quote, self.quote_start = char, index
        elif char in _OPENERS:
            self.stack.append(_OPENERS[char])
        elif char in _CLOSERS and self.stack:
            expected = self.stack.pop()
            if char != expected:
                raise TokenizeError(f"expected {expected!r}, found {char!r}", index + 1)
        # Stray closers at depth 0 belong to free text such as "a) b": they are kept as text.
        # Whitespace keeps the "start of a value" state; "=", "," and openers begin one.
        self.token_start = (char.isspace() and self.token_start) or char in "=,[({"

    def _in_quote(self, char: str) -> None:
        if self.escaped:
            self.escaped = False
        elif char == "\\":
            self.escaped = True
        elif char == self.quote:
            self.quote = None
            self.token_start = False

    def plain(self) -> None:
        """Advance over ordinary characters (anything ``_specials`` does not match)."""
        if self.quote is not None:
            self.escaped = False
        else:
            self.token_start = False

    def at_top(self) -> bool:
        return self.quote is None and not self.stack

    def finish(self, length: int) -> None:
        """Raise if a quote or bracket is still open at the end of a text of ``length``."""
        if self.quote is not None:
            raise TokenizeError(f"unterminated {self.quote} string", self.quote_start + 1)
        if self.stack:
            missing = "".join(reversed(self.stack))
            raise TokenizeError(f"unbalanced brackets: missing {missing!r}", length)


@functools.cache
def _specials(separator: str) -> re.Pattern[str]:
    return re.compile("[" + re.escape(separator) + r"\[\](){}=,'\"\\\s]")


def split_top_level(text: str, separator: str = ",") -> list[str]:
    """``text`` cut at each ``separator`` that is outside brackets and quoted strings.

    >>> split_top_level("a=[1, 2],b='x,y',c=f(1, 2)")
    ['a=[1, 2]', "b='x,y'", 'c=f(1, 2)']
    """
    scanner = _Scanner(stack=[])
    pieces: list[str] = []
    start = 0
    last = -1
    # Only brackets, quotes, separators, "=", backslashes and whitespace change the state;
    # jumping between them keeps lines of tens of KB fast.
    for match in _specials(separator).finditer(text):
        index = match.start()
        if index > last + 1:
            scanner.plain()
        last = index
        char = text[index]
        if char == separator and scanner.at_top():
            pieces.append(text[start:index])
            start = index + 1
            scanner.token_start = True
            continue
        scanner.feed(char, index)
    if len(text) > last + 1:
        scanner.plain()
    scanner.finish(len(text))
    pieces.append(text[start:])
    return pieces


def parse_kv(text: str) -> dict[str, str]:
    """The ``key=value`` pairs of a record, values as raw text (brackets and quotes kept).

    A top-level piece without ``key=`` continues the previous value (an unquoted comma in
    free text); one before any key is an error. An empty record gives ``{}``.
    """
    pairs = dict(_PIECES.findall(text))
    if "" not in pairs:
        # Every top-level piece is key=value: the scanner would find the same pieces.
        return pairs
    return scan_kv(text)


def scan_kv(text: str) -> dict[str, str]:
    """``parse_kv`` by the character scanner alone (the reference for its fast path)."""
    if not text.strip():
        return {}
    pairs: dict[str, str] = {}
    last: str | None = None
    offset = 0
    for piece in split_top_level(text):
        match = _KEY.match(piece)
        if match:
            last = match.group(1)
            pairs[last] = piece[match.end() :]
        elif last is None:
            raise TokenizeError(f"expected key=value, found {piece.strip()[:40]!r}", offset + 1)
        else:
            pairs[last] += "," + piece
        offset += len(piece) + 1
    return pairs


def parse_string_list(text: str) -> list[str]:
    """The elements of a Python list literal of quoted strings: ``['a=1,b=2', "c=3"]``."""
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        raise TokenizeError(f"expected a [...] list, found {body[:40]!r}", 1)
    items = _ITEMS.findall(body, 1, len(body) - 1)
    if items and not any(stray for _, stray in items):
        return [content for content, _ in items]
    return scan_string_list(text)


def scan_string_list(text: str) -> list[str]:
    """``parse_string_list`` by the character scanner alone (the reference for its fast
    path)."""
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        raise TokenizeError(f"expected a [...] list, found {body[:40]!r}", 1)
    inner = body[1:-1]
    if not inner.strip():
        return []
    return [_unquote(item.strip()) for item in split_top_level(inner)]


def parse_kv_list(text: str) -> list[dict[str, str]]:
    """``[parse_kv(item) for item in parse_string_list(text)]``: the records of a list such
    as ``['k=v,k=[1, 2]', 'k=v']``, split in one pass when they are simple."""
    body = text.strip()
    if body.startswith("[") and body.endswith("]"):
        records = _simple_records(body)
        if records is not None:
            return records
    return [parse_kv(item) for item in parse_string_list(text)]


def _simple_records(body: str) -> list[dict[str, str]] | None:
    """The records of ``[...]`` when every item is simple key=value pieces; else ``None``."""
    records: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    for opening, key, value, stray in _RECORD_ITEMS.findall(body, 1, len(body) - 1):
        if key:
            if opening:
                if current is not None:
                    return None
                current = {}
                records.append(current)
            elif current is None:
                return None
            current[key] = value
        elif stray or current is None:
            return None
        else:
            current = None  # the item's closing quote
    return records if current is None else None


def _unquote(item: str) -> str:
    """The content of one quoted string literal, with backslash escapes resolved."""
    if len(item) < 2 or item[0] not in _QUOTES or item[-1] != item[0]:
        raise TokenizeError(f"expected a quoted string, found {item[:40]!r}", 1)
    if "\\" not in item:
        return item[1:-1]
    out: list[str] = []
    chars = iter(item[1:-1])
    for char in chars:
        if char == "\\":
            following = next(chars, "\\")
            out.append(_ESCAPES.get(following, "\\" + following))
        else:
            out.append(char)
    return "".join(out)


def parse_int_list(text: str) -> list[int] | None:
    """``[2048, 2, 5120]`` as integers; ``None`` for ``None`` or anything that is not one."""
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        return None
    items = [item.strip() for item in body[1:-1].split(",") if item.strip()]
    if not all(_INT.fullmatch(item) for item in items):
        return None
    return [int(item) for item in items]
