"""Format detection and dispatch: a plain table from format name to parser module.

Every parser module in ``perfci/formats/`` exposes:

``NAME: str``
    the format name users pass to ``--format``;
``DESCRIPTION: str``
    one line for ``perfci formats``;
``sniff(head: Head) -> bool``
    whether the start of a file looks like this format (content only, never the file name);
``parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]``
    the profiles in the file; raises ``ParseError`` on input it cannot read.

Detection tries formats in ``FORMATS`` order: the most specific first, so that a generic
sniff (CSV with a header) never shadows a precise one.
"""

from __future__ import annotations

import gzip
import importlib
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import cast

from perfci.errors import ParseError, PerfciError, UnknownFormatError
from perfci.model import Profile

HEAD_BYTES = 256 * 1024

# Detection order matters: binary and strongly-marked formats first, generic tables last.
FORMAT_MODULES: tuple[str, ...] = (
    "nsys_sqlite",
    "perfci_json",
    "chrome_trace",
    "nsys_stats",
    "nsys_stats_csv",
    "nvprof",
    "pytorch_table",
    "megatron_trace",
    "workload_table",
)


@dataclass(frozen=True, slots=True)
class Head:
    """The first bytes of a file, decompressed when gzip, and their text decoding."""

    raw: bytes
    text: str
    gzipped: bool


@dataclass(frozen=True, slots=True)
class FormatSpec:
    name: str
    description: str
    sniff: Callable[[Head], bool]
    parse: Callable[..., list[Profile]]


def _load(module_name: str) -> FormatSpec:
    module: ModuleType = importlib.import_module(f"perfci.formats.{module_name}")
    return FormatSpec(
        name=cast(str, module.NAME),
        description=cast(str, module.DESCRIPTION),
        sniff=module.sniff,
        parse=module.parse,
    )


def formats() -> dict[str, FormatSpec]:
    """All registered formats by name, in detection order."""
    specs = (_load(name) for name in FORMAT_MODULES)
    return {spec.name: spec for spec in specs}


def read_head(path: Path, size: int = HEAD_BYTES) -> Head:
    """The start of ``path`` (gunzipped when it is gzip) for sniffing."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(size)
    except OSError as exc:
        raise ParseError(f"cannot read file: {exc.strerror}", source=str(path)) from exc
    gzipped = raw[:2] == b"\x1f\x8b"
    if gzipped:
        try:
            with gzip.open(path, "rb") as handle:
                raw = handle.read(size)
        except (OSError, EOFError, zlib.error):
            pass  # a cut-short or damaged gzip: sniff what decompressed, the parser says the rest
    text = raw.decode("utf-8", errors="replace")
    return Head(raw=raw, text=text, gzipped=gzipped)


def get_format(name: str) -> FormatSpec:
    """The parser registered as ``name``; the error lists the valid names."""
    registered = formats()
    if name not in registered:
        valid = ", ".join(registered)
        raise UnknownFormatError(f"unknown format {name!r}; known formats: {valid}")
    return registered[name]


def detect(path: Path) -> FormatSpec:
    """The first format whose ``sniff`` accepts the start of ``path``."""
    head = read_head(path)
    for spec in formats().values():
        try:
            if spec.sniff(head):
                return spec
        except Exception:  # noqa: BLE001 - a sniffer that chokes just means "not mine"
            continue
    raise UnknownFormatError(
        f"{path}: no parser recognises this file; pass --format NAME "
        f"(known: {', '.join(formats())})"
    )


def parse_file(path: Path, *, format: str | None = None,
               options: Mapping[str, str] | None = None) -> list[Profile]:
    """Parse ``path`` with the named format, or the detected one.

    Anything other than a ``PerfciError`` escaping a parser is a bug in that parser; it
    is still reported as a ``ParseError`` naming the file so that users never see a
    traceback for a bad input.
    """
    path = Path(path)
    if not path.is_file():
        raise ParseError("no such file", source=str(path))
    spec = get_format(format) if format else detect(path)
    try:
        return spec.parse(path, options=dict(options or {}))
    except PerfciError:
        raise
    except (ValueError, KeyError, IndexError, TypeError, OSError, EOFError,
            UnicodeDecodeError, RecursionError) as exc:
        raise ParseError(f"unreadable input: {exc}", source=str(path),
                         format=spec.name) from exc
