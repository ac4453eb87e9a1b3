"""perfci's one HTTP layer (perfci.integrations.http) against a real HTTP server on loopback:
Retry-After in both forms, waits bounded per call, which answers are retried for which method, a
timeout on
every call, and the POST hook that never posts twice."""

from __future__ import annotations

import email.utils
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from perfci.core.errors import GitHubError
from perfci.core.model import Metric, MetricKind, Profile, RunContext
from perfci.integrations.http import (
    BoundedRetry,
    make_session,
    post_with_recovery,
    retry_after_seconds,
)
from perfci.integrations.remote import upload_run

NOW = 1_700_000_000.0

#: A scripted answer: (status, headers); "hang" answers nothing until the test ends.
Answer = tuple[int, dict[str, str]] | str


@dataclass
class Script:
    answers: list[Answer] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)  # "METHOD /path" per request received
    keys: list[str | None] = field(default_factory=list)  # their Idempotency-Key headers
    release: threading.Event = field(default_factory=threading.Event)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def log_message(self, *_args: object) -> None:
        pass

    def _answer(self) -> None:
        script = self.server.script
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        script.seen.append(f"{self.command} {self.path}")
        script.keys.append(self.headers.get("Idempotency-Key"))
        answer = script.answers.pop(0) if script.answers else (200, {})
        if answer == "hang":
            script.release.wait(30)
            return
        assert not isinstance(answer, str)
        status, headers = answer
        body = b'{"ok": true}'
        self.send_response(status)
        for name, value in {"Content-Length": str(len(body)), **headers}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    script: Script


@pytest.fixture
def server() -> Iterator[tuple[str, Script]]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.script = Script()
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", httpd.script
    finally:
        httpd.script.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def _session(sleeps: Sleeps, **options: object) -> requests.Session:
    return make_session(sleep=sleeps, clock=lambda: NOW, **options)


