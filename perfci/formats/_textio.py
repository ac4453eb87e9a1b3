"""Reading a text profile (plain or gzip) with errors that name the file."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from perfci.errors import ParseError


def read_text(path: Path, *, format: str) -> str:
    """The decoded text of ``path``, gunzipped when it starts with the gzip magic.

    Undecodable bytes become U+FFFD rather than an error: profiler logs are mostly ASCII and a
    stray byte in free text (a description, a path) must not lose the whole file.
    """
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        raise ParseError(f"cannot read file: {exc}", source=str(path), format=format) from exc
    return raw.decode("utf-8", errors="replace")
