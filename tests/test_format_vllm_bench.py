"""vLLM's and SGLang's benchmark results, written here the way their source writes them (no
public result file is in ../shared/corpus): the dicts are built as the scripts build them, from
per-request outputs, and dumped with the same ``json`` calls.

Sources: vLLM ``vllm/benchmarks/serve.py`` (``calculate_metrics``, ``benchmark``,
``main_async``) and the older ``benchmarks/benchmark_serving.py``; ``vllm/benchmarks/latency.py``
and ``throughput.py``; SGLang ``python/sglang/bench_serving.py`` (today's and its first
release's), ``bench_offline_throughput.py`` and ``bench_one_batch.py``.
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perfci.core.errors import ParseError
from perfci.core.model import Better, Metric, MetricKind, Profile
from perfci.formats import registry
from perfci.formats.bench import _vllm_json, bmf, google_benchmark, pytest_benchmark, vllm_bench

K = MetricKind
MS = 1_000_000
S = 1_000_000_000
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@dataclass
class Output:
    """vLLM's ``RequestFuncOutput``: what one request gave (times in seconds)."""

    success: bool = True
    ttft: float = 0.0
    latency: float = 0.0
    itl: list[float] = field(default_factory=list)
    prompt_len: int = 100
    output_tokens: int = 0
    generated_text: str = ""
    error: str = ""


def completed(ttft: float, itl: list[float], text: str = "Paris is the capital.") -> Output:
    return Output(
        ttft=ttft,
        latency=ttft + sum(itl),
        itl=itl,
        output_tokens=len(itl) + 1,
        generated_text=text,
    )


FAILED = Output(
    success=False,
    prompt_len=100,
    error="Traceback (most recent call last):\n  ...\naiohttp.ClientPayloadError: Response payload",
)
OUTPUTS = [
    completed(0.120, [0.010, 0.012, 0.011]),
    completed(0.250, [0.020, 0.018]),
    FAILED,
    completed(0.410, [0.015, 0.016, 0.014, 0.017]),
]


def vllm_benchmark(
    outputs: list[Output],
    *,
    duration: float = 2.0,
    metrics: str = "ttft,tpot,itl",
    percentiles: str = "99",
    new: bool = True,
) -> dict[str, Any]:
    """``benchmark()``'s result: ``calculate_metrics`` then the result dict and, for each
    ``--percentile-metrics`` entry, ``process_one_metric``'s keys."""
    ok = [o for o in outputs if o.success]
    lens = [o.output_tokens if o.success else 0 for o in outputs]
    values = {
        "ttft": [o.ttft for o in ok],
        "tpot": [(o.latency - o.ttft) / (o.output_tokens - 1) for o in ok if o.output_tokens > 1],
        "itl": [x for o in ok for x in o.itl],
        "e2el": [o.latency for o in ok],
    }
    total_input = sum(o.prompt_len for o in ok)
    result: dict[str, Any] = {
        "duration": duration,
        "completed": len(ok),
        **({"failed": len(outputs) - len(ok)} if new else {}),
        "total_input_tokens": total_input,
        "total_output_tokens": sum(lens),
        "request_throughput": len(ok) / duration,
        ("request_goodput" if new else "request_goodput:"): None,  # no --goodput
        "output_throughput": sum(lens) / duration,
        "total_token_throughput": (total_input + sum(lens)) / duration,
        "input_lens": [o.prompt_len for o in outputs],
        "output_lens": lens,
        "ttfts": [o.ttft for o in outputs],
        "itls": [o.itl for o in outputs],
        "generated_texts": [o.generated_text for o in outputs],
        "errors": [o.error for o in outputs],
    }
    if new:
        result |= {"max_output_tokens_per_s": 7.0, "max_concurrent_requests": 3}
    for name in metrics.split(","):
        data = values[name] or 0
        result[f"mean_{name}_ms"] = np.mean(data) * 1000
        result[f"median_{name}_ms"] = np.median(data) * 1000
        result[f"std_{name}_ms"] = np.std(data) * 1000
        for p in (float(p) for p in percentiles.split(",")):
            p_word = str(int(p)) if int(p) == p else str(p)
            result[f"p{p_word}_{name}_ms"] = np.percentile(data, p) * 1000
    return result


