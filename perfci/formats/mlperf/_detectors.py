"""The MLPerf formats' names and sniffs, without their readers (see ``formats.protocol``)."""

from __future__ import annotations

from perfci.core.compat import compile_linear
from perfci.formats.protocol import Detector, Head

_MLPERF_LOG_SNIFF = compile_linear(r":::MLLOG\s*\{")
_MLPERF_SUMMARY_SNIFF = compile_linear(r"(?m)^={8,}\s*\nMLPerf Results Summary\s*\n={8,}")


def _mlperf_log(head: Head) -> bool:
    """A ``:::MLLOG {`` marker anywhere in the head (after any rank prefix)."""
    return _MLPERF_LOG_SNIFF.search(head.text) is not None


def _mlperf_summary(head: Head) -> bool:
    """The summary's title between two rules of ``=``."""
    return _MLPERF_SUMMARY_SNIFF.search(head.text) is not None


MLPERF_LOG = Detector(
    name="mlperf_log",
    description=(
        "MLPerf training log (:::MLLOG lines): time to train, epochs, throughput, accuracy; "
        "inference LoadGen detail log: its results"
    ),
    sniff=_mlperf_log,
)
MLPERF_SUMMARY = Detector(
    name="mlperf_summary",
    description="MLPerf inference LoadGen mlperf_log_summary.txt: throughput, latency percentiles",
    sniff=_mlperf_summary,
)
