"""GitHubClient against a real HTTP server on loopback standing in for the GitHub API."""

from __future__ import annotations

import email.utils
import logging
from collections.abc import Iterator

import pytest
from github_fake import TOKEN, FakeGitHub, github_server, start

from perfci.core.errors import ConfigError, GitHubError
from perfci.integrations.github.actions import annotation, is_fork_pull_request, write_job_summary
from perfci.integrations.github.client import GitHubClient

__all__ = ["github_server"]  # the fixture, imported for pytest

REPO = "octo/gpt"
PR = 7
MARKER = "<!-- perfci:benchmark=gpt-small -->"
NOW = 1_700_000_000.0
SHA = "0123456789abcdef0123456789abcdef01234567"


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def client(github_server: FakeGitHub, sleeps: Sleeps) -> Iterator[GitHubClient]:
    with GitHubClient(
        TOKEN, api_url=github_server.url, sleep=sleeps, clock=lambda: NOW, retries=2
    ) as gh:
        yield gh


def test_comment_is_created_once_then_edited_in_place(
    github_server: FakeGitHub, client: GitHubClient
) -> None:
    github_server.add_comment(REPO, PR, "LGTM")
    first = client.upsert_comment(REPO, PR, f"{MARKER}\nstep time +5 %", MARKER)
    second = client.upsert_comment(REPO, PR, f"{MARKER}\nstep time +1 %", MARKER)
    ours = [c for c in github_server.comments_on(REPO, PR) if MARKER in c["body"]]
    assert first.created and not second.created and first.id == second.id
    assert [c["body"] for c in ours] == [f"{MARKER}\nstep time +1 %"]
    assert len(github_server.requests_to("POST")) == 1
    [patch] = github_server.requests_to("PATCH")
    assert patch.path == f"/repos/{REPO}/issues/comments/{first.id}"
    assert patch.json == {"body": f"{MARKER}\nstep time +1 %"}
    assert first.url.endswith(f"#issuecomment-{first.id}")
    assert not github_server.unknown


def test_marker_comment_on_the_third_page_is_found_and_edited(
    github_server: FakeGitHub, client: GitHubClient
) -> None:
    for i in range(230):
        github_server.add_comment(REPO, PR, f"chatter {i}")
    target = github_server.add_comment(REPO, PR, f"{MARKER}\nold report")
    comment = client.upsert_comment(REPO, PR, f"{MARKER}\nnew report", MARKER)
    gets = github_server.requests_to("GET", "/comments$")
    assert [g.query.get("page", ["1"])[0] for g in gets] == ["1", "2", "3"]
    assert all(g.query["per_page"] == ["100"] for g in gets)
    assert comment.id == target and not comment.created
    assert github_server.comments[target]["body"] == f"{MARKER}\nnew report"
    assert not github_server.requests_to("POST")
    assert len(github_server.comments_on(REPO, PR)) == 231


def test_marker_is_added_when_the_body_lacks_it_and_same_body_is_not_resent(
    github_server: FakeGitHub, client: GitHubClient
) -> None:
    made = client.upsert_comment(REPO, PR, "report", MARKER)
    again = client.upsert_comment(REPO, PR, "report", MARKER)
    assert made.body == f"{MARKER}\nreport" and again.id == made.id
    assert not github_server.requests_to("PATCH")


def test_a_500_on_get_is_retried(github_server: FakeGitHub, client: GitHubClient) -> None:
    github_server.add_comment(REPO, PR, MARKER)
    github_server.fail_next("GET", r"/comments$", 500)
    found = client.find_comment(REPO, PR, MARKER)
    assert found is not None and found.body == MARKER
    assert [r.status for r in github_server.requests_to("GET")] == [500, 200]


def test_a_502_after_github_created_the_comment_does_not_duplicate_it(
    github_server: FakeGitHub, client: GitHubClient, sleeps: Sleeps
) -> None:
    github_server.fail_next("POST", r"/comments$", 502, process=True)
    comment = client.upsert_comment(REPO, PR, "report", MARKER)
    assert comment.created
    assert len(github_server.comments_on(REPO, PR)) == 1
    assert len(github_server.requests_to("POST")) == 1  # found by its marker, not posted again
    assert sleeps == [1.0]


