"""``perfci import-history``: a github-action-benchmark history becomes the baseline.

The history is a ``data.js`` written as the action writes it; the store is real (SQLite and
PostgreSQL); the pull request's run is pytest-benchmark's own JSON, as a project moving from
the action to perfci would feed ``perfci check``. With ``--history git:BRANCH`` the runs go to a
history branch of a bare ``origin`` too, as ephemeral runners keep their history.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from deadlines import scaled
from test_history_branch import BRANCH, PERFCI, Origin, git
from test_history_branch import origin as origin  # the fixture

from perfci.cli.main import main

PROJECT = "acme/kernels"
SUITE = "Python Benchmark with pytest-benchmark"
TEST_ID = "tests/test_attention.py::test_flash_fwd[fp16-4096]"
OTHER_ID = "tests/test_attention.py::test_flash_bwd[fp16-4096]"
MEAN_S = {TEST_ID: 2.5e-4, OTHER_ID: 6.0e-4}  # seconds per iteration at main's level


def _entry(index: int, rng: np.random.Generator) -> dict[str, Any]:
    sha = f"{index + 1:040x}"
    benches = []
    for name, mean in MEAN_S.items():
        drawn = mean * float(rng.lognormal(0.0, 0.01))
        benches.append(
            {
                "name": name,
                "value": 1 / drawn,
                "unit": "iter/sec",
                "range": f"stddev: {drawn * 0.02}",
                "extra": f"mean: {drawn * 1e3} msec\nrounds: 20",
            }
        )
    return {
        "commit": {
            "author": {"email": "dev@example.com", "name": "dev", "username": "dev"},
            "id": sha,
            "message": f"change {index}",
            "timestamp": f"2026-10-{index + 1:02d}T12:00:00+02:00",
            "url": f"https://github.com/{PROJECT}/commit/{sha}",
        },
        "date": 1790000000000 + index * 86_400_000,
        "tool": "pytest",
        "benches": benches,
    }


def _data_js(folder: Path, entries: int = 10, suites: tuple[str, ...] = (SUITE,)) -> Path:
    rng = np.random.default_rng(3)
    doc = {
        "lastUpdate": 1790900000000,
        "repoUrl": f"https://github.com/{PROJECT}",
        "entries": {suite: [_entry(i, rng) for i in range(entries)] for suite in suites},
    }
    path = folder / "data.js"
    path.write_text("window.BENCHMARK_DATA = " + json.dumps(doc, indent=2))
    return path


def _pytest_benchmark_json(
    path: Path, slower: dict[str, float], seed: int, commit_info: dict[str, Any] | None = None
) -> Path:
    """What ``pytest --benchmark-json`` writes: 20 rounds of each test (``--benchmark-autosave``
    adds the ``commit_info`` of the checkout)."""
    rng = np.random.default_rng(seed)
    benchmarks = []
    for name, mean in MEAN_S.items():
        data = list(mean * slower.get(name, 1.0) * rng.lognormal(0.0, 0.01, 20))
        stats = {
            "min": min(data),
            "max": max(data),
            "mean": float(np.mean(data)),
            "stddev": float(np.std(data, ddof=1)),
            "median": float(np.median(data)),
            "rounds": 20,
            "iterations": 1,
            "ops": 1 / float(np.mean(data)),
            "total": float(np.sum(data)),
            "data": data,
        }
        benchmarks.append(
            {"group": None, "name": name.split("::")[1], "fullname": name} | {"stats": stats}
        )
    doc: dict[str, Any] = {"machine_info": {"node": "runner"}, "benchmarks": benchmarks}
    if commit_info is not None:
        doc |= {"commit_info": commit_info, "datetime": "2026-10-02T08:00:00.123456"}
    path.write_text(json.dumps(doc))
    return path


def _import(url: str, path: Path, *args: str) -> int:
    return main(["import-history", str(path), "--project", PROJECT, "--database-url", url, *args])


def _stored_commits(url: str, benchmark: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The commits of the benchmark's stored runs, newest first; none when it has none."""
    capsys.readouterr()
    args = ["-b", benchmark, "--project", PROJECT, "--database-url", url, "--json"]
    code = main(["runs", "list", *args])
    said = capsys.readouterr()
    nothing = (f"has no benchmark named {benchmark!r}", f"no project named {PROJECT!r}")
    if code == 2 and any(text in said.err for text in nothing):
        return []
    assert code == 0, said.err
    return [run["commit"] for run in json.loads(said.out)]


