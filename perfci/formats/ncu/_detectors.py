"""The Nsight Compute formats' names and sniffs, without their readers (see
``formats.protocol``)."""

from __future__ import annotations

from perfci.core.compat import compile_linear
from perfci.formats.protocol import Head, detector

_NCU_CSV_SNIFF = compile_linear(
    r'(?m)^\ufeff?"ID",(?=[^\n]*"Kernel Name")'
    r'(?=[^\n]*(?:"Metric Name"|"[A-Za-z0-9_]+__[A-Za-z0-9_.]+"))'
)
# A process line holding an "@" (a lookahead, then the line taken whole: ``[^\n]*@[^\n]*``
# re-read the rest of the line from every "@" of it, issue 31), a kernel line under it.
_NCU_TEXT_SNIFF_PROCESS = compile_linear(
    r"(?m)^\[\d+\] (?=[^\n@]*+@)[^\n]*+\n {2}\S[^\n]*, Context \d+, Stream \d+"
)
_NCU_TEXT_SNIFF_LOG = compile_linear(r"(?m)^==PROF== (?:Connected to process|Profiling )")
_NCU_TEXT_SNIFF_SECTION = compile_linear(r"(?m)^ {4}Section: ")


def _ncu_csv(head: Head) -> bool:
    """An ncu CSV header line: ``"ID",…,"Kernel Name",…`` with ``"Metric Name"`` or metric ids."""
    return _NCU_CSV_SNIFF.search(head.text) is not None


def _ncu_text(head: Head) -> bool:
    """A text report: a process line with a kernel line under it, or ncu's log lines with a
    ``Section:`` table (``ncu_csv`` comes first, so a CSV report never gets here)."""
    text = head.text
    if _NCU_TEXT_SNIFF_PROCESS.search(text):
        return True
    return bool(_NCU_TEXT_SNIFF_LOG.search(text) and _NCU_TEXT_SNIFF_SECTION.search(text))


NCU_CSV = detector(
    _ncu_csv,
    "Nsight Compute ncu --csv, details or raw page (kernel times per launch, section metrics "
    "as per-kernel counters)",
)
NCU_TEXT = detector(
    _ncu_text,
    "Nsight Compute's default text report (ncu without --csv): kernel times per launch, "
    "section metrics as per-kernel counters",
)