def test_retry_after_in_seconds_is_waited_out(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers[:] = [(429, {"Retry-After": "3"})]
    sleeps = Sleeps()
    with _session(sleeps) as http:
        assert http.get(url + "/a").status_code == 200
    assert sleeps == [3.0] and script.seen == ["GET /a", "GET /a"]


def test_retry_after_as_an_http_date_is_waited_out(server: tuple[str, Script]) -> None:
    url, script = server
    when = email.utils.formatdate(NOW + 7, usegmt=True)  # e.g. "Tue, 14 Nov 2023 22:13:27 GMT"
    script.answers[:] = [(503, {"Retry-After": when})]
    sleeps = Sleeps()
    with _session(sleeps) as http:
        assert http.post(url + "/p", json={}).status_code == 200
    # A 503 that says when to come back was refused unprocessed: POST is retried too.
    assert sleeps == [7.0] and script.seen == ["POST /p", "POST /p"]


def test_retry_after_is_parsed_in_one_place_for_both_forms() -> None:
    assert retry_after_seconds("120", NOW) == 120.0
    assert retry_after_seconds(email.utils.formatdate(NOW + 30, usegmt=True), NOW) == 30.0
    assert retry_after_seconds(email.utils.formatdate(NOW - 30, usegmt=True), NOW) == 0.0
    assert retry_after_seconds("soon", NOW) is None and retry_after_seconds(None, NOW) is None
    # urllib3's own hook reads it through the same function, with the injected clock.
    retry = BoundedRetry(clock=lambda: NOW, max_wait_s=60)
    assert retry.parse_retry_after(email.utils.formatdate(NOW + 9, usegmt=True)) == 9.0


def test_waits_are_bounded_per_call_and_the_answer_comes_back(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers[:] = [(429, {"Retry-After": "40"}), (429, {"Retry-After": "40"})]
    sleeps = Sleeps()
    with _session(sleeps, max_wait_s=60) as http:
        response = http.get(url + "/a")
    assert response.status_code == 429 and response.headers["Retry-After"] == "40"
    assert sleeps == [40.0]  # a second 40 s wait would pass the 60 s bound
    script.answers[:] = [(429, {"Retry-After": "3600"})]
    with _session(sleeps, max_wait_s=60) as http:
        assert http.get(url + "/b").status_code == 429
    assert sleeps == [40.0]


def test_server_errors_are_retried_for_idempotent_methods_only(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers[:] = [(500, {}), (502, {})]
    sleeps = Sleeps()
    with _session(sleeps, retries=3) as http:
        assert http.get(url + "/g").status_code == 200
        assert sleeps == [0.5, 1.0]  # backoff before each retry, doubling
        script.answers[:] = [(502, {}), (503, {})]
        assert http.post(url + "/p", json={}).status_code == 502
        assert http.post(url + "/p", json={}).status_code == 503  # no Retry-After: unsure
    assert script.seen == ["GET /g"] * 3 + ["POST /p"] * 2


def test_refusals_are_not_retried(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers[:] = [(403, {}), (400, {}), (413, {"Retry-After": "1"})]
    sleeps = Sleeps()
    with _session(sleeps) as http:
        assert [http.get(url + "/r").status_code for _ in range(3)] == [403, 400, 413]
    assert sleeps == [] and len(script.seen) == 3


def test_every_call_gets_a_timeout_and_a_post_that_timed_out_is_not_sent_again(
    server: tuple[str, Script],
) -> None:
    url, script = server
    script.answers[:] = ["hang", "hang"]
    sleeps = Sleeps()
    with _session(sleeps, retries=1, timeout=(5.0, 0.2)) as http:
        # No timeout given here: the adapter's own applies.
        with pytest.raises(requests.ReadTimeout):
            http.post(url + "/p", json={})
        # The POST may have reached the server: it is not sent again.
        assert script.seen == ["POST /p"]
        script.answers[:] = ["hang", (200, {})]
        assert http.get(url + "/g").status_code == 200  # a GET is, once
    assert script.seen == ["POST /p", "GET /g", "GET /g"]


def test_a_refused_connection_is_retried_for_post_too() -> None:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = httpd.server_address[1]
    httpd.server_close()  # nothing listens there any more
    sleeps = Sleeps()
    with _session(sleeps, retries=2) as http, pytest.raises(requests.ConnectionError):
        http.post(f"http://127.0.0.1:{port}/p", json={})
    assert sleeps == [0.5, 1.0]  # two retries: the request never left


def test_an_unsure_post_is_looked_up_before_it_is_sent_again() -> None:
    posts: list[int] = []
    sleeps = Sleeps()

    def post() -> str:
        posts.append(1)
        if len(posts) == 1:
            raise GitHubError("502 after the work was done", status=502)
        return "posted"

    found = post_with_recovery(
        post,
        error=GitHubError,
        unsure=lambda e: e.status == 502,
        recover=lambda: "found",
        retries=3,
        sleep=sleeps,
    )
    assert found == "found" and len(posts) == 1 and sleeps == [1.0]
    posts.clear()
    again = post_with_recovery(
        post,
        error=GitHubError,
        unsure=lambda e: e.status == 502,
        recover=lambda: None,
        retries=3,
        sleep=sleeps,
    )
    assert again == "posted" and len(posts) == 2


def test_a_sure_failure_is_raised_at_once() -> None:
    calls: list[int] = []

    def post() -> str:
        calls.append(1)
        raise GitHubError("forbidden", status=403)

    with pytest.raises(GitHubError, match="forbidden"):
        post_with_recovery(
            post,
            error=GitHubError,
            unsure=lambda e: e.status == 502,
            recover=lambda: "x",
            retries=3,
            sleep=Sleeps(),
        )
    assert calls == [1]


def test_the_remote_client_retries_a_refused_upload_with_the_same_idempotency_key(
    server: tuple[str, Script],
) -> None:
    url, script = server
    script.answers[:] = [(503, {"Retry-After": "0"}), (429, {"Retry-After": "0"})]
    profile = Profile(
        label="p",
        format="test",
        source="mem",
        steps=1,
        metrics=[Metric(MetricKind.STEP, "step", calls=1, total_ns=1e6)],
    )
    answer = upload_run(
        url,
        "secret-token",
        project="acme/x",
        benchmark="b",
        context=RunContext(project="acme/x"),
        repeats=[[profile]],
    )
    assert answer == {"ok": True}
    assert script.seen == ["POST /api/v1/projects/acme/x/runs"] * 3
    assert len(set(script.keys)) == 1 and script.keys[0] is not None
