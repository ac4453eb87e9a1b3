"""pytest-benchmark's JSON (``--benchmark-json``, ``.benchmarks/<machine>/NNNN_*.json``).

One ``BENCH`` metric per benchmark, named by its ``fullname`` (the pytest node id). Its stats
are seconds per iteration (a round runs ``stats.iterations`` iterations and its time is divided
by them), so ``mean``/``min``/``max``/``stddev``/``median``/``total`` become ``*_ns`` and the
per-round ``data`` becomes ``samples_ns``; ``calls`` is the number of rounds. ``ops`` (1/mean)
is not kept: a second series of the same number would count one change twice.

The 2.x schema (``version`` 2.5, 2015) has no ``ops``, ``total``, ``data``, ``param`` or
``extra_info``; everything read here but ``mean`` may be absent. ``data`` is taken only when
it holds one number per round: a list that was cut or elided (the github-action-benchmark
fixture ends it with a string) would make a mean of a few rounds look like the benchmark's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfci.core.errors import ParseError
from perfci.core.model import Device, Metric, MetricKind, Profile
from perfci.core.units import scale_to_ns
from perfci.formats.bench import _json_doc
from perfci.formats.bench._detectors import PYTEST_BENCHMARK

NAME = PYTEST_BENCHMARK.name
DESCRIPTION = PYTEST_BENCHMARK.description
sniff = PYTEST_BENCHMARK.sniff

LABEL = "pytest-benchmark"
#: Top-level keys kept as profile metadata (the machine, the commit, when, which version).
METADATA_KEYS = ("machine_info", "commit_info", "datetime", "version")
#: Benchmark keys kept in a metric's attrs when the file gives them a value.
ATTR_KEYS = ("group", "name", "param", "params", "extra_info")
#: A git or Mercurial commit id (``unversioned`` outside a repository is none).
_SHA = re.compile(r"^[0-9a-fA-F]{7,64}$")
#: What ``get_commit_info`` writes when git names no branch.
_NO_BRANCH = frozenset({"(unknown)", "(detached head)", "HEAD"})


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """The one profile of a pytest-benchmark JSON file."""
    source = str(path)
    doc = _json_doc.load_benchmarks(path, format=NAME, tool="pytest-benchmark --benchmark-json")
    metadata = {key: doc[key] for key in METADATA_KEYS if doc.get(key) is not None}
    metadata.update(_provenance(doc))
    profile = Profile(label=LABEL, format=NAME, source=source, metadata=metadata)
    seen: set[str] = set()
    for index, entry in enumerate(doc["benchmarks"]):
        metric = _metric(entry, index, profile.warnings, source)
        if metric.name in seen:
            # The series identity must be unique; the first of two same-named entries stays.
            profile.warnings.append(f"{metric.name}: a second benchmark of this name was left out")
            continue
        seen.add(metric.name)
        profile.metrics.append(metric)
    if not profile.metrics:
        profile.warnings.append("the file holds no benchmarks")
    return [profile]


def _provenance(doc: dict[str, Any]) -> dict[str, Any]:
    """The commit a saved run measured, as ``perfci import-history`` reads it from any format:
    ``commit``, ``commit_time``, ``branch`` (when git named one), ``dirty``, and ``date`` (when
    the run was saved).

    pytest-benchmark's ``get_commit_info`` writes ``id`` (``unversioned`` outside git),
    ``time`` (``%cI``), ``branch`` (``(detached head)``, ``(unknown)``) and ``dirty``;
    ``datetime`` is the save time, naive UTC in older versions.
    """
    found: dict[str, Any] = {}
    info = doc.get("commit_info")
    if isinstance(info, dict) and _SHA.match(str(info.get("id", ""))):
        found["commit"] = info["id"]
        found["dirty"] = bool(info.get("dirty"))
        when = _json_doc.iso_time(info.get("time") or info.get("author_time"))
        if when:
            found["commit_time"] = when
        branch = info.get("branch")
        if isinstance(branch, str) and branch and branch not in _NO_BRANCH:
            found["branch"] = branch
    saved = _json_doc.iso_time(doc.get("datetime"))
    if saved:
        found["date"] = saved
    return found


def _metric(entry: object, index: int, warnings: list[str], source: str) -> Metric:
    where = f"benchmarks[{index}]"
    if not isinstance(entry, dict):
        raise ParseError(f"{where} is not an object", source=source, format=NAME)
    name = _name(entry)
    if name is None:
        raise ParseError(f"{where} has no 'fullname' or 'name'", source=source, format=NAME)
    stats = entry.get("stats")
    if not isinstance(stats, dict):
        raise ParseError(f"benchmark {name!r} has no 'stats' object", source=source, format=NAME)
    if _json_doc.number(stats.get("mean")) is None:
        raise ParseError(
            f"benchmark {name!r}: 'stats.mean' is not a number", source=source, format=NAME
        )
    rounds = _count(stats.get("rounds"))
    return Metric(
        kind=MetricKind.BENCH,
        name=name,
        device=Device.CPU,
        calls=rounds,
        total_ns=_ns(stats, "total"),
        avg_ns=_ns(stats, "mean"),
        min_ns=_ns(stats, "min"),
        max_ns=_ns(stats, "max"),
        std_ns=_ns(stats, "stddev"),
        median_ns=_ns(stats, "median"),
        samples_ns=_samples(name, stats.get("data"), rounds, warnings),
        attrs=_attrs(entry, stats, name),
    )


def _name(entry: dict[str, Any]) -> str | None:
    for key in ("fullname", "name"):
        value = entry.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _ns(stats: dict[str, Any], key: str) -> float | None:
    seconds = _json_doc.number(stats.get(key))
    return None if seconds is None else scale_to_ns(seconds, "s")


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _samples(
    name: str, data: object, rounds: int | None, warnings: list[str]
) -> list[float] | None:
    """The per-round times in ns, or None (with a warning) when ``data`` is not all of them."""
    if data is None:
        return None
    if not isinstance(data, list):
        warnings.append(f"{name}: 'stats.data' is not an array; its per-round times were not read")
        return None
    numbers = [_json_doc.number(value) for value in data]
    bad = [value for value, number in zip(data, numbers, strict=True) if number is None]
    if bad:
        warnings.append(
            f"{name}: {len(bad)} of {len(data)} entries of 'stats.data' are not numbers "
            f"(first: {str(bad[0])[:60]!r}); the per-round times were left out, the summary "
            f"stats are kept"
        )
        return None
    if rounds is not None and len(data) != rounds:
        warnings.append(
            f"{name}: 'stats.data' holds {len(data)} times for {rounds} rounds; the per-round "
            f"times were left out, the summary stats are kept"
        )
        return None
    return [scale_to_ns(seconds, "s") for seconds in numbers if seconds is not None]


def _attrs(entry: dict[str, Any], stats: dict[str, Any], name: str) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for key in ATTR_KEYS:
        value = entry.get(key)
        if value is None or value == {} or (key == "name" and value == name):
            continue
        attrs[key] = value
    iterations = _count(stats.get("iterations"))
    if iterations is not None:
        attrs["iterations"] = iterations  # per round: the stats are already divided by it
    return attrs
