"""What an unrecognised file looks like, in words: the refusal names it instead of guessing.

``a JSON object with keys benchmarks, machine_info, …`` tells a user at a glance which tool
wrote the file and that perfci does not read that tool's output (yet); a made-up ``--format``
would not. Only the head of the file is looked at, so the scan tolerates a cut-off document.
"""

from __future__ import annotations

_MAX_KEYS = 6


def describe(text: str) -> str:
    """A short description of the content that starts with ``text``."""
    start = text.lstrip("\ufeff \t\r\n")
    if _json_opens(start, "{", '"}'):
        keys = _keys(start, depth=1)
        return "a JSON object" + (f" with keys {_listed(keys)}" if keys else "")
    if _json_opens(start, "[", '{["]-0123456789tfn'):
        keys = _keys(start, depth=2)
        return "a JSON array" + (f" of objects with keys {_listed(keys)}" if keys else "")
    if not start:
        return "an empty file"
    if _binary(text):
        return "binary data"
    first = start.splitlines()[0].strip()
    if len(first) > 60:
        first = first[:57] + "…"
    return f"text starting {first!r}"


def _binary(text: str) -> bool:
    """NUL bytes, or undecodable bytes (U+FFFD) in more than 1 % of the first 4,096 characters:
    no text format perfci reads, and no use quoting."""
    sample = text[:4096]
    return "\x00" in sample or sample.count("\ufffd") > len(sample) // 100


def _json_opens(text: str, bracket: str, then: str) -> bool:
    """Whether ``text`` opens a JSON object or array: ``bracket``, then (after blanks) what
    JSON allows there; ``[RANK 0] comm op: …`` is a log line, not an array."""
    if not text.startswith(bracket):
        return False
    rest = text[1:].lstrip(" \t\r\n")
    return not rest or rest[0] in then


def _listed(keys: list[str]) -> str:
    shown = ", ".join(k if len(k) <= 40 else k[:37] + "…" for k in keys[:_MAX_KEYS])
    return shown + ("…" if len(keys) > _MAX_KEYS else "")


def _keys(text: str, *, depth: int) -> list[str]:
    """Keys of the objects at ``depth`` (1: the top-level object; 2: the first element's)."""
    keys: list[str] = []
    level = 0
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == '"':
            end = _string_end(text, i)
            if end < 0:
                break
            after = text[end + 1 : end + 40].lstrip()
            if level == depth and after.startswith(":"):
                key = text[i + 1 : end]
                if key not in keys:
                    keys.append(key)
                if len(keys) > _MAX_KEYS:
                    break
            i = end + 1
            continue
        if char in "{[":
            level += 1
        elif char in "}]":
            level -= 1
            if level < depth and keys:
                break  # the first object at that depth is done
        i += 1
    return keys


def _string_end(text: str, start: int) -> int:
    """Index of the quote closing the string opened at ``start``, or -1 when cut off."""
    i = start + 1
    while True:
        i = text.find('"', i)
        if i < 0:
            return -1
        backslashes = 0
        j = i - 1
        while text[j] == "\\":
            backslashes += 1
            j -= 1
        if backslashes % 2 == 0:
            return i
        i += 1
