"""An NVBench benchmark end to end through ``perfci check --profile`` (issue 33).

Each repeat is NVBench's real JSON (``tests/data/nvbench``: ``nvbench.example.axes`` on a
Quadro GV100 and a GP100) with log-normal noise (CV 0.5 %) on every state's times and rates,
as NVBench writes them (numbers as strings); the store is real (SQLite and PostgreSQL) and the
pull request's comment goes to a fake GitHub on loopback. One state 10 % slower on device 0
fails the check, and the comment names that state, not its neighbours.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from github_fake import TOKEN, FakeGitHub, github_server

from perfci.cli.main import main
from perfci.report.escape import md_escape

__all__ = ["github_server"]  # the fixture, imported for pytest

REPO, PR = "acme/cub-kernels", 12
SOURCE = Path(__file__).parent / "data" / "nvbench" / "nvbench_axes_gv100_gp100.json"
SLOW_STATE = "Device=0 BlockSize=2^8 NumBlocks=2^6"
SLOW_CASE = "copy_sweep_grid_shape [BlockSize=2^8 NumBlocks=2^6]"
SLOWDOWN = 1.10
CV = 0.005
_TIMES = ("nv/cold/time/gpu/mean", "nv/cold/time/cpu/mean", "nv/batch/time/gpu/mean")
_RATES = ("nv/cold/bw/global/bytes_per_second", "nv/cold/bw/item_rate")


def _scaled(summary: dict[str, Any], factor: float) -> None:
    for entry in summary.get("data") or []:
        if entry.get("name") == "value":
            entry["value"] = repr(float(entry["value"]) * factor)


def _repeat(path: Path, rng: np.random.Generator, *, slow: bool) -> str:
    """One run of the benchmark: every state's times times one noise draw, rates divided."""
    doc = json.loads(SOURCE.read_text())
    for bench in doc["benchmarks"]:
        for state in bench["states"]:
            factor = float(rng.lognormal(0.0, CV))
            if slow and bench["name"] == "copy_sweep_grid_shape" and state["name"] == SLOW_STATE:
                factor *= SLOWDOWN
            for summary in state.get("summaries") or []:
                if summary["tag"] in _TIMES:
                    _scaled(summary, factor)
                elif summary["tag"] in _RATES:
                    _scaled(summary, 1 / factor)
    path.write_text(json.dumps(copy.deepcopy(doc), indent=2))
    return str(path)


def _check(url: str, files: list[str], *args: str) -> int:
    profiles = [arg for f in files for arg in ("--profile", f)]
    common = ["--benchmark", "cub", "--project", REPO, "--database-url", url]
    return main(["check", *profiles, *common, *args])


def test_the_comment_names_the_nvbench_state_that_regressed(
    migrated_url: str,
    tmp_path: Path,
    outside_git: Path,
    github_server: FakeGitHub,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rng = np.random.default_rng(33)
    for run in range(6):
        files = [_repeat(tmp_path / f"main{run}-{r}.json", rng, slow=False) for r in range(3)]
        assert _check(migrated_url, files, "--branch", "main", "--commit", f"{run + 1:040x}") == 0
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", github_server.url)
    monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    files = [_repeat(tmp_path / f"pr-{r}.json", rng, slow=True) for r in range(3)]
    capsys.readouterr()
    pr = ["--branch", "feature", "--base-branch", "main", "--commit", "f" * 40, "--pr", str(PR)]
    out = tmp_path / "report.json"
    assert _check(migrated_url, files, *pr, "--comment", "--json-out", str(out)) == 1

    report = json.loads(out.read_text())
    assert report["verdict"] == "regression"
    by_series = {
        (m["series"]["kind"], m["series"]["section"], m["series"]["scope"], m["series"]["name"]): m
        for m in report["metrics"]
    }
    slowed = by_series["bench", "[0] Quadro GV100", "", SLOW_CASE]
    assert slowed["verdict"] == "regression" and slowed["gated"]
    assert slowed["change"] == pytest.approx(SLOWDOWN - 1, abs=0.02)
    # Its rates fell with it (higher is better); the same state on the other GPU did not move.
    bandwidth = by_series["measure", "[0] Quadro GV100", SLOW_CASE, "global memory bandwidth"]
    assert bandwidth["verdict"] == "regression" and bandwidth["series"]["better"] == "higher"
    other = by_series[
        "bench", "[1] Quadro GP100", "", "copy_sweep_grid_shape [BlockSize=2^6 NumBlocks=2^6]"
    ]
    assert other["verdict"] != "regression"
    regressed = {
        name for (kind, _, _, name), m in by_series.items() if m["verdict"] == "regression"
    }
    assert regressed <= {
        SLOW_CASE,
        SLOW_CASE + " (batch)",
        "global memory bandwidth",
        "element throughput",
    }

    (comment,) = github_server.comments_on(REPO, PR)
    rows = [text for text in comment["body"].splitlines() if text.startswith("| ")]
    # The regressed row names the device and the state: "[[0] Quadro GV100] copy_sweep_grid
    # _shape [BlockSize=2^8 NumBlocks=2^6]", escaped for Markdown.
    named = f"{md_escape('[[0] Quadro GV100]')} {md_escape(SLOW_CASE)} | bench |"
    assert any(row.startswith(f"| {named}") and row.endswith("❌ regression |") for row in rows)
    flagged = {row.split(" | ")[0] for row in rows if row.endswith("❌ regression |")}
    assert all(md_escape(SLOW_CASE) in row for row in flagged)
