"""Reading a text profile (plain or gzip) with errors that name the file.

``read_text`` gives the whole text; ``iter_lines`` streams the same lines in blocks so that a
parser of a 100 MB log holds one block at a time, not the file and a list of all its lines.
``scaled_decimal`` is the fast, exact path for the plain decimal numbers those lines are made of.
"""

from __future__ import annotations

import codecs
import gc
import gzip
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from perfci.errors import ParseError

BLOCK_SIZE = 1 << 20
_READ_ERRORS = (OSError, EOFError, zlib.error)
_DIGITS = frozenset("0123456789")
_LAST_CHARS = frozenset("0123456789.")
# Decimal's 28-digit context never rounds a literal this short (times a power of ten), so the
# float of the product is the correctly rounded exact value, which float(str) also gives.
_MAX_PLAIN_CHARS = 24
_MAX_PLAIN_MAGNITUDE = 1e25


def read_text(path: Path, *, format: str) -> str:
    """The decoded text of ``path``, gunzipped when it starts with the gzip magic.

    Undecodable bytes become U+FFFD rather than an error: profiler logs are mostly ASCII and a
    stray byte in free text (a description, a path) must not lose the whole file.
    """
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except _READ_ERRORS as exc:
        raise _read_error(exc, path, format) from exc
    return raw.decode("utf-8", errors="replace")


def iter_lines(path: Path, *, format: str, block_size: int = BLOCK_SIZE) -> Iterator[str]:
    """The lines of ``read_text(path).splitlines()``, read ``block_size`` bytes at a time.

    Same decoding, same line breaks (``\\r\\n``, ``\\r``, ``\\v``, ``\\x1c``, U+2028 ...) and
    the same ``ParseError`` for unreadable files, raised when the bad block is reached.
    """
    try:
        with _open_binary(path) as handle:
            yield from _split_blocks(handle, block_size)
    except _READ_ERRORS as exc:
        raise _read_error(exc, path, format) from exc


def _open_binary(path: Path) -> BinaryIO:
    with path.open("rb") as probe:
        gzipped = probe.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gzipped else path.open("rb")  # type: ignore[return-value]


def _split_blocks(handle: BinaryIO, block_size: int) -> Iterator[str]:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""  # the unfinished last line of the blocks so far
    while block := handle.read(block_size):
        text = pending + decoder.decode(block)
        # Cut after the last "\n": a "\r" just before a block end may be half of "\r\n".
        cut = text.rfind("\n") + 1 or _last_lone_cr(text)
        if cut:
            yield from text[:cut].splitlines()
        pending = text[cut:]
    text = pending + decoder.decode(b"", final=True)
    if text:
        yield from text.splitlines()


def _last_lone_cr(text: str) -> int:
    """Where to cut a block without "\\n" (old Mac line ends): after its last "\\r" that is
    not the block's last character; 0 when there is none."""
    index = text.rfind("\r", 0, len(text) - 1)
    return index + 1


def _read_error(exc: BaseException, path: Path, format: str) -> ParseError:
    return ParseError(f"cannot read file: {exc}", source=str(path), format=format)


@contextmanager
def gc_paused(*, settle: bool = False) -> Iterator[None]:
    """No cyclic garbage collection while a large file is parsed.

    The parsers make millions of acyclic objects (metrics, their attrs); the collections that
    their allocation triggers walk every live object again and again, doubling the parse time.

    ``settle``: on a normal exit, file what was made meanwhile under the oldest generation, as
    surviving collections would. Left young, it is all walked by the first collection after
    the pause, which finds no garbage in it: 0.37 s of a 4 s parse of 1.7 M metrics.
    ``gc.freeze()`` + ``gc.unfreeze()`` does the move without walking anything (CPython
    relinks the generation lists); skipped while objects are frozen by someone else, which
    ``unfreeze`` would release.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        if settle and enabled and not gc.get_freeze_count():
            gc.freeze()
            gc.unfreeze()
    finally:
        if enabled:
            gc.enable()


def scaled_decimal(text: str, power: int) -> float | None:
    """``float(Decimal(text) * 10**power)`` for a plain ASCII literal (``28.93``, ``4.79e-09``).

    Plain: an optional sign, digits, an optional fraction and exponent, nothing else.
    ``None`` for anything else (grouping, unit suffixes, ``.5``, NaN, Unicode digits, > 24
    characters, magnitude ≥ 1e25): the caller then takes its general ``Decimal`` path, which
    gives those their usual value or error. Identical results, several times faster, because
    the decimal exponent is shifted in the text and ``float()`` rounds the exact value once.
    """
    # float() alone would also read " 1", "1_0", ".5", "nan", "inf" and Unicode digits.
    if not text or len(text) > _MAX_PLAIN_CHARS or not text.isascii() or "_" in text \
            or text[-1] not in _LAST_CHARS \
            or (text[0] not in _DIGITS and (text[0] not in "+-" or text[1:2] not in _DIGITS)):
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    if not -_MAX_PLAIN_MAGNITUDE < value < _MAX_PLAIN_MAGNITUDE:
        return None
    if not power:
        return value
    if "e" in text or "E" in text:
        mantissa, _, exponent = text.replace("E", "e").partition("e")
        return float(f"{mantissa}e{int(exponent) + power}")
    return float(f"{text}e{power}")
