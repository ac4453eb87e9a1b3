"""A fake GitHub REST API on loopback: a real HTTP server that tests point a client at.

Use the ``github_server`` fixture (``from github_fake import github_server``, or register this
module as a plugin). It serves, under an optional path prefix such as ``/api/v3``:

- ``GET/POST /repos/{o}/{r}/issues/{n}/comments`` (``per_page``/``page``, ``Link: rel="next"``)
- ``PATCH /repos/{o}/{r}/issues/comments/{id}``
- ``POST /repos/{o}/{r}/statuses/{sha}``
- ``GET/POST /repos/{o}/{r}/issues`` (``state``, ``labels``, paginated) and
  ``PATCH /repos/{o}/{r}/issues/{n}``
- ``GET /repos/{o}/{r}/collaborators/{user}/permission`` (roles set in ``permissions``;
  anyone else ``none``), ``GET /repos/{o}/{r}/pulls/{n}`` (set with :meth:`FakeGitHub.add_pull`),
  ``POST /repos/{o}/{r}/issues/comments/{id}/reactions`` and
  ``POST /repos/{o}/{r}/actions/runs/{id}/rerun`` (recorded in ``reactions`` and ``reruns``)

It checks ``Authorization: Bearer <token>`` / ``token <token>`` (401 otherwise), records every
request, answers anything else with a loud 404, and plays scripted failures
(:meth:`FakeGitHub.fail_next`).
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

TOKEN = "ghs_fake_token_0123456789"

Json = Any
Handler = Callable[["FakeGitHub", "Recorded", re.Match[str]], tuple[int, Json, dict[str, str]]]


@dataclass
class Recorded:
    """One request as the server saw it (path without the prefix, query parsed)."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    json: Json = None
    status: int = 0


@dataclass
class Failure:
    method: str
    path: re.Pattern[str]
    status: int
    headers: dict[str, str]
    body: Json
    times: int
    process: bool  # carry the request out first, then answer with the failure


@dataclass
class FakeGitHub:
    """State and script of the fake API. ``url`` is the API root to give the client."""

    token: str | None = TOKEN
    prefix: str = ""
    host: str = "127.0.0.1"
    port: int = 0
    requests: list[Recorded] = field(default_factory=list)
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    statuses: list[dict[str, Any]] = field(default_factory=list)
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    permissions: dict[str, str] = field(default_factory=dict)  # login -> role_name
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    reactions: list[dict[str, Any]] = field(default_factory=list)
    reruns: list[int] = field(default_factory=list)
    unknown: list[Recorded] = field(default_factory=list)  # requests no route matched
    lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1001))

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}{self.prefix}"

    def fail_next(
        self,
        method: str,
        path_regex: str,
        status: int,
        *,
        headers: dict[str, str] | None = None,
        body: Json = None,
        times: int = 1,
        process: bool = False,
    ) -> None:
        """Answer the next ``times`` requests matching ``method`` and ``path_regex`` (searched
        in the path without prefix) with ``status``; ``process=True`` carries them out first
        (a gateway error after GitHub did the work)."""
        self.failures.append(
            Failure(
                method.upper(),
                re.compile(path_regex),
                status,
                headers or {},
                {"message": f"scripted {status}"} if body is None else body,
                times,
                process,
            )
        )

    def add_comment(self, repo: str, issue: int, body: str, user: str = "someone") -> int:
        with self.lock:
            return self._new_comment(repo, issue, body, user)["id"]

    def add_issue(
        self,
        repo: str,
        title: str,
        body: str,
        labels: list[str],
        state: str = "open",
        pull_request: bool = False,
    ) -> int:
        with self.lock:
            return self._new_issue(repo, title, body, labels, state, pull_request)["number"]

    def add_pull(self, repo: str, number: int, head_sha: str, base: str = "main") -> None:
        """A pull request of ``repo`` (same-repository head) whose head is ``head_sha``."""
        self.pulls[number] = {
            "number": number,
            "head": {"sha": head_sha, "ref": "feature", "repo": {"full_name": repo}},
            "base": {"ref": base, "repo": {"full_name": repo}},
            "_repo": repo,
        }

    def comments_on(self, repo: str, issue: int) -> list[dict[str, Any]]:
        return [c for c in self.comments.values() if c["_repo"] == repo and c["_issue"] == issue]

    def requests_to(self, method: str, pattern: str = "") -> list[Recorded]:
        return [r for r in self.requests if r.method == method and re.search(pattern, r.path)]

    # --- internals used by the handler -------------------------------------------------------

    def _new_comment(self, repo: str, issue: int, body: str, user: str) -> dict[str, Any]:
        cid = next(self._ids)
        comment = {
            "id": cid,
            "body": body,
            "user": {"login": user},
            "url": f"{self.url}/repos/{repo}/issues/comments/{cid}",
            "html_url": f"https://github.test/{repo}/pull/{issue}#issuecomment-{cid}",
            "_repo": repo,
            "_issue": issue,
        }
        self.comments[cid] = comment
        return comment

    def _new_issue(
        self, repo: str, title: str, body: str, labels: list[str], state: str, pull_request: bool
    ) -> dict[str, Any]:
        number = len(self.issues) + 1
        issue = {
            "number": number,
            "title": title,
            "body": body,
            "state": state,
            "labels": [{"name": name} for name in labels],
            "html_url": f"https://github.test/{repo}/issues/{number}",
            "_repo": repo,
        }
        if pull_request:
            issue["pull_request"] = {"url": "x"}
        self.issues[number] = issue
        return issue

    def _take_failure(self, method: str, path: str) -> Failure | None:
        for failure in self.failures:
            if failure.method == method and failure.path.search(path) and failure.times > 0:
                failure.times -= 1
                return failure
        return None

    def _page(self, request: Recorded, items: list[dict[str, Any]]) -> tuple[list[Any], dict]:
        per_page = min(int(request.query.get("per_page", ["30"])[0]), 100)
        page = int(request.query.get("page", ["1"])[0])
        chunk = items[(page - 1) * per_page : page * per_page]
        headers = {}
        if page * per_page < len(items):
            query = {k: v[0] for k, v in request.query.items()}
            query.update(page=str(page + 1), per_page=str(per_page))
            headers["Link"] = (
                f'<{self.url}{request.path}?{urlencode(query)}>; rel="next", '
                f'<{self.url}{request.path}?page=999>; rel="last"'
            )
        return [_public(item) for item in chunk], headers


