"""The action's outputs that ``perfci check --github-output`` does not write, from its JSON report.

Usage: ``python outputs.py REPORT.json`` (the interpreter that has perfci). Appends
``step-time-change=`` and ``run-url=`` to ``$GITHUB_OUTPUT``, and prints two words for the
composite step: whether to post the comment (``yes``/``no``, from ``$COMMENT_ON``: ``always``,
``change`` or ``regression``; never for a push or a fork's pull request) and whether the run is a
regression (``yes``/``no``, for the ``cc`` line).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from perfci.core.transfer import comparison_from_dict
from perfci.integrations.github.actions import is_fork_pull_request
from perfci.report.formatting import primary_step

_WORTH_A_COMMENT = {"always": {"regression", "improvement", "unchanged", "inconclusive",
                               "no-baseline"},
                    "change": {"regression", "improvement"},
                    "regression": {"regression"}}


def step_time_change(report: dict[str, Any]) -> str:
    """The primary step's change in percent, signed, or ``""`` without a baseline."""
    try:
        step = primary_step(comparison_from_dict(report))
    except (KeyError, TypeError, ValueError):
        return ""  # a report this perfci cannot read back: the other outputs still stand
    if step is None or step.change is None:
        return ""
    return f"{step.change * 100:+.2f}"


def run_url(report: dict[str, Any], server_url: str) -> str:
    """The run's page on the perfci server (remote mode only)."""
    run_id = report.get("run_id")
    if not server_url or not isinstance(run_id, int):
        return ""
    return f"{server_url.rstrip('/')}/runs/{run_id}"


def is_fork(event_path: str) -> bool:
    """A pull request whose head lives in another repository, or in none any more (its token
    is read-only): perfci's one rule, :func:`is_fork_pull_request`."""
    try:
        event = json.loads(Path(event_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(event, dict) and is_fork_pull_request(event)


def main(path: str) -> int:
    report = json.loads(Path(path).read_text(encoding="utf-8"))
    outputs = {"step-time-change": step_time_change(report),
               "run-url": run_url(report, os.environ.get("PERFCI_SERVER_URL", ""))}
    with Path(os.environ["GITHUB_OUTPUT"]).open("a", encoding="utf-8") as handle:
        handle.write("".join(f"{key}={value}\n" for key, value in outputs.items()))
    verdict = report.get("verdict")
    worth = verdict in _WORTH_A_COMMENT.get(os.environ.get("COMMENT_ON", "always"), set())
    is_pr = isinstance(report.get("pr_number"), int)
    post = worth and is_pr and not is_fork(os.environ.get("GITHUB_EVENT_PATH", ""))
    print("yes" if post else "no", "yes" if verdict == "regression" else "no")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
