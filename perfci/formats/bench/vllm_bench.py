"""vLLM's and SGLang's LLM-inference benchmark results: serving, latency and throughput.

What the tools write (key lists from their source; ``[...]`` only in some versions or modes):

* vLLM ``benchmarks/benchmark_serving.py --save-result`` and ``vllm bench serve --save-result``
  (``vllm/benchmarks/serve.py::main_async``): one JSON object on one line, the setup ``date,
  [endpoint_type], backend, [label], model_id, tokenizer_id, [best_of, use_beam_search],
  num_prompts``, the ``--metadata KEY=VALUE`` pairs, ``request_rate`` (a number or ``"inf"``),
  ``burstiness, max_concurrency, [ramp_up_strategy, ramp_up_start_rps, ramp_up_end_rps]``, then
  the result ``duration`` (s), ``completed, [failed], total_input_tokens, total_output_tokens,
  request_throughput, request_goodput`` (``"request_goodput:"`` in older releases; null
  without ``--goodput``), ``output_throughput, total_token_throughput``, the per-request
  ``input_lens, output_lens, ttfts`` (s), ``itls`` (s, a list per request), ``generated_texts,
  errors`` (newer releases: only with ``--save-detailed``, which older ones ignored),
  ``[max_output_tokens_per_s, max_concurrent_requests]``, and for each of ``ttft, tpot, itl,
  e2el`` in ``--percentile-metrics``: ``mean_X_ms, median_X_ms, std_X_ms`` and ``pN_X_ms`` per
  ``--metric-percentiles`` (``p99``, ``p99.9``). ``--append-result`` adds a line per run.
* vLLM ``benchmark_latency.py`` / ``vllm bench latency --output-json``: ``{avg_latency,
  latencies, percentiles: {"10": .., "25", "50", "75", "90", "99"}}``, seconds.
* vLLM ``benchmark_throughput.py`` / ``vllm bench throughput --output-json``: ``{elapsed_time,
  num_requests, total_num_tokens, requests_per_second, tokens_per_second}``.
* SGLang ``python -m sglang.bench_serving --output-file`` (``python/sglang/bench_serving.py``):
  JSONL, a line appended per run: ``[tag], backend, dataset_name, request_rate`` (a number,
  ``Infinity`` or ``"trace"``), ``max_concurrency``, the dataset lengths, ``[server_info]``,
  ``duration, completed, total_input_tokens, ..., request_throughput, input_throughput,
  output_throughput, total_throughput``, ``mean/median/std/p99_e2e_latency_ms`` and the same of
  ``ttft, tpot, itl`` (``p95``, ``max`` of ITL), ``concurrency, accept_length``; with
  ``--output-details`` the per-request arrays as vLLM's. Its first releases wrote medians only.
* SGLang ``bench_offline_throughput --result-filename`` (JSONL): ``backend,
  successful_requests, total_latency, total_input_tokens, total_output_tokens,
  request_throughput, input_throughput, output_throughput, total_throughput``.
* SGLang ``bench_one_batch --result-filename`` (JSONL, a line per batch size and lengths):
  ``run_name, batch_size, input_len, output_len, prefill_latency, prefill_throughput,
  median_decode_latency, median_decode_throughput, total_latency, overall_throughput``.

What becomes which metric (one profile per run, i.e. per object):

* latencies: ``BENCH`` metrics in ns, lower is better: ``ttft``, ``tpot``, ``itl``, ``e2el``
  (SGLang's ``e2e_latency``), the latency benchmark's ``latency``, one batch's ``prefill``,
  ``decode`` and ``total``. The summary's mean is the compared value (its median where the
  source gives no mean), with ``median_ns``, ``std_ns``, ``max_ns`` and the percentiles in
  ``attrs`` (``p99_ns``). Per-request values become ``samples_ns``: the ``ttfts`` of the
  requests that succeeded (their mean is the summary's mean) and the latency benchmark's
  ``latencies``; inter-token latencies stay summarised, being millions. A latency that is 0
  (TTFT and ITL of a backend that does not stream) is left out, with a warning.
* throughputs: ``MEASURE`` metrics named by their key, higher is better, in ``requests/s``
  (``request_throughput``, ``request_goodput``, ``requests_per_second``) or ``tokens/s``
  (``output_throughput``, ``total_token_throughput``, ``input_throughput``,
  ``total_throughput``, ``max_output_tokens_per_s``, ``tokens_per_second`` and one batch's);
  SGLang's speculative ``accept_length`` in ``tokens``, higher is better.
* everything else that is a scalar (configuration, ``--metadata`` pairs, duration, counts) is
  metadata; the per-request arrays and generated texts are dropped. Failed requests (``failed``,
  non-empty ``errors``, or ``num_prompts`` beyond ``completed``) give a warning with the first
  error; a run whose every request failed keeps no metric.

A serving run is labelled by its traffic, ``request_rate=inf, max_concurrency=64`` (after
vLLM's ``label`` / SGLang's ``tag``), so that each configuration of a sweep keeps its series
across runs; one batch's by its sizes. A label that repeats in a file gets `` #2``...
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from perfci.core.errors import ParseError
from perfci.core.model import Better, Metric, MetricKind, Profile
from perfci.formats.bench._detectors import VLLM_BENCH
from perfci.formats.bench._detectors import is_number as _is_number
from perfci.formats.bench._detectors import vllm_kind as _kind
from perfci.formats.bench._json_doc import ShapeError, describe, number, scaled
from perfci.formats.bench._vllm_json import documents
from perfci.formats.bench._vllm_latency import (
    NS_PER_MS,
    NS_PER_S,
    STAT_KEY,
    Outcome,
    latency_metric,
    latency_stats,
    request_seconds,
    seconds_in_ns,
)

NAME = VLLM_BENCH.name
DESCRIPTION = VLLM_BENCH.description
sniff = VLLM_BENCH.sniff

_REQUESTS, _TOKENS = "requests/s", "tokens/s"
#: Throughput keys (any version, any tool) by unit, in the order their metrics are made.
_RATE_KEYS = (
    (
        _REQUESTS,
        ("request_throughput", "request_goodput", "request_goodput:", "requests_per_second"),
    ),
    (
        _TOKENS,
        (
            "output_throughput",
            "total_token_throughput",
            "input_throughput",
            "total_throughput",
            "max_output_tokens_per_s",
            "tokens_per_second",
            "prefill_throughput",
            "median_decode_throughput",
            "overall_throughput",
        ),
    ),
    ("tokens", ("accept_length",)),
)
#: Each key's metric name and unit: the key is the name, less the ":" of a tool's typo.
_RATES: dict[str, tuple[str, str]] = {
    key: (key.rstrip(":"), unit) for unit, keys in _RATE_KEYS for key in keys
}
_LATENCIES = ("ttft", "tpot", "itl", "e2el")
#: bench_one_batch's times in seconds: metric name, key, whether the value is a median.
_ONE_BATCH_TIMES = (
    ("prefill", "prefill_latency", False),
    ("decode", "median_decode_latency", True),
    ("total", "total_latency", False),
)
#: A few scalars of SGLang's ``server_info`` (the server's arguments) worth keeping.
_SERVER_INFO = ("version", "model_path", "tp_size", "dp_size", "pp_size", "ep_size", "dtype")


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """One profile per benchmark run (JSON object) in ``path``."""
    profiles: list[Profile] = []
    seen: dict[str, int] = {}
    for line, doc in documents(path, format=NAME):
        try:
            profile = _profile(doc, str(path))
        except ShapeError as exc:
            raise ParseError(str(exc), source=str(path), line=line, format=NAME) from exc
        _make_unique(profile, seen)
        profiles.append(profile)
    if not profiles:
        raise ParseError("the file holds no benchmark result", source=str(path), format=NAME)
    return profiles


def _profile(doc: Any, source: str) -> Profile:
    if not isinstance(doc, dict):
        raise ShapeError(f"expected a JSON object (one benchmark run), got {describe(doc)}")
    kind = _kind(doc)
    if kind is None:
        keys = ", ".join(list(doc)[:8]) or "none"
        raise ShapeError(
            f"not a vLLM or SGLang benchmark result (its first keys: {keys}); serving results "
            "need backend, completed and request_throughput or output_throughput"
        )
    return _READERS[kind](doc, source)


def _make_unique(profile: Profile, seen: dict[str, int]) -> None:
    """Number a label the file holds again: ``request_rate=4 #2``."""
    count = seen[profile.label] = seen.get(profile.label, 0) + 1
    if count > 1:
        profile.label = f"{profile.label} #{count}"
        profile.warnings.append(
            f"the file holds this configuration {count} times (results appended to a file "
            f"that was not emptied?); this run is labelled {profile.label!r}"
        )