def _public(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if not k.startswith("_")}


# --- routes -----------------------------------------------------------------------------------

REPO = r"/repos/(?P<repo>[^/]+/[^/]+)"


def _list_comments(gh: FakeGitHub, req: Recorded, m: re.Match[str]):
    items = sorted(gh.comments_on(m["repo"], int(m["n"])), key=lambda c: c["id"])
    body, headers = gh._page(req, items)
    return 200, body, headers


def _create_comment(gh: FakeGitHub, req: Recorded, m: re.Match[str]):
    if not isinstance(req.json, dict) or "body" not in req.json:
        return 422, {"message": "Validation Failed"}, {}
    return 201, _public(gh._new_comment(m["repo"], int(m["n"]), req.json["body"], "bot")), {}


def _edit_comment(gh: FakeGitHub, req: Recorded, m: re.Match[str]):
    comment = gh.comments.get(int(m["id"]))
    if comment is None or comment["_repo"] != m["repo"]:
        return 404, {"message": "Not Found"}, {}
    comment["body"] = req.json["body"]
    return 200, _public(comment), {}


def _create_status(gh: FakeGitHub, req: Recorded, m: re.Match[str]):
    if req.json.get("state") not in {"error", "failure", "pending", "success"}:
        return 422, {"message": "Validation Failed"}, {}
    if len(req.json.get("description", "")) > 140:
        return 422, {"message": "description is too long (maximum is 140 characters)"}, {}
    status = {"id": len(gh.statuses) + 1, "sha": m["sha"], "_repo": m["repo"], **req.json}
    gh.statuses.append(status)
    return 201, _public(status), {}


def _list_issues(gh: FakeGitHub, req: Recorded, m: re.Match[str]):
    state = req.query.get("state", ["open"])[0]
    wanted = set(req.query["labels"][0].split(",")) if "labels" in req.query else set()
    items = [
        i
        for i in sorted(gh.issues.values(), key=lambda i: -i["number"])
        if i["_repo"] == m["repo"]
        and state in {"all", i["state"]}
        and wanted <= {label["name"] for label in i["labels"]}
    ]
    body, headers = gh._page(req, items)
    return 200, body, headers


def _create_issue(gh: FakeGitHub, req: Recorded, m: re.Match[str]):
    data = req.json
    issue = gh._new_issue(
        m["repo"], data["title"], data.get("body", ""), data.get("labels", []), "open", False
    )
    return 201, _public(issue), {}


def _edit_issue(gh: FakeGitHub, req: Recorded, m: re.Match[str]):
    issue = gh.issues.get(int(m["n"]))
    if issue is None or issue["_repo"] != m["repo"]:
        return 404, {"message": "Not Found"}, {}
    issue.update({k: v for k, v in req.json.items() if k in {"title", "body", "state"}})
    return 200, _public(issue), {}


_COARSE = {"admin": "admin", "maintain": "write", "write": "write", "triage": "read"}


