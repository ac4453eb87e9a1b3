"""A gzip file of a multipart upload, inflated to disk in chunks and refused with 413 as soon
as it passes the inflated-size cap or the ratio cap, so a gzip bomb never reaches the parser
(:mod:`perfci.server.uploads` parses what this gives)."""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from perfci.core.errors import InputTooLarge, ParseError
from perfci.server.deps import Limits

_GZIP_MAGIC = b"\x1f\x8b"
#: Files inflating to less than this are never refused for their ratio: a small, very
#: repetitive profile compresses far better than a big real one.
_RATIO_FREE_BYTES = 1024 * 1024
#: gzip inside gzip is inflated again, at most this deep (each layer counts toward the cap).
_MAX_GZIP_LAYERS = 3
_CHUNK = 256 * 1024


def inflate(path: Path, limits: Limits, *, budget: int | None = None) -> Path:
    """``path`` itself when it is not gzip, else its inflated copy beside it (``.gz`` dropped).

    Inflates in chunks of at most :data:`_CHUNK` output bytes and stops at the first byte past
    ``budget`` (default ``limits.max_inflated_bytes``: what all files of the upload may inflate
    to together) or past ``max_inflation_ratio`` times the compressed size; gzip inside gzip
    is inflated again, at most :data:`_MAX_GZIP_LAYERS` deep.

    Raises
    ------
    InputTooLarge
        Over either cap; the message names the file and the limit (the server answers 413).
    ParseError
        The gzip data is damaged.
    """
    budget = limits.max_inflated_bytes if budget is None else budget
    compressed = path.stat().st_size
    cap = min(budget, max(compressed * limits.max_inflation_ratio, _RATIO_FREE_BYTES))
    name = path.name
    for layer in range(_MAX_GZIP_LAYERS + 1):
        with path.open("rb") as handle:
            if handle.read(2) != _GZIP_MAGIC:
                return path
        if layer == _MAX_GZIP_LAYERS:
            raise InputTooLarge(f"gzip nested more than {_MAX_GZIP_LAYERS} deep", source=name)
        # The inflated file takes the upload's name less `.gz`: parse errors name it.
        source = path.rename(path.with_name(f".gzip-layer-{layer}"))
        target = path.with_name(re.sub(r"(?i)\.gz$", "", name) or name)
        _inflate_file(source, target, cap, name, limits)
        source.unlink()
        path = target
    return path


def _inflate_file(source: Path, target: Path, cap: int, name: str, limits: Limits) -> None:
    written = 0
    with source.open("rb") as reading, target.open("wb") as writing:
        try:
            for out in _inflated_chunks(reading):
                written += len(out)
                if written > cap:
                    raise InputTooLarge(_too_big(cap, limits), source=name)
                writing.write(out)
        except zlib.error as exc:
            raise ParseError(f"damaged gzip data: {exc}", source=name) from None
        except EOFError:
            raise ParseError("the gzip data is cut short", source=name) from None


def _inflated_chunks(reading: BinaryIO) -> Iterator[bytes]:
    """The inflated bytes of the gzip stream ``reading``, at most :data:`_CHUNK` at a time.

    Never asks zlib for more than one chunk of output at once (a bomb's next megabyte may be
    a gigabyte); a concatenation of gzip members is read member by member, as gzip does.
    """
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)  # 16+: a gzip header and trailer
    data = reading.read(_CHUNK)
    while data or not inflater.eof:
        out = inflater.decompress(data, _CHUNK)
        if out:
            yield out
        if inflater.eof:
            data = inflater.unused_data or reading.read(_CHUNK)
            if data:
                inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            continue
        # Output held back by the chunk limit comes with an empty input; new input only
        # once zlib has given out all it could.
        data = inflater.unconsumed_tail
        if not data and not out:
            data = reading.read(_CHUNK)
            if not data:
                raise EOFError


def _too_big(cap: int, limits: Limits) -> str:
    return (
        f"inflates to more than {cap} bytes; this server inflates a .gz upload to at "
        f"most {limits.max_inflated_bytes} bytes and {limits.max_inflation_ratio} times "
        "its compressed size (PERFCI_MAX_INFLATED_BYTES, PERFCI_MAX_INFLATION_RATIO)"
    )