def vllm_serve_json(
    result: dict[str, Any],
    *,
    request_rate: float = float("inf"),
    max_concurrency: int | None = 8,
    save_detailed: bool = True,
    metadata: tuple[str, ...] = ("tp=2",),
) -> dict[str, Any]:
    """``main_async``'s ``result_json`` (``vllm bench serve --save-result``)."""
    doc: dict[str, Any] = {
        "date": "20250611-101500",
        "endpoint_type": "openai",
        "backend": "openai",
        "label": None,
        "model_id": MODEL,
        "tokenizer_id": MODEL,
        "num_prompts": 4,
    }
    for item in metadata:
        key, value = item.split("=", 1)
        doc[key.strip()] = value.strip()
    doc["request_rate"] = request_rate if request_rate < float("inf") else "inf"
    doc["burstiness"] = 1.0
    doc["max_concurrency"] = max_concurrency
    doc = {**doc, **result}
    if not save_detailed:
        for key in ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors"):
            doc.pop(key, None)
    return doc


def write_vllm(path: Path, *docs: dict[str, Any]) -> Path:
    """``json.dump`` into ``open(path, "a+")``, a newline before each appended result
    (``--append-result``; one document is ``--save-result``)."""
    with path.open("a+", encoding="utf-8") as out:
        for doc in docs:
            if out.tell() != 0:
                out.write("\n")
            json.dump(doc, out)
    return path


def parse(path: Path) -> list[Profile]:
    assert registry.detect(path).name == "vllm_bench"
    return registry.parse_file(path)


def metric(profile: Profile, kind: MetricKind, name: str) -> Metric:
    found = profile.find(kind, name)
    assert found is not None, f"no {kind.value} {name!r} in {[m.name for m in profile.metrics]}"
    return found


# --- vLLM bench serve -------------------------------------------------------------------------


@pytest.fixture
def detailed(tmp_path: Path) -> Profile:
    doc = vllm_serve_json(vllm_benchmark(OUTPUTS))
    [profile] = parse(write_vllm(tmp_path / "openai-infqps-concurrency8-Llama.json", doc))
    return profile


def test_serve_ttft_samples_are_the_completed_requests_in_ns(detailed: Profile) -> None:
    ttft = metric(detailed, K.BENCH, "ttft")
    assert ttft.samples_ns == pytest.approx([0.120 * S, 0.250 * S, 0.410 * S])
    assert ttft.samples_ns == [120_000_000.0, 250_000_000.0, 410_000_000.0]  # exact
    assert ttft.avg_ns == pytest.approx(260 * MS) and ttft.median_ns == pytest.approx(250 * MS)
    assert ttft.std_ns == pytest.approx(np.std([0.12, 0.25, 0.41]) * S)
    assert ttft.attrs == {"p99_ns": pytest.approx(np.percentile([0.12, 0.25, 0.41], 99) * S)}
    assert (ttft.min_ns, ttft.max_ns, ttft.calls) == (120 * MS, 410 * MS, 3)
    assert ttft.unit == "ns" and ttft.better is Better.LOWER


def test_serve_tpot_and_itl_from_the_summary(detailed: Profile) -> None:
    tpot = metric(detailed, K.BENCH, "tpot")
    per_request = [0.011, 0.019, 0.0155]  # (latency - ttft) / (tokens - 1)
    assert tpot.avg_ns == pytest.approx(np.mean(per_request) * S)
    assert tpot.samples_ns is None
    itl = metric(detailed, K.BENCH, "itl")
    flat = [0.010, 0.012, 0.011, 0.020, 0.018, 0.015, 0.016, 0.014, 0.017]
    assert itl.avg_ns == pytest.approx(np.mean(flat) * S)
    assert itl.median_ns == pytest.approx(15 * MS) and itl.samples_ns is None
    # E2EL is not in vLLM's default --percentile-metrics (ttft,tpot,itl).
    assert detailed.find(K.BENCH, "e2el") is None


def test_serve_throughputs_are_higher_is_better_measures(detailed: Profile) -> None:
    rates = {m.name: (m.value, m.unit, m.better) for m in detailed.by_kind(K.MEASURE)}
    assert rates == {
        "request_throughput": (1.5, "requests/s", Better.HIGHER),
        "output_throughput": (6.0, "tokens/s", Better.HIGHER),  # 4 + 3 + 5 + 0 tokens / 2 s
        "total_token_throughput": (156.0, "tokens/s", Better.HIGHER),  # + 3 × 100 input
        "max_output_tokens_per_s": (7.0, "tokens/s", Better.HIGHER),
    }  # request_goodput is null without --goodput


