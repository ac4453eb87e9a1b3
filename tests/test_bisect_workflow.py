"""``github_action/bisect.yml``: runs on demand only, pins its actions, hands the benchmark no
secret and no write token, and bisects only commits of the repository's own branches (the
step's script run for real against a clone, with a stand-in ``perfci`` on ``PATH``).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml
from ab_repo import git

WORKFLOW = Path(__file__).parent.parent / "github_action" / "bisect.yml"


def _workflow() -> dict[Any, Any]:
    loaded = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def test_it_runs_on_demand_pinned_and_without_secrets() -> None:
    text = WORKFLOW.read_text(encoding="utf-8")
    flow = _workflow()
    assert list(flow[True]) == ["workflow_dispatch"]  # YAML reads the key `on` as True
    assert set(flow[True]["workflow_dispatch"]["inputs"]) >= {"good", "bad", "benchmark"}
    assert "secrets." not in text
    bisect, post = flow["jobs"]["bisect"], flow["jobs"]["post"]
    assert bisect["permissions"] == {"contents": "read"}
    assert post["permissions"] == {"issues": "write"} and post["runs-on"] == "ubuntu-latest"
    assert not any("run" in step and "checkout" in str(step) for step in post["steps"])
    for job in (bisect, post):
        for step in job["steps"]:
            if "uses" in step:
                assert re.fullmatch(r"[\w./-]+@[0-9a-f]{40}", step["uses"]), step["uses"]
            # Inputs reach scripts through the environment, never pasted into the script.
            assert "${{" not in step.get("run", "")
    checkout = bisect["steps"][0]["with"]
    assert checkout["persist-credentials"] is False


def _script() -> str:
    (step,) = [s for s in _workflow()["jobs"]["bisect"]["steps"] if s.get("name") == "Bisect"]
    return str(step["run"])


def _run_step(clone: Path, tmp: Path, good: str, bad: str) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "perfci"
    # Stands in for perfci: records its arguments and writes the answer it was asked for.
    fake.write_text(
        '#!/bin/sh\nprintf "%s\\n" "$@" > "$RUNNER_TEMP/args"\n'
        'while [ $# -gt 0 ]; do [ "$1" = --markdown-out ] && echo culprit > "$2"; shift; done\n',
        encoding="utf-8",
    )
    fake.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "RUNNER_TEMP": str(tmp),
        "GITHUB_STEP_SUMMARY": str(tmp / "summary.md"),
        "GOOD": good,
        "BAD": bad,
        "BENCHMARK": "gpt 'x'; rm -rf /",
        "METRIC": "",
        "BUDGET": "5",
    }
    return subprocess.run(
        ["bash", "-e", "-c", _script()], cwd=clone, env=env, capture_output=True, text=True
    )


def test_only_commits_of_the_repositorys_branches_are_bisected(tmp_path: Path) -> None:
    origin = tmp_path / "origin"
    origin.mkdir()
    git(origin, "init", "-q", "-b", "main")
    git(origin, "commit", "-q", "--allow-empty", "-m", "one")
    git(origin, "commit", "-q", "--allow-empty", "-m", "two")
    good, bad = git(origin, "rev-parse", "HEAD~1"), git(origin, "rev-parse", "HEAD")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)
    done = _run_step(clone, tmp_path, good, bad)
    assert done.returncode == 0, done.stderr + done.stdout
    args = (tmp_path / "args").read_text(encoding="utf-8").splitlines()
    assert args[:5] == ["bisect", good, bad, "-b", "gpt 'x'; rm -rf /"]
    assert (tmp_path / "summary.md").read_text(encoding="utf-8") == "culprit\n"
    # A commit no branch of the repository holds (a fork's, fetched by hand) is refused.
    git(clone, "commit", "-q", "--allow-empty", "-m", "from a fork")
    stray = git(clone, "rev-parse", "HEAD")
    (tmp_path / "args").unlink()
    refused = _run_step(clone, tmp_path, good, stray)
    assert refused.returncode == 2
    assert "on no branch of this repository" in refused.stdout
    assert not (tmp_path / "args").exists()