# --- serving (vLLM bench serve, SGLang bench_serving) -------------------------------------


def _serving(doc: dict[str, Any], source: str) -> Profile:
    profile = Profile(label=_serving_label(doc), format=NAME, source=source)
    profile.metadata = _metadata(doc)
    completed = int(number(doc["completed"]) or 0)
    outcome = Outcome(doc, completed)
    if outcome.failed:
        profile.warnings.append(outcome.warning())
    if completed <= 0:
        profile.warnings.append("every request failed: the run has no latency or throughput")
        return profile
    stats = latency_stats(doc)
    ttfts = request_seconds(doc, "ttfts", outcome, profile.warnings)
    zero: list[str] = []
    for name in _LATENCIES:
        samples = ttfts if name == "ttft" else None
        metric = latency_metric(name, stats.get(name, {}), NS_PER_MS, samples, profile.warnings)
        if metric is not None and name in ("ttft", "e2el"):
            metric.calls = completed  # one per completed request
        if metric is not None and metric.avg_ns == 0:
            zero.append(name)
        elif metric is not None:
            profile.metrics.append(metric)
    if zero:
        profile.warnings.append(
            f"{', '.join(zero)} 0 for every request (a backend that does not stream gives no "
            "first-token or inter-token time): left out"
        )
    profile.metrics.extend(_rates(doc, profile.warnings))
    return profile


