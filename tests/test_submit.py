"""submit_run: ingest, compare with the stored baseline, keep the comparison; retries."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
from sqlalchemy.orm import Session

from perfci.core.model import Device, Metric, MetricKind, Profile, RunContext, Verdict
from perfci.core.settings import Settings
from perfci.report.json_report import comparison_to_dict
from perfci.server.api_upload import answer_json
from perfci.store.comparisons import latest_comparison_document
from perfci.usecases.submit.ingest import ingest_run
from perfci.usecases.submit.run import latest_comparison, submit_run

ENV = {"gpu": "test-gpu", "torch": "2.13.0"}


def _context(
    sha: str, branch: str, *, ci: str, when: datetime, base: str | None = None
) -> RunContext:
    return RunContext(
        project="acme/trainer",
        commit=sha,
        branch=branch,
        base_branch=base,
        ci_provider="test",
        ci_run_id=ci,
        ci_run_attempt=1,
        commit_time=when.isoformat(),
        environment=dict(ENV),
    )


def _repeat(rng: np.random.Generator, gemm_factor: float = 1.0) -> list[Profile]:
    noise = lambda: float(np.exp(rng.normal(0, 0.01)))  # noqa: E731
    gemm = 6e6 * gemm_factor * noise()
    other = 3e6 * noise()
    metrics = [
        Metric(MetricKind.STEP, "step", samples_ns=[gemm + other + 1e6] * 3),
        Metric(MetricKind.KERNEL, "ampere_sgemm_128x64_tn", calls=30, total_ns=3 * gemm),
        Metric(MetricKind.KERNEL, "softmax_kernel", calls=30, total_ns=3 * other),
        Metric(MetricKind.API, "cudaLaunchKernel", device=Device.CPU, calls=90, total_ns=3e5),
    ]
    return [Profile(label="p", format="test", source="mem", metrics=metrics, steps=3)]


def test_regression_is_found_stored_and_returned_again_on_retry(session: Session) -> None:
    rng = np.random.default_rng(7)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(8):
        ingest_run(
            session,
            context=_context(f"{i:040x}", "main", ci=f"b{i}", when=start + timedelta(days=i)),
            benchmark="gpt",
            repeats=[_repeat(rng) for _ in range(3)],
        )
    pr = _context("f" * 40, "fix", ci="pr1", when=start + timedelta(days=9), base="main")
    repeats = [_repeat(rng, gemm_factor=1.15) for _ in range(3)]
    first = submit_run(session, context=pr, benchmark="gpt", repeats=repeats, settings=Settings())
    result = first.comparison
    assert first.ingest.created and result.verdict is Verdict.REGRESSION
    assert result.baseline is not None and result.baseline.runs == 8
    assert result.baseline.branch == "main"
    assert result.baseline.last_commit == f"{7:040x}"
    assert result.contributions[0].series is not None
    assert result.contributions[0].series.name == "ampere_sgemm_128x64_tn"
    stored = latest_comparison(session, first.ingest.run_id)
    assert stored is not None and stored.verdict is Verdict.REGRESSION
    # Stored as JSON text encoded once: read back, it is the document the API gives.
    document = latest_comparison_document(session, first.ingest.run_id)
    assert document == comparison_to_dict(result) and document["metrics"]
    assert first.document is not None and json.loads(first.document) == document
    # The service's answer sends that text as it is: the same bytes as the model would give.
    answer = answer_json(first, "acme/trainer", "gpt")
    assert answer == answer_json(replace(first, document=None), "acme/trainer", "gpt")
    assert json.loads(answer)["comparison"]["verdict"] == "regression"
    assert [m.key for m in stored.metrics] == [m.key for m in result.metrics]
    again = submit_run(session, context=pr, benchmark="gpt", repeats=repeats, settings=Settings())
    assert not again.ingest.created and again.ingest.run_id == first.ingest.run_id
    assert again.comparison.verdict is Verdict.REGRESSION
    assert again.document is None  # a retry stored nothing: its answer encodes the model
    assert json.loads(answer_json(again, "acme/trainer", "gpt"))["comparison"] == document


def test_too_little_history_gives_no_baseline(session: Session) -> None:
    rng = np.random.default_rng(1)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    ingest_run(
        session,
        context=_context("a" * 40, "main", ci="b0", when=start),
        benchmark="gpt",
        repeats=[_repeat(rng) for _ in range(3)],
    )
    pr = _context("b" * 40, "fix", ci="pr", when=start + timedelta(days=1), base="main")
    result = submit_run(
        session,
        context=pr,
        benchmark="gpt",
        repeats=[_repeat(rng, 1.5) for _ in range(3)],
        settings=Settings(),
    ).comparison
    assert result.verdict is Verdict.NO_BASELINE
    assert result.baseline is not None and result.baseline.runs == 1
