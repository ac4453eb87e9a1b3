"""A store at the previous migration head (0004, before units) with runs in it upgrades with
``perfci db upgrade``, and its old runs still serve as a baseline (issue 15).

The old store is written as 0004 wrote it, with plain SQL on 0004's tables (the current models
have columns 0004 lacks); everything after is the real CLI on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

from perfci.cli.main import main
from perfci.core.fingerprint import fingerprint_hash
from perfci.core.jsondoc import to_document
from perfci.core.model import Metric, MetricKind, Profile
from perfci.integrations.context import detect_run_context
from perfci.store import engines, migrate
from perfci.store.schema import series_parts_hash

PROJECT, BENCHMARK = "acme/x", "train"
SERIES = {  # id: (kind, name, per-step ns)
    1: ("step", "train_step", 10e6),
    2: ("kernel", "ampere_sgemm_128x64_tn", 6e6),
}


def _old_store(url: str, runs: int = 8, repeats: int = 3) -> None:
    """``runs`` main runs written into a store at revision 0004, as perfci then wrote them."""
    assert migrate.upgrade(url, "0004") == "0004"
    environment = detect_run_context(PROJECT, {}).environment
    rng = np.random.default_rng(1)
    start = datetime(2026, 10, 1, tzinfo=UTC)
    engine = engines.make_engine(url)
    try:
        with engine.begin() as c:
            c.execute(
                text("INSERT INTO project (id, name, public, created_at) VALUES (1, :p, :f, :t)"),
                {"p": PROJECT, "f": False, "t": start},
            )
            c.execute(
                text(
                    'INSERT INTO environment (id, fingerprint, "values", created_at) '
                    "VALUES (1, :h, :v, :t)"
                ),
                {"h": fingerprint_hash(environment), "v": json.dumps(environment), "t": start},
            )
            c.execute(
                text("INSERT INTO benchmark (id, project_id, name) VALUES (1, 1, :b)"),
                {"b": BENCHMARK},
            )
            for sid, (kind, name, _) in SERIES.items():
                c.execute(
                    text(
                        "INSERT INTO series (id, benchmark_id, key_hash, kind, device, scope, "
                        "section, name) VALUES (:i, 1, :h, :k, 'gpu', '', '', :n)"
                    ),
                    {
                        "i": sid,
                        "h": series_parts_hash(kind, "gpu", "", "", name),
                        "k": kind,
                        "n": name,
                    },
                )
            for run in range(1, runs + 1):
                at = start + timedelta(days=run)
                c.execute(
                    text(
                        'INSERT INTO "commit" (id, project_id, sha, committed_at) '
                        "VALUES (:i, 1, :s, :t)"
                    ),
                    {"i": run, "s": f"{run:040x}", "t": at},
                )
                c.execute(
                    text(
                        "INSERT INTO run (id, project_id, benchmark_id, environment_id, "
                        "commit_id, branch, repeats, created_at, idempotency_key) "
                        "VALUES (:i, 1, 1, 1, :i, 'main', :r, :t, :k)"
                    ),
                    {"i": run, "r": repeats, "t": at, "k": f"old-{run}"},
                )
                for repeat in range(repeats):
                    c.execute(
                        text(
                            "INSERT INTO profile (run_id, repeat, label, format, source, "
                            "steps, metadata) VALUES (:i, :r, 'train', 'perfci_json', 'x', 2, "
                            "'{}')"
                        ),
                        {"i": run, "r": repeat},
                    )
                    for sid, (_, _, level) in SERIES.items():
                        c.execute(
                            text(
                                "INSERT INTO sample (run_id, series_id, repeat, value, total_ns) "
                                "VALUES (:i, :s, :r, :v, :t)"
                            ),
                            {
                                "i": run,
                                "s": sid,
                                "r": repeat,
                                "v": level * float(np.exp(rng.normal(0, 0.005))),
                                "t": 2 * level,
                            },
                        )
            if engine.dialect.name == "postgresql":  # ids were given: move the sequences on
                for table in ("project", "environment", "benchmark", "series", "commit", "run"):
                    c.execute(
                        text(
                            f"SELECT setval(pg_get_serial_sequence('\"{table}\"', 'id'), "
                            f'(SELECT max(id) FROM "{table}"))'
                        )
                    )
    finally:
        engine.dispose()


def _candidate(folder: Path, slower: float) -> list[str]:
    paths = []
    for repeat in range(3):
        step, gemm = 10e6 * (1 + slower), 6e6 * (1 + slower * 10 / 6)
        profile = Profile(
            label="train",
            format="perfci_json",
            source=f"pr-{repeat}.json",
            steps=2,
            metrics=[
                Metric(MetricKind.STEP, "train_step", samples_ns=[step, step]),
                Metric(MetricKind.KERNEL, "ampere_sgemm_128x64_tn", calls=2, total_ns=2 * gemm),
            ],
        )
        path = folder / f"pr-{repeat}.json"
        path.write_text(json.dumps(to_document([profile])))
        paths.append(str(path))
    return paths


def test_a_populated_0004_store_upgrades_and_its_runs_are_still_the_baseline(
    empty_url: str, tmp_path: Path, outside_git: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _old_store(empty_url)
    assert main(["db", "upgrade", "--database-url", empty_url]) == 0
    assert f"schema at revision {migrate.head_revision()}" in capsys.readouterr().out
    assert migrate.current(empty_url) == migrate.head_revision()
    engine = engines.make_engine(empty_url)
    try:
        with engine.connect() as c:
            units = c.execute(text("SELECT DISTINCT unit, better FROM series")).all()
    finally:
        engine.dispose()
    assert units == [("ns", "lower")]  # old series are times, lower is better

    common = ["--benchmark", BENCHMARK, "--project", PROJECT, "--database-url", empty_url]
    pr = ["--branch", "feature", "--base-branch", "main", "--commit", "f" * 40, "--pr", "7"]
    assert main(["ingest", *_candidate(tmp_path, 0.10), *common, *pr, "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    # Exit status 1: a regression, as CI reads it.
    assert main(["compare", "--run", str(run_id), "--database-url", empty_url, "--json"]) == 1
    comparison = json.loads(capsys.readouterr().out)
    assert comparison["baseline"]["runs"] == 8  # every old run of main
    assert comparison["verdict"] == "regression"
    step = next(m for m in comparison["metrics"] if m["key"] == "step:gpu:train_step")
    assert step["verdict"] == "regression"
    assert step["change"] == pytest.approx(0.10, abs=0.01)
    assert step["series"]["unit"] == "ns" and step["series"]["better"] == "lower"


def test_downgrade_below_units_is_refused_while_non_time_series_exist(
    migrated_url: str, tmp_path: Path, outside_git: Path
) -> None:
    profile = Profile(
        label="llm",
        format="perfci_json",
        source="x",
        metrics=[Metric(MetricKind.MEASURE, "throughput", unit="tokens/s", value=1200.0)],
    )
    path = tmp_path / "tput.json"
    path.write_text(json.dumps(to_document([profile])))
    args = ["ingest", str(path), "--benchmark", "llm", "--database-url", migrated_url]
    assert main([*args, "--branch", "main", "--commit", "a" * 40]) == 0
    with pytest.raises(RuntimeError, match="cannot downgrade below 0005: 1 series hold values"):
        migrate.downgrade(migrated_url, "0004")
    assert migrate.current(migrated_url) == migrate.head_revision()