def test_serve_configuration_is_metadata_and_texts_are_dropped(detailed: Profile) -> None:
    meta = detailed.metadata
    assert meta["backend"] == "openai" and meta["model_id"] == MODEL
    assert meta["request_rate"] == "inf" and meta["max_concurrency"] == 8
    assert meta["num_prompts"] == 4 and meta["tp"] == "2"  # a --metadata pair
    assert (meta["duration"], meta["completed"], meta["failed"]) == (2.0, 3, 1)
    assert "label" not in meta  # null
    assert not {"generated_texts", "ttfts", "itls", "errors", "mean_ttft_ms"} & meta.keys()
    assert "Paris" not in json.dumps(meta)
    assert detailed.label == "request_rate=inf, max_concurrency=8"


def test_serve_failed_requests_warn_with_the_error(detailed: Profile) -> None:
    assert detailed.warnings == [
        "1 of 4 requests failed (first error: 'aiohttp.ClientPayloadError: Response payload'); "
        "the latencies and throughputs are those of the 3 that completed"
    ]


def test_serve_summary_only_with_chosen_percentiles(tmp_path: Path) -> None:
    result = vllm_benchmark(OUTPUTS, metrics="ttft,tpot,itl,e2el", percentiles="50,99,99.9")
    doc = vllm_serve_json(result, request_rate=4.0, max_concurrency=None, save_detailed=False)
    assert "ttfts" not in doc and "p99.9_e2el_ms" in doc
    [profile] = parse(write_vllm(tmp_path / "r.json", doc))
    ttft = metric(profile, K.BENCH, "ttft")
    assert ttft.samples_ns is None and ttft.avg_ns == pytest.approx(260 * MS)
    e2el = metric(profile, K.BENCH, "e2el")
    latencies = [0.153, 0.288, 0.472]
    assert e2el.avg_ns == pytest.approx(np.mean(latencies) * S) and e2el.calls == 3
    assert set(e2el.attrs) == {"p50_ns", "p99_ns", "p99.9_ns"}
    assert e2el.attrs["p99.9_ns"] == pytest.approx(np.percentile(latencies, 99.9) * S)
    assert profile.label == "request_rate=4"
    # Without the errors array, the failed count says it.
    assert profile.warnings[0].startswith("1 of 4 requests failed; the latencies")


def test_older_benchmark_serving_keys(tmp_path: Path) -> None:
    """``benchmarks/benchmark_serving.py`` before ``vllm bench``: ``"request_goodput:"``, no
    ``failed`` (the errors say it), the arrays always there."""
    result = vllm_benchmark(OUTPUTS, new=False)
    result["request_goodput:"] = 1.0  # --goodput ttft:300
    doc = {
        "date": "20250301-090000",
        "backend": "vllm",
        "model_id": MODEL,
        "tokenizer_id": MODEL,
        "num_prompts": 4,
        "request_rate": 2.0,
        "burstiness": 1.0,
        "max_concurrency": None,
        **result,
    }
    [profile] = parse(write_vllm(tmp_path / "vllm-2.0qps-Llama.json", doc))
    goodput = metric(profile, K.MEASURE, "request_goodput")
    assert (goodput.value, goodput.unit, goodput.better) == (1.0, "requests/s", Better.HIGHER)
    assert "failed (first error: 'aiohttp.ClientPayloadError" in profile.warnings[0]
    assert metric(profile, K.BENCH, "ttft").samples_ns == [120 * MS, 250 * MS, 410 * MS]
    assert profile.label == "request_rate=2"


def test_append_result_gives_a_profile_per_run_labelled_by_traffic(tmp_path: Path) -> None:
    path = tmp_path / "sweep.json"
    runs = [vllm_serve_json(vllm_benchmark(OUTPUTS), request_rate=r) for r in (1.0, 8.0)]
    write_vllm(path, runs[0])
    write_vllm(path, runs[1])  # a second `vllm bench serve --append-result`
    assert path.read_text().count("\n") == 1
    profiles = parse(path)
    labels = ["request_rate=1, max_concurrency=8", "request_rate=8, max_concurrency=8"]
    assert [p.label for p in profiles] == labels
    assert all(p.find(K.BENCH, "ttft") for p in profiles)


