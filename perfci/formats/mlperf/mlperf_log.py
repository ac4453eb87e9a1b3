"""MLPerf training logs: the ``:::MLLOG {json}`` lines of the MLCommons ``mllog`` logger.

The lines may sit anywhere in a job's output, behind rank prefixes and among any noise
(``_events`` finds them). Each run in the log becomes one profile (``_runs`` says what
becomes which metric): ``time_to_train`` (``run_stop − run_start``, the MLPerf score), the
epoch or block durations as the step, ``throughput`` and the last ``eval_accuracy``, with the
submission fields and hyper-parameters as metadata.

Decisions:

* Every rank may log the same event; an event whose JSON text repeats one already read in
  the same run (same key, ``time_ms``, value and metadata) is read once. So a log that
  repeats a whole run verbatim holds that run once: real repeats differ in ``time_ms``.
* A ``:::MLLOG {`` line whose JSON is cut or garbled (a killed job, two ranks' output run
  together) is skipped and counted in a warning naming its line: a log is interleaved
  output, and one torn line must not lose the run. A log in which no such line can be read
  is a ``ParseError`` naming the first bad line.
* MLPerf *inference* LoadGen logs (``mlperf_log_detail.txt``) use the same marker for other
  keys (``result_samples_per_second``, ``result_90.00_percentile_latency_ns``…): a log with
  LoadGen's keys and no training run gives one profile of its results (``_loadgen``, the same
  rule as ``mlperf_summary`` for the summary text).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from pathlib import Path

from perfci.core.errors import ParseError
from perfci.core.model import Profile
from perfci.formats._textio import gc_paused, open_maybe_gzip
from perfci.formats.caps import budget
from perfci.formats.mlperf._detectors import MLPERF_LOG
from perfci.formats.mlperf._events import Event, Unreadable, decode_event, marked_lines
from perfci.formats.mlperf._loadgen import RESULT_PREFIXES, detail_profile
from perfci.formats.mlperf._runs import RunSplitter, build_profiles

NAME = MLPERF_LOG.name
DESCRIPTION = MLPERF_LOG.description
sniff = MLPERF_LOG.sniff

_READ_ERRORS = (OSError, EOFError, zlib.error)
_INFERENCE_KEYS = frozenset({"loadgen_version", "effective_scenario", "result_validity"})


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """One profile per MLPerf run in the log at ``path`` (plain or gzip)."""
    source = str(path)
    counted = budget(source, NAME)
    splitter = RunSplitter(counted)
    unreadable = Unreadable()  # over the whole file, for the error when nothing is readable
    events = 0
    inference = False
    loadgen: dict[str, object] = {}  # every key's last value, for a LoadGen log
    seen: set[str] = set()  # JSON texts read in the current run
    try:
        with open_maybe_gzip(path, format=NAME) as handle, gc_paused():
            for line, text in marked_lines(handle):
                if not text.startswith("{") or text in seen:
                    continue  # the marker in prose, or another rank's copy of an event
                event = decode_event(text, line)
                if not isinstance(event, Event):
                    unreadable.add(line, event)
                    splitter.current.unreadable.add(line, event)
                    continue
                events += 1
                inference = inference or event.key in _INFERENCE_KEYS
                if event.key not in loadgen and event.key.startswith(RESULT_PREFIXES):
                    counted.metric()  # a LoadGen result (of a detail log)
                loadgen[event.key] = event.value
                if splitter.add(event):
                    seen = set()
                seen.add(text)
    except _READ_ERRORS as exc:
        raise ParseError(f"cannot read file: {exc}", source=source, format=NAME) from exc
    if not events:
        if unreadable.first_line is not None:
            raise ParseError(
                unreadable.first_problem, source=source, line=unreadable.first_line, format=NAME
            )
        raise ParseError("no :::MLLOG events: not an MLPerf log", source=source, format=NAME)
    profiles = build_profiles(splitter.runs, source=source, format=NAME)
    if profiles:
        return profiles
    if inference:
        return [detail_profile(loadgen, source=source, format=NAME)]
    raise ParseError(
        f"{events} :::MLLOG event(s) but no run_start, epoch, block, throughput or "
        f"eval_accuracy: nothing to measure (a log cut before training started?)",
        source=source,
        format=NAME,
    )
