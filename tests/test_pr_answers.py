"""Answers given on a pull request end to end (issue 34): ``/perfci accept``, ``false-alarm``,
``rerun`` carried out by ``perfci answer`` against the loopback GitHub stand-in, on a real store
(SQLite and PostgreSQL), between real ``perfci check`` runs, and counted by ``perfci report``.

The benchmark is a Google Benchmark throughput case (files written as the tool writes them):
a 10 % drop fails the check, which is what people then answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from github_fake import TOKEN, FakeGitHub, github_server
from test_answers_workflow import answer_script

from perfci.cli.main import main
from perfci.report.markdown import comment_marker

__all__ = ["github_server"]  # the fixture, imported for pytest

REPO, PR = "acme/tokenizer", 7
BENCH = "BM_Tokenize/4096"
BENCHMARK = "tokenizer"
HEAD, LATER = "f" * 40, "e" * 40
RUN_ID = "5551234"


def _google_benchmark(path: Path, rng: np.random.Generator, speed: float) -> str:
    runs = []
    for repetition in range(3):
        rate = 2.5e6 * speed * float(rng.lognormal(0.0, 0.005))
        real_ns = 4096 / rate * 1e9
        runs.append(
            {
                "name": BENCH,
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
    context = {"date": "2026-11-23T10:00:00+00:00", "host_name": "runner-1", "num_cpus": 16}
    path.write_text(json.dumps({"context": context, "benchmarks": runs}), encoding="utf-8")
    return str(path)


def _check(url: str, folder: Path, speed: float, seed: int, *args: str) -> int:
    rng = np.random.default_rng(seed)
    files = [_google_benchmark(folder / f"{seed}-{r}.json", rng, speed) for r in range(3)]
    profiles = [arg for f in files for arg in ("--profile", f)]
    common = ["--benchmark", BENCHMARK, "--project", REPO, "--database-url", url]
    return main(["check", *profiles, *common, *args])


def _pr_check(url: str, folder: Path, seed: int, commit: str, pr: int = PR) -> int:
    pr_args = ["--branch", "feature", "--base-branch", "main", "--commit", commit]
    return _check(
        url, folder, 0.9, seed, *pr_args, "--pr", str(pr), "--ci-run-id", RUN_ID, "--comment"
    )


@pytest.fixture
def pr_world(
    migrated_url: str,
    tmp_path: Path,
    outside_git: Path,
    github_server: FakeGitHub,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[str, Path, FakeGitHub]:
    """A base branch of 6 runs, and pull request 7 whose check regressed (status failure)."""
    for run in range(6):
        args = ("--branch", "main", "--commit", f"{run + 1:040x}")
        assert _check(migrated_url, tmp_path, 1.0, 100 + run, *args) == 0
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", github_server.url)
    monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    assert _pr_check(migrated_url, tmp_path, 1, HEAD) == 1
    assert github_server.statuses[-1]["state"] == "failure"
    github_server.add_pull(REPO, PR, HEAD)
    github_server.permissions.update({"alice": "write", "rob": "read", "tina": "triage"})
    return migrated_url, tmp_path, github_server


def _comment_event(
    gh: FakeGitHub, folder: Path, user: str, body: str, *, pr: int = PR, on_pull: bool = True
) -> Path:
    comment_id = gh.add_comment(REPO, pr, body, user)
    issue: dict[str, Any] = {"number": pr}
    if on_pull:
        issue["pull_request"] = {"url": f"{gh.url}/repos/{REPO}/pulls/{pr}"}
    event = {
        "action": "created",
        "issue": issue,
        "comment": {"id": comment_id, "body": body, "user": {"login": user, "type": "User"}},
        "repository": {"full_name": REPO},
    }
    path = folder / f"event-{comment_id}.json"
    path.write_text(json.dumps(event), encoding="utf-8")
    return path


def _answer(url: str, event: Path) -> int:
    return main(["answer", "--event", str(event), "--database-url", url, "--project", REPO])


def _perfci_comment(gh: FakeGitHub, pr: int = PR) -> dict[str, Any]:
    (found,) = [c for c in gh.comments_on(REPO, pr) if comment_marker(BENCHMARK) in c["body"]]
    return found


def _weekly(url: str, folder: Path) -> dict[str, Any]:
    out = folder / "reports"
    args = ["report", "--project", REPO, "--database-url", url, "--out", str(out)]
    assert main([*args, "--format", "json", "--format", "md", "--format", "html"]) == 0
    (path,) = out.glob("*.json")
    return json.loads(path.read_text(encoding="utf-8"))


def _counts(report: dict[str, Any]) -> dict[str, Any]:
    (row,) = [r for r in report["answers"] if r["benchmark"] == BENCHMARK]
    return row


def test_a_read_only_user_is_refused_with_a_reply_and_nothing_is_recorded(
    pr_world: tuple[str, Path, FakeGitHub], capsys: pytest.CaptureFixture[str]
) -> None:
    url, folder, gh = pr_world
    statuses = len(gh.statuses)
    for user in ("rob", "tina", "stranger"):
        assert _answer(url, _comment_event(gh, folder, user, "/perfci accept looks fine")) == 0
    replies = [c["body"] for c in gh.comments_on(REPO, PR) if "perfci:reply=" in c["body"]]
    assert len(replies) == 3
    for reply, role in zip(replies, ("read", "triage", "none"), strict=True):
        assert f"has `{role}` access" in reply and "Nothing was recorded" in reply
    assert len(gh.statuses) == statuses  # the check stays red
    assert "Accepted" not in _perfci_comment(gh)["body"]
    assert [r["content"] for r in gh.reactions] == ["-1"] * 3
    counts = _counts(_weekly(url, folder))
    assert (counts["alerts"], counts["accepted"], counts["open"]) == (1, 0, 1)


def test_accept_turns_the_status_green_edits_the_comment_and_the_next_check_passes(
    pr_world: tuple[str, Path, FakeGitHub],
) -> None:
    url, folder, gh = pr_world
    before = _perfci_comment(gh)
    reason = "new <script>alert(1)</script> | *tokenizer* trades speed for accuracy"
    assert _answer(url, _comment_event(gh, folder, "alice", f"  /PerfCI  Accept {reason}")) == 0

    status = gh.statuses[-1]
    assert status["state"] == "success" and status["sha"] == HEAD
    assert status["context"] == f"perfci/{BENCHMARK}"
    assert status["description"].startswith("accepted by @alice: new <script>")
    after = _perfci_comment(gh)
    assert after["id"] == before["id"]  # edited in place, not a second comment
    body = after["body"]
    assert body.startswith(comment_marker(BENCHMARK) + "\n<!-- perfci:answers -->")
    assert "**Accepted** by @\u2060alice" in body
    assert "&lt;script&gt;" in body and "<script>" not in body
    assert "\\| \\*tokenizer\\*" in body
    assert body.count("<!-- perfci:answers -->") == 1
    assert [r["content"] for r in gh.reactions] == ["+1"]

    # A later push: its check regresses on the same line, shows the acceptance, and passes.
    gh.add_pull(REPO, PR, LATER)
    assert _pr_check(url, folder, 2, LATER) == 0
    assert gh.statuses[-1]["state"] == "success" and gh.statuses[-1]["sha"] == LATER
    assert gh.statuses[-1]["description"].startswith("accepted by @alice")
    again = _perfci_comment(gh)["body"]
    assert "**Accepted** by @\u2060alice" in again and "&lt;script&gt;" in again
    assert again.count("<!-- perfci:answers -->") == 1

    counts = _counts(_weekly(url, folder))
    assert (counts["alerts"], counts["accepted"], counts["false_alarms"]) == (1, 1, 0)
    assert counts["precision"] == 1.0


def test_false_alarm_and_accept_are_counted_in_the_weekly_report(
    pr_world: tuple[str, Path, FakeGitHub],
) -> None:
    url, folder, gh = pr_world
    assert _pr_check(url, folder, 3, "d" * 40, pr=8) == 1
    gh.add_pull(REPO, 8, "d" * 40)
    assert _pr_check(url, folder, 4, "c" * 40, pr=9) == 1  # left open
    assert _answer(url, _comment_event(gh, folder, "alice", "/perfci accept intended")) == 0
    event = _comment_event(gh, folder, "alice", "/perfci false-alarm runner was busy", pr=8)
    assert _answer(url, event) == 0
    reply = [c for c in gh.comments_on(REPO, 8) if "perfci:reply=" in c["body"]]
    assert "recorded as a false alarm" in reply[0]["body"]
    on_8 = [s for s in gh.statuses if s["sha"] == "d" * 40]
    assert on_8[-1]["state"] == "failure"  # a false alarm does not pass the check

    report = _weekly(url, folder)
    counts = _counts(report)
    assert counts["alerts"] == 3
    assert (counts["accepted"], counts["false_alarms"], counts["open"]) == (1, 1, 1)
    assert counts["precision"] == pytest.approx(0.5)
    (markdown,) = (folder / "reports").glob("*.md")
    text = markdown.read_text(encoding="utf-8")
    assert "### Answers on pull requests" in text
    assert f"| {BENCHMARK} | 3 | 1 | 1 | 0 | 1 | 0 | 50 % |" in text
    (page,) = (folder / "reports").glob("*.html")
    assert 'id="answers"' in page.read_text(encoding="utf-8")


def test_rerun_reruns_the_pull_requests_own_workflow_run(
    pr_world: tuple[str, Path, FakeGitHub],
) -> None:
    url, folder, gh = pr_world
    assert _answer(url, _comment_event(gh, folder, "alice", "/perfci rerun --ab")) == 0
    assert gh.reruns == [int(RUN_ID)]
    reply = next(c["body"] for c in gh.comments_on(REPO, PR) if "perfci:reply=" in c["body"])
    assert f"re-running workflow run {RUN_ID}" in reply and "--ab" in reply
    counts = _counts(_weekly(url, folder))
    assert counts["reruns"] == 1 and counts["open"] == 1


def test_unknown_commands_get_help_and_other_comments_are_ignored(
    pr_world: tuple[str, Path, FakeGitHub],
) -> None:
    url, folder, gh = pr_world
    sent = len(gh.requests)
    assert _answer(url, _comment_event(gh, folder, "alice", "LGTM, ship it")) == 0
    assert _answer(url, _comment_event(gh, folder, "alice", "/perfci accept", on_pull=False)) == 0
    assert len(gh.requests) == sent  # a plain comment and an issue's comment: no API call
    assert _answer(url, _comment_event(gh, folder, "rob", "/perfci frobnicate")) == 0
    assert _answer(url, _comment_event(gh, folder, "alice", "/perfci accept")) == 0
    replies = [c["body"] for c in gh.comments_on(REPO, PR) if "perfci:reply=" in c["body"]]
    assert "unknown command `frobnicate`." in replies[0]
    assert "needs a reason" in replies[1]
    for reply in replies:
        assert "`/perfci accept <reason>`" in reply and "`/perfci rerun" in reply
    assert gh.statuses[-1]["state"] == "failure"
    assert not gh.requests_to("GET", "/permission$")  # help costs no permission lookup


def test_the_workflows_answer_step_accepts_as_written(
    pr_world: tuple[str, Path, FakeGitHub],
) -> None:
    """``github_action/answers.yml``'s step, run by bash as the runner would, with perfci
    installed where its install step puts it."""
    url, folder, gh = pr_world
    venv = folder / "runner" / "perfci" / "bin"
    venv.mkdir(parents=True)
    (venv / "perfci").symlink_to(Path(sys.executable).parent / "perfci")
    event = _comment_event(gh, folder, "alice", "/perfci accept the new tokenizer is slower")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(folder),
        "RUNNER_TEMP": str(folder / "runner"),
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_API_URL": gh.url,
        "GITHUB_TOKEN": TOKEN,
        "PERFCI_DATABASE_URL": url,
    }
    done = subprocess.run(
        ["bash", "-e", "-c", answer_script()],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("accepted:")
    assert gh.statuses[-1]["state"] == "success"
    assert "**Accepted** by @\u2060alice" in _perfci_comment(gh)["body"]


def test_the_accepted_change_is_not_raised_again_on_the_base_branch_after_the_merge(
    pr_world: tuple[str, Path, FakeGitHub], capsys: pytest.CaptureFixture[str]
) -> None:
    """The merge is noted on the acceptance; the change point at the merge commit (an alert
    the weekly report records) is acknowledged with who accepted it and why."""
    from datetime import datetime, timedelta

    from perfci.core.compat import UTC
    from perfci.core.transfer import comparison_from_dict
    from perfci.core.weekly import NewAlert, WeeklyReport
    from perfci.store.queries import runs_in_period
    from perfci.usecases.browse.alerts import record_alerts
    from perfci.usecases.stores import session_for
    from perfci.usecases.weekly.answers import acknowledge_accepted

    url, folder, gh = pr_world
    merge = "a" * 40
    assert _answer(url, _comment_event(gh, folder, "alice", "/perfci accept new vocabulary")) == 0
    merged = folder / "merged.json"
    pull = {"number": PR, "merged": True, "merge_commit_sha": merge}
    event = {"action": "closed", "pull_request": pull, "repository": {"full_name": REPO}}
    merged.write_text(json.dumps(event), encoding="utf-8")
    capsys.readouterr()
    assert _answer(url, merged) == 0
    assert "1 acceptance(s) noted" in capsys.readouterr().out

    out = folder / "main.json"
    _check(url, folder, 0.9, 50, "--branch", "main", "--commit", merge, "--json-out", str(out))
    series = comparison_from_dict(json.loads(out.read_text()))
    regressed = next(m for m in series.gated_regressions if m.series is not None)
    now = datetime.now(UTC)
    with session_for(url) as session:
        runs = runs_in_period(
            session, project=REPO, since=now - timedelta(days=1), until=now, by_run_time=True
        )
        run = next(r for r in runs if r.commit == merge)
        (alert,) = record_alerts(
            session,
            project=REPO,
            alerts=[
                NewAlert(
                    benchmark=BENCHMARK,
                    series=regressed.series,
                    environment_id=run.environment_id,
                    branch="main",
                    run_id=run.id,
                    commit=merge,
                    previous_commit=f"{6:040x}",
                    before=1.0,
                    after=1.1,
                    change=0.1,
                    p_value=0.001,
                )
            ],
        )
        assert alert.status == "open"
        report = WeeklyReport(REPO, "main", "2026-W48", now, now, now, alerts=[alert])
        acknowledge_accepted(session, report)
    (done,) = report.alerts
    assert done.status == "acknowledged"
    assert done.note == "accepted in PR #7 by @alice: new vocabulary"


def test_a_command_given_on_the_command_line_is_answered_the_same_way(
    pr_world: tuple[str, Path, FakeGitHub], capsys: pytest.CaptureFixture[str]
) -> None:
    url, folder, gh = pr_world
    local = ["answer", "--database-url", url, "--project", REPO, "--repo", REPO, "--pr", str(PR)]
    assert main([*local, "--user", "rob", "--body", "/perfci false-alarm"]) == 0
    assert main([*local, "--user", "alice", "--body", "/perfci false-alarm noisy box"]) == 0
    assert "false-alarm: recorded 1 false alarm(s)" in capsys.readouterr().out
    replies = [c["body"] for c in gh.comments_on(REPO, PR) if "perfci:reply=local-" in c["body"]]
    assert len(replies) == 2 and "has `read` access" in replies[0]
    assert gh.reactions == []  # no comment to react to
    assert main([*local, "--user", "alice"]) == 2  # --pr needs --user and --body
    assert "--pr needs --user and --body" in capsys.readouterr().err
    counts = _counts(_weekly(url, folder))
    assert (counts["false_alarms"], counts["precision"]) == (1, 0.0)
