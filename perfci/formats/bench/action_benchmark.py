"""github-action-benchmark's custom JSON: ``[{name, unit, value, range?, extra?}, ...]``.

The input of its ``customSmallerIsBetter`` / ``customBiggerIsBetter`` tools, which any benchmark
can write. The file does not say which way is good; the action's ``tool`` setting does. Here:

* the ``better=lower|higher`` option (or ``tool=customSmallerIsBetter|customBiggerIsBetter``)
  sets the direction of every entry;
* without it, the unit decides where it can: a time (``ns``, ``ms``, ``s``...) is a ``BENCH``
  metric in ns, lower is better; a size (``bytes``, ``MB``, ``Megabytes``...) becomes bytes,
  lower is better; a rate (``ops/sec``, ``tokens/s``, ``x faster``) is higher-is-better;
* any other unit (``Percent``, ``points``) is assumed lower-is-better, and the profile says so
  in a warning that names the option to pass.

Entries other than times are ``MEASURE`` metrics named by ``name`` in their unit. ``range``
(``"± 2.3"``, ``"+/- 5%"``) and ``extra`` go to ``attrs``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfci.core.compat import compile_linear
from perfci.core.errors import ConfigError
from perfci.core.model import Better, Device, Metric, MetricKind, Profile
from perfci.core.units import BYTES_PER_UNIT, NS_PER_UNIT
from perfci.formats.bench._detectors import ACTION_BENCHMARK
from perfci.formats.bench._json_doc import (
    ShapeError,
    describe,
    load,
    number,
    required_number,
    scaled,
    shape_errors,
)

NAME = ACTION_BENCHMARK.name
DESCRIPTION = ACTION_BENCHMARK.description
sniff = ACTION_BENCHMARK.sniff

_LABEL = "benchmarks"
#: The command-line flag that reaches ``options`` (``perfci parse --option KEY=VALUE``).
_OPTION_HINT = "--option better=higher"

_TOOLS = {"customsmallerisbetter": Better.LOWER, "custombiggerisbetter": Better.HIGHER}
_BETTER = {"lower": Better.LOWER, "higher": Better.HIGHER}

# Spelled-out time and size units; the short ones come from perfci.core.units.
_TIME_WORDS = {
    "nanosecond": "ns",
    "nsec": "ns",
    "microsecond": "us",
    "usec": "us",
    "millisecond": "ms",
    "msec": "ms",
    "secs": "s",
    "minute": "min",
    "mins": "min",
}
_SIZE_WORDS = {
    "kilobyte": "KB",
    "megabyte": "MB",
    "gigabyte": "GB",
    "terabyte": "TB",
    "kibibyte": "KiB",
    "mebibyte": "MiB",
    "gibibyte": "GiB",
    "tebibyte": "TiB",
}
# "ns/iter" (cargo bench), "ns/op" (go test -bench), "ms per call": still a time per iteration.
# Linear on any text (issue 31): "per" + one space at least is ``per(?=\s)`` and a run of spaces
# is taken whole (``\s*+``), never split between two quantifiers; no leading ``\s*`` either,
# which ``sub`` tried from every space of a long run (the caller strips what is left).
_PER_ITERATION = compile_linear(r"(?:/|\bper(?=\s))\s*+(?:iter|iteration|op|operation|call|run)s?$")
_RATE = compile_linear(
    r"(?:/|\bper(?=\s))\s*+(?:s|sec|secs|second|seconds|ms|min|minute|h|hour)$"
    r"|\bx\s++faster$|\btimes\s++faster$|^x$|\bspeed-?up$|^hz$|^fps$|flops$",
)
_BYTES_BY_LOWER = {unit.lower(): factor for unit, factor in BYTES_PER_UNIT.items()}
_RANGE = compile_linear(r"^\s*+(?:(?:±|\+/-|\+-)\s*+)?([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(%?)")


@dataclass(frozen=True, slots=True)
class EntryUnit:
    """What an entry's unit says: its kind, the factor to ns or bytes, and its direction."""

    text: str  # as the file gives it
    kind: str  # "time", "size", "rate" or "other"
    factor: int = 1
    better: Better | None = None


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """One profile with a metric per entry of the custom JSON file ``path``."""
    chosen = _option_direction(options)
    doc = load(path, format=NAME)
    profile = Profile(label=_LABEL, format=NAME, source=str(path))
    assumed: list[str] = []
    with shape_errors(path, format=NAME):
        if not isinstance(doc, list):
            raise ShapeError(
                f"expected a JSON array of {{name, unit, value}} entries, got {describe(doc)}"
            )
        used: set[str] = set()
        for index, entry in enumerate(doc, start=1):
            metric, unit = entry_metric(index, entry, chosen)
            metric.name = unique_name(metric.name, used, profile.warnings)
            if chosen is None and unit.better is None:
                assumed.append(f"{metric.name!r} ({metric.unit})")
            elif chosen is not None and unit.better not in (None, chosen):
                profile.warnings.append(
                    f"{metric.name!r}: its unit {unit.text!r} reads {unit.better.value}-is-"
                    f"better, kept {chosen.value}-is-better as the option says"
                )
            profile.metrics.append(metric)
    if not profile.metrics:
        profile.warnings.append("the file holds no entries")
    if assumed:
        profile.warnings.append(_assumed_warning(assumed))
    profile.metadata["better"] = chosen.value if chosen else "by unit"
    return [profile]


