"""Reading vLLM's and SGLang's result files (:mod:`.vllm_bench`) as a stream of JSON values.

A JSON text per line (JSONL, vLLM's one-line result) or one spanning many lines (``indent=4``),
each with the line it starts at; the per-request arrays perfci does not read are cut out of a
line before it is decoded. :mod:`.vllm_bench` builds the profiles from the values read here.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from perfci.core.compat import compile_linear
from perfci.core.errors import ParseError
from perfci.formats._textio import open_maybe_gzip

__all__ = ["documents", "without_bulk"]

_BOM = "\ufeff"
_READ_ERRORS = (OSError, EOFError, zlib.error)
#: Per-request arrays that perfci does not read and that make a ``--save-detailed`` result
#: large (10k requests: ~90 MB of inter-token times, ~20 MB of texts): cut out before decoding.
_NUMBERS = re.compile(rb"[-+0-9.eE, \[\]]*")
_STRINGS = compile_linear(rb'\[(?:"(?:[^"\\]++|\\.)*+"(?:, "(?:[^"\\]++|\\.)*+")*+)?\]')


def documents(path: Path, *, format: str) -> Iterator[tuple[int, Any]]:
    """``(line, value)`` of each JSON text: one per line (JSONL, vLLM's one-line result), or
    one spanning many lines (``indent=4``), read whole then."""
    try:
        with open_maybe_gzip(path, format=format) as handle:
            yield from _texts(handle, str(path), format)
    except _READ_ERRORS as exc:
        raise ParseError(f"cannot read file: {exc}", source=str(path), format=format) from exc


def _texts(handle: IO[bytes], source: str, format: str) -> Iterator[tuple[int, Any]]:
    first = True
    for line, raw in enumerate(handle, start=1):
        text = without_bulk(raw).decode("utf-8", errors="replace").strip()
        del raw  # a --save-detailed result is one line of up to hundreds of MB
        text = text.removeprefix(_BOM).lstrip() if first else text
        if not text:
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            if not (first and exc.pos >= len(text)):
                raise _json_error(exc, source, line, format) from exc
            # The line ends inside the value: a document written over several lines.
            rest = handle.read().decode("utf-8", errors="replace")
            yield from _spanning(f"{text}\n{rest}" if rest else text, source, line, format)
            return
        except RecursionError as exc:
            raise ParseError(
                "JSON nested too deeply", source=source, line=line, format=format
            ) from exc
        first = False
        yield line, value


def without_bulk(raw: bytes) -> bytes:
    """``raw`` with the arrays of ``_BULK`` replaced by ``null`` where they are in the form
    ``json.dump`` writes them; as it is otherwise (it is then decoded whole)."""
    for key, end_of in _BULK:
        start = raw.find(key)
        end = end_of(raw, start + len(key)) if start >= 0 else None
        if end is not None:
            raw = raw[: start + len(key)] + b"null" + raw[end:]
    return raw


def _end_of_itls(raw: bytes, start: int) -> int | None:
    """The end of a list of lists of numbers at ``start``: its first ``]]`` (the inner lists
    hold no bracket), when nothing but numbers lies before it."""
    if raw.startswith(b"[]", start):
        return start + 2
    end = raw.find(b"]]", start) + 2
    ok = end > 1 and raw.startswith(b"[[", start) and _NUMBERS.fullmatch(raw, start, end)
    return end if ok else None


def _end_of_texts(raw: bytes, start: int) -> int | None:
    """The end of a list of JSON strings at ``start``."""
    match = _STRINGS.match(raw, start)
    return match.end() if match else None


def _spanning(text: str, source: str, start: int, format: str) -> Iterator[tuple[int, Any]]:
    """The JSON values of ``text`` (which starts at line ``start``), one after another."""
    decoder = json.JSONDecoder()
    pos = 0
    while (pos := len(text) - len(text[pos:].lstrip())) < len(text):
        line = start + text.count("\n", 0, pos)
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise _json_error(exc, source, start + exc.lineno - 1, format) from exc
        except RecursionError as exc:
            raise ParseError(
                "JSON nested too deeply", source=source, line=line, format=format
            ) from exc
        yield line, value


def _json_error(exc: json.JSONDecodeError, source: str, line: int, format: str) -> ParseError:
    ends = exc.pos >= len(exc.doc.rstrip()) or exc.msg.startswith("Unterminated string")
    cut = " (the text ends inside it: cut short?)" if ends else ""
    return ParseError(
        f"invalid JSON: {exc.msg} (column {exc.colno}){cut}",
        source=source,
        line=line,
        format=format,
    )


_BULK: tuple[tuple[bytes, Callable[[bytes, int], int | None]], ...] = (
    (b'"itls": ', _end_of_itls),
    (b'"generated_texts": ', _end_of_texts),
)
