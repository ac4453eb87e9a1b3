"""The Nsight Systems formats' names and sniffs, without their readers (see
``formats.protocol``)."""

from __future__ import annotations

from perfci.core.compat import compile_linear
from perfci.formats.protocol import Head, detector

SQLITE_MAGIC = b"SQLite format 3\x00"

# Linear on any head (issue 31): the first "] with [" or ".py " is taken for good (an atomic
# group: a later one leaves less room, so cannot match where the first did not), and blanks
# before a title stay on its line (``\s*`` after ``^`` ran on through every blank line below).
_NSYS_STATS_SNIFF = compile_linear(
    r"(?m)^(?:\[\d+/\d+\] Executing '\w+' stats report|Processing \[(?>.+?\] with \[).+\.py\]"
    r"|Running \[(?>.+?\.py ).+\]|[^\S\n]*Time ?\(%\)\s+Total Time|CUDA API Statistics \(\w+\)"
    r"|[^\S\n]*\*\* .+ \((?:cuda|gpu|nvtx|osrt|cudaapi)\w*\):)"
)
_NSYS_STATS_CSV_HEADER = compile_linear(r"(?m)^\"?Time ?\(%\)\"?,")
# The 2020/2021 size report has no unit in its titles (KiB): "Total","Operations",...
_NSYS_STATS_CSV_SNIFF = compile_linear(
    r'(?m)^"?(?:Time ?\(%\)"?,"?Total Time|Total \(MB\)"?,"?Count|Total"?,"?Operations"?,)'
)


def _nsys_sqlite(head: Head) -> bool:
    """Any uncompressed SQLite database; ``parse`` checks for the Nsight Systems tables."""
    return not head.gzipped and head.raw.startswith(SQLITE_MAGIC)


def _nsys_stats(head: Head) -> bool:
    """An nsys report marker or summary header, and not the CSV flavour."""
    text = head.text
    return bool(_NSYS_STATS_SNIFF.search(text)) and not _NSYS_STATS_CSV_HEADER.search(text)


def _nsys_stats_csv(head: Head) -> bool:
    """A ``Time (%),Total Time ...``, ``Total (MB),Count,...`` or ``Total,Operations,...``
    header row."""
    return bool(_NSYS_STATS_CSV_SNIFF.search(head.text))


NSYS_SQLITE = detector(
    _nsys_sqlite,
    "Nsight Systems SQLite export (nsys export --type sqlite) and nvprof .nvvp databases",
)
NSYS_STATS = detector(
    _nsys_stats,
    "Nsight Systems 'nsys stats' / 'nsys profile --stats=true' console text (2020-2025)",
)
NSYS_STATS_CSV = detector(
    _nsys_stats_csv,
    "Nsight Systems 'nsys stats --format csv' report blocks or base_<report>.csv files",
)
