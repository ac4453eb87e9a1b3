"""The MLPerf formats' names and sniffs, without their readers (see ``formats.protocol``)."""

from __future__ import annotations

from perfci.core.compat import compile_linear
from perfci.formats.protocol import Head, detector

_MLPERF_LOG_SNIFF = compile_linear(r":::MLLOG\s*\{")
_MLPERF_SUMMARY_SNIFF = compile_linear(r"(?m)^={8,}\s*\nMLPerf Results Summary\s*\n={8,}")


def _mlperf_log(head: Head) -> bool:
    """A ``:::MLLOG {`` marker anywhere in the head (after any rank prefix)."""
    return _MLPERF_LOG_SNIFF.search(head.text) is not None


def _mlperf_summary(head: Head) -> bool:
    """The summary's title between two rules of ``=``."""
    return _MLPERF_SUMMARY_SNIFF.search(head.text) is not None


MLPERF_LOG = detector(
    _mlperf_log,
    "MLPerf training log (:::MLLOG lines): time to train, epochs, throughput, accuracy; "
    "inference LoadGen detail log: its results",
)
MLPERF_SUMMARY = detector(
    _mlperf_summary,
    "MLPerf inference LoadGen mlperf_log_summary.txt: throughput, latency percentiles",
)
