"""One HTTP layer for perfci's clients: the GitHub API, Slack webhooks and the perfci server.

:func:`retrying_adapter` (mounted by :func:`make_session`) is a requests adapter that

- puts a timeout on every request that names none (:data:`TIMEOUT`, (connect, read) seconds);
- retries with :class:`BoundedRetry`, a urllib3 ``Retry``:

  - connection errors, for every method: the request never left, so it is always safe;
  - 500/502/503/504 and read errors only for ``retry_methods``, the methods the client knows
    to be idempotent. A POST that may have reached the server is not retried here; see
    :func:`post_with_recovery` for the hook that retries it only once it is known to have
    changed nothing;
  - rate limits, for every method, POST included: a 429 (or a 503 with ``Retry-After``) says
    the server refused the request without carrying it out. How long to wait is the client's
    ``rate_limit`` policy, by default ``Retry-After`` in either form (seconds or an HTTP date,
    read by :func:`retry_after_seconds`, the one parser of it), else ``default_wait``. The
    waits of one call add up to at most ``max_wait_s``: a longer one ends the retries and
    hands the answer back, so that the client can say when to come back.

- waits 0.5, 1, 2 … s (at most 10 s) between retries after errors.

Waiting and the clock are injected (``sleep``, ``clock``) so that tests assert the waits
instead of spending them. Log lines carry the client's ``label`` and never a URL: a Slack
webhook's path is its secret.
"""

from __future__ import annotations

import email.utils
import logging
import time
from collections.abc import Callable, Collection, Mapping
from itertools import takewhile
from typing import Any, TypeVar

import requests
from requests import PreparedRequest
from requests.adapters import HTTPAdapter
from urllib3.connectionpool import ConnectionPool
from urllib3.exceptions import InvalidHeader, MaxRetryError, ResponseError
from urllib3.response import BaseHTTPResponse
from urllib3.util.retry import RequestHistory, Retry

from perfci.core.compat import Self

__all__ = [
    "IDEMPOTENT",
    "RETRY_STATUSES",
    "TIMEOUT",
    "BoundedRetry",
    "RateLimitPolicy",
    "make_session",
    "mount_retrying",
    "post_with_recovery",
    "retry_after_seconds",
    "retry_after_wait",
    "retrying_adapter",
]

log = logging.getLogger(__name__)

#: (connect, read) seconds for every request that names no timeout of its own.
TIMEOUT = (10.0, 30.0)
#: Server errors retried for the methods a client calls idempotent.
RETRY_STATUSES = frozenset({500, 502, 503, 504})
#: Idempotent as perfci uses them (a PATCH sets a body, it does not add to one).
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "DELETE"})
#: Answers that may be rate limits; the client's policy decides from their headers.
_RATE_LIMIT_STATUSES = frozenset({403, 429, 503})
_MAX_RATE_LIMIT_WAITS = 5
_BACKOFF_MAX = 10.0

Sleep = Callable[[float], None]
Clock = Callable[[], float]
#: ``(status, headers, now) -> seconds to wait``, or ``None`` when the answer is no rate limit.
RateLimitPolicy = Callable[[int, Mapping[str, str], float], float | None]
T = TypeVar("T")
E = TypeVar("E", bound=Exception)


def retry_after_seconds(value: str | None, now: float) -> float | None:
    """``Retry-After`` as seconds from ``now``: a number of seconds, or an HTTP date.

    ``None`` when the header is absent or unreadable; never negative.
    """
    if not value or not value.strip():
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


def retry_after_wait(
    status: int, headers: Mapping[str, str], now: float, *, default_wait: float = 1.0
) -> float | None:
    """The default rate-limit policy: a 429, or a 503 that says when to come back."""
    retry_after = retry_after_seconds(headers.get("Retry-After"), now)
    if status == 429:
        return default_wait if retry_after is None else retry_after
    if status == 503 and retry_after is not None:
        return retry_after
    return None


