"""GitHub REST client over requests: the pull-request comment, commit statuses, issues, and the
helpers a GitHub Actions job needs (job summary, annotations, fork detection).

Retries, and why POST is special:

- An :class:`~requests.adapters.HTTPAdapter` with a urllib3 ``Retry`` retries connection errors
  (the request never reached GitHub, so it is always safe) for every method, and 500/502/503/504
  and read errors for GET, PATCH, PUT and DELETE, which are idempotent here (a PATCH sets a body).
- POST is not idempotent: a 502 can come back after GitHub created the comment. So a POST that
  ends in a 5xx or a lost connection is retried by this module only after looking for what it
  would have created (the comment or issue carrying the hidden marker); a commit status is safe
  to post twice (the latest one per context wins), so it is simply retried.
- Rate limits (429, or 403 with ``X-RateLimit-Remaining: 0`` or ``Retry-After``) are waited out
  per ``Retry-After`` or ``X-RateLimit-Reset``, at most ``max_wait_s`` in all; a longer wait is a
  :class:`~perfci.errors.GitHubError` that says when the limit resets.

Every call has a timeout. Failures are logged with method, URL, status and GitHub's message;
never the token or the ``Authorization`` header.
"""

from __future__ import annotations

import email.utils
import logging
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from perfci import __version__
from perfci.errors import ConfigError, GitHubError

if TYPE_CHECKING:
    from perfci.settings import Settings

__all__ = ["DEFAULT_API_URL", "Comment", "GitHubClient", "Issue", "annotation",
           "is_fork_pull_request", "write_job_summary"]

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://api.github.com"
#: (connect, read) seconds for every request.
TIMEOUT = (10.0, 30.0)
PER_PAGE = 100
MAX_PAGES = 1_000
MAX_BODY_CHARS = 65_536
MAX_STATUS_DESCRIPTION = 140
STATUS_STATES = frozenset({"error", "failure", "pending", "success"})
#: Outcomes after which a POST may or may not have been carried out.
_UNSURE = frozenset({None, 500, 502, 503, 504})
_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "DELETE"})
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
#: GitHub's advice when a rate-limit answer carries no header saying how long to wait.
_DEFAULT_RATE_LIMIT_WAIT = 60.0
_MAX_RATE_LIMIT_WAITS = 5
_COMMENT_PERMISSION = "pull-requests: write` (or `issues: write` for issues"
_FORK_HINT = ("Pull requests from forks get a read-only GITHUB_TOKEN, so perfci cannot comment "
              "on them or set statuses; the job summary still carries the report.")


@dataclass(frozen=True, slots=True)
class Comment:
    """An issue or pull-request comment. ``created`` says whether this call created it."""

    id: int
    url: str
    created: bool = False
    body: str = ""


@dataclass(frozen=True, slots=True)
class Issue:
    """An issue. ``created`` says whether this call created it."""

    number: int
    url: str
    created: bool = False