def test_a_configuration_appended_twice_is_numbered(tmp_path: Path) -> None:
    doc = vllm_serve_json(vllm_benchmark(OUTPUTS))
    profiles = parse(write_vllm(tmp_path / "r.json", doc, doc))
    assert [p.label for p in profiles] == [
        "request_rate=inf, max_concurrency=8",
        "request_rate=inf, max_concurrency=8 #2",
    ]
    assert "this configuration 2 times" in profiles[1].warnings[-1]


def test_a_backend_that_does_not_stream_has_no_ttft_or_itl(tmp_path: Path) -> None:
    # Without streaming the request functions never set ttft nor itl: both stay 0.
    outputs = [Output(latency=0.5, output_tokens=64, generated_text="x") for _ in range(3)]
    [profile] = parse(write_vllm(tmp_path / "r.json", vllm_serve_json(vllm_benchmark(outputs))))
    assert {m.name for m in profile.by_kind(K.BENCH)} == {"tpot"}
    assert "ttft, itl 0 for every request" in profile.warnings[-1]


def test_every_request_failed(tmp_path: Path) -> None:
    doc = vllm_serve_json(vllm_benchmark([FAILED, FAILED]))
    [profile] = parse(write_vllm(tmp_path / "r.json", doc))
    assert profile.metrics == []
    assert profile.warnings[0].startswith("2 of 2 requests failed")
    assert profile.warnings[1] == "every request failed: the run has no latency or throughput"


def test_nan_and_null_in_the_summary(tmp_path: Path) -> None:
    doc = vllm_serve_json(vllm_benchmark(OUTPUTS), save_detailed=False)
    doc |= {"std_ttft_ms": float("nan"), "mean_itl_ms": float("nan"), "median_itl_ms": None}
    path = write_vllm(tmp_path / "r.json", doc)
    assert "NaN" in path.read_text()  # as Python's json writes it
    [profile] = parse(path)
    assert metric(profile, K.BENCH, "ttft").std_ns is None
    assert profile.find(K.BENCH, "itl") is None  # no mean, no median, no samples


def test_ttfts_that_do_not_line_up_keep_the_summary(tmp_path: Path) -> None:
    doc = vllm_serve_json(vllm_benchmark(OUTPUTS))
    doc["errors"] = ["", "", "", ""]  # says 4 succeeded, completed says 3
    [profile] = parse(write_vllm(tmp_path / "r.json", doc))
    ttft = metric(profile, K.BENCH, "ttft")
    assert ttft.samples_ns is None and ttft.avg_ns == pytest.approx(260 * MS)
    assert "ttfts (4 values) does not line up with the 3 completed" in profile.warnings[-1]


def test_a_gzipped_result(tmp_path: Path) -> None:
    doc = vllm_serve_json(vllm_benchmark(OUTPUTS))
    path = tmp_path / "r.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    [profile] = parse(path)
    assert metric(profile, K.BENCH, "ttft").samples_ns == [120 * MS, 250 * MS, 410 * MS]


def test_pooling_result_has_e2el_only(tmp_path: Path) -> None:
    # benchmark() for an embeddings backend: EmbedBenchmarkMetrics, percentile metric "e2el".
    e2els = [0.02, 0.03, 0.04]
    result = {
        "duration": 1.0,
        "completed": 3,
        "total_input_tokens": 300,
        "request_throughput": 3.0,
        "total_token_throughput": 300.0,
        "input_lens": [100, 100, 100],
        "errors": ["", "", ""],
        "mean_e2el_ms": np.mean(e2els) * 1000,
        "median_e2el_ms": np.median(e2els) * 1000,
        "std_e2el_ms": np.std(e2els) * 1000,
        "p99_e2el_ms": np.percentile(e2els, 99) * 1000,
    }
    doc = vllm_serve_json(result) | {"backend": "openai-embeddings"}
    [profile] = parse(write_vllm(tmp_path / "r.json", doc))
    assert [m.name for m in profile.by_kind(K.BENCH)] == ["e2el"]
    assert metric(profile, K.BENCH, "e2el").avg_ns == pytest.approx(30 * MS)
    assert {m.name for m in profile.by_kind(K.MEASURE)} == {
        "request_throughput",
        "total_token_throughput",
    }
    assert profile.warnings == []


