"""PyTorch's compiler benchmarks (``benchmarks/dynamo/*.py --performance|--accuracy``): the CSV
they append a row per model to (``inductor_timm_models_training.csv``...).

``dev,name,batch_size,speedup,abs_latency,compilation_latency,compression_ratio,eager_peak_mem,
dynamo_peak_mem,calls_captured,unique_graphs,graph_breaks,unique_graph_breaks,...``; an accuracy
run has ``accuracy`` (``pass``, ``fail_accuracy``, ``eager_fail_to_run``...) where the
performance columns were. Columns are read by name; later PyTorch releases append more counts.

What becomes which metric, per row (one model on one device):

* ``abs_latency`` (ms per iteration of the compiled model) is a ``BENCH`` metric named by the
  model, on the GPU for ``cuda`` rows; 0 there, or in a ratio, means the model did not run,
  and is left out;
* ``speedup`` (eager over compiled) and ``compression_ratio`` (eager over compiled peak memory):
  ``MEASURE`` ratios (unit ``x``), higher is better, scoped by the model;
* ``compilation_latency`` (seconds): a ``MEASURE`` time in ns, lower is better;
* ``eager_peak_mem`` / ``dynamo_peak_mem`` (GB, 10⁹ bytes): ``MEASURE`` in bytes;
* ``calls_captured`` (operators the compiler captured): a count, higher is better; every other
  numeric column (graph breaks, recompiles, cudagraph skips) a count, lower is better;
* ``accuracy`` and other text stay in the ``attrs`` of the model's metrics (with ``batch_size``).

A model that appears in several rows (runs appended to one file) keeps each row's value as a
sample, in file order.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfci.core.errors import ParseError
from perfci.core.model import TIME_UNIT, Better, Device, Metric, MetricKind, Profile
from perfci.formats._text_lines import open_text
from perfci.formats.bench._detectors import DYNAMO_CSV
from perfci.formats.caps import Budget, budget

NAME = DYNAMO_CSV.name
DESCRIPTION = DYNAMO_CSV.description
sniff = DYNAMO_CSV.sniff

_REQUIRED = ("dev", "name")
_NS_PER_MS = 1e6
_NS_PER_S = 1e9
_BYTES_PER_GB = 1e9
#: column → (unit, factor to it, better)
_MEASURES: dict[str, tuple[str, float, Better]] = {
    "speedup": ("x", 1.0, Better.HIGHER),
    "compression_ratio": ("x", 1.0, Better.HIGHER),
    "compilation_latency": (TIME_UNIT, _NS_PER_S, Better.LOWER),
    "eager_peak_mem": ("bytes", _BYTES_PER_GB, Better.LOWER),
    "dynamo_peak_mem": ("bytes", _BYTES_PER_GB, Better.LOWER),
    "calls_captured": ("count", 1.0, Better.HIGHER),
}
_LATENCY = "abs_latency"
#: Columns where 0 means the model did not run (a failed model's speedup is written as 0).
_ZERO_IS_NOT_RUN = frozenset({_LATENCY, "speedup", "compression_ratio"})
_ATTRS = ("batch_size", "accuracy")
_TIMES = frozenset({_LATENCY, *(c for c, (unit, _, _) in _MEASURES.items() if unit == TIME_UNIT)})


@dataclass(slots=True)
class _Model:
    """One (device, model)'s rows: per column, the values in file order."""

    name: str
    device: Device
    values: dict[str, list[float]] = field(default_factory=dict)
    attrs: dict[str, list[str]] = field(default_factory=dict)
    not_run: int = 0


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """One profile with every model's metrics."""
    models: dict[tuple[str, str], _Model] = {}
    warnings: list[str] = []
    counted = budget(str(path), NAME)  # refused at the cap, while reading (issue 31)
    with open_text(path, format=NAME) as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        missing = [column for column in _REQUIRED if column not in header]
        if missing:
            raise ParseError(
                f"the header lacks the {', '.join(missing)} column(s) these benchmarks write "
                "(dev,name,batch_size,...)",
                source=str(path),
                line=1,
                format=NAME,
            )
        for row in reader:
            _read_row(row, models, path, reader.line_num, warnings, counted)
    if not models:
        raise ParseError(
            "the CSV has its header but no model rows: the benchmark wrote none (did it fail "
            "before the first model?)",
            source=str(path),
            format=NAME,
        )
    profile = Profile(label="dynamo", format=NAME, source=str(path), warnings=warnings)
    for model in models.values():
        profile.metrics.extend(_metrics(model))
    not_run = [m.name for m in models.values() if m.not_run]
    if not_run:
        profile.warnings.append(
            f"{len(not_run)} model(s) have a latency, speedup or compression of 0 (the model "
            f"did not run) in some row, left out: first {not_run[0]!r}"
        )
    return [profile]


def _read_row(
    row: dict[str | Any, Any],
    models: dict[tuple[str, str], _Model],
    path: Path,
    line: int,
    warnings: list[str],
    counted: Budget,
) -> None:
    if None in row:  # more cells than the header has columns
        raise ParseError(
            f"a row with more cells than the header's {len(row) - 1} columns",
            source=str(path),
            line=line,
            format=NAME,
        )
    name, dev = (row.get("name") or "").strip(), (row.get("dev") or "").strip()
    if not name:
        warnings.append(f"line {line}: a row without a model name was left out")
        return
    model = models.get((dev, name))
    if model is None:
        counted.metric()  # a model row has a metric at least (charged before it is kept)
        device = Device.GPU if dev.startswith("cuda") else Device.CPU
        model = models[(dev, name)] = _Model(name, device)
    for column, cell in row.items():
        if column in ("dev", "name") or cell is None:
            continue
        text = cell.strip()
        value = _number(text)
        if column in _ATTRS or value is None:
            if text:
                model.attrs.setdefault(column, []).append(text)
            continue
        if column in _ZERO_IS_NOT_RUN and value <= 0:
            model.not_run += 1
            continue
        values = model.values.get(column)
        if values is None:
            if model.values:
                counted.metric()  # the model's second metric on (its first: charged above)
            values = model.values[column] = []
        elif column in _TIMES:
            counted.sample()  # a time's further rows: its samples_ns
        values.append(value)


def _metrics(model: _Model) -> list[Metric]:
    attrs = {k: v[0] if len(set(v)) == 1 else v for k, v in model.attrs.items()}
    metrics: list[Metric] = []
    latency = model.values.pop(_LATENCY, None)
    if latency:
        times = [value * _NS_PER_MS for value in latency]
        metrics.append(
            Metric(
                kind=MetricKind.BENCH,
                name=model.name,
                device=model.device,
                calls=len(times),
                avg_ns=sum(times) / len(times),
                samples_ns=times if len(times) > 1 else None,
                attrs=attrs,
            )
        )
    for column, values in model.values.items():
        unit, factor, better = _MEASURES.get(column, ("count", 1.0, Better.LOWER))
        scaled = [value * factor for value in values]
        mean = sum(scaled) / len(scaled)
        samples = scaled if len(scaled) > 1 else None
        time = unit == TIME_UNIT  # a time keeps its numbers in the *_ns fields
        metrics.append(
            Metric(
                kind=MetricKind.MEASURE,
                name=column,
                device=model.device,
                scope=model.name,
                unit=unit,
                better=better,
                calls=len(scaled),
                attrs=dict(attrs),
                avg_ns=mean if time else None,
                samples_ns=samples if time else None,
                value=None if time else mean,
                samples=None if time else samples,
            )
        )
    return metrics


def _number(text: str) -> float | None:
    """A plain finite number (these files hold no grouping), else ``None``."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
