"""Stream the events of a Chrome-trace JSON file in batches, in bounded memory.

``json.load`` of a 100 MB trace builds about 1 GB of Python objects; this reader never holds
more than a few MiB of the file. It reads (and gunzips) the file in chunks and decodes each
chunk's complete events at once with ``msgspec`` into small structs that keep only the fields
perfci aggregates: everything else is skipped inside the C decoder.

Where one chunk of events ends is found by searching backwards for ``}`` ``,`` ``{``. That text
can also occur inside a string or a nested ``args`` object; such a wrong cut cannot decode
(the piece then ends inside a string or an open object), so a failed decode that fails *at the
cut* just means "try the previous candidate". A decode that fails *before* the cut is a real
syntax error, or, with "trailing characters", the end of the ``traceEvents`` array. Every byte
of the array is therefore decoded exactly once by a real JSON parser: no event is guessed,
invented or skipped.

The top-level object's other keys (``deviceProperties``, ``distributedInfo``, ``perfci`` ...)
may come before or after ``traceEvents``; both parts are decoded as ordinary JSON objects.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, cast

import msgspec

from perfci.core.errors import ParseError
from perfci.formats._textio import open_maybe_gzip
from perfci.formats.pytorch._chrome_types import BatchConsumer, EventError

# Small enough that every buffer of a chunk stays below glibc's mmap threshold (128 KiB): larger
# ones are mapped and unmapped per chunk, and the page faults of re-touching them cost a 100 MB
# trace about a fifth of its CPU time (benchmarks/RESULTS.md, stop 42). Where a chunk holds no
# complete event (a large header or event), the next read is as large as the buffer: reads grow
# geometrically, so no text is searched more than a few times.
CHUNK_BYTES = 64 * 1024
_BOM = b"\xef\xbb\xbf"
_WS = b" \t\r\n"
# The end of one event object and the start of the next one.
_BOUNDARY = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")
_EVENTS_KEY = re.compile(rb'"traceEvents"[ \t\r\n]*:[ \t\r\n]*\[')
_OFFSET = re.compile(r"\(byte (\d+)\)")
# Windows searched (from the end of the buffer) for the last event boundary.
_WINDOWS = (16 * 1024, 1024 * 1024)
# Candidate boundaries tried per chunk before reading on (see _consume_complete).
_MAX_WRONG_CUTS = 8


class Args(msgspec.Struct, gc=False):
    """``_chrome_types.TraceArgs`` as decoded: the other fields of ``args`` are skipped inside the
    C decoder."""

    bytes: Any = None
    total_allocated: Any = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Any = msgspec.field(default=None, name="Total Reserved")
    device_type: Any = msgspec.field(default=None, name="Device Type")
    device_id: Any = msgspec.field(default=None, name="Device Id")


class Event(msgspec.Struct, gc=False):
    """``_chrome_types.TraceEvent`` as decoded, with its fields' types checked by the decoder
    (``_chrome_small`` checks the same ones by hand)."""

    ph: str | None = None
    name: str | None = None
    cat: str | None = None
    ts: Any = None
    dur: float | None = None
    pid: Any = None
    args: Args | None = None


_DECODE_EVENTS = msgspec.json.Decoder(list[Event]).decode
_DECODE_OBJECT = msgspec.json.Decoder(dict[str, Any]).decode


class TraceSyntaxError(Exception):
    """A problem at a byte offset of the (decompressed) file; turned into a ``ParseError``."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


def read_trace(
    path: Path, consume: BatchConsumer, *, format: str, warnings: list[str] | None = None
) -> tuple[dict[str, Any], bool]:
    """Hand every event of ``path`` to ``consume`` in batches; return the top-level metadata.

    The second value says whether the file is a bare JSON array (the legacy autograd
    profiler's layout). Raises ``ParseError`` naming the file and line on any bad input.
    What was read in spite of the JSON (bare ``inf`` / ``nan``) is said in ``warnings``.
    """
    try:
        with _open(path, format) as handle:
            reader = _Reader(handle, consume)
            result = reader.run()
            if reader.non_finite and warnings is not None:
                warnings.append(
                    f"{reader.non_finite} chunk(s) of events held a bare inf or nan, which JSON "
                    f"has no word for (Kineto before torch 1.9 wrote a zero-length memcpy's "
                    f'"memory bandwidth (GB/s)" so); read as null'
                )
            return result
    except TraceSyntaxError as exc:
        line = _line_at(path, exc.offset)
        raise ParseError(exc.message, source=str(path), line=line, format=format) from exc
    except (OSError, EOFError, zlib.error) as exc:
        raise ParseError(
            f"cannot read file (truncated or corrupt gzip?): {exc}", source=str(path), format=format
        ) from exc


@contextmanager
def _open(path: Path, format: str | None = None) -> Iterator[IO[bytes]]:
    # Inflated within _textio's caps: a gzip bomb stops with InputTooLarge while streaming.
    with open_maybe_gzip(path, format=format) as handle:
        yield handle