def test_ramp_up_and_label_name_the_run(tmp_path: Path) -> None:
    doc = vllm_serve_json(vllm_benchmark(OUTPUTS), max_concurrency=None, save_detailed=False)
    doc |= {"label": "fp8", "ramp_up_strategy": "linear"}
    doc |= {"ramp_up_start_rps": 1, "ramp_up_end_rps": 20}
    [profile] = parse(write_vllm(tmp_path / "r.json", doc))
    assert profile.label == "fp8 ramp_up=linear:1-20"
    assert profile.metadata["label"] == "fp8" and profile.metadata["ramp_up_end_rps"] == 20


def test_byte_order_mark_and_crlf_lines(tmp_path: Path) -> None:
    runs = [json.dumps(sglang_result(r, None)) for r in (1.0, 2.0)]
    path = tmp_path / "r.jsonl"
    path.write_bytes(("\ufeff" + "\r\n".join(runs) + "\r\n").encode())
    assert [p.label for p in parse(path)] == ["request_rate=1", "request_rate=2"]


# --- vLLM bench latency / throughput ----------------------------------------------------------


def test_latency_benchmark(tmp_path: Path) -> None:
    latencies = np.array([1.52, 1.49, 1.50, 1.61])
    percentages = [10, 25, 50, 75, 90, 99]
    percentiles = np.percentile(latencies, percentages)
    results = {
        "avg_latency": np.mean(latencies),
        "latencies": latencies.tolist(),
        "percentiles": dict(zip(percentages, percentiles.tolist(), strict=True)),
    }
    path = tmp_path / "latency.json"
    with path.open("w") as f:
        json.dump(results, f, indent=4)
    [profile] = parse(path)
    latency = metric(profile, K.BENCH, "latency")
    assert profile.label == "latency"
    assert latency.samples_ns == [1_520_000_000.0, 1_490_000_000.0, 1_500_000_000.0, 1.61 * S]
    assert latency.avg_ns == pytest.approx(1.53 * S) and latency.calls == 4
    assert latency.median_ns == pytest.approx(1.51 * S)
    assert set(latency.attrs) == {"p10_ns", "p25_ns", "p50_ns", "p75_ns", "p90_ns", "p99_ns"}
    assert latency.attrs["p99_ns"] == pytest.approx(percentiles[-1] * S)


def test_throughput_benchmark(tmp_path: Path) -> None:
    elapsed_time, requests, total_num_tokens = 40.0, 1000, 1_024_000
    results = {
        "elapsed_time": elapsed_time,
        "num_requests": requests,
        "total_num_tokens": total_num_tokens,
        "requests_per_second": requests / elapsed_time,
        "tokens_per_second": total_num_tokens / elapsed_time,
    }
    path = tmp_path / "throughput.json"
    with path.open("w") as f:
        json.dump(results, f, indent=4)
    [profile] = parse(path)
    rates = {m.name: (m.value, m.unit, m.better) for m in profile.metrics}
    assert rates == {
        "requests_per_second": (25.0, "requests/s", Better.HIGHER),
        "tokens_per_second": (25_600.0, "tokens/s", Better.HIGHER),
    }
    assert profile.metadata == {
        "elapsed_time": 40.0,
        "num_requests": 1000,
        "total_num_tokens": 1_024_000,
    }


# --- SGLang -----------------------------------------------------------------------------------


def sglang_result(request_rate: float, max_concurrency: int | None) -> dict[str, Any]:
    """``benchmark()``'s ``result`` in ``python/sglang/bench_serving.py``."""
    return {
        "backend": "sglang",
        "dataset_name": "random",
        "request_rate": request_rate,
        "max_concurrency": max_concurrency,
        "sharegpt_output_len": None,
        "random_input_len": 1024,
        "random_output_len": 1024,
        "random_range_ratio": 0.5,
        "duration": 120.5,
        "completed": 3,
        "total_input_tokens": 300,
        "total_output_tokens": 12,
        "total_output_tokens_retokenized": 12,
        "request_throughput": 0.0249,
        "input_throughput": 2.49,
        "output_throughput": 0.0996,
        "mean_e2e_latency_ms": 304.33,
        "median_e2e_latency_ms": 288.0,
        "std_e2e_latency_ms": 130.0,
        "p99_e2e_latency_ms": 471.0,
        "mean_ttft_ms": 260.0,
        "median_ttft_ms": 250.0,
        "std_ttft_ms": 118.0,
        "p99_ttft_ms": 409.0,
        "mean_tpot_ms": 15.17,
        "median_tpot_ms": 15.5,
        "std_tpot_ms": 3.3,
        "p99_tpot_ms": 18.9,
        "mean_itl_ms": 14.78,
        "median_itl_ms": 15.0,
        "std_itl_ms": 3.0,
        "p95_itl_ms": 19.2,
        "p99_itl_ms": 19.8,
        "concurrency": 7.6,
        "accept_length": None,
    }


