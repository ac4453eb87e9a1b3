"""Reading a text profile (plain or gzip) with errors that name the file.

``read_text`` gives the whole text; ``iter_lines`` streams the same lines in blocks so that a
parser of a 100 MB log holds one block at a time, not the file and a list of all its lines.
``scaled_decimal`` is the fast, exact path for the plain decimal numbers those lines are made of.

Every gzip input is inflated through :func:`open_capped`, which stops with
:class:`~perfci.core.errors.InputTooLarge` once the inflated bytes pass a cap (1 GiB) or outgrow the
compressed bytes read so far by a ratio (200:1, beyond the first MiB): a 1 MB gzip bomb
inflating to 1 GB is refused after a few MB, while streaming, not after filling the memory
(issue 13). :func:`inflate_limits` changes the caps for the code it wraps.
"""

from __future__ import annotations

import codecs
import gc
import gzip
import io
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, cast

from perfci.core.errors import InputTooLarge, ParseError

BLOCK_SIZE = 1 << 20
_READ_ERRORS = (OSError, EOFError, zlib.error)
_DIGITS = frozenset("0123456789")
_LAST_CHARS = frozenset("0123456789.")
# Decimal's 28-digit context never rounds a literal this short (times a power of ten), so the
# float of the product is the correctly rounded exact value, which float(str) also gives.
_MAX_PLAIN_CHARS = 24
_MAX_PLAIN_MAGNITUDE = 1e25


GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True, slots=True)
class InflateLimits:
    """How far a gzip input may inflate (see the module docstring)."""

    #: Inflated bytes at most.
    max_bytes: int = 1 << 30
    #: Inflated bytes per compressed byte read so far, at most, once past ``free_bytes``.
    max_ratio: float = 200.0
    #: Inflated bytes always allowed: a small file of repeated text compresses very well.
    free_bytes: int = 1 << 20


DEFAULT_LIMITS = InflateLimits()
_LIMITS: ContextVar[InflateLimits | None] = ContextVar("perfci_inflate_limits", default=None)


@contextmanager
def inflate_limits(limits: InflateLimits) -> Iterator[None]:
    """Inflate gzip inputs opened inside the block under ``limits`` (a setting, a test)."""
    token = _LIMITS.set(limits)
    try:
        yield
    finally:
        _LIMITS.reset(token)


class _CappedGzip(io.RawIOBase):
    """The inflated bytes of a gzip stream, stopping with ``InputTooLarge`` at the caps."""

    def __init__(self, raw: BinaryIO, *, source: str, format: str | None, close_raw: bool) -> None:
        super().__init__()
        self._raw = raw
        self._close_raw = close_raw
        self._gzip = gzip.GzipFile(fileobj=raw, mode="rb")
        self._start = raw.tell()
        self._inflated = 0
        self._limits = _LIMITS.get() or DEFAULT_LIMITS
        self._source = source
        self._format = format

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        count = self._gzip.readinto(buffer)
        self._inflated += count
        self._check()
        return count

    def _check(self) -> None:
        limits, inflated = self._limits, self._inflated
        if inflated > limits.max_bytes:
            raise InputTooLarge(
                f"refused: it inflates beyond {_size(limits.max_bytes)}, perfci's cap on a "
                f"decompressed input",
                source=self._source,
                format=self._format,
            )
        compressed = max(self._raw.tell() - self._start, 1)
        if inflated > limits.free_bytes and inflated > limits.max_ratio * compressed:
            raise InputTooLarge(
                f"refused: it inflates more than {limits.max_ratio:g} times its compressed "
                f"size ({_size(compressed)} to over {_size(inflated)} so far; a gzip bomb?), "
                f"perfci's cap beyond the first {_size(limits.free_bytes)}",
                source=self._source,
                format=self._format,
            )

    def close(self) -> None:
        try:
            self._gzip.close()
            if self._close_raw:
                self._raw.close()
        finally:
            super().close()


def _size(count: float) -> str:
    for unit in ("bytes", "KiB", "MiB"):
        if count < 1024:
            return f"{count:.0f} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} GiB"


def open_capped(
    raw: BinaryIO, *, source: str, format: str | None = None, close_raw: bool = False
) -> BinaryIO:
    """The inflated bytes of the gzip stream ``raw``, within the :class:`InflateLimits`.

    Reading past a cap raises :class:`~perfci.core.errors.InputTooLarge` (a ``ParseError`` naming
    ``source`` and the cap); closing the result closes ``raw`` only with ``close_raw``. For
    text, wrap it: ``io.TextIOWrapper(open_capped(path.open("rb"), source=str(path),
    close_raw=True), encoding="utf-8", errors="replace")``.
    """
    capped = _CappedGzip(raw, source=source, format=format, close_raw=close_raw)
    return cast(BinaryIO, io.BufferedReader(capped, buffer_size=BLOCK_SIZE))


@contextmanager
def open_maybe_gzip(path: Path, *, format: str | None = None) -> Iterator[BinaryIO]:
    """``path`` open for binary reading, inflated (within the caps) when it starts as gzip."""
    with path.open("rb") as raw:
        gzipped = raw.read(2) == GZIP_MAGIC
        raw.seek(0)
        if not gzipped:
            yield raw
            return
        with open_capped(raw, source=str(path), format=format) as inflated:
            yield inflated


def read_text(path: Path, *, format: str) -> str:
    """The decoded text of ``path``, gunzipped when it starts with the gzip magic.

    Undecodable bytes become U+FFFD rather than an error: profiler logs are mostly ASCII and a
    stray byte in free text (a description, a path) must not lose the whole file.
    """
    try:
        with open_maybe_gzip(path, format=format) as handle:
            raw = handle.read()
    except _READ_ERRORS as exc:
        raise _read_error(exc, path, format) from exc
    return raw.decode("utf-8", errors="replace")


def iter_lines(path: Path, *, format: str, block_size: int = BLOCK_SIZE) -> Iterator[str]:
    """The lines of ``read_text(path).splitlines()``, read ``block_size`` bytes at a time.

    Same decoding, same line breaks (``\\r\\n``, ``\\r``, ``\\v``, ``\\x1c``, U+2028 ...) and
    the same ``ParseError`` for unreadable files, raised when the bad block is reached.
    """
    try:
        with open_maybe_gzip(path, format=format) as handle:
            yield from _split_blocks(handle, block_size)
    except _READ_ERRORS as exc:
        raise _read_error(exc, path, format) from exc


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
    the pause, which finds no garbage in it and so costs a noticeable share of a large parse.
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
    gives those their usual value or error. Identical results, faster, because
    the decimal exponent is shifted in the text and ``float()`` rounds the exact value once.
    """
    # float() alone would also read " 1", "1_0", ".5", "nan", "inf" and Unicode digits.
    if (
        not text
        or len(text) > _MAX_PLAIN_CHARS
        or not text.isascii()
        or "_" in text
        or text[-1] not in _LAST_CHARS
        or (text[0] not in _DIGITS and (text[0] not in "+-" or text[1:2] not in _DIGITS))
    ):
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
