"""Find the ``:::MLLOG {json}`` events of a log among everything else it holds.

A real MLPerf log is mostly noise: bash ``+`` traces, framework chatter, ``:::DLPAL`` and
``:::SYSJSON`` lines, ``RESULT,...`` summaries, and each event again from every rank, behind
a prefix (`` 0: `` from ``srun -l``, ``[1,0]<stdout>:`` from ``mpirun --tag-output``). The
scan looks for the marker with ``str.find`` over 1 MiB blocks, so noise costs no Python
per line, and decodes only the JSON that follows a marker (``raw_decode``: whatever a rank
printed after the object on the same line is ignored).

Lines are counted by ``"\\n"`` only, as editors number them, so errors can name them.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from perfci.core.limits import MAX_VALUE

MARKER = ":::MLLOG"
BLOCK_SIZE = 1 << 20
_DECODER = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class Event:
    """One ``:::MLLOG`` record: its ``key``, ``time_ms`` (ms since the epoch), ``value``,
    ``metadata`` and ``event_type``, and the line of the log it came from."""

    key: str
    time_ms: float
    value: Any
    metadata: dict[str, Any]
    event_type: str
    line: int


@dataclass(slots=True)
class Unreadable:
    """The ``:::MLLOG {`` lines whose JSON could not be read: how many, and the first."""

    count: int = 0
    first_line: int | None = None
    first_problem: str = ""

    def add(self, line: int, problem: str) -> None:
        self.count += 1
        if self.first_line is None:
            self.first_line, self.first_problem = line, problem


def marked_lines(handle: BinaryIO, block_size: int = BLOCK_SIZE) -> Iterator[tuple[int, str]]:
    """``(line number, text after the marker)`` for every ``:::MLLOG`` in the stream.

    A line holding the marker twice (two ranks' output run together) gives both, each with
    the rest of the line after its own marker. The text is stripped of surrounding space.
    ``handle`` is read ``block_size`` bytes at a time.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""  # the unfinished last line of the blocks so far
    line_base = 1  # the line number of the first line of ``text``
    final = False
    marker_len = len(MARKER)
    while not final:
        block = handle.read(block_size)
        final = not block
        text = pending + decoder.decode(block, final=final)
        cut = len(text) if final else text.rfind("\n") + 1
        if not cut:  # no line end in this block yet: a very long line
            pending = text
            continue
        find, count = text.find, text.count
        line, counted = line_base, 0
        hit = find(MARKER, 0, cut)
        while hit >= 0:
            end = find("\n", hit, cut)
            if end < 0:
                end = cut
            line += count("\n", counted, hit)
            counted = hit
            yield line, text[hit + marker_len : end].strip()
            hit = find(MARKER, hit + marker_len, cut)
        line_base = line + count("\n", counted, cut)
        pending = text[cut:]


def decode_event(text: str, line: int) -> Event | str:
    """The event in ``text`` (the JSON after a marker), or what is wrong with it."""
    try:
        record, _ = _DECODER.raw_decode(text)
    except json.JSONDecodeError as exc:
        return f"invalid JSON after {MARKER} ({exc.msg})"
    except RecursionError:
        return f"the JSON after {MARKER} nests too deeply"
    if not isinstance(record, dict):
        return f"the JSON after {MARKER} is not an object"
    key = record.get("key")
    if not isinstance(key, str):
        return f'the {MARKER} object has no "key" string'
    time_ms = record.get("time_ms")
    when = finite(time_ms)
    if when is None:
        return f'the {MARKER} event {key!r} has no numeric "time_ms"'
    metadata = record.get("metadata")
    event_type = record.get("event_type")
    return Event(
        key=key,
        time_ms=when,
        value=record.get("value"),
        metadata=metadata if isinstance(metadata, dict) else {},
        event_type=event_type if isinstance(event_type, str) else "",
        line=line,
    )


def finite(value: Any) -> float | None:
    """``value`` as a float when it is a JSON number (not a bool) within ``±MAX_VALUE``,
    else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any float
        return None
    # Beyond MAX_VALUE (NaN and infinities too): sums of such numbers overflow (issue 31).
    return number if -MAX_VALUE <= number <= MAX_VALUE else None
