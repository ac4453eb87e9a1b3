"""MLPerf inference LoadGen's ``mlperf_log_summary.txt`` (also what LoadGen prints at the end).

::

    ================================================
    MLPerf Results Summary
    ================================================
    SUT name : PySUT
    Scenario : Offline
    Mode     : PerformanceOnly
    Samples per second: 33.6903
    Result is : VALID
      Min duration satisfied : Yes
    ...
    ================================================
    Additional Stats
    ================================================
    Min latency (ns)                : 16325180169
    90.00 percentile latency (ns)   : 16325180169
    ...
    ================================================
    Test Parameters Used
    ================================================
    samples_per_query : 550
    target_qps : 50

Sections are named by a line between two ``====`` rules; every other line is ``key : value``
(the colon's spacing varies). Results (``_loadgen.result_metric``: latencies in ns, rates,
samples per query) of the first two sections become ``MEASURE`` metrics named as LoadGen names
them; the rest (SUT name, scenario, mode, LoadGen's verdict, what was satisfied, the test
parameters) go to the metadata, the parameters under ``parameters``. A run LoadGen called
INVALID is read with a warning. Text before the summary (a harness's log) is skipped; a file
with several summaries (runs appended) gives a profile each.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfci.core.errors import ParseError
from perfci.core.model import Profile
from perfci.formats._text_lines import open_text
from perfci.formats.caps import budget
from perfci.formats.mlperf._detectors import MLPERF_SUMMARY
from perfci.formats.mlperf._loadgen import invalid_warning, result_metric

NAME = MLPERF_SUMMARY.name
DESCRIPTION = MLPERF_SUMMARY.description
sniff = MLPERF_SUMMARY.sniff

_RULE = re.compile(r"^={8,}\s*$")
_SUMMARY = "MLPerf Results Summary"
_RESULT_SECTIONS = frozenset({_SUMMARY, "Additional Stats"})
_PARAMETERS = "Test Parameters Used"
_NUMBER = re.compile(r"^[-+]?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_META_KEYS = {"SUT name": "sut", "Scenario": "scenario", "Mode": "mode", "Result is": "result"}


class _Run:
    def __init__(self, source: str) -> None:
        self.profile = Profile(label="mlperf", format=NAME, source=source)
        self.parameters: dict[str, Any] = {}
        self.unmet: list[str] = []
        self.names: set[str] = set()  # of the metrics so far (a scan of them was quadratic)
        self.counted = budget(source, NAME)  # a service upload's caps (issue 31)

    def add(self, section: str, key: str, value: str) -> None:
        if section == _PARAMETERS:
            self.parameters[key] = value
            return
        if key in _META_KEYS:
            self.profile.metadata[_META_KEYS[key]] = value
            return
        if key.endswith("satisfied"):
            self.profile.metadata[key] = value
            if value.strip().lower() == "no":
                self.unmet.append(f"{key}: {value}")
            return
        number = _NUMBER.match(value)
        metric = result_metric(key, float(number.group())) if number else None
        if metric is not None and section in _RESULT_SECTIONS:
            if metric.name not in self.names:  # every result is a MEASURE
                self.counted.metric()
                self.names.add(metric.name)
                self.profile.metrics.append(metric)
        elif value:
            self.profile.metadata[key] = value

    def finish(self) -> Profile:
        profile = self.profile
        if self.parameters:
            profile.metadata["parameters"] = self.parameters
        scenario = profile.metadata.get("scenario")
        if isinstance(scenario, str) and scenario:
            profile.label = scenario.replace(" ", "")
        profile.warnings.extend(invalid_warning(profile.metadata.get("result"), self.unmet))
        if not profile.metrics:
            profile.warnings.append("the summary holds no throughput or latency result")
        return profile


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """One profile per ``MLPerf Results Summary`` in the file."""
    with open_text(path, format=NAME) as handle:
        lines = [line.rstrip("\r\n") for line in handle]
    runs: list[_Run] = []
    section: str | None = None
    for index, text in enumerate(lines):
        if _RULE.match(text) or not text.strip():
            continue
        if _is_title(lines, index):
            section = text.strip()
            if section == _SUMMARY:
                runs.append(_Run(str(path)))
        elif runs and section is not None:
            _add_line(runs[-1], section, text)
    if not runs:
        raise ParseError(
            "no 'MLPerf Results Summary' section between '====' rules: not a LoadGen summary",
            source=str(path),
            format=NAME,
        )
    profiles = [run.finish() for run in runs]
    if len(profiles) > 1:
        for number, profile in enumerate(profiles, 1):
            profile.label = f"{profile.label} #{number}"
    return profiles


def _is_title(lines: list[str], index: int) -> bool:
    """A section's name: the one line between two rules."""
    return 0 < index < len(lines) - 1 and all(_RULE.match(lines[i]) for i in (index - 1, index + 1))


def _add_line(run: _Run, section: str, text: str) -> None:
    pair = _key_value(text)
    if pair is not None and not text.lstrip().startswith("*"):
        run.add(section, *pair)


def _key_value(text: str) -> tuple[str, str] | None:
    """``key : value`` around the line's first colon, each stripped; ``None`` without a key.

    What ``^\\s*(?P<key>[^:]+?)\\s*:\\s*(?P<value>.*?)\\s*$`` matched, in one pass: that
    pattern took minutes on a long run of spaces (issue 31). A key of blanks only is the last
    of them, as the pattern had it.
    """
    before, colon, after = text.partition(":")
    if not colon or not before:
        return None
    return before.strip() or before[-1], after.strip()