def test_every_entry_is_a_run_of_its_commit_and_a_second_import_stores_nothing(
    migrated_url: str, tmp_path: Path, outside_git: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = _data_js(tmp_path, entries=6)
    assert _import(migrated_url, history, "--json") == 0
    first = json.loads(capsys.readouterr().out)
    assert (first["runs"], first["created"], first["benchmarks"]) == (6, 6, [SUITE])
    assert first["branch"] == "main"

    assert _import(migrated_url, history) == 0
    said = capsys.readouterr().out
    assert f"{PROJECT}/{SUITE}: 0 of 6 runs stored (6 commits of main; 6 already there)" in said
    # Newest first, each at its commit.
    assert _stored_commits(migrated_url, SUITE, capsys) == [f"{i:040x}" for i in range(6, 0, -1)]


def test_the_imported_history_is_the_baseline_of_the_first_pull_request(
    migrated_url: str, tmp_path: Path, outside_git: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _import(migrated_url, _data_js(tmp_path), "--benchmark", "attention") == 0

    def check(slower: dict[str, float], seed: int) -> dict[str, Any]:
        # Three repeats, each a fresh `pytest --benchmark-json` run, as `perfci check` records.
        repeats = [
            _pytest_benchmark_json(tmp_path / f"pr{seed}-{r}.json", slower, seed * 10 + r)
            for r in range(3)
        ]
        out = tmp_path / f"report{seed}.json"
        profiles = [a for f in repeats for a in ("--profile", str(f))]
        code = main(
            [
                "check",
                *profiles,
                *("--benchmark", "attention", "--project", PROJECT),
                *("--database-url", migrated_url, "--branch", "feature", "--base-branch", "main"),
                *("--commit", "f" * 40, "--json-out", str(out)),
            ]
        )
        report = json.loads(out.read_text())
        report["exit"] = code
        return report

    slow = check({TEST_ID: 1.2}, seed=11)
    assert (slow["exit"], slow["verdict"]) == (1, "regression")
    line = next(m for m in slow["metrics"] if m["series"]["name"] == TEST_ID)
    assert line["verdict"] == "regression"
    assert line["change"] == pytest.approx(0.2, abs=0.03)
    other = next(m for m in slow["metrics"] if m["series"]["name"] == OTHER_ID)
    assert other["verdict"] not in ("regression", "improvement")

    same = check({}, seed=12)
    assert same["exit"] == 0 and same["verdict"] != "regression"


def test_one_suite_of_several_and_the_errors_that_store_nothing(
    migrated_url: str, tmp_path: Path, outside_git: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = _data_js(tmp_path, entries=3, suites=("GPU", "CPU"))
    capsys.readouterr()
    assert _import(migrated_url, history, "--benchmark", "kernels") == 2
    assert "--benchmark names one benchmark, but 2 suites" in capsys.readouterr().err
    assert _import(migrated_url, history, "--suite", "TPU") == 2
    assert "no suite 'TPU' in the history; it holds 'GPU', 'CPU'" in capsys.readouterr().err

    assert _import(migrated_url, history, "--suite", "CPU", "--branch", "develop", "--json") == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["benchmarks"], result["created"], result["branch"]) == (["CPU"], 3, "develop")
    assert _stored_commits(migrated_url, "GPU", capsys) == []

    # A bad value in the last entry: refused before the first run is written.
    doc = json.loads(history.read_text().removeprefix("window.BENCHMARK_DATA = "))
    doc["entries"]["GPU"][-1]["benches"][0] |= {"unit": "ms", "value": -1.0}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    assert _import(migrated_url, bad, "--suite", "GPU") != 0
    assert "negative" in capsys.readouterr().err
    assert _stored_commits(migrated_url, "GPU", capsys) == []


def test_a_history_is_not_one_run_and_one_run_is_not_a_history(
    migrated_url: str, tmp_path: Path, outside_git: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = _data_js(tmp_path, entries=4)
    args = ["--benchmark", "x", "--project", PROJECT, "--database-url", migrated_url]
    assert main(["ingest", str(history), *args]) == 2
    err = capsys.readouterr().err
    assert "a history of 4 commit(s) (action_benchmark_history), not one run" in err
    assert "perfci import-history" in err

    # A configured server without the database: the upload API would date every run today.
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PERFCI_SERVER_URL", "https://perfci.example.com")
        code = main(["import-history", str(history), "--project", PROJECT])
    assert code == 2
    assert "writes to the database, not through the upload API" in capsys.readouterr().err

    run = _pytest_benchmark_json(tmp_path / "run.json", {}, seed=1)
    assert _import(migrated_url, run) == 2
    err = capsys.readouterr().err
    assert "pytest_benchmark holds one run that does not say its commit, not a history" in err
    assert "perfci ingest --commit SHA" in err


@pytest.mark.slow  # end to end through `perfci`: 15-30 s on a busy 2-core VM
def test_an_import_goes_to_the_history_branch_in_one_push_for_ephemeral_runners(
    origin: Origin, tmp_path: Path
) -> None:
    """Imported once from a laptop's clone; a pull request's job in a fresh clone, with no
    store of its own, finds the runs on the branch as its baseline (real git, no mocks)."""
    laptop = origin.clone("laptop")
    history = _data_js(tmp_path, entries=8)

    def perfci(clone: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(PERFCI), *args, "--history", f"git:{BRANCH}", "--project", PROJECT],
            cwd=clone,
            env=origin.env,
            capture_output=True,
            text=True,
            timeout=scaled(300),
            check=False,
        )

    done = perfci(laptop, "import-history", str(history), "-b", "attention", "--json")
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert (said["created"], said["history_branch"], said["history_pushed"]) == (
        8,
        BRANCH,
        8,
    )
    assert len(origin.run_files()) == 8
    tip = origin.tip()
    assert git(origin.bare, "rev-list", "--count", str(tip), env=origin.env) == "1"
    again = perfci(laptop, "import-history", str(history), "-b", "attention", "--json")
    assert json.loads(again.stdout)["history_pushed"] == 0 and origin.tip() == tip

    runner = origin.clone()
    git(runner, "checkout", "--quiet", "-b", "feature/unfused", env=origin.env)
    repeats = [
        _pytest_benchmark_json(tmp_path / f"pr-{r}.json", {TEST_ID: 1.2}, 40 + r) for r in range(3)
    ]
    report = tmp_path / "report.json"
    done = perfci(
        runner,
        "check",
        "-b",
        "attention",
        *(a for f in repeats for a in ("--profile", str(f))),
        "--base-branch",
        "main",
        "--pr",
        "3",
        "--no-comment",
        "--json-out",
        str(report),
    )
    assert done.returncode == 1, done.stdout + done.stderr
    result = json.loads(report.read_text())
    assert result["baseline"]["runs"] == 8
    line = next(m for m in result["metrics"] if m["series"]["name"] == TEST_ID)
    assert line["verdict"] == "regression"


def test_pytest_benchmark_saved_runs_are_a_history_of_their_commits(
    migrated_url: str, tmp_path: Path, outside_git: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``pytest --benchmark-autosave`` keeps one file per run under ``.benchmarks/<machine>/``,
    each with the commit it measured; a run of another branch is no baseline of main."""
    saved = tmp_path / ".benchmarks" / "Linux-CPython-3.11-64bit"
    saved.mkdir(parents=True)
    for index in range(7):
        sha = f"{index + 1:040x}"
        info = {
            "id": sha,
            "time": f"2026-10-{index + 1:02d}T12:00:00+02:00",
            "author_time": f"2026-10-{index + 1:02d}T11:00:00+02:00",
            "dirty": index == 2,
            "project": "kernels",
            "branch": "feature/fused" if index == 6 else "main" if index else "(detached head)",
        }
        name = f"{index + 1:04d}_{sha}_20261002_080000_uncommited-changes.json"
        _pytest_benchmark_json(saved / name, {}, 100 + index, commit_info=info)
    capsys.readouterr()
    assert _import(migrated_url, tmp_path / ".benchmarks", "-b", "attention", "--json") == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["created"], result["benchmarks"]) == (6, ["attention"])
    assert result["other_branches"] == {"feature/fused": 1}
    assert _stored_commits(migrated_url, "attention", capsys) == [
        f"{i:040x}" for i in range(6, 0, -1)
    ]

    repeats = [
        _pytest_benchmark_json(tmp_path / f"pr-{r}.json", {TEST_ID: 1.2}, 60 + r) for r in range(3)
    ]
    out = tmp_path / "report.json"
    code = main(
        [
            "check",
            *(a for f in repeats for a in ("--profile", str(f))),
            *("--benchmark", "attention", "--project", PROJECT, "--database-url", migrated_url),
            *("--branch", "feature", "--base-branch", "main", "--commit", "f" * 40),
            *("--json-out", str(out)),
        ]
    )
    report = json.loads(out.read_text())
    assert code == 1 and report["baseline"]["runs"] == 6
    line = next(m for m in report["metrics"] if m["series"]["name"] == TEST_ID)
    assert line["verdict"] == "regression"


def test_a_saved_run_without_its_commit_is_refused_and_nothing_is_written(
    migrated_url: str, tmp_path: Path, outside_git: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "saved"
    folder.mkdir()
    sha = "a" * 40
    _pytest_benchmark_json(folder / "0001.json", {}, 1, commit_info={"id": sha, "dirty": False})
    # Outside git pytest-benchmark writes "unversioned": no commit to place the run on.
    _pytest_benchmark_json(folder / "0002.json", {}, 2, commit_info={"id": "unversioned"})
    capsys.readouterr()
    assert _import(migrated_url, folder, "-b", "attention") == 2
    assert "0002.json: pytest_benchmark holds one run that does not say its commit" in (
        capsys.readouterr().err
    )
    assert _stored_commits(migrated_url, "attention", capsys) == []