def _line_at(path: Path, offset: int) -> int:
    """The 1-based line of byte ``offset`` of the decompressed file (error path only)."""
    line, seen = 1, 0
    try:
        with _open(path) as handle:
            while seen < offset:
                block = handle.read(min(CHUNK_BYTES, offset - seen))
                if not block:
                    break
                line += block.count(b"\n")
                seen += len(block)
    except (OSError, EOFError, zlib.error):
        pass  # a truncated gzip: the line counted so far is the best there is
    return line


class _Reader:
    """One pass over one file; ``offset`` is the file position of ``buf[0]``."""

    def __init__(self, handle: IO[bytes], consume: BatchConsumer) -> None:
        self._handle = handle
        self._consume = consume
        self._buf = b""
        self._offset = 0
        self._eof = False
        self.non_finite = 0  # pieces decoded with bare inf / nan read as null

    def run(self) -> tuple[dict[str, Any], bool]:
        first = self._first_byte()
        if first == b"[":
            self._advance(1)
            if self._events() is not None:
                raise TraceSyntaxError(
                    "unexpected text after the JSON array of trace events", self._offset
                )
            return {}, True
        if first != b"{":
            raise TraceSyntaxError(
                "expected a JSON object with 'traceEvents' or a JSON array of trace events",
                self._offset,
            )
        header = self._header()
        closed_at = self._events()
        if closed_at is None:
            raise TraceSyntaxError(
                "the file ends after the traceEvents array, before the "
                "top-level object is closed (truncated?)",
                self._offset,
            )
        return {**header, **self._tail(closed_at)}, False

    # --- buffer -------------------------------------------------------------------------

    def _fill(self) -> bool:
        """Append the next chunk; ``False`` at the end of the file."""
        if self._eof:
            return False
        data = self._handle.read(max(CHUNK_BYTES, len(self._buf)))
        if not data:
            self._eof = True
            return False
        self._buf += data
        return True

    def _advance(self, count: int) -> None:
        self._buf = self._buf[count:]
        self._offset += count

    def _first_byte(self) -> bytes:
        """The first significant byte, after a UTF-8 byte-order mark and whitespace."""
        while len(self._buf) < len(_BOM) and self._fill():
            pass
        if self._buf.startswith(_BOM):
            self._advance(len(_BOM))
        while not (stripped := self._buf.lstrip(_WS)):
            self._advance(len(self._buf))
            if not self._fill():
                raise TraceSyntaxError(
                    "the file is empty: expected a Chrome trace JSON object or array", self._offset
                )
        self._advance(len(self._buf) - len(stripped))
        return self._buf[:1]

    # --- the object around traceEvents ----------------------------------------------------

    def _header(self) -> dict[str, Any]:
        """The keys before ``"traceEvents": [``; leaves the buffer just after the ``[``."""
        while (match := _EVENTS_KEY.search(self._buf)) is None:
            if not self._fill():
                raise TraceSyntaxError(
                    'no "traceEvents": [...] array in this JSON object', self._offset
                )
        head = self._buf[: match.start()]
        header = self._decode_object(head + b'"traceEvents": null}', self._offset)
        self._advance(match.end())
        return header

    def _tail(self, start: int) -> dict[str, Any]:
        """The keys after the events array, which closed at ``buf[start - 1]``."""
        self._advance(start)
        while self._fill():
            pass
        prefix = b'{"traceEvents": null'
        # The prefix is not in the file: offsets shift back by its length.
        return self._decode_object(prefix + self._buf, self._offset - len(prefix))

    def _decode_object(self, data: bytes, offset: int) -> dict[str, Any]:
        try:
            return _DECODE_OBJECT(data)
        except msgspec.DecodeError as exc:
            where = _error_offset(exc)
            at = offset + (where if where is not None else len(data))
            text = str(exc).removeprefix("JSON is malformed: ")
            if "truncated" in text:
                text = "the file ends before the top-level JSON object is closed (truncated?)"
            raise TraceSyntaxError(f"invalid trace JSON: {text}", max(at, 0)) from exc

    # --- the events array -----------------------------------------------------------------

    def _events(self) -> int | None:
        """Consume the array's events.

        Returns the buffer index just after the array's ``]`` when text follows it, ``None``
        when the array is the last thing in the file.
        """
        while True:
            closed_at = self._consume_complete()
            if closed_at is not None:
                return closed_at
            if not self._fill():
                return self._finish()

    def _consume_complete(self) -> int | None:
        """Decode the buffer's complete events up to the last good boundary.

        Returns the buffer index just after the array's ``]`` when the array ended within
        the decoded piece, else ``None``.
        """
        end = len(self._buf)
        for _ in range(_MAX_WRONG_CUTS):
            cut = _last_boundary(self._buf, end)
            if cut is None:
                return None
            piece = b"[" + self._buf[: cut + 1] + b"]"
            result = self._try_decode(piece)
            if result is _WRONG_CUT:
                end = cut  # the '}' was inside a string or a nested object: look further back
                continue
            if isinstance(result, int):
                return self._close_array(piece, result)
            self._deliver(cast(list[Event], result), piece)
            self._advance(cut + 1)
            self._skip_comma()
            return None
        return None  # inside one large event: read on until a real boundary follows it

    def _finish(self) -> int | None:
        """At the end of the file: the buffer holds the last events and what follows them."""
        piece = b"[" + self._buf
        result = self._try_decode(piece)
        if isinstance(result, int):
            return self._close_array(piece, result)
        if result is _WRONG_CUT:
            raise TraceSyntaxError(
                "the file ends inside the traceEvents array (truncated?)",
                self._offset + len(self._buf),
            )
        self._deliver(cast(list[Event], result), piece)
        self._advance(len(self._buf))
        return None

    def _close_array(self, piece: bytes, trailing_at: int) -> int:
        """Deliver the events before the array's ``]`` and return the index after it."""
        close = piece.rfind(b"]", 0, trailing_at - 1) + 1
        events = self._try_decode(piece[:close])
        if not isinstance(events, list):  # cannot happen for valid JSON; fail loudly anyway
            raise TraceSyntaxError(
                "invalid JSON near the end of the traceEvents array", self._offset + close
            )
        self._deliver(events, piece[:close])
        return close - 1  # piece has the extra leading '['

    def _skip_comma(self) -> None:
        stripped = self._buf.lstrip(_WS)
        if stripped.startswith(b","):
            stripped = stripped[1:]
        self._advance(len(self._buf) - len(stripped))

    def _try_decode(self, piece: bytes) -> list[Event] | int | object:
        """Events, the offset of trailing characters (array closed early), or ``_WRONG_CUT``.

        ``piece`` is ``[`` + buffer bytes (+ ``]``); a real syntax error raises.
        """
        try:
            return _DECODE_EVENTS(piece)
        except msgspec.ValidationError as exc:
            raise self._validation_error(exc, piece) from exc
        except msgspec.DecodeError as exc:
            text = str(exc)
            where = _error_offset(exc)
            if where is not None and "trailing characters" in text:
                return where
            if where is None or where >= len(piece) - 1:
                return _WRONG_CUT
            if _NON_FINITE_AT.match(piece, where):
                cleaned = _NON_FINITE.sub(rb"\1null", piece)
                try:
                    events = _DECODE_EVENTS(cleaned)
                except (msgspec.DecodeError, msgspec.ValidationError):
                    pass  # something else is wrong too: report the first error as it is
                else:
                    self.non_finite += 1
                    return events
            detail = text.removeprefix("JSON is malformed: ")
            raise TraceSyntaxError(
                f"invalid JSON in traceEvents: {detail}", self._offset + where - 1
            ) from exc

    def _deliver(self, events: list[Event], piece: bytes) -> None:
        try:
            self._consume(events)
        except EventError as exc:
            at = _element_offset(piece, exc.index)
            raise TraceSyntaxError(exc.message, self._offset + at - 1) from exc

    def _validation_error(self, exc: msgspec.ValidationError, piece: bytes) -> TraceSyntaxError:
        """``Expected `float | null`, got `str` - at `$[12].dur``` with the event's line."""
        text = str(exc)
        match = re.search(r"\$\[(\d+)\]", text)
        at = _element_offset(piece, int(match.group(1))) if match else 1
        message, _, path = text.partition(" - at ")
        field = path.strip("`").removeprefix("$").lstrip("[0123456789]").lstrip(".")
        return TraceSyntaxError(
            f"bad trace event: {field or 'event'}: {message}", self._offset + at - 1
        )


