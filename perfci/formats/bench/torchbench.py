"""TorchBench userbenchmark results: ``.userbenchmark/<name>/metrics-<YYYYmmddHHMMSS>.json``.

``{"name": <userbenchmark>, "environ": {"pytorch_git_version", "pytorch_version", "device"?},
"metrics": {<key>: <number or text>}}`` (``userbenchmark/utils.py::get_output_json``). The
metrics are a flat mapping whose keys carry the meaning, in the two styles TorchBench writes:

* ``test_bench`` / ``group_bench``: ``model=resnet50, test=eval, device=cuda, bs=None,
  extra_args=[], metric=latencies``;
* ``torch-nightly``: ``test_eval[resnet50-cuda-eager]_latency`` (``_cmem``, ``_gmem``), and a
  score such as ``v3_score``; and, as the field guide gives a flat key,
  ``<model>-<test>-<device>_latency`` (any configuration before a known measure's suffix).

What becomes which metric:

* a latency (``metric=latencies``, ``_latency``; the median of TorchBench's timed iterations,
  in milliseconds) is a ``BENCH`` metric named by the configuration (``model=…, extra_args=[]``
  or ``test_eval[resnet50-cuda-eager]``), on the GPU when the configuration names CUDA;
* peak memory (``cpu_peak_mem``/``_cmem``, ``gpu_peak_mem``/``_gmem``; GiB, as TorchBench's
  model analyzer reports them) is a ``MEASURE`` in bytes scoped by the configuration;
* throughput (``throughputs``) a ``MEASURE`` in 1/s, higher is better; a score, higher is better;
* the ``optim`` userbenchmark's keys (``"resnet18, Adam, cuda, (foreach=True)"``, and
  ``"compile_time, …"`` under ``pt2_``) are the mean time of one ``optimizer.step()`` and the
  compile time, in seconds (``userbenchmark/optim/run.py::get_metrics``, ``Measurement.mean``):
  ``BENCH`` metrics in ns named by the key;
* any other numeric key (other userbenchmarks' own metrics) a ``MEASURE`` named by the key,
  lower is better, with no unit (``count``): TorchBench does not say it.

Values that are not numbers (``"failed"``, ``"not_implemented"``, an error message, an
accuracy ``"pass"``) are left out, counted in one warning. Nested objects are flattened one
level (``key.sub``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfci.core.model import Better, Device, Metric, MetricKind, Profile
from perfci.formats.bench._detectors import TORCHBENCH
from perfci.formats.bench._json_doc import ShapeError, describe, load, number, shape_errors

NAME = TORCHBENCH.name
DESCRIPTION = TORCHBENCH.description
sniff = TORCHBENCH.sniff

_NS_PER_MS = 1e6
_NS_PER_S = 1e9
#: The userbenchmark whose keys are all times in seconds.
_OPTIM = "optim"
_BYTES_PER_GIB = 2**30
#: ``model=…, extra_args=[…], metric=<what>``
_CONFIG_STYLE = re.compile(r"^(?P<config>.+), metric=(?P<what>[^,]+)$")
#: ``test_eval[resnet50-cuda-eager]_<what>``
_NIGHTLY_STYLE = re.compile(r"^(?P<config>test_\w+\[.+\])_(?P<what>[a-z_]+)$")
#: ``<model>-<test>-<device>_<what>`` and the like: a known measure after the last ``_``
#: (the field guide's form of a flat key; only the names below, so ``v3_score`` stays whole).
_SUFFIX_STYLE = re.compile(
    r"^(?P<config>.+?)_(?P<what>latency|latencies|throughput|throughputs|cmem|gmem"
    r"|cpu_peak_mem|gpu_peak_mem)$"
)
_CUDA = re.compile(r"device=cuda\b|-cuda-|\bcuda\b")
_LATENCY = frozenset({"latencies", "latency"})
_MEMORY = {
    "cpu_peak_mem": Device.CPU,
    "cmem": Device.CPU,
    "gpu_peak_mem": Device.GPU,
    "gmem": Device.GPU,
}
_THROUGHPUT = frozenset({"throughputs", "throughput"})


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """One profile holding every numeric metric of the userbenchmark result ``path``."""
    doc = load(path, format=NAME)
    with shape_errors(path, format=NAME):
        if not isinstance(doc, dict) or not isinstance(doc.get("metrics"), dict):
            got = describe(doc.get("metrics")) if isinstance(doc, dict) else describe(doc)
            raise ShapeError(
                "expected a TorchBench result {name, environ, metrics: {key: number}}, "
                f"got metrics as {got}"
            )
        name = doc.get("name")
        label = name.strip() if isinstance(name, str) and name.strip() else "torchbench"
        profile = Profile(label=label, format=NAME, source=str(path))
        environ = doc.get("environ")
        if isinstance(environ, dict):
            profile.metadata.update(
                {str(k): v for k, v in environ.items() if isinstance(v, str | int | float)}
            )
        left_out: list[str] = []
        seen: set[str] = set()
        read = _optim_metric if label == _OPTIM else _metric
        for key, value in _flat(doc["metrics"]):
            metric = read(key, value)
            if metric is None:
                left_out.append(key)
                continue
            if metric.key in seen:
                raise ShapeError(f"metric {key!r} repeats a series an earlier key gave")
            seen.add(metric.key)
            profile.metrics.append(metric)
    if left_out:
        profile.warnings.append(
            f"{len(left_out)} metric(s) hold no number (failed, not implemented, an error or a "
            f"pass/fail) or a negative time, and were left out, first {left_out[0]!r}"
        )
    if not profile.metrics:
        profile.warnings.append("the result holds no numeric metric")
    return [profile]


def _flat(metrics: dict[str, Any]) -> list[tuple[str, Any]]:
    """``(key, value)`` pairs, a nested object's entries as ``key.sub``."""
    pairs: list[tuple[str, Any]] = []
    for key, value in metrics.items():
        if isinstance(value, dict):
            pairs.extend((f"{key}.{sub}", inner) for sub, inner in value.items())
        else:
            pairs.append((str(key), value))
    return pairs


