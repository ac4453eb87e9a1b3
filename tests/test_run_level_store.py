"""Issue 12 through the store: the baseline as the comparison used it, on SQLite and PostgreSQL.

Runs are stored and compared through :func:`perfci.usecases.submit.run.submit_run`, the path of
``perfci check``, the Action and the HTTP upload, so every caller gets what compare_run does.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
from sqlalchemy.orm import Session

from perfci.core.model import Device, Metric, MetricKind, Profile, RunContext, Verdict
from perfci.core.settings import Settings
from perfci.usecases.submit.run import SubmitResult, submit_run

START = datetime(2026, 9, 1, 8, 0, tzinfo=UTC)
KERNELS = [f"gemm_{i}" for i in range(24)]


def _repeats(
    rng: np.random.Generator, *, slower: float = 1.0, load: float = 1.0, repeats: int = 3
) -> list[list[Profile]]:
    """Repeats of one run: a step and 24 kernels, with a run level and repeat noise."""
    out = []
    level = np.exp(rng.normal(0, 0.005, len(KERNELS) + 1))
    for _ in range(repeats):
        noise = np.exp(rng.normal(0, 0.004, len(KERNELS) + 1)) * level * load
        metrics = [
            Metric(
                MetricKind.STEP,
                "train_step",
                Device.CPU,
                samples_ns=[20e6 * slower * float(noise[0])] * 3,
            )
        ]
        metrics += [
            Metric(
                MetricKind.KERNEL,
                name,
                total_ns=3 * 0.8e6 * float(noise[i + 1]) * (slower if i < 12 else 1.0),
                calls=3,
            )
            for i, name in enumerate(KERNELS)
        ]
        out.append(
            [Profile(label="", format="perfci_json", source="sim.json", metrics=metrics, steps=3)]
        )
    return out


def _submit(
    session: Session,
    index: int,
    repeats: list[list[Profile]],
    *,
    branch: str = "main",
    merge_base: str | None = None,
) -> SubmitResult:
    context = RunContext(
        project="acme/train",
        commit=f"{index:07x}" + "a" * 33,
        branch=branch,
        ci_provider="test",
        ci_run_id=f"{branch}-{index}",
        ci_run_attempt=1,
        commit_time=(START + timedelta(hours=index)).isoformat(),
        base_branch="main" if merge_base else None,
        merge_base=merge_base,
        environment={"gpu": "NVIDIA H100 80GB HBM3"},
    )
    return submit_run(
        session, context=context, benchmark="train", repeats=repeats, settings=Settings()
    )


def test_baseline_info_names_the_runs_used_and_the_commit_that_started_the_level(
    session: Session,
) -> None:
    rng = np.random.default_rng(12)
    ids = [
        _submit(session, i, _repeats(rng, slower=1.0 if i < 14 else 1.08)).ingest.run_id
        for i in range(22)
    ]
    pr = _submit(
        session,
        40,
        _repeats(rng, slower=1.08),
        branch="docs-only",
        merge_base=f"{21:07x}" + "a" * 33,
    ).comparison
    assert pr.baseline is not None
    assert sorted(pr.baseline.run_ids) == sorted(ids[14:])
    assert pr.baseline.runs == 8 and pr.baseline.first_commit == f"{14:07x}" + "a" * 33
    assert any(f"level started at commit {14:07x}" in note for note in pr.notes)
    assert pr.verdict is not Verdict.REGRESSION


def test_a_loaded_baseline_run_is_left_out_and_named(session: Session) -> None:
    rng = np.random.default_rng(13)
    ids = [
        _submit(session, i, _repeats(rng, load=1.45 if i == 6 else 1.0)).ingest.run_id
        for i in range(12)
    ]
    pr = _submit(
        session, 40, _repeats(rng), branch="feature", merge_base=f"{11:07x}" + "a" * 33
    ).comparison
    assert pr.baseline is not None and ids[6] not in pr.baseline.run_ids
    assert pr.baseline.runs == 11
    assert any(note.startswith("1 of 12 baseline runs left out: 4") for note in pr.notes)
