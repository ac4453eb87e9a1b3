"""The benchmark harnesses' formats: names and sniffs, without their readers (see
``formats.protocol``). What a sniff and its reader share (the shapes of a result) is here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perfci.core.compat import compile_linear
from perfci.formats.bench._json_doc import first_element, leading_items, number
from perfci.formats.protocol import Head, detector

_BOM = "\ufeff"


# --- github-action-benchmark ---------------------------------------------------------------------

#: What the action writes before the JSON text of ``data.js``.
SCRIPT_PREFIX = "window.BENCHMARK_DATA"


def _action_benchmark(head: Head) -> bool:
    """A JSON array whose first element has a string ``name`` and ``unit`` and a number
    ``value``."""
    found, first = first_element(head.text)
    return (
        found
        and isinstance(first, dict)
        and isinstance(first.get("name"), str)
        and isinstance(first.get("unit"), str)
        and number(first.get("value")) is not None
    )


def _action_benchmark_history(head: Head) -> bool:
    """``window.BENCHMARK_DATA = {`` at the start, or a JSON object whose first keys are the
    action's ``lastUpdate`` / ``repoUrl`` / ``entries``."""
    text = head.text.removeprefix(_BOM).lstrip()
    if text.startswith(SCRIPT_PREFIX):
        return text[len(SCRIPT_PREFIX) :].lstrip().startswith("=")
    keys = {key for key, _ in leading_items(text, limit=3)}
    return "entries" in keys and bool(keys & {"lastUpdate", "repoUrl"})


# --- Bencher Metric Format -----------------------------------------------------------------------

_BMF_VALUE_KEYS = frozenset({"value", "lower_value", "upper_value"})
#: Entries the sniff checks: enough to refuse a look-alike, few enough for a cut head.
_BMF_SNIFF_ENTRIES = 8
#: Top-level keys of the other JSON formats (pytest-benchmark, Google Benchmark,
#: optimum-benchmark, Chrome trace, perfci's own): a file holding one is not BMF.
_BMF_FOREIGN_KEYS = frozenset(
    {
        "benchmarks",
        "context",
        "machine_info",
        "config",
        "report",
        "traceEvents",
        "perfci_version",
        "profiles",
    }
)


def _bmf(head: Head) -> bool:
    """An object whose first entries are all objects of ``{value: number, ...}`` measures.

    BMF has no marker key, so every checked measure must hold a numeric ``value`` and nothing
    beyond ``lower_value`` / ``upper_value``.
    """
    items = leading_items(head.text, limit=_BMF_SNIFF_ENTRIES)
    return bool(items) and all(_looks_like_bmf_benchmark(name, value) for name, value in items)


def _looks_like_bmf_benchmark(name: str, measures: Any) -> bool:
    if name in _BMF_FOREIGN_KEYS or not isinstance(measures, dict) or not measures:
        return False
    return all(
        isinstance(fields, dict)
        and fields.keys() <= _BMF_VALUE_KEYS
        and number(fields.get("value")) is not None
        for fields in measures.values()
    )


# --- PyTorch's dynamo benchmarks CSV ------------------------------------------------------------

_DYNAMO_CSV_SNIFF = compile_linear(r"^\ufeff?dev,name,batch_size,[a-z_]+")


def _dynamo_csv(head: Head) -> bool:
    """The header these benchmarks write: ``dev,name,batch_size,<a result column>``."""
    return _DYNAMO_CSV_SNIFF.match(head.text) is not None


# --- Google Benchmark, pytest-benchmark ----------------------------------------------------------


def _google_benchmark(head: Head) -> bool:
    """A JSON object with ``"context"`` and ``"benchmarks"`` whose runs carry a ``"time_unit"``
    and a ``"real_time"`` (or, for a complexity row, a ``"cpu_coefficient"``)."""
    return _object_holding(
        head, ("context", "benchmarks", "time_unit"), ("real_time", "cpu_coefficient")
    )


def _pytest_benchmark(head: Head) -> bool:
    """A JSON object with ``"benchmarks"`` whose entries hold ``"stats"`` with ``"rounds"``,
    and pytest-benchmark's ``"machine_info"``, ``"commit_info"`` or ``"fullname"``."""
    return _object_holding(
        head, ("benchmarks", "stats", "rounds"), ("machine_info", "commit_info", "fullname")
    )


def _object_holding(head: Head, every: tuple[str, ...], some: tuple[str, ...]) -> bool:
    """A JSON object whose head holds every key of ``every`` and one at least of ``some``
    (anywhere: a run's keys lie past the first ones)."""
    text = head.text.lstrip("\ufeff \t\r\n")
    return (
        text.startswith("{")
        and all(f'"{key}"' in text for key in every)
        and any(f'"{key}"' in text for key in some)
    )


# --- Hugging Face Trainer -----------------------------------------------------------------------

HF_RUNTIME = compile_linear(r"^(?P<split>[a-z][a-z0-9]*)_runtime$")
HF_RATE = compile_linear(r"^(?P<split>[a-z][a-z0-9]*)_(?P<what>samples|steps|tokens)_per_second$")
_HF_STATE_KEYS = frozenset({"log_history", "is_world_process_zero", "best_metric", "max_steps"})
_HF_SNIFF_ITEMS = 64


def _hf_trainer(head: Head) -> bool:
    """A ``trainer_state.json`` (``global_step`` beside its other keys), or a flat object of
    numbers with a ``<split>_runtime`` or ``<split>_*_per_second`` key among its first ones."""
    items = leading_items(head.text, limit=_HF_SNIFF_ITEMS)
    keys = {key for key, _ in items}
    if "global_step" in keys and keys & _HF_STATE_KEYS:
        return True
    return (
        bool(items)
        and all(number(value) is not None for _, value in items)
        and any(HF_RUNTIME.match(key) or HF_RATE.match(key) for key in keys)
    )


# --- optimum-benchmark ---------------------------------------------------------------------------

OPTIMUM_SECTIONS = ("memory", "latency", "throughput", "energy", "efficiency")
_OPTIMUM_SNIFF_ENTRIES = 4
#: The start of a target whose latency list runs past the sniff head (dataclass order: the
#: ``unit`` field comes first in every section).
_TARGET_START = (
    r'\{\s*"[^"\\]+"\s*:\s*\{\s*"(?:memory|latency|throughput|energy|efficiency)"\s*:'
    r'\s*(?:null|\{\s*"unit"\s*:)'
)
_CUT_REPORT = compile_linear(r"^\s*" + _TARGET_START)
_CUT_WRAPPED_REPORT = compile_linear(r'"report"\s*:\s*' + _TARGET_START)


def _optimum_benchmark(head: Head) -> bool:
    """``{config, report}`` or a bare report: targets holding latency/memory/... sections."""
    items = leading_items(head.text, limit=_OPTIMUM_SNIFF_ENTRIES)
    found = dict(items)
    if "report" in found or "config" in found:
        if isinstance(found.get("report"), dict):
            return _looks_like_report(found["report"])
        # The report may lie past the cut of a large head; check how it starts.
        return isinstance(found.get("config"), dict) and bool(_CUT_WRAPPED_REPORT.search(head.text))
    if items:
        return _looks_like_report(found)
    return bool(_CUT_REPORT.match(head.text.lstrip("\ufeff")))


def _looks_like_report(report: Mapping[str, Any]) -> bool:
    targets = list(report.values())[:_OPTIMUM_SNIFF_ENTRIES]
    return (
        bool(targets)
        and all(target is None or isinstance(target, dict) for target in targets)
        and any(_looks_like_target(target) for target in targets)
    )


def _looks_like_target(target: Any) -> bool:
    """A target's sections: each null or an object with a ``unit``, one at least not null."""
    if not isinstance(target, dict) or not target.keys() & set(OPTIMUM_SECTIONS):
        return False
    sections = [target[key] for key in OPTIMUM_SECTIONS if key in target]
    return all(s is None or (isinstance(s, dict) and "unit" in s) for s in sections) and any(
        s is not None for s in sections
    )


# --- TorchBench ---------------------------------------------------------------------------------

_TORCHBENCH_TOP_KEYS = frozenset({"name", "environ", "metrics", "args"})


def _torchbench(head: Head) -> bool:
    """An object starting ``{"name": "<text>", "environ": {…}`` with only TorchBench's keys."""
    items = dict(leading_items(head.text, limit=len(_TORCHBENCH_TOP_KEYS)))
    return (
        isinstance(items.get("name"), str)
        and isinstance(items.get("environ"), dict)
        and items.keys() <= _TORCHBENCH_TOP_KEYS
    )


# --- vLLM / SGLang ------------------------------------------------------------------------------

#: Leading keys the sniff reads: vLLM's setup keys and ``--metadata`` pairs come before its
#: result keys, and before the per-request arrays that can run past the head.
_VLLM_SNIFF_ITEMS = 64


def is_number(value: object) -> bool:
    """A JSON number (``True`` and ``False`` are not)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def vllm_kind(doc: Mapping[str, Any]) -> str | None:
    """Which benchmark wrote ``doc`` (a whole result or its leading items), None if none."""
    numbers = {key for key, value in doc.items() if is_number(value)}
    if "avg_latency" in numbers and isinstance(doc.get("latencies"), list):
        return "latency"
    if {"elapsed_time", "requests_per_second", "tokens_per_second"} <= numbers:
        return "throughput"
    if isinstance(doc.get("run_name"), str) and {"batch_size", "prefill_latency"} <= numbers:
        return "one_batch"
    if not isinstance(doc.get("backend"), str):
        return None
    if {"successful_requests", "total_latency"} <= numbers:
        return "offline"
    if "completed" in numbers and numbers & {"request_throughput", "output_throughput"}:
        return "serving"
    return None


def _vllm_bench(head: Head) -> bool:
    """A JSON object whose leading keys are those of one of the benchmarks vllm_bench reads."""
    return vllm_kind(dict(leading_items(head.text, limit=_VLLM_SNIFF_ITEMS))) is not None


# --- the detectors -------------------------------------------------------------------------------

_NVBENCH_SNIFF_KEYS = 3
_NVBENCH_RESULTS = "# Benchmark Results"


def _nvbench_json(head: Head) -> bool:
    """A JSON object whose first keys are NVBench's (``meta``, ``devices``, ``benchmarks``) and
    whose head holds a state's ``summaries`` with an ``nv/`` tag."""
    text = head.text
    keys = {key for key, _ in leading_items(text, limit=_NVBENCH_SNIFF_KEYS)}
    starts = bool(keys & {"meta", "devices"}) or (
        text.lstrip("\ufeff \t\r\n").startswith('{\n  "benchmarks"')
    )
    return starts and '"summaries"' in text and '"nv/' in text


def _nvbench_md(head: Head) -> bool:
    """NVBench's results heading with a table of its columns, or its devices and log."""
    text = head.text
    if _NVBENCH_RESULTS in text and ("| GPU Time |" in text or "| Samples |" in text):
        return True
    return "# Devices" in text and "Pass: Cold:" in text


ACTION_BENCHMARK = detector(
    _action_benchmark, "github-action-benchmark custom JSON ([{name, unit, value, range, extra}])"
)
ACTION_BENCHMARK_HISTORY = detector(
    _action_benchmark_history,
    "github-action-benchmark history (gh-pages data.js: window.BENCHMARK_DATA = {entries}); "
    "one profile per commit and suite",
)
BMF = detector(
    _bmf, "Bencher Metric Format JSON ({benchmark: {measure: {value, lower_value, ...}}})"
)
DYNAMO_CSV = detector(
    _dynamo_csv,
    "PyTorch compiler benchmark CSV (benchmarks/dynamo: dev,name,batch_size,speedup,"
    "abs_latency...)",
)
GOOGLE_BENCHMARK = detector(
    _google_benchmark, "Google Benchmark JSON (--benchmark_format=json, --benchmark_out)"
)
HF_TRAINER = detector(
    _hf_trainer,
    "Hugging Face Trainer results (all_results.json, <split>_results.json, "
    "trainer_state.json): runtimes, samples/steps/tokens per second, peak memory",
)
OPTIMUM_BENCHMARK = detector(
    _optimum_benchmark, "optimum-benchmark report JSON (benchmark.json or benchmark_report.json)"
)
PYTEST_BENCHMARK = detector(
    _pytest_benchmark, "pytest-benchmark JSON (--benchmark-json, .benchmarks/ saved runs)"
)
TORCHBENCH = detector(
    _torchbench, "TorchBench userbenchmark metrics JSON (metrics-*.json: {name, environ, metrics})"
)
VLLM_BENCH = detector(
    _vllm_bench,
    "vLLM / SGLang bench serve, latency and throughput results (JSON, or JSONL of runs)",
)
NVBENCH_JSON = detector(
    _nvbench_json,
    "NVBench JSON (--json / --jsonbin): per state GPU time, noise, batch time, bandwidth",
)
NVBENCH_MD = detector(
    _nvbench_md, "NVBench markdown / console output (# Benchmark Results tables of GPU Time, Noise)"
)
