"""Hugging Face ``Trainer`` results: ``all_results.json`` / ``<split>_results.json`` and
``trainer_state.json``.

``Trainer.save_metrics(split, metrics)`` writes ``<split>_results.json`` and merges it into
``all_results.json`` (``json.dump(..., indent=4, sort_keys=True)``), a flat object of numbers
(``transformers/trainer_pt_utils.py``). Its speed keys come from ``speed_metrics``
(``trainer_utils.py``):

* ``<split>_runtime``: the phase's wall time in seconds (``train``, ``eval``, ``test``,
  ``predict``; rounded to 0.1 ms);
* ``<split>_samples_per_second``, ``<split>_steps_per_second``, ``<split>_tokens_per_second``;

and, with ``skip_memory_metrics=False`` (``TrainerMemoryTracker``),
``<stage>_mem_cpu_peaked_delta`` / ``<stage>_mem_gpu_peaked_delta`` (bytes above the stage's
start), ``..._alloc_delta`` (which can be negative) and ``before_init_mem_cpu`` /
``before_init_mem_gpu``. Everything else
(``train_loss``, ``eval_accuracy``, ``epoch``, ``total_flos``) is the model's, not the
machine's.

``trainer_state.json`` (``TrainerState.save_to_json``: ``indent=2, sort_keys=True``) holds the
same numbers in ``log_history``: one entry per logging step (loss, learning rate), one per
evaluation (``eval_runtime``...), and a last one for the whole training (``train_runtime``...).

What becomes which metric:

* ``<split>_runtime`` → a ``measure`` named so, a time in ns; in a ``trainer_state.json`` each
  evaluation's time is a sample of ``eval_runtime``;
* ``<split>_{samples,steps,tokens}_per_second`` → a ``measure`` in ``samples/s``, ``steps/s``,
  ``tokens/s``, higher is better (each evaluation a sample, as above);
* the peak memory deltas and the ``before_init`` sizes → a ``measure`` in bytes, lower is
  better; an ``alloc_delta`` (negative when a stage frees more than it takes) goes to metadata
  with the model's numbers (``metadata["results"]``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfci.core.model import Better, Device, Metric, MetricKind, Profile
from perfci.core.units import NS_PER_UNIT
from perfci.formats.bench._detectors import HF_RATE as _RATE
from perfci.formats.bench._detectors import HF_RUNTIME as _RUNTIME
from perfci.formats.bench._detectors import HF_TRAINER
from perfci.formats.bench._json_doc import ShapeError, describe, load, number, scaled, shape_errors

NAME = HF_TRAINER.name
DESCRIPTION = HF_TRAINER.description
sniff = HF_TRAINER.sniff

_LABEL = "trainer"
_PEAK = re.compile(r"^(?:[a-z][a-z0-9]*_mem_(?:cpu|gpu)_peaked_delta|before_init_mem_(?:cpu|gpu))$")


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """One profile of the results or the state file ``path``."""
    doc = load(path, format=NAME)
    profile = Profile(label=_LABEL, format=NAME, source=str(path))
    with shape_errors(path, format=NAME):
        if not isinstance(doc, dict):
            raise ShapeError(f"expected a JSON object of Trainer metrics, got {describe(doc)}")
        if isinstance(doc.get("log_history"), list):
            entries = _history_entries(doc["log_history"])
            profile.metadata.update(_state_metadata(doc))
        else:
            entries = [doc]
        _read(entries, profile)
    if not profile.metrics:
        profile.warnings.append(
            "no runtime, speed or memory key (<split>_runtime, <split>_samples_per_second, "
            "<stage>_mem_gpu_peaked_delta): nothing to compare"
        )
    return [profile]


def _history_entries(history: list[Any]) -> list[dict[str, Any]]:
    entries = []
    for index, entry in enumerate(history):
        if not isinstance(entry, dict):
            raise ShapeError(f"log_history[{index}]: expected an object, got {describe(entry)}")
        entries.append(entry)
    return entries


def _state_metadata(doc: dict[str, Any]) -> dict[str, Any]:
    keys = ("global_step", "max_steps", "epoch", "train_batch_size", "total_flos")
    return {key: doc[key] for key in keys if number(doc.get(key)) is not None}


def _read(entries: list[dict[str, Any]], profile: Profile) -> None:
    """Every entry's speed keys, a sample each; the other numbers of the last entry in
    ``metadata["results"]``."""
    samples: dict[str, list[float]] = {}
    results: dict[str, Any] = {}
    for entry in entries:
        for key, raw in entry.items():
            value = number(raw)
            if value is None:
                continue
            if _RUNTIME.match(key) or _RATE.match(key) or _PEAK.match(key):
                if value < 0:
                    raise ShapeError(f"{key!r} cannot be negative ({raw!r})")
                samples.setdefault(key, []).append(value)
            else:
                results[key] = raw  # the last value: loss, accuracy, epoch, step, FLOPs
    for key, values in samples.items():
        profile.metrics.append(_metric(key, values))
    if results:
        profile.metadata["results"] = results


def _metric(key: str, values: list[float]) -> Metric:
    if _RUNTIME.match(key):
        times = [scaled(value, NS_PER_UNIT["s"]) for value in values]
        return Metric(
            kind=MetricKind.MEASURE,
            name=key,
            device=Device.CPU,
            calls=len(times),
            total_ns=sum(times),
            avg_ns=sum(times) / len(times),
            samples_ns=times if len(times) > 1 else None,
            better=Better.LOWER,
        )
    rate = _RATE.match(key)
    if rate:
        unit, better = f"{rate['what']}/s", Better.HIGHER
    else:
        unit, better = "bytes", Better.LOWER
    device = Device.GPU if "_gpu" in key else Device.CPU
    return Metric(
        kind=MetricKind.MEASURE,
        name=key,
        device=device,
        unit=unit,
        better=better,
        value=sum(values) / len(values),
        samples=values if len(values) > 1 else None,
    )