def _permission(gh: FakeGitHub, req: Recorded, m: re.Match[str]):
    role = gh.permissions.get(m["user"], "none")
    coarse = _COARSE.get(role, role)
    return 200, {"permission": coarse, "role_name": role, "user": {"login": m["user"]}}, {}


def _get_pull(gh: FakeGitHub, req: Recorded, m: re.Match[str]):
    pull = gh.pulls.get(int(m["n"]))
    if pull is None or pull["_repo"] != m["repo"]:
        return 404, {"message": "Not Found"}, {}
    return 200, _public(pull), {}


def _react(gh: FakeGitHub, req: Recorded, m: re.Match[str]):
    comment = gh.comments.get(int(m["id"]))
    if comment is None or comment["_repo"] != m["repo"]:
        return 404, {"message": "Not Found"}, {}
    content = (req.json or {}).get("content")
    if content not in {"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"}:
        return 422, {"message": "Validation Failed"}, {}
    reaction = {"id": len(gh.reactions) + 1, "content": content, "_comment": comment["id"]}
    gh.reactions.append(reaction)
    return 201, _public(reaction), {}


def _rerun(gh: FakeGitHub, req: Recorded, m: re.Match[str]):
    gh.reruns.append(int(m["id"]))
    return 201, {}, {}


ROUTES: list[tuple[str, re.Pattern[str], Handler]] = [
    ("GET", re.compile(REPO + r"/collaborators/(?P<user>[^/]+)/permission$"), _permission),
    ("GET", re.compile(REPO + r"/pulls/(?P<n>\d+)$"), _get_pull),
    ("POST", re.compile(REPO + r"/issues/comments/(?P<id>\d+)/reactions$"), _react),
    ("POST", re.compile(REPO + r"/actions/runs/(?P<id>\d+)/rerun$"), _rerun),
    ("GET", re.compile(REPO + r"/issues/(?P<n>\d+)/comments$"), _list_comments),
    ("POST", re.compile(REPO + r"/issues/(?P<n>\d+)/comments$"), _create_comment),
    ("PATCH", re.compile(REPO + r"/issues/comments/(?P<id>\d+)$"), _edit_comment),
    ("POST", re.compile(REPO + r"/statuses/(?P<sha>[0-9a-fA-F]+)$"), _create_status),
    ("GET", re.compile(REPO + r"/issues$"), _list_issues),
    ("POST", re.compile(REPO + r"/issues$"), _create_issue),
    ("PATCH", re.compile(REPO + r"/issues/(?P<n>\d+)$"), _edit_issue),
]


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output quiet; requests are recorded instead

    def _handle(self) -> None:
        gh = self.server.fake
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        payload = json.loads(raw) if raw else None
        path = parts.path
        request = Recorded(
            self.command, path, parse_qs(parts.query), dict(self.headers.items()), payload
        )
        with gh.lock:
            gh.requests.append(request)
            status, body, headers = self._answer(gh, request)
            request.status = status
        self._send(status, body, headers)

    def _answer(self, gh: FakeGitHub, request: Recorded) -> tuple[int, Json, dict[str, str]]:
        if not request.path.startswith(gh.prefix + "/"):
            gh.unknown.append(request)
            return 404, {"message": f"fake GitHub: no route {request.method} {request.path}"}, {}
        request.path = request.path[len(gh.prefix) :]
        if gh.token is not None and self.headers.get("Authorization") not in {
            f"Bearer {gh.token}",
            f"token {gh.token}",
        }:
            return 401, {"message": "Bad credentials"}, {}
        failure = gh._take_failure(request.method, request.path)
        if failure is not None and not failure.process:
            return failure.status, failure.body, failure.headers
        for method, pattern, handler in ROUTES:
            match = pattern.match(request.path)
            if method == request.method and match:
                answer = handler(gh, request, match)
                if failure is not None:
                    return failure.status, failure.body, failure.headers
                return answer
        gh.unknown.append(request)
        return 404, {"message": f"fake GitHub: no route {request.method} {request.path}"}, {}

    def _send(self, status: int, body: Json, headers: dict[str, str]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeGitHub


def start(fake: FakeGitHub | None = None) -> tuple[FakeGitHub, Callable[[], None]]:
    """Serve ``fake`` on 127.0.0.1 with an ephemeral port; returns it and a stop function."""
    fake = fake or FakeGitHub()
    server = _Server((fake.host, 0), _Handler)
    server.fake = fake
    fake.port = server.server_address[1]
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-github", daemon=True
    )
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    return fake, stop


@pytest.fixture
def github_server() -> Iterator[FakeGitHub]:
    """A running fake GitHub API; ``.url`` is its root, ``.requests`` what it received."""
    fake, stop = start()
    try:
        yield fake
    finally:
        stop()