def _serving_label(doc: Mapping[str, Any]) -> str:
    """``request_rate=inf, max_concurrency=64``, after vLLM's label or SGLang's tag."""
    traffic = f"request_rate={_rate_text(doc.get('request_rate'))}"
    if isinstance(doc.get("ramp_up_strategy"), str):
        start, end = doc.get("ramp_up_start_rps"), doc.get("ramp_up_end_rps")
        traffic = f"ramp_up={doc['ramp_up_strategy']}:{start}-{end}"
    parts = [traffic] if "request_rate" in doc or "ramp_up_strategy" in doc else []
    if _is_number(doc.get("max_concurrency")):
        parts.append(f"max_concurrency={doc['max_concurrency']}")
    name = doc.get("label") or doc.get("tag")
    prefix = f"{name.strip()} " if isinstance(name, str) and name.strip() else ""
    return prefix + (", ".join(parts) or "serving")


def _rate_text(value: Any) -> str:
    if isinstance(value, str) and value.strip():
        return value.strip()
    if _is_number(value):
        return "inf" if value == float("inf") else f"{value:g}"
    return "?"


# --- the other benchmarks -----------------------------------------------------------------


def _latency_run(doc: dict[str, Any], source: str) -> Profile:
    """vLLM bench latency: one batch's end-to-end time, ``num_iters`` times (seconds)."""
    profile = Profile(label="latency", format=NAME, source=source, metadata=_metadata(doc))
    latencies = doc["latencies"]
    samples = seconds_in_ns(latencies, "latencies", profile.warnings) if latencies else None
    stats: dict[str, Any] = {"mean": doc["avg_latency"]}
    percentiles = doc.get("percentiles")
    if isinstance(percentiles, dict):
        stats |= {f"p{key}": value for key, value in percentiles.items()}
        stats["median"] = percentiles.get("50")
    metric = latency_metric("latency", stats, NS_PER_S, samples, profile.warnings)
    if metric is not None:
        profile.metrics.append(metric)
    return profile


