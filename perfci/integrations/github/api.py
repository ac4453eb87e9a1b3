"""The GitHub REST API as perfci calls it: authentication, pagination, rate limits, errors.

:class:`GitHubApi` is the transport under :class:`perfci.integrations.github.client.GitHubClient`.
Its retries are perfci's one HTTP layer (:mod:`perfci.integrations.http`): connection errors for
every method, 5xx for the idempotent ones, rate limits waited out within ``max_wait_s``; a POST
whose outcome is unsure is retried only once ``recover`` finds that nothing was created. Errors are
:class:`~perfci.core.errors.GitHubError` with a message for users (a 403 names the permission the
token lacks); the token is never logged nor put in a message.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import requests

from perfci import __version__
from perfci.core.compat import UTC, Self
from perfci.core.errors import ConfigError, GitHubError
from perfci.integrations.http import (
    IDEMPOTENT,
    TIMEOUT,
    mount_retrying,
    post_with_recovery,
    retry_after_seconds,
    retrying_adapter,
)

__all__ = ["DEFAULT_API_URL", "GitHubApi", "checked_repo"]

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://api.github.com"
PER_PAGE = 100
MAX_PAGES = 1_000
#: Outcomes after which a POST may or may not have been carried out.
_UNSURE = frozenset({None, 500, 502, 503, 504})
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
#: GitHub's advice when a rate-limit answer carries no header saying how long to wait.
_DEFAULT_RATE_LIMIT_WAIT = 60.0
_FORK_HINT = (
    "Pull requests from forks get a read-only GITHUB_TOKEN, so perfci cannot comment "
    "on them or set statuses; the job summary still carries the report."
)


class GitHubApi:
    """GitHub's REST API: requests with the token, retries, pagination and errors.

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
    timeout
        (connect, read) seconds for every request.
    """

    def __init__(
        self,
        token: str | None,
        *,
        api_url: str = DEFAULT_API_URL,
        session: requests.Session | None = None,
        max_wait_s: float = 60,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        retries: int = 3,
        timeout: tuple[float, float] = TIMEOUT,
    ) -> None:
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

    def __repr__(self) -> str:
        token = "***" if self._token else None
        return f"{type(self).__name__}(api_url={self.api_url!r}, token={token})"

    def close(self) -> None:
        if self._owns_session:
            self._session.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _mount_retrying_adapter(self) -> None:
        adapter = retrying_adapter(
            retries=self._retries,
            retry_methods=IDEMPOTENT,
            rate_limit=_rate_limit_wait,
            max_wait_s=self._max_wait_s,
            sleep=self._sleep,
            clock=self._clock,
            timeout=self._timeout,
            label="GitHub",
        )
        mount_retrying(self._session, self._origin + "/", adapter)

    def _url(self, path: str) -> str:
        return self.api_url + path

    def _headers(self) -> dict[str, str]:
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": f"perfci/{__version__}",
        }
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        return headers

    def _paginate(
        self, url: str, params: Mapping[str, Any], *, permission: str
    ) -> Iterator[dict[str, Any]]:
        query: dict[str, Any] | None = {**params, "per_page": PER_PAGE}
        next_url: str | None = url
        for _ in range(MAX_PAGES):
            if next_url is None:
                return
            response = self._request("GET", next_url, params=query, permission=permission)
            items = response.json()
            if not isinstance(items, list):
                raise GitHubError(
                    f"GitHub answered GET {next_url} with something other than a list",
                    status=response.status_code,
                )
            yield from items
            next_url = response.links.get("next", {}).get("url")
            query = None  # the next link carries the query
            if next_url is not None and not next_url.startswith(self._origin + "/"):
                # Never send the token to a host the API URL does not name.
                raise GitHubError(f"GitHub's pagination link points to another host: {next_url}")
        raise GitHubError(f"stopped after {MAX_PAGES} pages of {url}")

    def _post(
        self,
        url: str,
        payload: Mapping[str, Any],
        *,
        permission: str,
        recover: Callable[[], dict[str, Any] | None] | None,
    ) -> dict[str, Any]:
        """POST, retrying an unsure outcome only once ``recover`` finds nothing was created."""
        return post_with_recovery(
            lambda: dict(self._request("POST", url, json=payload, permission=permission).json()),
            error=GitHubError,
            unsure=lambda exc: exc.status in _UNSURE,
            recover=recover,
            retries=self._retries,
            sleep=self._sleep,
            label="GitHub",
        )

    def _request(
        self,
        method: str,
        url: str,
        *,
        permission: str | None = None,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
    ) -> requests.Response:
        """One API call, failures turned into GitHubError.

        The adapter waits out the rate limits its headers announce; what comes back rate
        limited was beyond the bound. A 403 whose only sign of a rate limit is its message (a
        secondary limit without ``Retry-After``) is waited out here, once: GitHub asks for at
        least a minute then.
        """
        for attempt in range(2):
            response = self._send(method, url, json=json, params=params)
            if response.ok:
                return response
            wait = self._rate_limit_wait(response)
            if wait is None:
                raise self._error(method, url, response, permission)
            if (
                attempt
                or wait > self._max_wait_s
                or _rate_limit_wait(response.status_code, response.headers, self._clock())
                is not None
            ):
                log.warning("GitHub %s %s -> %d: rate limited", method, url, response.status_code)
                raise GitHubError(
                    self._rate_limit_message(response, wait), status=response.status_code
                )
            log.warning("GitHub rate limit on %s %s: waiting %.0f s", method, url, wait)
            self._sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _send(
        self, method: str, url: str, *, json: Any, params: Mapping[str, Any] | None
    ) -> requests.Response:
        try:
            response = self._session.request(
                method,
                url,
                json=json,
                params=params,
                headers=self._headers(),
                timeout=self._timeout,
            )
        except requests.RequestException as exc:
            log.warning("GitHub %s %s failed: %s", method, url, type(exc).__name__)
            raise GitHubError(
                f"could not reach GitHub ({method} {url}): {type(exc).__name__}: {exc}"
            ) from exc
        log.debug("GitHub %s %s -> %d", method, url, response.status_code)
        return response

    def _rate_limit_wait(self, response: requests.Response) -> float | None:
        """Seconds to wait when ``response`` is a rate-limit answer, else ``None``.

        Its headers say so (:func:`_rate_limit_wait`), or a 403's message does.
        """
        now = self._clock()
        wait = _rate_limit_wait(response.status_code, response.headers, now)
        if (
            wait is None
            and response.status_code == 403
            and ("rate limit" in _api_message(response).lower())
        ):
            return _DEFAULT_RATE_LIMIT_WAIT
        return wait

    def _rate_limit_message(self, response: requests.Response, wait: float) -> str:
        resets = datetime.fromtimestamp(self._clock() + wait, tz=UTC).strftime("%H:%M:%S UTC")
        return (
            f"GitHub's API rate limit is exhausted ({response.status_code}: "
            f"{_api_message(response)}); it resets at {resets} (in {wait:.0f} s), beyond "
            f"the {self._max_wait_s:.0f} s perfci waits. Re-run the job after that."
        )

    def _error(
        self, method: str, url: str, response: requests.Response, permission: str | None
    ) -> GitHubError:
        status = response.status_code
        message = _api_message(response)
        log.warning("GitHub %s %s -> %d: %s", method, url, status, message)
        where = f"{method} {url}"
        if status == 401:
            if not self._token:
                text = (
                    f"GitHub answered 401 to {where}: no token was given; set GITHUB_TOKEN "
                    "or PERFCI_GITHUB_TOKEN"
                )
            else:
                text = (
                    f"GitHub rejected the token (401 on {where}): the token is invalid or expired"
                )
        elif status in {403, 404} and permission:
            text = (
                f"GitHub refused {where} ({status}: {message}): the token lacks the "
                f"`{permission}` permission, or cannot see this repository. Grant it in the "
                f"workflow's `permissions:` block. {_FORK_HINT}"
            )
        else:
            text = f"GitHub {where} failed with {status}: {message}"
        return GitHubError(text, status=status)


# --- helpers --------------------------------------------------------------------------------


def checked_repo(repo: str) -> str:
    """``repo`` when it is an ``OWNER/NAME`` GitHub repository name, else a ConfigError."""
    if not _REPO.match(repo) or any(part in {".", ".."} for part in repo.split("/")):
        raise ConfigError(f"not a GitHub repository name: {repo!r} (expected OWNER/NAME)")
    return repo


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


def _rate_limit_wait(status: int, headers: Mapping[str, str], now: float) -> float | None:
    """GitHub's rate-limit policy for :mod:`perfci.integrations.http`: seconds to wait, or ``None``.

    A 429, or a 403 carrying ``X-RateLimit-Remaining: 0`` or ``Retry-After``, is a rate limit:
    wait per ``Retry-After``, else until ``X-RateLimit-Reset``, else GitHub's advised minute.
    """
    limited = status == 429 or (
        status == 403 and (headers.get("X-RateLimit-Remaining") == "0" or "Retry-After" in headers)
    )
    if not limited:
        return None
    retry_after = retry_after_seconds(headers.get("Retry-After"), now)
    if retry_after is not None:
        return retry_after
    reset = headers.get("X-RateLimit-Reset")
    if reset and reset.isdigit():
        # One second more: the reset time is whole seconds and clocks differ a little.
        return max(0.0, int(reset) - now) + 1.0
    return _DEFAULT_RATE_LIMIT_WAIT