def test_a_503_before_github_created_the_comment_is_posted_again(
    github_server: FakeGitHub, client: GitHubClient
) -> None:
    github_server.fail_next("POST", r"/comments$", 503)
    comment = client.upsert_comment(REPO, PR, "report", MARKER)
    assert comment.created and len(github_server.comments_on(REPO, PR)) == 1
    assert [r.status for r in github_server.requests_to("POST")] == [503, 201]


def test_a_429_with_retry_after_is_waited_out(
    github_server: FakeGitHub, client: GitHubClient, sleeps: Sleeps
) -> None:
    github_server.fail_next("GET", r"/comments$", 429, headers={"Retry-After": "1"})
    assert client.find_comment(REPO, PR, MARKER) is None
    assert sleeps == [1.0]
    assert [r.status for r in github_server.requests_to("GET")] == [429, 200]


def test_a_429_on_the_comment_post_with_an_http_date_is_waited_out_and_posted_once(
    github_server: FakeGitHub, client: GitHubClient, sleeps: Sleeps
) -> None:
    when = email.utils.formatdate(NOW + 12, usegmt=True)
    github_server.fail_next("POST", r"/comments$", 429, headers={"Retry-After": when})
    comment = client.upsert_comment(REPO, PR, "report", MARKER)
    assert comment.created and sleeps == [12.0]
    assert [r.status for r in github_server.requests_to("POST")] == [429, 201]
    assert len(github_server.comments_on(REPO, PR)) == 1


def test_a_403_that_says_rate_limit_only_in_its_message_is_waited_out_once(
    github_server: FakeGitHub, client: GitHubClient, sleeps: Sleeps
) -> None:
    limited = {"message": "You have exceeded a secondary rate limit"}
    github_server.fail_next("GET", r"/comments$", 403, body=limited)
    assert client.find_comment(REPO, PR, MARKER) is None
    assert sleeps == [60.0]  # GitHub's advised minute
    github_server.fail_next("GET", r"/comments$", 403, body=limited, times=2)
    with pytest.raises(GitHubError, match="rate limit is exhausted"):
        client.find_comment(REPO, PR, MARKER)
    assert sleeps == [60.0, 60.0]


def test_a_retry_after_beyond_the_bound_fails_saying_when_it_resets(
    github_server: FakeGitHub, client: GitHubClient, sleeps: Sleeps
) -> None:
    github_server.fail_next("GET", r"/comments$", 429, headers={"Retry-After": "600"})
    with pytest.raises(GitHubError, match=r"resets at 22:23:20 UTC \(in 600 s\)") as caught:
        client.find_comment(REPO, PR, MARKER)
    assert caught.value.status == 429 and sleeps == []


def test_waits_add_up_to_at_most_max_wait(
    github_server: FakeGitHub, client: GitHubClient, sleeps: Sleeps
) -> None:
    github_server.fail_next("GET", r"/comments$", 429, headers={"Retry-After": "40"}, times=2)
    with pytest.raises(GitHubError, match="rate limit"):
        client.find_comment(REPO, PR, MARKER)
    assert sleeps == [40.0]  # a second 40 s wait would exceed the 60 s bound


def test_a_403_rate_limit_waits_until_the_reset(
    github_server: FakeGitHub, client: GitHubClient, sleeps: Sleeps
) -> None:
    github_server.fail_next(
        "POST",
        r"/statuses/",
        403,
        body={"message": "API rate limit exceeded"},
        headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(NOW) + 5)},
    )
    client.set_status(REPO, SHA, state="success", context="perfci", description="ok")
    assert sleeps == [6.0]  # 5 s to the reset, plus a second for clock skew
    assert len(github_server.statuses) == 1