class BoundedRetry(Retry):
    """A urllib3 ``Retry`` with rate-limit waits bounded per call, injected sleep and clock.

    Parameters beyond ``Retry``'s: ``rate_limit`` (the policy), ``max_wait_s`` (the most the
    rate-limit waits of one call add up to), ``sleep``, ``clock`` and ``label`` (names the
    client in log lines). ``waited``, ``next_wait`` and ``waits_left`` are the state one call
    carries from attempt to attempt (urllib3 makes a new ``Retry`` for each).
    """

    def __init__(
        self,
        *args: Any,
        rate_limit: RateLimitPolicy = retry_after_wait,
        max_wait_s: float = 60.0,
        sleep: Sleep = time.sleep,
        clock: Clock = time.time,
        label: str = "HTTP",
        waited: float = 0.0,
        next_wait: float = 0.0,
        waits_left: int = _MAX_RATE_LIMIT_WAITS,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.rate_limit = rate_limit
        self.max_wait_s = max_wait_s
        self.sleeper = sleep
        self.clock = clock
        self.label = label
        self.waited = waited
        self.next_wait = next_wait
        self.waits_left = waits_left

    def new(self, **kw: Any) -> Self:
        carried = {
            "rate_limit": self.rate_limit,
            "max_wait_s": self.max_wait_s,
            "sleep": self.sleeper,
            "clock": self.clock,
            "label": self.label,
            "waited": self.waited,
            "next_wait": self.next_wait,
            "waits_left": self.waits_left,
        }
        return super().new(**{**carried, **kw})

    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        if status_code in _RATE_LIMIT_STATUSES:
            return True  # increment decides: it sees the headers, this does not
        return self._is_method_retryable(method) and status_code in (self.status_forcelist or ())

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: BaseHTTPResponse | None = None,
        error: Exception | None = None,
        _pool: ConnectionPool | None = None,
        _stacktrace: Any = None,
    ) -> Self:
        if response is not None and error is None and response.status in _RATE_LIMIT_STATUSES:
            wait = self.rate_limit(response.status, response.headers, self.clock())
            if wait is not None:
                return self._wait_out(wait, method, url, response, _pool)
            if not (
                method
                and self._is_method_retryable(method)
                and response.status in (self.status_forcelist or ())
            ):
                # Not a rate limit, and not retried for this method: the answer goes back.
                raise MaxRetryError(
                    _pool,  # type: ignore[arg-type]
                    url,
                    ResponseError(f"{response.status} is not retried for {method}"),
                )
        retry = super().increment(method, url, response, error, _pool, _stacktrace)
        wait = retry.get_backoff_time()
        cause = (
            type(error).__name__
            if error is not None
            else str(getattr(response, "status", "no answer"))
        )
        log.warning("%s %s failed (%s); retrying in %.1f s", self.label, method, cause, wait)
        return retry.new(next_wait=wait)

    def _wait_out(
        self,
        wait: float,
        method: str | None,
        url: str | None,
        response: BaseHTTPResponse,
        pool: ConnectionPool | None,
    ) -> Self:
        if self.waits_left <= 0 or self.waited + wait > self.max_wait_s:
            raise MaxRetryError(
                pool,  # type: ignore[arg-type]
                url,
                ResponseError(
                    f"rate limited for {wait:.0f} s, beyond the {self.max_wait_s:.0f} s bound"
                ),
            )
        log.warning(
            "%s %s rate limited (%d): waiting %.0f s", self.label, method, response.status, wait
        )
        history = (*self.history, RequestHistory(method, url, None, response.status, None))
        return self.new(
            history=history,
            waited=self.waited + wait,
            next_wait=wait,
            waits_left=self.waits_left - 1,
        )

    def get_backoff_time(self) -> float:
        # urllib3 waits nothing before the first retry; a server that just failed gets a moment.
        errors = len(list(takewhile(lambda h: h.redirect_location is None, reversed(self.history))))
        if errors == 0:
            return 0.0
        return min(self.backoff_max, self.backoff_factor * 2.0 ** (errors - 1))

    def parse_retry_after(self, retry_after: str) -> float:
        seconds = retry_after_seconds(retry_after, self.clock())
        if seconds is None:
            raise InvalidHeader(f"Invalid Retry-After header: {retry_after}")
        return min(seconds, self.max_wait_s)

    def sleep_for_retry(self, response: BaseHTTPResponse) -> bool:
        wait = self.get_retry_after(response)
        if wait:
            self.sleeper(wait)
            return True
        return False

    def sleep(self, response: BaseHTTPResponse | None = None) -> None:
        if self.next_wait > 0:
            self.sleeper(self.next_wait)