_WRONG_CUT = object()
# A bare non-finite number where a JSON value goes: after ``:``, ``,`` or ``[``, before ``,``,
# ``}`` or ``]``. Only tried on a piece that failed to decode at such a token.
_NON_FINITE = re.compile(rb"([:,\[][ \t\r\n]*)[-+]?(?:inf(?:inity)?|nan)(?=[ \t\r\n]*[,}\]])", re.I)
_NON_FINITE_AT = re.compile(rb"[-+]?(?:inf|nan)", re.I)


def _last_boundary(buf: bytes, end: int) -> int | None:
    """Index of the ``}`` of the last ``}, {`` that lies wholly before ``end``."""
    for window in (*_WINDOWS, end):
        start = max(0, end - window)
        last = None
        for last in _BOUNDARY.finditer(buf, start, end):  # noqa: B007 - we want the last one
            pass
        if last is not None:
            return last.start()
        if start == 0:
            return None
    return None


def _error_offset(exc: Exception) -> int | None:
    match = _OFFSET.search(str(exc))
    return int(match.group(1)) if match else None


def _element_offset(piece: bytes, index: int) -> int:
    """Byte offset in ``piece`` of the array element ``index`` (error path only).

    The first element with the same bytes is the one that failed: identical events earlier in
    the array would have failed first.
    """
    try:
        raws = msgspec.json.decode(piece, type=list[msgspec.Raw])
        found = piece.find(bytes(raws[index]))
    except (msgspec.DecodeError, msgspec.ValidationError, IndexError):
        return 1
    return found if found >= 0 else 1
