"""nvprof's name and sniff, without its reader (see ``formats.protocol``)."""

from __future__ import annotations

from perfci.core.compat import compile_linear
from perfci.formats.protocol import Head, detector

_RESULT_WORDS = (
    r"(?:NVPROF is profiling process|Profiling application:|Profiling result:"
    r"|NVTX result:|Metric result:|Event result:|Unified Memory profiling result:)"
)
# Blanks before a header stay on its line (issue 31): ``^\s*`` ran on through every blank
# line below each line start, so a head of blank lines took a quadratic time.
_NVPROF_SNIFF = compile_linear(
    rf"(?m)^(?:==\d+==|={{8}})\s*{_RESULT_WORDS}"
    r"|^[^\S\n]*(?:Type\s+)?Time\(%\)\s+Time\s+Calls\s+Avg\s+Min\s+Max\s+Name\s*$"
    r'|^"Type","Time\(%\)","Time","Calls","Avg","Min","Max","Name"\r?\n,%,'
    # Trace tables: the --csv header with its units row, or the text GPU trace header.
    r'|^"Start","Duration","(?:Grid X","Grid Y","Grid Z"|Name")[^\n]*\n(?:[mun]?s,){2}'
    r"|^[^\S\n]*Start\s+Duration\s+Grid Size\s+Block Size\s+Regs\*"
)


def _nvprof(head: Head) -> bool:
    """An nvprof banner (``==PID== Profiling result:`` …), a summary or trace header, or a
    ``--csv`` summary or trace header with its units row."""
    return _NVPROF_SNIFF.search(head.text) is not None


NVPROF = detector(
    _nvprof,
    "nvprof summary text and --csv (GPU activities, API calls, NVTX ranges, "
    "unified memory, metrics/events, GPU/API traces as text or --csv)",
)