def _option_direction(options: Mapping[str, str]) -> Better | None:
    """The direction ``better=`` or ``tool=`` sets for every entry, or None."""
    better, tool = options.get("better"), options.get("tool")
    from_better = _BETTER.get(better.strip().lower()) if better else None
    from_tool = _TOOLS.get(tool.strip().lower()) if tool else None
    if better and from_better is None:
        raise ConfigError(f"{NAME}: better={better!r}: expected lower or higher")
    if tool and from_tool is None:
        raise ConfigError(
            f"{NAME}: tool={tool!r}: expected customSmallerIsBetter or customBiggerIsBetter"
        )
    if from_better and from_tool and from_better is not from_tool:
        raise ConfigError(f"{NAME}: better={better} and tool={tool} disagree")
    return from_better or from_tool


def _assumed_warning(entries: list[str]) -> str:
    shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
    noun = "entry" if len(entries) == 1 else "entries"
    return (
        f"direction assumed lower-is-better for {len(entries)} {noun} whose unit does not say "
        f"({shown}); if bigger is better pass {_OPTION_HINT} (perfci parse {_OPTION_HINT} FILE), "
        f"--option better=lower to confirm"
    )


def unique_name(name: str, used: set[str], warnings: list[str]) -> str:
    """``name``, or ``name (2)``... when taken: a series name is unique within a profile."""
    renamed, count = name, 1
    while renamed in used:
        count += 1
        renamed = f"{name} ({count})"
    used.add(renamed)
    if renamed != name:
        warnings.append(f"entry name {name!r} repeats; this entry is named {renamed!r}")
    return renamed


def entry_metric(
    index: int, entry: Any, chosen: Better | None, *, where: str = "entry"
) -> tuple[Metric, EntryUnit]:
    """The metric of one ``{name, unit, value, range?, extra?}`` entry and what its unit says.

    ``chosen`` is the direction every entry takes (None: the unit's, else lower-is-better);
    errors name the entry as ``<where> <index>``.
    """
    if not isinstance(entry, dict):
        raise ShapeError(
            f"{where} {index}: expected an object {{name, unit, value}}, got {describe(entry)}"
        )
    name, unit_text, raw = entry.get("name"), entry.get("unit"), entry.get("value")
    if not isinstance(name, str) or not name.strip():
        raise ShapeError(
            f"{where} {index}: 'name' must be a non-empty string; got {describe(name)}"
        )
    where = f"{where} {index} ({name!r})"
    if not isinstance(unit_text, str):
        raise ShapeError(f"{where}: 'unit' must be a string; got {describe(unit_text)}")
    value = required_number(entry, "value", where)
    unit = classify(unit_text)
    better = chosen or unit.better or Better.LOWER
    attrs = _attrs(entry)
    if unit.kind == "time":
        if value < 0:
            raise ShapeError(f"{where}: a time cannot be negative ({raw!r} {unit_text})")
        attrs["source_unit"] = unit_text
        metric = Metric(
            kind=MetricKind.BENCH,
            name=name,
            device=Device.CPU,
            avg_ns=scaled(value, unit.factor, where),
            better=better,
            attrs=attrs,
        )
        return metric, unit
    if unit.kind == "size":
        attrs.update(source_unit=unit_text, source_value=value)
        value, unit_text = scaled(value, unit.factor, where), "bytes"
    metric = Metric(
        kind=MetricKind.MEASURE,
        name=name,
        device=Device.CPU,
        unit=unit_text,
        better=better,
        value=value,
        attrs=attrs,
    )
    return metric, unit


def classify(unit: str) -> EntryUnit:
    """What ``unit`` says: a time (factor to ns), a size (factor to bytes), a rate, or nothing."""
    text = unit.strip()
    lowered = text.lower()
    factor = _time_factor(_PER_ITERATION.sub("", lowered).strip())
    if factor is not None:
        return EntryUnit(text, "time", factor, Better.LOWER)
    size = _SIZE_WORDS.get(lowered.removesuffix("s"), lowered)
    if text in BYTES_PER_UNIT or size.lower() in _BYTES_BY_LOWER:
        factor = BYTES_PER_UNIT.get(text) or _BYTES_BY_LOWER[size.lower()]
        return EntryUnit(text, "size", factor, Better.LOWER)
    if _RATE.search(lowered):
        return EntryUnit(text, "rate", better=Better.HIGHER)
    return EntryUnit(text, "other")


def _time_factor(base: str) -> int | None:
    """Nanoseconds per ``base`` (``ms``, ``seconds``, ``usec``...), None for no time unit."""
    for candidate in (base, base.removesuffix("s")):
        spelled = _TIME_WORDS.get(candidate, candidate)
        if spelled in NS_PER_UNIT:
            return NS_PER_UNIT[spelled]
    return None


def _attrs(entry: dict[str, Any]) -> dict[str, Any]:
    """``range`` (raw, and its number when it reads as one) and ``extra``."""
    attrs: dict[str, Any] = {}
    spread = entry.get("range")
    if isinstance(spread, str) and spread.strip():
        attrs["range"] = spread
        match = _RANGE.match(spread)
        if match:
            key = "range_pct" if match.group(2) else "range_value"
            attrs[key] = float(match.group(1))
    elif number(spread) is not None:
        attrs["range_value"] = number(spread)
    extra = entry.get("extra")
    if extra is not None:
        scalar = isinstance(extra, str | int | float | bool)
        attrs["extra"] = extra if scalar else json.dumps(extra, sort_keys=True)[:1000]
    return attrs