def write_sglang(path: Path, *results: dict[str, Any]) -> Path:
    """``file.write(json.dumps(result_for_dump) + "\\n")`` in append mode, once per run."""
    for result in results:
        with path.open("a") as file:
            file.write(json.dumps(result) + "\n")
    return path


def test_sglang_runs_of_a_sweep(tmp_path: Path) -> None:
    runs = [sglang_result(float("inf"), 64), sglang_result(16.0, None)]
    path = write_sglang(tmp_path / "sglang_0611_3_1024_1024.jsonl", *runs)
    assert '"request_rate": Infinity' in path.read_text()
    first, second = parse(path)
    assert first.label == "request_rate=inf, max_concurrency=64"
    assert second.label == "request_rate=16"
    e2el = metric(first, K.BENCH, "e2el")
    assert (e2el.avg_ns, e2el.median_ns) == (304.33 * MS, 288 * MS)
    assert e2el.attrs == {"p99_ns": 471 * MS}
    itl = metric(first, K.BENCH, "itl")
    assert itl.attrs == {"p95_ns": 19.2 * MS, "p99_ns": 19.8 * MS}
    rates = {m.name: m.unit for m in first.by_kind(K.MEASURE)}
    assert rates == {
        "request_throughput": "requests/s",
        "input_throughput": "tokens/s",
        "output_throughput": "tokens/s",
    }  # accept_length is null
    assert first.metadata["request_rate"] == "inf" and first.metadata["concurrency"] == 7.6
    assert first.warnings == [] and "max_concurrency" not in second.metadata


def test_sglang_output_details_and_accept_length(tmp_path: Path) -> None:
    result = sglang_result(8.0, 16) | {"accept_length": 3.2}
    details = {
        "input_lens": [100, 100, 100],
        "output_lens": [4, 3, 5],
        "ttfts": [0.12, 0.25, 0.41],
        "itls": [[0.01, 0.012, 0.011], [0.02, 0.018], [0.015, 0.016, 0.014, 0.017]],
        "generated_texts": ["a", "b", "c"],
        "errors": ["", "", ""],
    }
    [profile] = parse(write_sglang(tmp_path / "r.jsonl", result | details))
    assert metric(profile, K.BENCH, "ttft").samples_ns == [120 * MS, 250 * MS, 410 * MS]
    accept = metric(profile, K.MEASURE, "accept_length")
    assert (accept.value, accept.unit, accept.better) == (3.2, "tokens", Better.HIGHER)


def test_sglang_first_release_wrote_medians_only(tmp_path: Path) -> None:
    result = {
        "backend": "sglang",
        "dataset_name": "sharegpt",
        "request_rate": 4.0,
        "total_input_tokens": 300,
        "total_output_tokens": 12,
        "total_output_tokens_retokenized": 12,
        "mean_e2e_latency_ms": 304.33,
        "median_e2e_latency_ms": 288.0,
        "median_ttft_ms": 250.0,
        "median_itl_ms": 15.0,
        "output_throughput": 0.0996,
        "sharegpt_output_len": None,
        "random_input_len": 1024,
        "random_output_len": 128,
        "random_range_ratio": 0.0,
        "duration": 120.5,
        "completed": 3,
    }
    [profile] = parse(write_sglang(tmp_path / "r.jsonl", result))
    ttft = metric(profile, K.BENCH, "ttft")
    assert ttft.avg_ns == ttft.median_ns == 250 * MS  # the median is what it compares
    assert metric(profile, K.BENCH, "e2el").avg_ns == 304.33 * MS


