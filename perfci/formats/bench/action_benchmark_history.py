"""github-action-benchmark's history: the ``data.js`` it keeps on ``gh-pages``.

The action appends every run of a benchmark suite to one file,
``window.BENCHMARK_DATA = {lastUpdate, repoUrl, entries: {<suite>: [<entry>, ...]}}``, the
JSON text after the ``window.BENCHMARK_DATA = `` prefix being ``JSON.stringify(data, null, 2)``
(``src/write.ts``, ``SCRIPT_PREFIX``). With ``external-data-json-path`` it writes the same
object as plain JSON. Each entry is one run of one commit, oldest first::

    {"commit": {"id", "timestamp", "url", "message", "author", ...},
     "date": <ms since the epoch>, "tool": "cargo" | "go" | "pytest" | ... ,
     "benches": [{"name", "value", "unit", "range"?, "extra"?}, ...]}

Here every entry becomes one profile labelled ``<suite> @ <commit>``, with the commit's id,
its time, the entry's date, the suite and the tool in ``metadata``: a history, not the repeats
of one run. ``perfci parse`` shows it; ``perfci import-history`` stores each entry as a run of its
commit, so that a project moving from the action starts with its baseline.

The benches are read as :mod:`.action_benchmark` reads its input, one metric each, so that
an imported history lines up with the runs perfci stores afterwards from the same benchmark:

* ``custom*`` tools: as the custom JSON itself (``perfci check --format action_benchmark``);
* ``pytest``: the action keeps ``stats.ops`` in ``iter/sec``, which is ``1 / stats.mean``; it
  becomes the ``BENCH`` time ``1 / value`` seconds, the series :mod:`.pytest_benchmark` makes
  of the same test from its ``--benchmark-json`` file;
* ``googlecpp``: ``real_time`` in ``<time_unit>/iter``, the series :mod:`.google_benchmark`
  makes of the same benchmark;
* the others (``cargo``'s ``ns/iter``, ``go``'s ``ns/op``, ``benchmarkjs``'s ``ops/sec``): by
  their unit. A ``go`` bench whose unit holds further ``value unit`` pairs (older actions on a
  benchmark with ``b.ReportMetric``: ``"ns/op\t 4.000 auxMetricUnits"``) is split into a bench
  per pair named ``<name> - <unit>``, as current actions write them (``split_go_metrics``).

Which way is good: the ``custom*`` tools say it for every bench; for the others a unit that
says it decides, else the action's own ``biggerIsBetter`` table for the tool
(``src/write.ts``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from perfci.core.compat import UTC
from perfci.core.errors import ParseError
from perfci.core.model import Better, Profile
from perfci.formats._textio import read_text
from perfci.formats.bench._detectors import ACTION_BENCHMARK_HISTORY, SCRIPT_PREFIX
from perfci.formats.bench._json_doc import (
    ShapeError,
    describe,
    iso_time,
    json_errors,
    number,
    shape_errors,
)
from perfci.formats.bench.action_benchmark import classify, entry_metric, unique_name

NAME = ACTION_BENCHMARK_HISTORY.name
DESCRIPTION = ACTION_BENCHMARK_HISTORY.description
sniff = ACTION_BENCHMARK_HISTORY.sniff

_NOT_NEWLINE = re.compile(r"[^\n]")
_BOM = "\ufeff"
#: The action's ``biggerIsBetter(tool)`` (``src/write.ts``).
_TOOL_BETTER = {
    "cargo": Better.LOWER,
    "go": Better.LOWER,
    "benchmarkjs": Better.HIGHER,
    "benchmarkluau": Better.LOWER,
    "pytest": Better.HIGHER,
    "googlecpp": Better.LOWER,
    "catch2": Better.LOWER,
    "julia": Better.LOWER,
    "jmh": Better.LOWER,
    "benchmarkdotnet": Better.LOWER,
    "customBiggerIsBetter": Better.HIGHER,
    "customSmallerIsBetter": Better.LOWER,
}
_CUSTOM_TOOLS = frozenset({"customBiggerIsBetter", "customSmallerIsBetter"})


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """One profile per entry of every suite in the history ``path``, oldest first per suite."""
    doc = _load(path)
    profiles: list[Profile] = []
    with shape_errors(path, format=NAME):
        if not isinstance(doc, dict) or not isinstance(doc.get("entries"), dict):
            got = describe(doc) if not isinstance(doc, dict) else "no 'entries' object"
            raise ShapeError(
                f"expected {{lastUpdate, repoUrl, entries: {{suite: [...]}}}}, got {got}"
            )
        repository = doc.get("repoUrl") if isinstance(doc.get("repoUrl"), str) else None
        for suite, entries in doc["entries"].items():
            if not isinstance(entries, list):
                raise ShapeError(
                    f"suite {suite!r}: expected an array of entries, got {describe(entries)}"
                )
            for index, entry in enumerate(entries, start=1):
                profile = _profile(path, suite, index, entry)
                if repository:
                    profile.metadata["repository"] = repository
                profiles.append(profile)
    return profiles


def _load(path: Path) -> Any:
    """The JSON object of ``path``, with the ``window.BENCHMARK_DATA =`` prefix taken off.

    The prefix is blanked rather than cut, so that the decoder's line and column are the
    file's.
    """
    text = read_text(path, format=NAME).removeprefix(_BOM)
    body = text.lstrip()
    if body.startswith(SCRIPT_PREFIX):
        rest = body[len(SCRIPT_PREFIX) :].lstrip()
        if not rest.startswith("="):
            raise ParseError(
                f"expected '{SCRIPT_PREFIX} = {{...}}'", source=str(path), line=1, format=NAME
            )
        cut = len(text) - len(rest) + 1
        text = _NOT_NEWLINE.sub(" ", text[:cut]) + text[cut:].rstrip().removesuffix(";")
    with json_errors(path, format=NAME):
        return json.loads(text)


def _profile(path: Path, suite: str, index: int, entry: Any) -> Profile:
    where = f"suite {suite!r}, entry {index}"
    if not isinstance(entry, dict):
        raise ShapeError(
            f"{where}: expected an object {{commit, date, tool, benches}}, got {describe(entry)}"
        )
    commit, benches = entry.get("commit"), entry.get("benches")
    if not isinstance(commit, dict) or not isinstance(commit.get("id"), str) or not commit["id"]:
        raise ShapeError(f"{where}: 'commit' must be an object with a string 'id'")
    if not isinstance(benches, list):
        raise ShapeError(f"{where}: 'benches' must be an array, got {describe(benches)}")
    tool = entry.get("tool") if isinstance(entry.get("tool"), str) else None
    # The label tells the entries apart in ``perfci parse``; the suite itself is in metadata.
    profile = Profile(label=f"{suite} @ {commit['id'][:12]}", format=NAME, source=str(path))
    profile.metadata.update(
        suite=suite,
        entry=index,
        commit=commit["id"],
        commit_time=_commit_time(commit.get("timestamp"), where),
        date=_date(entry.get("date"), where),
        tool=tool,
    )
    if isinstance(commit.get("url"), str):
        profile.metadata["commit_url"] = commit["url"]
    used: set[str] = set()
    assumed: list[str] = []
    if tool == "go":
        benches = split_go_metrics(benches)
    for number_in_entry, found in enumerate(benches, start=1):
        bench = _as_time(found) if tool == "pytest" else found
        chosen = _direction(tool, bench)
        metric, unit = entry_metric(number_in_entry, bench, chosen, where=f"{where}: bench")
        metric.name = unique_name(metric.name, used, profile.warnings)
        if chosen is None and unit.better is None:
            assumed.append(metric.name)
        profile.metrics.append(metric)
    if assumed:
        profile.warnings.append(
            f"tool {tool!r}: direction assumed lower-is-better for {len(assumed)} "
            f"bench(es) whose unit does not say ({', '.join(map(repr, assumed[:5]))})"
        )
    if not profile.metrics:
        profile.warnings.append(f"{where} holds no benches")
    return profile


def split_go_metrics(benches: list[Any]) -> list[Any]:
    """Go benches whose unit holds further metrics, split as the action splits them now.

    ``b.ReportMetric`` adds ``value unit`` pairs to a ``go test -bench`` line
    (``BenchmarkFib20WithAuxMetric-4  27205  44267 ns/op  4.000 auxMetricUnits``); older
    actions kept the rest of the line as the unit (``"ns/op\t  4.000 auxMetricUnits"``),
    current ones write one bench per pair, named ``<name> - <unit>`` (some versions both).
    The combined bench becomes those per-pair benches, less the ones its entry already
    holds, so that one series runs through the whole history and none is counted twice.
    """
    names = {bench.get("name") for bench in benches if isinstance(bench, dict)}
    split: list[Any] = []
    for bench in benches:
        pairs = _go_pairs(bench)
        if pairs is None:
            split.append(bench)
            continue
        for value, unit in pairs:
            name = f"{bench['name']} - {unit}"
            if name not in names:
                split.append({**bench, "name": name, "unit": unit, "value": value})
    return split


def _go_pairs(bench: Any) -> list[tuple[Any, str]] | None:
    """``[(value, "ns/op"), (4.0, "auxMetricUnits")]`` for a bench whose unit is
    ``"ns/op\t 4.000 auxMetricUnits"``; ``None`` for a bench with a plain unit."""
    if not isinstance(bench, dict) or not isinstance(bench.get("name"), str):
        return None
    unit = bench.get("unit")
    words = unit.split() if isinstance(unit, str) else []
    if len(words) < 3 or len(words) % 2 == 0:
        return None
    pairs: list[tuple[Any, str]] = [(bench.get("value"), words[0])]
    for value, name in zip(words[1::2], words[2::2], strict=True):
        try:
            pairs.append((float(value), name))
        except ValueError:
            return None  # "ops per sec": words, not value-unit pairs
    return pairs


def _as_time(bench: Any) -> Any:
    """A pytest bench's ``iter/sec`` (pytest-benchmark's ``ops``, ``1 / mean``) as its mean
    time in seconds; anything else as it is, for :func:`entry_metric` to judge."""
    if not isinstance(bench, dict) or bench.get("unit") != "iter/sec":
        return bench
    ops = number(bench.get("value"))
    if ops is None or ops <= 0:
        return bench
    return {**bench, "value": 1.0 / ops, "unit": "s"}


def _direction(tool: str | None, bench: Any) -> Better | None:
    """The ``custom*`` tool's direction; else the unit's, else the action's table's."""
    if tool in _CUSTOM_TOOLS:
        return _TOOL_BETTER[tool]
    unit = bench.get("unit") if isinstance(bench, dict) else None
    said = classify(unit).better if isinstance(unit, str) else None
    return said or (_TOOL_BETTER.get(tool) if tool else None)


def _commit_time(value: Any, where: str) -> str | None:
    """The commit's ISO 8601 time, checked (git's ``%cI``; the action copies GitHub's)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ShapeError(f"{where}: commit 'timestamp' must be a string, got {describe(value)}")
    moment = iso_time(value)
    if moment is None:
        raise ShapeError(f"{where}: commit 'timestamp' {value!r} is not an ISO 8601 time")
    return moment


def _date(value: Any, where: str) -> str | None:
    """The entry's ``date`` (ms since the epoch, JavaScript's ``Date.now()``) as ISO 8601."""
    if value is None:
        return None
    millis = number(value)
    if millis is None or not 0 <= millis < 1e14:
        raise ShapeError(f"{where}: 'date' must be milliseconds since 1970, got {describe(value)}")
    return datetime.fromtimestamp(millis / 1000, tz=UTC).isoformat()
