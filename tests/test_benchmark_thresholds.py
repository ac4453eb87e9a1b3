"""``delta`` and ``alpha`` per benchmark in ``[tool.perfci.benchmarks.NAME]``: over the global
value, under a flag (``Settings.for_benchmark`` in perfci/core/settings.py, used by
``perfci check``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from deadlines import scaled

from perfci.core.errors import ConfigError
from perfci.core.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ROOT / "examples" / "gpt" / "profiles"
PERFCI = Path(sys.executable).parent / "perfci"


def test_a_benchmark_threshold_wins_over_the_global_one_and_a_flag_over_both() -> None:
    settings = Settings(
        delta=0.02, alpha=0.05, benchmarks={"noisy": {"delta": 0.1}, "quiet": {"command": "x"}}
    )
    assert settings.for_benchmark("noisy").delta == 0.1
    assert settings.for_benchmark("noisy").alpha == 0.05
    assert settings.for_benchmark("quiet").delta == 0.02
    assert settings.for_benchmark("undeclared").delta == 0.02
    assert settings.for_benchmark("noisy", {"delta": 0.03, "alpha": None}).delta == 0.02
    for bad in (0, 1.5, "0.1", True):
        with pytest.raises(ConfigError, match=r"benchmarks\.noisy\] delta must be a number"):
            Settings(benchmarks={"noisy": {"delta": bad}}).for_benchmark("noisy")


@pytest.mark.slow
def test_perfci_check_applies_the_benchmarks_own_margin(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.perfci.benchmarks.gpt-tiny]\nprofiler = "torch"\ndelta = 0.9\n', encoding="utf-8"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "PERFCI_"))}
    env["PERFCI_DATABASE_URL"] = f"sqlite:///{tmp_path / 'perfci.db'}"

    def perfci(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(PERFCI), *args],
            cwd=tmp_path,
            env=env,
            text=True,
            capture_output=True,
            timeout=scaled(180),
            check=False,
        )

    for run in range(1, 5):
        files = sorted(str(p) for p in (PROFILES / f"main-{run}").glob("*.gz"))
        done = perfci(
            "ingest",
            *files,
            "-b",
            "gpt-tiny",
            "--branch",
            "main",
            "--commit",
            f"{run:040x}",
            "--ci-run-id",
            f"main-{run}",
        )
        assert done.returncode == 0, done.stderr
    slow = [
        arg
        for p in sorted((PROFILES / "slow-attention").glob("*.gz"))
        for arg in ("--profile", str(p))
    ]
    pr = ("--branch", "feature", "--base-branch", "main", "--pr", "1", "--no-comment")
    lenient = perfci(
        "check", *slow, *pr, "--ci-run-id", "a", "--json-out", "a.json", "--no-fail-on-regression"
    )
    assert lenient.returncode == 0, lenient.stdout + lenient.stderr
    # The flag wins over the table.
    strict = perfci(
        "check",
        *slow,
        *pr,
        "--ci-run-id",
        "b",
        "--json-out",
        "b.json",
        "--no-fail-on-regression",
        "--delta",
        "0.02",
    )
    assert strict.returncode == 0, strict.stdout + strict.stderr

    def regressions(name: str) -> dict[str, float]:
        report = json.loads((tmp_path / name).read_text(encoding="utf-8"))
        return {m["key"]: m["change"] for m in report["metrics"] if m["verdict"] == "regression"}

    wide, narrow = regressions("a.json"), regressions("b.json")
    # Under the benchmark's 90 % margin only changes beyond it can be regressions; the flag's
    # 2 % margin also flags smaller ones.
    assert wide and all(change > 0.9 for change in wide.values()), wide
    assert set(wide) < set(narrow)
    assert any(change < 0.9 for change in narrow.values()), narrow