def test_sglang_offline_throughput(tmp_path: Path) -> None:
    result = {
        "backend": "engine",
        "successful_requests": 1000,
        "total_latency": 50.0,
        "total_input_tokens": 512_000,
        "total_output_tokens": 256_000,
        "request_throughput": 20.0,
        "input_throughput": 10_240.0,
        "output_throughput": 5_120.0,
        "total_throughput": 15_360.0,
    }
    [profile] = parse(write_sglang(tmp_path / "offline.jsonl", result))
    assert profile.label == "offline_throughput"
    assert [m.name for m in profile.metrics] == [
        "request_throughput",
        "output_throughput",
        "input_throughput",
        "total_throughput",
    ]
    assert profile.metadata["total_latency"] == 50.0


def test_sglang_one_batch(tmp_path: Path) -> None:
    def once(batch_size: int, prefill: float, decode: float) -> dict[str, Any]:
        # latency_test_run_once's measurement_results, input_len 1024, output_len 16.
        total = prefill + 15 * decode
        return {
            "run_name": "default",
            "batch_size": batch_size,
            "input_len": 1024,
            "output_len": 16,
            "prefill_latency": prefill,
            "prefill_throughput": 1024 * batch_size / prefill,
            "median_decode_latency": decode,
            "median_decode_throughput": batch_size / decode,
            "total_latency": total,
            "overall_throughput": (1024 + 16) * batch_size / total,
        }

    path = tmp_path / "result.jsonl"
    with path.open("a") as fout:  # "Write results in jsonlines format on rank 0."
        for result in (once(1, 0.05, 0.01), once(8, 0.2, 0.0125)):
            fout.write(json.dumps(result) + "\n")
    one, eight = parse(path)
    assert eight.label == "batch_size=8, input_len=1024, output_len=16"
    decode = metric(eight, K.BENCH, "decode")
    assert decode.avg_ns == decode.median_ns == 12.5 * MS
    assert metric(eight, K.BENCH, "prefill").avg_ns == 200 * MS
    assert metric(one, K.BENCH, "total").avg_ns == pytest.approx(0.2 * S)
    assert metric(eight, K.MEASURE, "median_decode_throughput").value == 640.0
    assert "prefill_latency" not in eight.metadata and eight.metadata["batch_size"] == 8


# --- detection --------------------------------------------------------------------------------


def test_detected_on_a_head_cut_inside_the_per_request_arrays(tmp_path: Path) -> None:
    many = [completed(0.1 + i / 10_000, [0.0123456789] * 60) for i in range(2000)]
    path = write_vllm(tmp_path / "big.json", vllm_serve_json(vllm_benchmark(many)))
    assert path.stat().st_size > 4 * registry.HEAD_BYTES
    [profile] = parse(path)
    assert len(metric(profile, K.BENCH, "ttft").samples_ns or ()) == 2000


def test_words_of_other_formats_in_the_texts_do_not_steal_it(tmp_path: Path) -> None:
    # Generated texts that are the very words the substring sniffers look for.
    words = "context benchmarks time_unit real_time stats rounds machine_info traceEvents"
    outputs = [completed(0.1, [0.01], text=word) for word in words.split()]
    path = write_vllm(tmp_path / "r.json", vllm_serve_json(vllm_benchmark(outputs)))
    head = registry.read_head(path)
    assert google_benchmark.sniff(head) and pytest_benchmark.sniff(head)  # why the order
    assert not bmf.sniff(head)
    assert registry.detect(path).name == "vllm_bench"


def test_sniff_claims_nothing_of_the_corpus_and_seeds(corpus_dir: Path, seeds_dir: Path) -> None:
    files = [p for p in corpus_dir.glob("*/*") if p.is_file()] + list(seeds_dir.iterdir())
    claimed = {p.name for p in files if vllm_bench.sniff(registry.read_head(p))}
    assert claimed == set()