def _one_batch(doc: dict[str, Any], source: str) -> Profile:
    """SGLang bench_one_batch: one (batch size, input, output length)'s prefill and decode."""
    sizes = ", ".join(f"{key}={doc.get(key)}" for key in ("batch_size", "input_len", "output_len"))
    run = doc["run_name"].strip()
    label = f"{run} {sizes}" if run and run != "default" else sizes
    profile = Profile(label=label, format=NAME, source=source)
    profile.metadata = _metadata(doc, also=frozenset(key for _, key, _ in _ONE_BATCH_TIMES))
    for name, key, is_median in _ONE_BATCH_TIMES:
        seconds = number(doc.get(key))
        if seconds is None or seconds < 0:
            continue
        ns = scaled(seconds, NS_PER_S)
        profile.metrics.append(
            Metric(kind=MetricKind.BENCH, name=name, avg_ns=ns, median_ns=ns if is_median else None)
        )
    profile.metrics.extend(_rates(doc, profile.warnings))
    return profile


def _rates_only(label: str) -> Callable[[dict[str, Any], str], Profile]:
    """A reader of a result of throughputs only (vLLM bench throughput, SGLang offline)."""

    def read(doc: dict[str, Any], source: str) -> Profile:
        profile = Profile(label=label, format=NAME, source=source, metadata=_metadata(doc))
        profile.metrics.extend(_rates(doc, profile.warnings))
        return profile

    return read


def _rates(doc: Mapping[str, Any], warnings: list[str]) -> list[Metric]:
    """A higher-is-better ``MEASURE`` per throughput key the result holds a number for."""
    metrics: list[Metric] = []
    for key, (name, unit) in _RATES.items():
        value = number(doc.get(key))
        if value is None:
            continue
        if value < 0:
            warnings.append(f"{key} is {value!r}: left out")
            continue
        metrics.append(
            Metric(kind=MetricKind.MEASURE, name=name, unit=unit, better=Better.HIGHER, value=value)
        )
    return metrics


def _metadata(doc: Mapping[str, Any], also: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The result's scalars that are no metric (``also`` names more that are): configuration,
    ``--metadata`` pairs, duration, counts."""
    meta: dict[str, Any] = {}
    for key, value in doc.items():
        if key in _RATES or key in also or key == "avg_latency" or STAT_KEY.match(key):
            continue
        scalar = _scalar(value)
        if scalar is not None:
            meta[key] = scalar
    info = doc.get("server_info")
    if isinstance(info, dict):
        for key in _SERVER_INFO:
            scalar = _scalar(info.get(key))
            if scalar is not None:
                meta[f"server_info.{key}"] = scalar
    return meta


def _scalar(value: Any) -> Any:
    """A metadata value: text, a boolean, a finite number or an infinity as text; else None."""
    if isinstance(value, str | int):  # booleans too
        return value
    if not isinstance(value, float) or value != value:  # not a number, or NaN
        return None
    if number(value) is None:  # an infinity
        return "inf" if value > 0 else "-inf"
    return value


_READERS: dict[str, Callable[[dict[str, Any], str], Profile]] = {
    "serving": _serving,
    "latency": _latency_run,
    "throughput": _rates_only("throughput"),
    "offline": _rates_only("offline_throughput"),
    "one_batch": _one_batch,
}
