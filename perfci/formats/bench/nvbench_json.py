"""NVBench's JSON output (``--json FILE``, ``--jsonbin FILE``), JSON file version 1 (NVBench
0.1 and later, 2022 on).

The file (``nvbench/json_printer.cu``)::

    {"meta": {"argv": [...], "version": {"json": {...}, "nvbench": {...}}},
     "devices": [{"id": 0, "name": "Quadro GV100", "sm_version": 700, ...}],
     "benchmarks": [{"name": "copy_type_sweep", "axes": [...] | null,
                     "states": [{"name": "Device=0 T=U32", "device": 0,
                                 "axis_values": [{"name": "T", "type": "string",
                                                  "value": "U32"}] | null,
                                 "summaries": [{"tag": "nv/cold/time/gpu/mean",
                                                "name": "GPU Time", "hint": "duration",
                                                "data": [{"name": "value", "type": "float64",
                                                          "value": "0.00106..."}]}, ...],
                                 "is_skipped": false}]}]}

Numbers are strings (int64s would lose digits as JSON numbers); durations are seconds, relative
noise and utilisation fractions. Which summaries become which metric is ``_nvbench``'s
docstring: ``nv/cold/time/gpu/mean`` (GPU time), ``nv/cold/sample_size``,
``nv/cold/time/gpu/stdev/relative`` (noise), ``nv/batch/time/gpu/mean`` and
``nv/batch/sample_size``, ``nv/cold/bw/global/bytes_per_second`` and ``.../utilization``,
``nv/cold/bw/item_rate``; the hidden ``nv/cold/time/gpu/{min,max,median,stdev/absolute}`` of
newer versions fill min / max / median / std; the benchmark's own summaries that NVBench shows
(``nv/element_count/Items``, ``nv/gmem/reads/InSize``) go to ``attrs["columns"]``. The case's
name is the benchmark's with its axis values as NVBench prints them (``_axes``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfci.core.errors import ParseError
from perfci.core.model import Profile
from perfci.formats.bench._detectors import NVBENCH_JSON
from perfci.formats.bench._json_doc import ShapeError, describe, load, shape_errors
from perfci.formats.bench._nvbench import Results, State
from perfci.formats.caps import budget

if TYPE_CHECKING:
    pass

NAME = NVBENCH_JSON.name
DESCRIPTION = NVBENCH_JSON.description
sniff = NVBENCH_JSON.sniff

_NS_PER_S = 1e9
#: Summary tag → (State field, scale to perfci's unit).
_TAGS: dict[str, tuple[str, float]] = {
    "nv/cold/time/gpu/mean": ("gpu_ns", _NS_PER_S),
    "nv/cold/sample_size": ("samples", 1),
    "nv/cold/time/gpu/stdev/relative": ("noise_pct", 100),
    "nv/cold/time/cpu/mean": ("cpu_ns", _NS_PER_S),
    "nv/cold/time/cpu/stdev/relative": ("cpu_noise_pct", 100),
    "nv/batch/time/gpu/mean": ("batch_ns", _NS_PER_S),
    "nv/batch/sample_size": ("batch_samples", 1),
    "nv/cold/bw/global/bytes_per_second": ("bandwidth", 1),
    "nv/cold/bw/global/utilization": ("utilization_pct", 100),
    "nv/cold/bw/item_rate": ("items_per_s", 1),
}
_TIMES = {
    "nv/cold/time/gpu/min": "min_ns",
    "nv/cold/time/gpu/max": "max_ns",
    "nv/cold/time/gpu/median": "median_ns",
    "nv/cold/time/gpu/stdev/absolute": "std_ns",
}
_COUNTS = frozenset({"samples", "batch_samples"})


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """One profile per device of the NVBench JSON file ``path``."""
    doc = load(path, format=NAME)
    results = Results(source=str(path), format=NAME)
    counted = budget(str(path), NAME)
    with shape_errors(path, format=NAME):
        if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
            raise ShapeError(f"expected an object with a 'benchmarks' array, got {describe(doc)}")
        _read_meta(doc, results)
        for bench in doc["benchmarks"]:
            if not isinstance(bench, dict) or not isinstance(bench.get("name"), str):
                raise ShapeError(f"a benchmark must be an object with a 'name': {describe(bench)}")
            states = bench.get("states")
            if not isinstance(states, list):
                raise ShapeError(
                    f"benchmark {bench['name']!r}: 'states' must be an array, got "
                    f"{describe(states)} (NVBench JSON before version 1.0, 2021, is not read)"
                )
            pow2 = _pow2(bench)
            for state in states:
                found = _state(bench["name"], state, pow2)
                if found is not None:
                    results.add(found, counted)
                else:
                    reason = state.get("skip_reason") if isinstance(state, dict) else None
                    results.skip(f"{bench['name']} [{_label(state)}]: {reason or 'skipped'}")
    profiles = results.profiles()
    if not profiles:
        raise ParseError(
            "no measured NVBench state: every state was skipped or has no "
            "'nv/cold/time/gpu/mean' summary",
            source=str(path),
            format=NAME,
        )
    return profiles


def _read_meta(doc: dict[str, Any], results: Results) -> None:
    meta = doc.get("meta")
    if isinstance(meta, dict):
        version = meta.get("version")
        if isinstance(version, dict):
            results.metadata["nvbench_version"] = {
                key: value.get("string")
                for key, value in version.items()
                if isinstance(value, dict) and isinstance(value.get("string"), str)
            }
        if isinstance(meta.get("argv"), list):
            results.metadata["argv"] = [str(arg) for arg in meta["argv"]]
    for device in doc.get("devices") or []:
        if isinstance(device, dict) and isinstance(device.get("id"), int):
            results.devices[device["id"]] = {
                key: value for key, value in device.items() if isinstance(value, str | int)
            }


def _label(state: Any) -> str:
    name = state.get("name") if isinstance(state, dict) else None
    return name if isinstance(name, str) else "?"


def _state(bench: str, state: Any, pow2: frozenset[str]) -> State | None:
    """The state's measures; ``None`` for a skipped state."""
    if not isinstance(state, dict):
        raise ShapeError(f"benchmark {bench!r}: a state must be an object, got {describe(state)}")
    if state.get("is_skipped"):
        return None
    where = f"benchmark {bench!r}, state {_label(state)!r}"
    device = state.get("device")
    found = State(
        bench=bench, axes=_axes(state, pow2), device=device if isinstance(device, int) else None
    )
    for summary in state.get("summaries") or []:
        if not isinstance(summary, dict) or not isinstance(summary.get("tag"), str):
            raise ShapeError(f"{where}: a summary must be an object with a 'tag'")
        tag = summary["tag"]
        if tag in _TAGS:
            attr, scale = _TAGS[tag]
            value = _value(summary, where)
            if value is not None:
                setattr(found, attr, int(value) if attr in _COUNTS else value * scale)
        elif tag in _TIMES:
            value = _value(summary, where)
            if value is not None:
                found.times[_TIMES[tag]] = value * _NS_PER_S
        elif not summary.get("hide") and tag.startswith(("nv/element_count/", "nv/gmem/")):
            value = _value(summary, where)
            if value is not None:
                found.other[str(summary.get("name") or tag)] = value
    return found