class GitHubClient:
    """A small GitHub REST client for what perfci writes.

    Parameters
    ----------
    token
        Token sent as ``Authorization: Bearer``; ``None`` for anonymous reads.
    api_url
        REST root: ``https://api.github.com``, or ``https://HOST/api/v3`` on GitHub Enterprise
        Server (Actions gives it as ``GITHUB_API_URL``).
    session
        A requests session to use (tests, proxies); the retrying adapter is mounted on the API's
        origin unless the session already has an adapter of its own for it.
    max_wait_s
        The longest time, in all, one call waits for a rate limit to reset.
    sleep, clock
        Injected for tests: how to wait, and the current UNIX time.
    retries
        Attempts after the first for connection errors and 5xx answers.
    """

    def __init__(self, token: str | None, *, api_url: str = DEFAULT_API_URL,
                 session: requests.Session | None = None, max_wait_s: float = 60,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.time, retries: int = 3,
                 timeout: tuple[float, float] = TIMEOUT) -> None:
        parts = urlsplit(api_url.strip())
        if parts.scheme not in {"http", "https"} or not parts.netloc:
            raise ConfigError(f"GitHub API URL must be http(s)://HOST[/PATH], got {api_url!r}")
        self.api_url = api_url.strip().rstrip("/")
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._token = token or None
        self._owns_session = session is None
        self._session = session or requests.Session()
        self._max_wait_s = max_wait_s
        self._sleep = sleep
        self._clock = clock
        self._retries = retries
        self._timeout = timeout
        self._mount_retrying_adapter()

    @classmethod
    def from_settings(cls, settings: Settings, **kwargs: Any) -> GitHubClient:
        """A client from :class:`perfci.settings.Settings`: its GitHub token and API URL."""
        secret = settings.github_token
        token = secret.get_secret_value() if secret is not None else None
        return cls(token, api_url=settings.github_api_url, **kwargs)

    def __repr__(self) -> str:
        return f"GitHubClient(api_url={self.api_url!r}, token={'***' if self._token else None})"

    def close(self) -> None:
        if self._owns_session:
            self._session.close()

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- pull-request comments ---------------------------------------------------------------

    def find_comment(self, repo: str, issue_number: int, marker: str) -> Comment | None:
        """The first comment on issue/PR ``issue_number`` whose body contains ``marker``.

        Reads every page of comments (100 a page, following ``Link: rel="next"``).
        """
        found = self._find_comment_data(repo, issue_number, marker)
        return _comment(found, created=False) if found else None

    def upsert_comment(self, repo: str, issue_number: int, body: str, marker: str) -> Comment:
        """Create the comment carrying ``marker``, or edit it in place: never a second one.

        ``marker`` is put on the first line of ``body`` when the body does not contain it.
        An unchanged body is not sent again.
        """
        body = _with_marker(body, marker)
        if len(body) > MAX_BODY_CHARS:
            raise GitHubError(f"the comment is {len(body):,} characters; GitHub accepts at most "
                              f"{MAX_BODY_CHARS:,}")
        existing = self._find_comment_data(repo, issue_number, marker)
        if existing is not None:
            if existing.get("body") == body:
                return _comment(existing, created=False)
            url = self._url(f"/repos/{_repo(repo)}/issues/comments/{int(existing['id'])}")
            data = self._request("PATCH", url, json={"body": body},
                                 permission=_COMMENT_PERMISSION).json()
            return _comment(data, created=False)
        url = self._url(f"/repos/{_repo(repo)}/issues/{int(issue_number)}/comments")
        data = self._post(url, {"body": body}, permission=_COMMENT_PERMISSION,
                          recover=lambda: self._find_comment_data(repo, issue_number, marker))
        return _comment(data, created=True)

    def _find_comment_data(self, repo: str, issue_number: int,
                           marker: str) -> dict[str, Any] | None:
        url = self._url(f"/repos/{_repo(repo)}/issues/{int(issue_number)}/comments")
        for item in self._paginate(url, {}, permission="pull-requests: read"):
            if marker in (item.get("body") or ""):
                return item
        return None

    # --- commit statuses ---------------------------------------------------------------------

    def set_status(self, repo: str, sha: str, *, state: str, context: str, description: str,
                   target_url: str | None = None) -> dict[str, Any]:
        """Set commit status ``context`` on ``sha``; ``description`` is cut to 140 characters."""
        if state not in STATUS_STATES:
            raise ValueError(f"status state must be one of {sorted(STATUS_STATES)}, got {state!r}")
        if len(description) > MAX_STATUS_DESCRIPTION:
            description = description[: MAX_STATUS_DESCRIPTION - 1] + "…"
        payload = {"state": state, "context": context, "description": description}
        if target_url:
            payload["target_url"] = target_url
        url = self._url(f"/repos/{_repo(repo)}/statuses/{quote(sha, safe='')}")
        # Posting the same status twice is harmless (the latest per context wins): plain retry.
        return self._post(url, payload, permission="statuses: write", recover=None)

    # --- issues (weekly reports) -------------------------------------------------------------

    def create_or_update_issue(self, repo: str, title: str, body: str, labels: Sequence[str],
                               marker: str, *, state: str = "all") -> Issue:
        """Update the issue whose body carries ``marker``, or create it with ``labels``.

        Looks through every page of the repository's issues with those labels (``state`` "all"
        by default, so a closed report is updated rather than duplicated).
        """
        body = _with_marker(body, marker)
        existing = self._find_issue_data(repo, labels, marker, state)
        if existing is not None:
            url = self._url(f"/repos/{_repo(repo)}/issues/{int(existing['number'])}")
            data = self._request("PATCH", url, json={"title": title, "body": body},
                                 permission="issues: write").json()
            return _issue(data, created=False)
        url = self._url(f"/repos/{_repo(repo)}/issues")
        data = self._post(url, {"title": title, "body": body, "labels": list(labels)},
                          permission="issues: write",
                          recover=lambda: self._find_issue_data(repo, labels, marker, state))
        return _issue(data, created=True)

    def _find_issue_data(self, repo: str, labels: Sequence[str], marker: str,
                         state: str) -> dict[str, Any] | None:
        params: dict[str, Any] = {"state": state}
        if labels:
            params["labels"] = ",".join(labels)
        url = self._url(f"/repos/{_repo(repo)}/issues")
        for item in self._paginate(url, params, permission="issues: read"):
            # The issues endpoint lists pull requests too.
            if "pull_request" not in item and marker in (item.get("body") or ""):
                return item
        return None

    # --- plumbing ----------------------------------------------------------------------------

    def _mount_retrying_adapter(self) -> None:
        custom = [prefix for prefix in self._session.adapters
                  if prefix not in {"http://", "https://"}
                  and self.api_url.lower().startswith(prefix.lower())]
        if custom:
            return  # the caller's own transport for this API wins
        retry = Retry(total=self._retries, connect=self._retries, read=self._retries,
                      status=self._retries, backoff_factor=0.5,
                      status_forcelist=(500, 502, 503, 504), allowed_methods=_IDEMPOTENT,
                      raise_on_status=False, respect_retry_after_header=False)
        self._session.mount(self._origin + "/", HTTPAdapter(max_retries=retry))

    def _url(self, path: str) -> str:
        return self.api_url + path

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/vnd.github+json",
                   "X-GitHub-Api-Version": "2022-11-28",
                   "User-Agent": f"perfci/{__version__}"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        return headers

    def _paginate(self, url: str, params: Mapping[str, Any], *,
                  permission: str) -> Iterator[dict[str, Any]]:
        query: dict[str, Any] | None = {**params, "per_page": PER_PAGE}
        next_url: str | None = url
        for _ in range(MAX_PAGES):
            if next_url is None:
                return
            response = self._request("GET", next_url, params=query, permission=permission)
            items = response.json()
            if not isinstance(items, list):
                raise GitHubError(f"GitHub answered GET {next_url} with something other than a "
                                  "list", status=response.status_code)
            yield from items
            next_url = response.links.get("next", {}).get("url")
            query = None  # the next link carries the query
            if next_url is not None and not next_url.startswith(self._origin + "/"):
                # Never send the token to a host the API URL does not name.
                raise GitHubError(f"GitHub's pagination link points to another host: {next_url}")
        raise GitHubError(f"stopped after {MAX_PAGES} pages of {url}")

    def _post(self, url: str, payload: Mapping[str, Any], *, permission: str,
              recover: Callable[[], dict[str, Any] | None] | None) -> dict[str, Any]:
        """POST, retrying an unsure outcome only once ``recover`` finds nothing was created."""
        for attempt in range(self._retries + 1):
            try:
                return dict(self._request("POST", url, json=payload, permission=permission).json())
            except GitHubError as exc:
                if exc.status not in _UNSURE or attempt == self._retries:
                    raise
                log.warning("GitHub POST %s may have failed (%s); checking before retrying",
                            url, exc.status or "no answer")
            self._sleep(min(2.0**attempt, 10.0))
            if recover is not None and (found := recover()) is not None:
                return found
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _request(self, method: str, url: str, *, permission: str | None = None,
                 json: Any = None, params: Mapping[str, Any] | None = None) -> requests.Response:
        """One API call: rate limits waited out, failures turned into GitHubError."""
        waited = 0.0
        for _ in range(_MAX_RATE_LIMIT_WAITS + 1):
            response = self._send(method, url, json=json, params=params)
            wait = self._rate_limit_wait(response)
            if wait is None:
                break
            if waited + wait > self._max_wait_s:
                log.warning("GitHub %s %s -> %d: rate limited", method, url,
                            response.status_code)
                raise GitHubError(self._rate_limit_message(response, wait),
                                  status=response.status_code)
            log.warning("GitHub rate limit on %s %s: waiting %.0f s", method, url, wait)
            self._sleep(wait)
            waited += wait
        else:
            raise GitHubError(f"GitHub kept rate-limiting {method} {url} after "
                              f"{_MAX_RATE_LIMIT_WAITS} waits", status=response.status_code)
        if response.ok:
            return response
        raise self._error(method, url, response, permission)

    def _send(self, method: str, url: str, *, json: Any,
              params: Mapping[str, Any] | None) -> requests.Response:
        try:
            response = self._session.request(method, url, json=json, params=params,
                                             headers=self._headers(), timeout=self._timeout)
        except requests.RequestException as exc:
            log.warning("GitHub %s %s failed: %s", method, url, type(exc).__name__)
            raise GitHubError(f"could not reach GitHub ({method} {url}): "
                              f"{type(exc).__name__}: {exc}") from exc
        log.debug("GitHub %s %s -> %d", method, url, response.status_code)
        return response

    def _rate_limit_wait(self, response: requests.Response) -> float | None:
        """Seconds to wait when ``response`` is a rate-limit answer, else ``None``."""
        headers = response.headers
        limited = response.status_code == 429 or (
            response.status_code == 403
            and (headers.get("X-RateLimit-Remaining") == "0" or "Retry-After" in headers
                 or "rate limit" in _api_message(response).lower()))
        if not limited:
            return None
        retry_after = _retry_after_seconds(headers.get("Retry-After"), self._clock())
        if retry_after is not None:
            return retry_after
        reset = headers.get("X-RateLimit-Reset")
        if reset and reset.isdigit():
            # One second more: the reset time is whole seconds and clocks differ a little.
            return max(0.0, int(reset) - self._clock()) + 1.0
        return _DEFAULT_RATE_LIMIT_WAIT

    def _rate_limit_message(self, response: requests.Response, wait: float) -> str:
        resets = datetime.fromtimestamp(self._clock() + wait, tz=UTC).strftime("%H:%M:%S UTC")
        return (f"GitHub's API rate limit is exhausted ({response.status_code}: "
                f"{_api_message(response)}); it resets at {resets} (in {wait:.0f} s), beyond "
                f"the {self._max_wait_s:.0f} s perfci waits. Re-run the job after that.")

    def _error(self, method: str, url: str, response: requests.Response,
               permission: str | None) -> GitHubError:
        status = response.status_code
        message = _api_message(response)
        log.warning("GitHub %s %s -> %d: %s", method, url, status, message)
        where = f"{method} {url}"
        if status == 401:
            if not self._token:
                text = (f"GitHub answered 401 to {where}: no token was given; set GITHUB_TOKEN "
                        "or PERFCI_GITHUB_TOKEN")
            else:
                text = (f"GitHub rejected the token (401 on {where}): the token is invalid or "
                        "expired")
        elif status in {403, 404} and permission:
            text = (f"GitHub refused {where} ({status}: {message}): the token lacks the "
                    f"`{permission}` permission, or cannot see this repository. Grant it in the "
                    f"workflow's `permissions:` block. {_FORK_HINT}")
        else:
            text = f"GitHub {where} failed with {status}: {message}"
        return GitHubError(text, status=status)