def _metric(key: str, raw: Any) -> Metric | None:
    value = number(raw)
    if value is None or not key.strip():
        return None
    match = _CONFIG_STYLE.match(key) or _NIGHTLY_STYLE.match(key) or _SUFFIX_STYLE.match(key)
    config, what = (match["config"], match["what"]) if match else (key, "")
    device = Device.GPU if _CUDA.search(config) else Device.CPU
    if what in _LATENCY and match is not None:
        if value < 0:
            raise ShapeError(f"metric {key!r}: a latency cannot be negative ({value!r})")
        return Metric(kind=MetricKind.BENCH, name=config, device=device, avg_ns=value * _NS_PER_MS)
    if what in _MEMORY:
        return Metric(
            kind=MetricKind.MEASURE,
            name=what,
            device=_MEMORY[what],
            scope=config,
            unit="bytes",
            value=value * _BYTES_PER_GIB,
        )
    # A key without a configuration is its own measure, unscoped.
    name, scope = (what, config) if match is not None else (key, None)
    if name in _THROUGHPUT:
        return _measure(name, scope, device, value, unit="1/s", better=Better.HIGHER)
    higher = name.endswith("score")
    return _measure(name, scope, device, value, better=Better.HIGHER if higher else None)


def _optim_metric(key: str, raw: Any) -> Metric | None:
    """A key of the ``optim`` userbenchmark: a time in seconds (see the module docstring)."""
    value = number(raw)
    if value is None or not key.strip():
        return None
    if value < 0:
        # compile_time is the first step less the mean of three later ones: noise can make
        # it negative when there is nothing to compile; not a time to store.
        return None
    device = Device.GPU if _CUDA.search(key) else Device.CPU
    return Metric(kind=MetricKind.BENCH, name=key, device=device, avg_ns=value * _NS_PER_S)


def _measure(
    name: str,
    scope: str | None,
    device: Device,
    value: float,
    *,
    unit: str = "count",
    better: Better | None = None,
) -> Metric:
    return Metric(
        kind=MetricKind.MEASURE,
        name=name,
        device=device,
        scope=scope,
        unit=unit,
        better=better or Better.LOWER,
        value=value,
    )
