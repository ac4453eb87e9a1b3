"""A throwaway repository of many commits with the toy benchmark of ``ab_repo``, for
``perfci bisect``: ``factors.json`` changes at chosen commits (a slowdown planted there).

The benchmark's numbers are deterministic (seeded noise, no timing: ``ab_repo.SCRIPT``), so
every probe of a commit gives the same answer on any machine.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ab_repo import SCRIPT, git

__all__ = ["make_range"]


def make_range(root: Path, commits: int, factors_at: dict[int, dict[str, object]]) -> list[str]:
    """A repository at ``root/repo``: commit 0 (GOOD) holds the benchmark, commits
    ``1..commits`` follow; at commit ``k`` in ``factors_at`` ``factors.json`` becomes
    ``factors_at[k]``. Returns the shas, GOOD first; ``main`` is checked out at the last."""
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "bench.py").write_text(SCRIPT, encoding="utf-8")
    (repo / "factors.json").write_text("{}\n", encoding="utf-8")
    (repo / "pyproject.toml").write_text(
        '[tool.perfci]\nproject = "acme/tiny"\n\n'
        "[tool.perfci.benchmarks.tiny]\n"
        f'command = [{json.dumps(sys.executable)}, "bench.py"]\n'
        'profiler = "none"\nglobs = ["*.json"]\nrepeats = 3\n',
        encoding="utf-8",
    )
    (repo / ".gitignore").write_text(".perfci/\n", encoding="utf-8")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "commit 0: the benchmark")
    shas = [git(repo, "rev-parse", "HEAD")]
    for k in range(1, commits + 1):
        if k in factors_at:
            (repo / "factors.json").write_text(json.dumps(factors_at[k]) + "\n", encoding="utf-8")
        (repo / "log.txt").write_text(f"{k}\n", encoding="utf-8")
        git(repo, "add", ".")
        git(repo, "commit", "-q", "-m", f"commit {k}")
        shas.append(git(repo, "rev-parse", "HEAD"))
    return shas