class _TimeoutAdapter(HTTPAdapter):
    """An adapter that gives every request without a timeout of its own ``timeout``."""

    def __init__(self, retry: BoundedRetry, timeout: tuple[float, float]) -> None:
        super().__init__(max_retries=retry)
        self.default_timeout = timeout

    def send(
        self,
        request: PreparedRequest,
        stream: bool = False,
        timeout: float | tuple[float | None, float | None] | None = None,
        verify: bool | str = True,
        cert: str | tuple[str, str] | None = None,
        proxies: dict[str, str] | None = None,
    ) -> requests.Response:
        return super().send(
            request,
            stream=stream,
            timeout=self.default_timeout if timeout is None else timeout,
            verify=verify,
            cert=cert,
            proxies=proxies,
        )


def retrying_adapter(
    *,
    retries: int = 3,
    retry_methods: Collection[str] | None = IDEMPOTENT,
    backoff: float = 0.5,
    rate_limit: RateLimitPolicy = retry_after_wait,
    max_wait_s: float = 60.0,
    sleep: Sleep = time.sleep,
    clock: Clock = time.time,
    timeout: tuple[float, float] = TIMEOUT,
    label: str = "HTTP",
) -> HTTPAdapter:
    """The adapter described in this module's docstring.

    ``retries`` counts attempts after the first for errors and 5xx answers (rate-limit waits
    are bounded by ``max_wait_s`` instead); ``retry_methods=None`` retries every method, for a
    client whose POST is idempotent (an ``Idempotency-Key``) or may be repeated.
    """
    retry = BoundedRetry(
        total=retries,
        connect=retries,
        read=retries,
        status=retries,
        backoff_factor=backoff,
        backoff_max=_BACKOFF_MAX,
        status_forcelist=RETRY_STATUSES,
        allowed_methods=None
        if retry_methods is None
        else frozenset(m.upper() for m in retry_methods),
        raise_on_status=False,
        respect_retry_after_header=True,
        rate_limit=rate_limit,
        max_wait_s=max_wait_s,
        sleep=sleep,
        clock=clock,
        label=label,
    )
    return _TimeoutAdapter(retry, timeout)


def mount_retrying(session: requests.Session, prefix: str, adapter: HTTPAdapter) -> None:
    """Mount ``adapter`` for ``prefix`` unless the session has an adapter of its own there.

    A caller's own transport for that address (a test double, a proxy) wins.
    """
    custom = [
        known
        for known in session.adapters
        if known not in {"http://", "https://"} and prefix.lower().startswith(known.lower())
    ]
    if not custom:
        session.mount(prefix, adapter)


def make_session(**options: Any) -> requests.Session:
    """A new session with :func:`retrying_adapter` (``options``) on every http(s) address."""
    session = requests.Session()
    adapter = retrying_adapter(**options)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def post_with_recovery(
    post: Callable[[], T],
    *,
    error: type[E],
    unsure: Callable[[E], bool],
    recover: Callable[[], T | None] | None,
    retries: int,
    sleep: Sleep,
    label: str = "HTTP",
) -> T:
    """``post()``, retried after an unsure outcome only once nothing was carried out.

    A POST that ends in ``error`` for which ``unsure(exc)`` holds (a 5xx, a lost connection)
    may have been carried out: the server can fail after doing the work. So wait, ask
    ``recover()`` for what the POST would have created (``None`` when there is none), and
    post again only then. ``recover=None`` says the POST is harmless to repeat.
    """
    for attempt in range(retries + 1):
        try:
            return post()
        except error as exc:
            if not unsure(exc) or attempt == retries:
                raise
            log.warning("%s POST may have failed (%s); checking before retrying", label, exc)
        sleep(min(2.0**attempt, _BACKOFF_MAX))
        if recover is not None and (found := recover()) is not None:
            return found
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises
