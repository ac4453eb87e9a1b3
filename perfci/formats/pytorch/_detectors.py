"""The PyTorch profiler formats' names and sniffs, without their readers (see
``formats.protocol``)."""

from __future__ import annotations

import re

from perfci.core.compat import compile_linear
from perfci.formats.protocol import Head, detector

_OBJECT_START = compile_linear(r"^\s*\{")
_ARRAY_OF_EVENTS = compile_linear(r'^\s*\[\s*\{.*?"ph"\s*:\s*"[A-Za-z]"', re.DOTALL)
# Linear on any head (issue 31): a run of blanks is taken whole before "#", and "Name" needs
# two spaces, not ``{2,}`` spaces, before ``[^\n]*`` (which takes any more): the two ways
# to share a long run of spaces were tried one by one.
_PYTORCH_TABLE_SNIFF = compile_linear(
    r"(?m)^[ \t]*+(?:#+ ?)?-{3,}(?: {2}-{3,})+ *\r?\n"
    r"[ \t]*+(?:#++ ?)?[ \t]*Name {2}[^\n]*(?:CPU|Calls)"
)


def _chrome_trace(head: Head) -> bool:
    """A JSON object with ``"traceEvents"`` (or Kineto's leading keys), or an array of events."""
    text = head.text.lstrip("\ufeff")
    if _OBJECT_START.match(text):
        start = text[:4096]
        return '"traceEvents"' in text or (
            '"schemaVersion"' in start
            and ('"deviceProperties"' in start or '"distributedInfo"' in start)
        )
    return _ARRAY_OF_EVENTS.match(text[:65536]) is not None


def _pytorch_table(head: Head) -> bool:
    """A dashed separator followed by a ``Name  ...`` header with CPU or call columns."""
    return _PYTORCH_TABLE_SNIFF.search(head.text) is not None


CHROME_TRACE = detector(
    _chrome_trace, "PyTorch profiler / Kineto Chrome-trace JSON (.json, .json.gz, legacy arrays)"
)
PYTORCH_TABLE = detector(
    _pytorch_table, "PyTorch profiler key_averages().table() text (torch >= 1.8 and legacy <= 1.7)"
)