def _axes(state: dict[str, Any], pow2: frozenset[str]) -> list[tuple[str, str]]:
    """The axis values as NVBench prints them in a state's name: ``2^N`` for a power-of-two
    axis, a float with 5 significant digits, anything else as it is."""
    axes = []
    for entry in state.get("axis_values") or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            continue
        name, value, kind = entry["name"], entry.get("value"), entry.get("type")
        text = str(value)
        try:
            if kind == "int64" and name in pow2:
                text = f"2^{int(text).bit_length() - 1}"
            elif kind == "float64":
                text = f"{float(text):.5g}"
        except ValueError:
            pass  # printed as given
        axes.append((name, text))
    return axes


def _pow2(bench: dict[str, Any]) -> frozenset[str]:
    """The benchmark's power-of-two axes (``"flags": "pow2"``)."""
    return frozenset(
        axis["name"]
        for axis in bench.get("axes") or []
        if isinstance(axis, dict)
        and isinstance(axis.get("name"), str)
        and axis.get("flags") == "pow2"
    )


def _value(summary: dict[str, Any], where: str) -> float | None:
    """The summary's ``value`` entry as a number (NVBench writes numbers as strings)."""
    for entry in summary.get("data") or []:
        if isinstance(entry, dict) and entry.get("name") == "value":
            raw = entry.get("value")
            if raw is None:
                return None
            try:
                value = float(raw)
            except (TypeError, ValueError):
                raise ShapeError(
                    f"{where}: summary {summary['tag']!r} has the value {describe(raw)}, "
                    "expected a number"
                ) from None
            return value if math.isfinite(value) else None  # "nan" noise of a single sample
    return None