def test_a_403_permission_error_names_the_missing_permission(
    github_server: FakeGitHub, client: GitHubClient
) -> None:
    denied = {"message": "Resource not accessible by integration"}
    github_server.fail_next("POST", r"/comments$", 403, body=denied)
    with pytest.raises(GitHubError) as caught:
        client.upsert_comment(REPO, PR, "report", MARKER)
    message = str(caught.value)
    assert caught.value.status == 403
    assert "pull-requests: write" in message and "Resource not accessible" in message
    assert "forks" in message
    github_server.fail_next("POST", r"/statuses/", 403, body=denied)
    with pytest.raises(GitHubError, match="statuses: write"):
        client.set_status(REPO, SHA, state="failure", context="perfci", description="slower")
    assert not github_server.comments and not github_server.statuses


def test_a_bad_or_missing_token_says_so(github_server: FakeGitHub) -> None:
    with (
        GitHubClient("ghs_wrong", api_url=github_server.url) as gh,
        pytest.raises(GitHubError, match="the token is invalid or expired") as caught,
    ):
        gh.find_comment(REPO, PR, MARKER)
    assert caught.value.status == 401
    with (
        GitHubClient(None, api_url=github_server.url) as gh,
        pytest.raises(GitHubError, match="no token was given"),
    ):
        gh.find_comment(REPO, PR, MARKER)
    assert "Authorization" not in github_server.requests[-1].headers


def test_the_status_is_posted_with_the_right_payload(
    github_server: FakeGitHub, client: GitHubClient
) -> None:
    client.set_status(
        REPO,
        SHA,
        state="failure",
        context="perfci/gpt-small",
        description="x" * 200,
        target_url="https://ci.example/run/1",
    )
    [request] = github_server.requests_to("POST")
    assert request.path == f"/repos/{REPO}/statuses/{SHA}"
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert request.headers["Accept"] == "application/vnd.github+json"
    body = request.json
    assert body["state"] == "failure" and body["context"] == "perfci/gpt-small"
    assert body["target_url"] == "https://ci.example/run/1"
    assert len(body["description"]) == 140 and body["description"].endswith("…")
    with pytest.raises(ValueError, match="state"):
        client.set_status(REPO, SHA, state="red", context="perfci", description="")


def test_an_enterprise_api_url_with_a_path_prefix_works(sleeps: Sleeps) -> None:
    fake, stop = start(FakeGitHub(prefix="/api/v3"))
    try:
        for i in range(150):
            fake.add_comment(REPO, PR, f"chatter {i}")
        with GitHubClient(TOKEN, api_url=fake.url + "/", sleep=sleeps) as gh:
            made = gh.upsert_comment(REPO, PR, "report", MARKER)
            edited = gh.upsert_comment(REPO, PR, "report 2", MARKER)
        assert made.created and edited.id == made.id
        assert len(fake.requests_to("GET")) == 4  # two pages, twice: next links keep /api/v3
        assert not fake.unknown
    finally:
        stop()


def test_a_pagination_link_to_another_host_is_not_followed(
    github_server: FakeGitHub, client: GitHubClient
) -> None:
    github_server.fail_next(
        "GET",
        r"/comments$",
        200,
        body=[],
        headers={"Link": '<http://evil.example/steal>; rel="next"'},
    )
    with pytest.raises(GitHubError, match="another host"):
        client.find_comment(REPO, PR, MARKER)


def test_an_unreachable_api_is_a_github_error() -> None:
    fake, stop = start()
    stop()  # nothing listens on this port any more
    with (
        GitHubClient(TOKEN, api_url=fake.url, retries=0) as gh,
        pytest.raises(GitHubError, match="could not reach GitHub"),
    ):
        gh.find_comment(REPO, PR, MARKER)


def test_bad_repository_names_and_urls_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="OWNER/NAME"):
        GitHubClient(TOKEN).find_comment("../etc", 1, MARKER)
    with pytest.raises(ConfigError, match="http"):
        GitHubClient(TOKEN, api_url="ftp://example")