# --- helpers --------------------------------------------------------------------------------


def _repo(repo: str) -> str:
    if not _REPO.match(repo) or any(part in {".", ".."} for part in repo.split("/")):
        raise ConfigError(f"not a GitHub repository name: {repo!r} (expected OWNER/NAME)")
    return repo


def _with_marker(body: str, marker: str) -> str:
    return body if marker in body else f"{marker}\n{body}"


def _comment(data: Mapping[str, Any], *, created: bool) -> Comment:
    return Comment(id=int(data["id"]), url=str(data.get("html_url") or data.get("url") or ""),
                   created=created, body=str(data.get("body") or ""))


def _issue(data: Mapping[str, Any], *, created: bool) -> Issue:
    return Issue(number=int(data["number"]),
                 url=str(data.get("html_url") or data.get("url") or ""), created=created)


def _api_message(response: requests.Response) -> str:
    """GitHub's ``message`` (and validation errors), else the start of the body."""
    try:
        data = response.json()
    except ValueError:
        return response.text[:300].strip() or response.reason or ""
    if not isinstance(data, dict):
        return str(data)[:300]
    message = str(data.get("message", ""))
    errors = data.get("errors")
    if errors:
        message += f" ({errors})"[:300]
    return message


def _retry_after_seconds(value: str | None, now: float) -> float | None:
    """``Retry-After`` as seconds: a number, or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


# --- GitHub Actions ------------------------------------------------------------------------


def write_job_summary(markdown: str, path: str | os.PathLike[str] | None = None) -> bool:
    """Append ``markdown`` to the job summary (``$GITHUB_STEP_SUMMARY``, or ``path``).

    Returns whether it was written: ``False`` outside GitHub Actions.
    """
    target = path if path is not None else os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return False
    with Path(target).open("a", encoding="utf-8") as handle:
        handle.write(markdown if markdown.endswith("\n") else markdown + "\n")
    return True


_LEVELS = frozenset({"debug", "notice", "warning", "error"})


def annotation(level: str, message: str, *, title: str | None = None,
               file: str | None = None, line: int | None = None) -> str:
    """A workflow command such as ``::error file=a.py,title=Slower::step time +5 %``.

    Escaped as the Actions runner expects: ``%``, CR and LF in the message; also ``:`` and
    ``,`` in property values.
    """
    if level not in _LEVELS:
        raise ValueError(f"annotation level must be one of {sorted(_LEVELS)}, got {level!r}")
    props = [(key, str(value)) for key, value in (("file", file), ("line", line),
                                                  ("title", title)) if value is not None]
    rendered = ",".join(f"{key}={_escape_property(value)}" for key, value in props)
    return f"::{level}{' ' + rendered if rendered else ''}::{_escape_data(message)}"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def is_fork_pull_request(event: Mapping[str, Any]) -> bool:
    """Whether a GitHub event payload is a pull request from a fork (read-only token).

    A head repository that is gone (deleted fork) counts as a fork.
    """
    pull = event.get("pull_request")
    if not isinstance(pull, Mapping):
        return False
    head = (pull.get("head") or {}).get("repo")
    base = (pull.get("base") or {}).get("repo") or {}
    if not head:
        return True
    # Not ``head.repo.fork``: that is also true for a same-repository PR in a forked project.
    return bool(head.get("full_name") and head.get("full_name") != base.get("full_name"))
