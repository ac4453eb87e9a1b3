"""A text profile opened for line-by-line parsing: plain or gzip, GC paused, errors named.

``_textio.iter_lines`` is not used here on purpose: it splits like ``str.splitlines()``, on
``\\v``, ``\\f``, ``\\x1c``-``\\x1e``, ``\\x85`` and U+2028 too, and drops the line ends. The
line-based parsers (``nvprof``, ``pytorch_table``) need text-mode lines: split on ``\\n``,
``\\r\\n`` and ``\\r`` only, each ending in ``"\\n"`` except a last line the file cut short,
which they warn about.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from perfci.core.errors import ParseError
from perfci.formats._textio import gc_paused, open_capped

_READ_ERRORS = (OSError, EOFError, zlib.error)


@contextmanager
def open_text(path: Path, *, format: str) -> Iterator[TextIO]:
    """``path`` as a text file, with the cyclic garbage collector paused while it is read.

    A read error (a missing file, a cut or corrupt gzip stream) inside the ``with`` block
    becomes a ``ParseError`` naming the file and ``format``.
    """
    try:
        with _open(path) as handle, gc_paused():
            yield handle
    except _READ_ERRORS as exc:
        raise ParseError(f"cannot read file: {exc}", source=str(path), format=format) from exc


def _open(path: Path) -> TextIO:
    """The file as text, gunzipped when it starts with the gzip magic.

    Undecodable bytes become U+FFFD: a stray byte in application output must not lose the log.
    """
    with path.open("rb") as probe:
        gzipped = probe.read(2) == b"\x1f\x8b"
    if gzipped:
        # Within _textio's inflation caps: a gzip bomb stops with InputTooLarge (issue 13).
        return io.TextIOWrapper(
            open_capped(path.open("rb"), source=str(path), close_raw=True),
            encoding="utf-8",
            errors="replace",
        )
    return path.open(encoding="utf-8", errors="replace")