@pytest.mark.parametrize(
    "doc",
    [
        {
            "context": {"date": "x"},
            "benchmarks": [{"name": "a", "real_time": 1, "time_unit": "ns"}],
        },
        {"machine_info": {}, "commit_info": {}, "benchmarks": [], "datetime": "x"},
        {"config": {"name": "x"}, "report": {"forward": {"latency": {"unit": "s"}}}},
        [{"name": "ttft", "unit": "ms", "value": 1.0}],
        {"lastUpdate": 1, "repoUrl": "x", "entries": {}},
        {"name": "test_bench", "environ": {"pytorch_version": "2"}, "metrics": {"completed": 1}},
        {"backend": {"value": 1.0}, "completed": {"value": 3}, "request_throughput": {"value": 1}},
        {"perfci_version": "0.1", "profiles": []},
        {"backend": "vllm", "completed": "3", "request_throughput": 1.0},  # not a number
        {"backend": "vllm", "completed": 3},  # no throughput
        {"avg_latency": 1.0, "latencies": "1.0"},
    ],
)
def test_sniff_refuses_the_other_json_formats(tmp_path: Path, doc: object) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps(doc))
    assert not vllm_bench.sniff(registry.read_head(path))


def test_bmf_entries_are_not_read_as_a_result(tmp_path: Path) -> None:
    doc = {"backend": {"latency": {"value": 1.0}}, "completed": {"latency": {"value": 2.0}}}
    path = tmp_path / "bmf.json"
    path.write_text(json.dumps(doc))
    assert registry.detect(path).name == "bmf"


# --- the arrays skipped before decoding -------------------------------------------------------


@pytest.mark.parametrize(
    "texts",
    [
        ["", 'a "quoted"], "errors": [" line', "back\\slash\\", "[[]]", "é ☃ \u2028", "\n\t"],
        [],
    ],
)
def test_skipped_arrays_leave_the_rest_as_it_was(texts: list[str]) -> None:
    doc = {
        "completed": 2,
        "ttfts": [0.1, 2e-05],
        "itls": [[1e-05, 0.5], [], [3.0e-7]] if texts else [],
        "generated_texts": texts,
        "errors": ["", 'x"]'],
        "mean_ttft_ms": 1.0,
    }
    raw = json.dumps(doc).encode()
    kept = json.loads(_vllm_json.without_bulk(raw))
    assert kept == doc | {"itls": None, "generated_texts": None}


def test_arrays_in_another_form_are_decoded_as_they_are() -> None:
    raw = b'{"itls": [[NaN, 0.1]], "generated_texts": ["a", null]}'
    assert _vllm_json.without_bulk(raw) == raw


# --- errors -----------------------------------------------------------------------------------


def test_a_run_cut_short_names_its_line(tmp_path: Path) -> None:
    docs = [vllm_serve_json(vllm_benchmark(OUTPUTS), request_rate=r) for r in (1.0, 2.0, 4.0)]
    path = write_vllm(tmp_path / "sweep.json", *docs)
    text = path.read_text()
    path.write_text(text[: len(text) - 300])
    with pytest.raises(ParseError, match=r"sweep\.json:3: invalid JSON: .*cut short") as caught:
        registry.parse_file(path)
    assert caught.value.line == 3 and caught.value.format == "vllm_bench"


def test_a_single_result_cut_short(tmp_path: Path) -> None:
    path = write_vllm(tmp_path / "r.json", vllm_serve_json(vllm_benchmark(OUTPUTS)))
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(ParseError, match=r"r\.json:1: invalid JSON: .*cut short"):
        registry.parse_file(path)


def test_a_latency_file_cut_short_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "latency.json"
    path.write_text(json.dumps({"avg_latency": 1.0, "latencies": [1.0, 1.0]}, indent=4)[:-12])
    with pytest.raises(ParseError, match=r"latency\.json:5: invalid JSON") as caught:
        registry.parse_file(path, format="vllm_bench")
    assert caught.value.line == 5  # it ends after the first of the two latencies


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        ("[1, 2]", r":1: expected a JSON object \(one benchmark run\), got an array"),
        ('{"backend": "vllm", "completed": 3}', r":1: not a vLLM or SGLang benchmark result"),
        ('{"backend": "v", "completed": 1, "output_throughput": 2}\n\n{"x": 1}', r":3: not a"),
        ("", "holds no benchmark result"),
        ("\n  \n", "holds no benchmark result"),
    ],
)
def test_what_it_cannot_read(tmp_path: Path, lines: str, expected: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(lines)
    with pytest.raises(ParseError, match=expected):
        registry.parse_file(path, format="vllm_bench")


def test_metric_values_are_finite(detailed: Profile) -> None:
    for m in detailed.metrics:
        numbers = [m.avg_ns, m.median_ns, m.std_ns, m.value, *(m.samples_ns or ())]
        assert all(math.isfinite(v) for v in numbers if v is not None)
