"""``github_action/answers.yml``: reacts to pull-request comments and merges only, never checks
out nor runs the pull request's code, pins its actions, and grants its one job only what the
answers need. (Its ``Answer`` step is run for real in ``tests/test_pr_answers.py``.)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

WORKFLOW = Path(__file__).parent.parent / "github_action" / "answers.yml"


def workflow() -> dict[Any, Any]:
    loaded = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def answer_script() -> str:
    (step,) = [s for s in workflow()["jobs"]["answer"]["steps"] if s.get("name") == "Answer"]
    return str(step["run"])


def test_it_runs_on_comments_and_merges_with_least_permissions() -> None:
    flow = workflow()
    on = flow[True]  # YAML reads the key `on` as True
    assert on == {
        "issue_comment": {"types": ["created"]},
        "pull_request_target": {"types": ["closed"]},
    }
    assert flow["permissions"] == {}
    (job,) = flow["jobs"].values()
    assert job["permissions"] == {
        "pull-requests": "write",
        "statuses": "write",
        "actions": "write",
    }
    assert "contents" not in job["permissions"]  # no write to the code, ever
    assert job["runs-on"] == "ubuntu-latest"
    condition = job["if"]
    assert "github.event.issue.pull_request" in condition
    assert "github.event.pull_request.merged" in condition
    assert "'Bot'" in condition


def test_it_never_fetches_nor_runs_the_pull_requests_code() -> None:
    text = WORKFLOW.read_text(encoding="utf-8")
    steps = workflow()["jobs"]["answer"]["steps"]
    checkouts = [s for s in steps if "actions/checkout" in s.get("uses", "")]
    # The one checkout is perfci itself, at a pinned commit, without the token.
    assert [c["with"]["repository"] for c in checkouts] == ["OWNER/perfci"]
    assert checkouts[0]["with"]["ref"] == "PERFCI_SHA"
    assert checkouts[0]["with"]["persist-credentials"] is False
    for forbidden in ("head.sha", "head.ref", "head_ref", "refs/pull", "merge_commit_sha"):
        assert forbidden not in text
    for step in steps:
        if "uses" in step:
            assert re.fullmatch(r"[\w./-]+@[0-9a-f]{40}", step["uses"]), step["uses"]
        # Nothing of the event is pasted into a script: the comment is attacker-written.
        assert "${{" not in step.get("run", "")
    # The one secret reaches only the step that answers, through its environment.
    assert re.findall(r"secrets\.\w+", text) == ["secrets.PERFCI_DATABASE_URL"]
    (answer,) = [s for s in steps if s.get("name") == "Answer"]
    assert "PERFCI_DATABASE_URL" in answer["env"]
    assert 'perfci/bin/perfci" answer' in answer_script()


def test_it_installs_the_postgres_driver_its_store_needs() -> None:
    (install,) = [
        s for s in workflow()["jobs"]["answer"]["steps"] if s.get("name") == "Install perfci"
    ]
    assert '"./perfci-src[postgres]"' in install["run"]


def test_the_docs_example_is_the_workflow_as_shipped() -> None:
    """docs/answers.md's copy-paste example says what answers.yml does (comments aside)."""
    docs = (WORKFLOW.parent.parent / "docs" / "answers.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", docs, flags=re.S)]
    shown = yaml.safe_load(block)
    shipped = workflow()
    shipped.pop("concurrency")
    shipped["jobs"]["answer"].pop("timeout-minutes")
    for flow in (shown, shipped):
        for step in flow["jobs"]["answer"]["steps"]:
            if "run" in step:  # the shell's comments aside
                lines = step["run"].splitlines()
                step["run"] = [line for line in lines if not line.strip().startswith("#")]
    assert shown == shipped