def test_the_token_never_appears_in_logs_or_errors(
    github_server: FakeGitHub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    github_server.fail_next("GET", r"/comments$", 500, times=2)
    github_server.fail_next(
        "POST", r"/comments$", 403, body={"message": "Resource not accessible by integration"}
    )
    errors = []
    with GitHubClient(TOKEN, api_url=github_server.url, retries=1, sleep=lambda s: None) as gh:
        for _ in range(2):
            try:
                gh.upsert_comment(REPO, PR, "report", MARKER)
            except GitHubError as exc:
                errors.append(str(exc))
        assert TOKEN not in repr(gh)
    assert len(errors) == 2 and "500" in errors[0] and "403" in errors[1]
    assert "GitHub GET" in caplog.text and "-> 500" in caplog.text
    for text in (caplog.text, *errors):
        assert TOKEN not in text and "Authorization" not in text and "Bearer" not in text


def test_an_issue_is_created_once_then_updated(
    github_server: FakeGitHub, client: GitHubClient
) -> None:
    marker = "<!-- perfci:weekly=2024-W20 -->"
    for i in range(120):
        github_server.add_issue(REPO, f"other {i}", "body", ["perf"])
    github_server.add_issue(REPO, "a PR", marker, ["perf"], pull_request=True)
    made = client.create_or_update_issue(REPO, "Weekly", "week 20", ["perf", "weekly"], marker)
    github_server.issues[made.number]["state"] = "closed"
    updated = client.create_or_update_issue(
        REPO, "Weekly (rev)", "week 20, rerun", ["perf", "weekly"], marker
    )
    assert made.created and not updated.created and updated.number == made.number
    issue = github_server.issues[made.number]
    assert issue["title"] == "Weekly (rev)" and issue["body"] == f"{marker}\nweek 20, rerun"
    assert {label["name"] for label in issue["labels"]} == {"perf", "weekly"}
    gets = github_server.requests_to("GET", "/issues$")
    assert all(g.query["state"] == ["all"] and g.query["labels"] == ["perf,weekly"] for g in gets)
    assert len(github_server.requests_to("POST")) == 1


def test_the_job_summary_is_appended(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert write_job_summary("## ❌ Regression")
    assert write_job_summary("second\n")
    assert summary.read_text(encoding="utf-8") == "# earlier step\n## ❌ Regression\nsecond\n"
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    assert not write_job_summary("nowhere")
    assert write_job_summary("explicit", path=tmp_path / "other.md")


def test_annotations_escape_workflow_command_syntax() -> None:
    assert annotation("error", "step time +5 %") == "::error::step time +5 %25"
    line = annotation("warning", "a\nb\r", title="gemm: slower, 10 %", file="bench/run.py", line=3)
    assert line == ("::warning file=bench/run.py,line=3,title=gemm%3A slower%2C 10 %25::a%0Ab%0D")
    with pytest.raises(ValueError, match="level"):
        annotation("fatal", "x")


def test_fork_pull_requests_are_detected() -> None:
    def event(head: str | None, base: str = "octo/gpt") -> dict:
        head_repo = {"full_name": head, "fork": head != base} if head else None
        return {
            "pull_request": {"head": {"repo": head_repo}, "base": {"repo": {"full_name": base}}}
        }

    assert is_fork_pull_request(event("someone/gpt"))
    assert not is_fork_pull_request(event("octo/gpt"))
    assert is_fork_pull_request(event(None))  # the fork was deleted
    assert not is_fork_pull_request({"push": {}})


def test_a_client_from_settings_uses_its_token_and_api_url(github_server: FakeGitHub) -> None:
    from perfci.core.settings import Settings

    settings = Settings(github_token=TOKEN, github_api_url=github_server.url)
    with GitHubClient.from_settings(settings) as gh:
        assert gh.find_comment(REPO, PR, MARKER) is None
    assert github_server.requests[-1].headers["Authorization"] == f"Bearer {TOKEN}"
