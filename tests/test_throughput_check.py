"""A throughput benchmark end to end through ``perfci check --profile`` (issue 15).

Google Benchmark JSON (``--benchmark_format=json``) with an ``items_per_second`` counter, the
files written as the tool writes them; the store is real (SQLite and PostgreSQL) and the pull
request comment goes to a fake GitHub on loopback. A 10 % throughput drop fails the check and
the comment says so in the metric's unit; a 10 % rise is an improvement.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from github_fake import TOKEN, FakeGitHub, github_server

from perfci.cli.main import main

__all__ = ["github_server"]  # the fixture, imported for pytest

REPO, PR = "acme/tokenizer", 7
BENCH = "BM_Tokenize/4096"
ITEMS_PER_S = 2.5e6  # items per second at the baseline level


def _google_benchmark(path: Path, rng: np.random.Generator, speed: float) -> str:
    """One repeat: what ``./bench --benchmark_format=json`` prints (3 repetitions)."""
    runs = []
    for repetition in range(3):
        rate = ITEMS_PER_S * speed * float(rng.lognormal(0.0, 0.005))
        real_ns = 4096 / rate * 1e9
        runs.append(
            {
                "name": BENCH,
                "family_index": 0,
                "per_family_instance_index": 0,
                "run_name": BENCH,
                "run_type": "iteration",
                "repetitions": 3,
                "repetition_index": repetition,
                "threads": 1,
                "iterations": 1000,
                "real_time": real_ns,
                "cpu_time": real_ns * 0.99,
                "time_unit": "ns",
                "items_per_second": rate,
            }
        )
    document = {
        "context": {
            "date": "2026-11-23T10:00:00+00:00",
            "host_name": "runner-1",
            "executable": "./tokenizer_bench",
            "num_cpus": 16,
            "mhz_per_cpu": 3000,
            "cpu_scaling_enabled": False,
            "caches": [],
            "load_avg": [0.5, 0.4, 0.3],
            "library_build_type": "release",
        },
        "benchmarks": runs,
    }
    path.write_text(json.dumps(document, indent=2))
    return str(path)


def _check(url: str, files: list[str], *args: str) -> int:
    profiles = [arg for f in files for arg in ("--profile", f)]
    common = ["--benchmark", "tokenizer", "--project", REPO, "--database-url", url]
    return main(["check", *profiles, *common, *args])


def _baseline(url: str, folder: Path, runs: int = 6) -> None:
    rng = np.random.default_rng(5)
    for run in range(runs):
        files = [_google_benchmark(folder / f"main{run}-{r}.json", rng, 1.0) for r in range(3)]
        code = _check(url, files, "--branch", "main", "--commit", f"{run + 1:040x}")
        assert code == 0


@pytest.mark.parametrize(
    ("speed", "code", "verdict"), [(0.9, 1, "regression"), (1.1, 0, "improvement")]
)
def test_a_throughput_change_is_judged_by_its_direction_and_said_in_its_unit(
    migrated_url: str,
    tmp_path: Path,
    outside_git: Path,
    github_server: FakeGitHub,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    speed: float,
    code: int,
    verdict: str,
) -> None:
    _baseline(migrated_url, tmp_path)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", github_server.url)
    monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")  # as on a GPU runner: comment, summary, status
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    rng = np.random.default_rng(9)
    files = [_google_benchmark(tmp_path / f"pr-{r}.json", rng, speed) for r in range(3)]
    capsys.readouterr()
    pr = ["--branch", "feature", "--base-branch", "main", "--commit", "f" * 40, "--pr", str(PR)]
    out = tmp_path / "report.json"
    assert _check(migrated_url, files, *pr, "--comment", "--json-out", str(out)) == code

    report = json.loads(out.read_text())
    assert report["verdict"] == verdict
    line = next(m for m in report["metrics"] if m["series"]["name"] == "items_per_second")
    assert line["verdict"] == verdict and line["gated"]
    assert line["series"]["better"] == "higher"
    assert line["change"] == pytest.approx(speed - 1, abs=0.02)

    (comment,) = github_server.comments_on(REPO, PR)
    body = comment["body"]
    # The name as the comment escapes it: "_" is Markdown emphasis.
    said = f"{round(line['change'] * 100, 1):+.1f} % BM\\_Tokenize/4096 ▸ items\\_per\\_second"
    assert f"**{said}**" in body
    label = "❌ regression" if verdict == "regression" else "🟢 improvement"
    assert f"- {label}: **{said}**" in body
    assert "higher is better" in body
    assert "M items/s" in body  # 2.5 M items/s: the value in its unit, not in ns


def test_parser_options_reach_the_parser_from_check_and_ingest(
    migrated_url: str, tmp_path: Path, outside_git: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # github-action-benchmark's custom JSON says no direction for a bare "tokens" unit: the
    # user says it, on `perfci check` and `perfci ingest` as on `perfci parse`.
    custom = tmp_path / "custom.json"
    custom.write_text(json.dumps([{"name": "decode", "unit": "tokens", "value": 1234.5}]))
    out = tmp_path / "report.json"
    args = ["--benchmark", "serve", "--database-url", migrated_url, "--json-out", str(out)]
    code = main(["check", "--profile", str(custom), *args, "--option", "better=higher"])
    assert code == 0, capsys.readouterr().err
    (line,) = json.loads(out.read_text())["metrics"]
    assert line["series"]["better"] == "higher" and line["series"]["unit"] == "tokens"

    stored = ["ingest", str(custom), "--benchmark", "serve2", "--database-url", migrated_url]
    assert main([*stored, "-o", "better=higher", "--json"]) == 0
    assert main([*stored, "-o", "better"]) == 2  # not KEY=VALUE: a usage error
    assert "--option" in capsys.readouterr().err
