"""Publishing a comparison: report files, job summary, annotations, and against a real loopback
fake GitHub API the pull-request comment (created, then edited in place) and commit status;
forks and refused permissions never break the run."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from github_fake import TOKEN, FakeGitHub, github_server

from perfci.analysis.compare import compare_run
from perfci.core.errors import ConfigError
from perfci.core.model import MetricKind, RunComparison, RunContext, SeriesKey, Verdict
from perfci.core.settings import Settings
from perfci.integrations.github.client import GitHubClient
from perfci.report.json_report import comparison_to_dict
from perfci.report.markdown import comment_marker
from perfci.usecases.check.publish import (
    MAX_ERROR_ANNOTATIONS,
    CommentOn,
    artifact_paths,
    publish,
    publish_artifact,
    status_description,
    verdict_annotations,
)

__all__ = ["github_server"]  # the fixture, imported for pytest

REPO = "octo/gpt"
SHA = "3333333cccccccccccccccccccccccccccccccc3"
STEP = SeriesKey(MetricKind.STEP, "step")
ATTN = SeriesKey(MetricKind.OP, "aten::scaled_dot_product_attention")
MM = SeriesKey(MetricKind.OP, "aten::mm")
LEVELS = {STEP: 60e6, ATTN: 12e6, MM: 30e6}


def _comparison(slow: dict[SeriesKey, float], *, seed: int = 3) -> RunComparison:
    rng = np.random.default_rng(seed)
    baseline = {
        key: (level * np.exp(rng.normal(0, 0.01, (8, 3)))).tolist() for key, level in LEVELS.items()
    }
    candidate = {
        key: (level * (1 + slow.get(key, 0.0)) * np.exp(rng.normal(0, 0.01, 5))).tolist()
        for key, level in LEVELS.items()
    }
    return compare_run(baseline, candidate, benchmark="gpt-tiny")


@pytest.fixture(scope="module")
def regression() -> RunComparison:
    result = _comparison({STEP: 0.25, ATTN: 1.2})
    assert result.verdict is Verdict.REGRESSION
    return result


@pytest.fixture(scope="module")
def unchanged() -> RunComparison:
    result = _comparison({}, seed=5)
    assert not result.gated_regressions
    return result


def _context(pr: int | None = 7) -> RunContext:
    return RunContext(
        project=REPO,
        repository=REPO,
        commit=SHA,
        branch="feature/attn",
        base_branch="main",
        pr_number=pr,
        ci_url=f"https://github.test/{REPO}/actions/runs/42",
    )


def _settings(server: FakeGitHub, token: str | None = TOKEN) -> Settings:
    return Settings(github_token=token, github_api_url=server.url)


def _event(fork: bool = False) -> dict:
    head = "someone/gpt" if fork else REPO
    return {
        "pull_request": {
            "number": 7,
            "head": {"sha": SHA, "repo": {"full_name": head}},
            "base": {"ref": "main", "repo": {"full_name": REPO}},
        }
    }


def _actions_env(tmp_path: Path) -> dict[str, str]:
    return {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}


def test_comment_is_created_then_edited_and_status_follows_the_verdict(
    github_server: FakeGitHub, regression: RunComparison, unchanged: RunComparison, tmp_path: Path
) -> None:
    env = _actions_env(tmp_path)
    first = publish(
        regression,
        context=_context(),
        settings=_settings(github_server),
        benchmark="gpt-tiny",
        event=_event(),
        env=env,
        out_dir=tmp_path / "art",
    )
    assert first.skipped_reason is None and not first.warnings
    assert first.status_set and first.summary_written
    assert first.comment_url and first.comment_url.endswith(str(min(github_server.comments)))

    second = publish(
        unchanged,
        context=_context(),
        settings=_settings(github_server),
        benchmark="gpt-tiny",
        event=_event(),
        env=env,
    )
    comments = github_server.comments_on(REPO, 7)
    assert len(comments) == 1, "the second run must edit the comment, not add one"
    assert comments[0]["body"].startswith(comment_marker("gpt-tiny"))
    assert comments[0]["body"] == second.markdown
    assert len(github_server.requests_to("PATCH", r"/issues/comments/\d+$")) == 1
    states = [(s["sha"], s["context"], s["state"]) for s in github_server.statuses]
    assert states == [(SHA, "perfci/gpt-tiny", "failure"), (SHA, "perfci/gpt-tiny", "success")]
    assert all(s["state"] != "pending" for s in github_server.statuses)
    assert github_server.statuses[0]["target_url"] == first.comment_url
    assert not github_server.unknown


def test_files_summary_and_annotations(
    github_server: FakeGitHub,
    regression: RunComparison,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    env = _actions_env(tmp_path)
    outcome = publish(
        regression,
        context=_context(),
        settings=_settings(github_server),
        benchmark="gpt-tiny",
        event=_event(),
        env=env,
        out_dir=tmp_path / "art",
    )
    md_path, json_path = artifact_paths(tmp_path / "art", "gpt-tiny")
    assert outcome.report_paths == [md_path, json_path]
    assert md_path.read_text(encoding="utf-8") == outcome.markdown
    saved = json.loads(json_path.read_text(encoding="utf-8"))
    assert saved["verdict"] == "regression"
    assert saved["publish"]["pr_number"] == 7 and saved["publish"]["commit"] == SHA
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "Regression" in summary and comment_marker("gpt-tiny") not in summary
    printed = capsys.readouterr().out.splitlines()
    errors = [line for line in printed if line.startswith("::error ")]
    assert errors and errors == [a for a in outcome.annotations if a.startswith("::error ")]
    assert any("step" in line for line in errors)


def test_no_annotations_are_printed_outside_actions(
    github_server: FakeGitHub, regression: RunComparison, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = publish(
        regression,
        context=_context(),
        settings=_settings(github_server),
        benchmark="gpt-tiny",
        event=_event(),
        env={},
    )
    assert outcome.annotations and not outcome.summary_written
    assert "::error" not in capsys.readouterr().out


def test_fork_pull_request_makes_no_api_call_but_gets_summary_and_artifact(
    github_server: FakeGitHub, regression: RunComparison, tmp_path: Path
) -> None:
    outcome = publish(
        regression,
        context=_context(),
        settings=_settings(github_server),
        benchmark="gpt-tiny",
        event=_event(fork=True),
        env=_actions_env(tmp_path),
        out_dir=tmp_path / "art",
    )
    assert github_server.requests == []
    assert outcome.skipped_reason and "fork" in outcome.skipped_reason
    assert outcome.summary_written and len(outcome.report_paths) == 2
    assert "fork" in (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert not outcome.status_set and outcome.comment_url is None


@pytest.mark.parametrize(
    ("token", "pr", "comment", "why"),
    [
        (None, 7, True, "no GitHub token"),
        (TOKEN, None, True, "not a pull request"),
        (TOKEN, 7, False, "--no-comment"),
    ],
)
def test_other_reasons_to_stay_off_the_api(
    github_server: FakeGitHub,
    regression: RunComparison,
    token: str | None,
    pr: int | None,
    comment: bool,
    why: str,
) -> None:
    outcome = publish(
        regression,
        context=_context(pr),
        settings=_settings(github_server, token),
        benchmark="gpt-tiny",
        comment=comment,
        event={},
        env={},
    )
    assert github_server.requests == []
    assert outcome.skipped_reason and why in outcome.skipped_reason


def test_refused_permission_becomes_a_warning_not_an_error(
    github_server: FakeGitHub,
    regression: RunComparison,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    github_server.fail_next(
        "POST",
        r"/issues/7/comments$",
        403,
        body={"message": "Resource not accessible by integration"},
    )
    github_server.fail_next(
        "POST", r"/statuses/", 403, body={"message": "Resource not accessible by integration"}
    )
    outcome = publish(
        regression,
        context=_context(),
        settings=_settings(github_server),
        benchmark="gpt-tiny",
        event=_event(),
        env=_actions_env(tmp_path),
    )
    assert outcome.comment_url is None and not outcome.status_set
    assert len(outcome.warnings) == 2
    assert "pull-requests: write" in outcome.warnings[0]
    assert "statuses: write" in outcome.warnings[1]
    printed = capsys.readouterr().out
    assert printed.count("::warning title=perfci%3A GitHub::") == 2
    assert TOKEN not in printed
    assert outcome.summary_written


def test_an_injected_client_is_used_and_left_open(
    github_server: FakeGitHub, unchanged: RunComparison
) -> None:
    with GitHubClient(TOKEN, api_url=github_server.url) as client:
        outcome = publish(
            unchanged,
            context=_context(),
            settings=Settings(),
            benchmark="gpt-tiny",
            event=_event(),
            env={},
            client=client,
        )
        # Settings() has no token, but the skip check reads it: the client alone is not enough.
        assert outcome.skipped_reason is not None
        outcome = publish(
            unchanged,
            context=_context(),
            settings=_settings(github_server),
            benchmark="gpt-tiny",
            event=_event(),
            env={},
            client=client,
        )
        assert outcome.status_set
        assert github_server.statuses[-1]["state"] == "success"


def test_artifact_is_posted_later_by_a_trusted_job(
    github_server: FakeGitHub, regression: RunComparison, tmp_path: Path
) -> None:
    # The fork's run: no API call, only the artifact.
    publish(
        regression,
        context=_context(),
        settings=_settings(github_server, None),
        benchmark="gpt-tiny",
        event=_event(fork=True),
        env={},
        out_dir=tmp_path,
    )
    assert github_server.requests == []
    _, json_path = artifact_paths(tmp_path, "gpt-tiny")
    outcome = publish_artifact(
        json_path, settings=_settings(github_server), repository=REPO, commit=SHA, env={}
    )
    assert outcome.comment_url and outcome.status_set
    assert github_server.statuses[-1]["state"] == "failure"
    assert len(github_server.comments_on(REPO, 7)) == 1
    with pytest.raises(ConfigError, match="not for the workflow run's head"):
        publish_artifact(
            json_path, settings=_settings(github_server), repository=REPO, commit="4" * 40, env={}
        )


def test_a_tampered_artifact_is_refused(
    tmp_path: Path, github_server: FakeGitHub, regression: RunComparison
) -> None:
    publish(
        regression,
        context=_context(),
        settings=_settings(github_server, None),
        benchmark="gpt-tiny",
        event={},
        env={},
        out_dir=tmp_path,
    )
    _, json_path = artifact_paths(tmp_path, "gpt-tiny")
    document = json.loads(json_path.read_text(encoding="utf-8"))
    document["publish"]["pr_number"] = "7; rm -rf /"
    json_path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(ConfigError, match="pr_number"):
        publish_artifact(json_path, settings=_settings(github_server), repository=REPO, env={})
    assert github_server.requests == []


def test_error_annotations_are_capped_and_lead_with_the_step() -> None:
    many = {SeriesKey(MetricKind.KERNEL, f"kernel_{i}"): 0.5 for i in range(14)}
    levels = {**LEVELS, **{key: 2e6 for key in many}}
    rng = np.random.default_rng(9)
    baseline = {
        key: (level * np.exp(rng.normal(0, 0.01, (8, 3)))).tolist() for key, level in levels.items()
    }
    candidate = {
        key: (
            level * (1 + {**many, STEP: 0.3}.get(key, 0.0)) * np.exp(rng.normal(0, 0.01, 5))
        ).tolist()
        for key, level in levels.items()
    }
    result = compare_run(baseline, candidate, benchmark="gpt-tiny")
    assert len(result.gated_regressions) > 10
    errors = [
        a for a in verdict_annotations(result, benchmark="gpt-tiny") if a.startswith("::error")
    ]
    assert len(errors) == MAX_ERROR_ANNOTATIONS
    assert "::step " in errors[0]
    assert "more regressions" in errors[-1]
    assert status_description(result).startswith("regression: step +")


def test_a_check_json_report_can_be_posted_later(
    github_server: FakeGitHub, regression: RunComparison, tmp_path: Path
) -> None:
    # What `perfci check --json-out/--markdown-out` leave: the plain JSON report, no publish block.
    result = dataclasses.replace(regression, pr_number=7, commit=SHA)
    report = tmp_path / "report.json"
    report.write_text(json.dumps(comparison_to_dict(result)), encoding="utf-8")
    (tmp_path / "report.md").write_text(
        "<!-- perfci:benchmark=gpt-tiny -->\nslower\n", encoding="utf-8"
    )
    outcome = publish_artifact(
        report, settings=_settings(github_server), repository=REPO, commit=SHA, env={}
    )
    assert outcome.status_set and outcome.comment_url
    assert github_server.statuses[-1]["state"] == "failure"
    assert github_server.statuses[-1]["description"] == "regression"
    no_token = publish_artifact(
        report, settings=_settings(github_server, None), repository=REPO, env={}
    )
    assert no_token.skipped_reason and len(github_server.statuses) == 1


def test_publish_command_posts_a_saved_report(
    github_server: FakeGitHub,
    regression: RunComparison,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from perfci.cli.main import main

    publish(
        regression,
        context=_context(),
        settings=_settings(github_server, None),
        benchmark="gpt-tiny",
        event=_event(fork=True),
        env={},
        out_dir=tmp_path,
    )
    _, json_path = artifact_paths(tmp_path, "gpt-tiny")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PERFCI_GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("PERFCI_GITHUB_API_URL", github_server.url)
    assert main(["publish", str(json_path), "--repo", REPO, "--commit", SHA]) == 0
    assert len(github_server.comments_on(REPO, 7)) == 1
    assert "#issuecomment-" in capsys.readouterr().out
    assert main(["publish", str(json_path), "--repo", REPO, "--commit", "5" * 40]) == 2
    assert TOKEN not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("comment_on", "posts_regression", "posts_unchanged"),
    [("always", True, True), ("change", True, False), ("regression", True, False)],
)
def test_comment_on_decides_which_verdicts_are_posted(
    github_server: FakeGitHub,
    regression: RunComparison,
    unchanged: RunComparison,
    comment_on: str,
    posts_regression: bool,
    posts_unchanged: bool,
) -> None:
    for result, posts in ((regression, posts_regression), (unchanged, posts_unchanged)):
        github_server.requests.clear()
        outcome = publish(
            result,
            context=_context(),
            settings=_settings(github_server),
            benchmark="gpt-tiny",
            comment_on=CommentOn(comment_on),
            event=_event(),
            env={},
        )
        assert bool(github_server.requests) is posts, (comment_on, result.verdict)
        assert (outcome.skipped_reason is None) is posts
        if not posts:
            assert f"--comment-on {comment_on}" in (outcome.skipped_reason or "")


def test_cc_mentions_go_into_a_regressions_comment_only(
    github_server: FakeGitHub, regression: RunComparison, unchanged: RunComparison
) -> None:
    cc = ["@alice  @octo/perf-team", "not-a-mention", "@x](https://evil.example)"]
    outcome = publish(
        regression,
        context=_context(),
        settings=_settings(github_server),
        benchmark="gpt-tiny",
        cc=cc,
        event=_event(),
        env={},
    )
    assert outcome.markdown.endswith("\ncc @alice @octo/perf-team\n")
    assert github_server.comments_on(REPO, 7)[0]["body"] == outcome.markdown
    assert len(outcome.warnings) == 2 and "'not-a-mention'" in outcome.warnings[0]
    quiet = publish(
        unchanged,
        context=_context(),
        settings=_settings(github_server),
        benchmark="gpt-tiny",
        cc=cc,
        event=_event(),
        env={},
    )
    assert "cc @alice" not in quiet.markdown
