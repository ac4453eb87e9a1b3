"""Post a message to a Slack incoming webhook, with the GitHub client's retry rules.

- Connection errors and 5xx answers are retried (``retries`` times, exponential backoff capped
  at 10 s). Slack offers no idempotency key, so a 5xx after Slack posted the message can, rarely,
  post it twice; a lost weekly report is worse than a duplicate.
- 429 is waited out per ``Retry-After``, at most ``max_wait_s`` in all; a longer wait is an error.
- Anything else (400 ``invalid_payload``, 403, 404 ``no_service``) fails at once.

The webhook URL is a secret (whoever has it can post to the channel): it is never logged nor put
in an error message, and requests' own exception text, which contains it, is dropped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import requests

from perfci.errors import ConfigError, PerfciError

__all__ = ["SlackError", "post_slack"]

log = logging.getLogger(__name__)

#: (connect, read) seconds for every request.
TIMEOUT = (10.0, 30.0)
#: Slack's documented limit for one message's text.
MAX_TEXT_CHARS = 40_000


class SlackError(PerfciError):
    """Slack refused or failed the message."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


def post_slack(webhook_url: str, text: str, *, session: requests.Session | None = None,
               retries: int = 3, max_wait_s: float = 60.0,
               sleep: Callable[[float], None] = time.sleep,
               timeout: tuple[float, float] = TIMEOUT) -> None:
    """Post ``text`` (Slack ``mrkdwn``) to the incoming webhook ``webhook_url``.

    Raises
    ------
    ConfigError
        The URL is not http(s).
    SlackError
        Slack refused the message, kept failing after ``retries`` retries, or asked to wait
        longer than ``max_wait_s``.
    """
    parts = urlsplit(webhook_url.strip())
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        raise ConfigError("the Slack webhook URL must be an http(s) URL "
                          "(https://hooks.slack.com/services/...)")
    if len(text) > MAX_TEXT_CHARS:
        text = text[: MAX_TEXT_CHARS - 1] + "…"
    where = f"Slack webhook on {parts.hostname}"  # the path is the secret
    http = session or requests.Session()
    try:
        _post(http, webhook_url.strip(), {"text": text}, where=where, retries=retries,
              max_wait_s=max_wait_s, sleep=sleep, timeout=timeout)
    finally:
        if session is None:
            http.close()


def _post(http: requests.Session, url: str, payload: dict[str, str], *, where: str,
          retries: int, max_wait_s: float, sleep: Callable[[float], None],
          timeout: tuple[float, float]) -> None:
    waited = 0.0
    attempt = 0
    while True:
        status, reason, retry_after = _send(http, url, payload, timeout)
        if status is not None and 200 <= status < 300:
            return
        if status == 429:
            wait = retry_after if retry_after is not None else 1.0
            if waited + wait > max_wait_s:
                raise SlackError(f"{where} is rate limiting (429) and asks to wait {wait:.0f} s, "
                                 f"beyond the {max_wait_s:.0f} s perfci waits", status=429)
            log.warning("%s rate limited: waiting %.0f s", where, wait)
            sleep(wait)
            waited += wait
            continue
        if status is not None and status < 500:
            raise SlackError(f"{where} refused the message ({status}: {reason})", status=status)
        if attempt >= retries:
            what = f"{status}: {reason}" if status is not None else reason
            raise SlackError(f"{where} kept failing after {retries} retries ({what})",
                             status=status)
        log.warning("%s failed (%s); retrying", where, status or reason)
        sleep(min(0.5 * 2.0**attempt, 10.0))
        attempt += 1


def _send(http: requests.Session, url: str, payload: dict[str, str],
          timeout: tuple[float, float]) -> tuple[int | None, str, float | None]:
    """(status, reason, Retry-After seconds); status ``None`` when Slack was not reached."""
    try:
        response = http.post(url, json=payload, timeout=timeout)
    except requests.RequestException as exc:
        # str(exc) names the URL, i.e. the secret: keep the exception's class only.
        return None, f"could not connect: {type(exc).__name__}", None
    reason = response.text.strip()[:200] or response.reason or ""
    return response.status_code, reason, _retry_after(response.headers.get("Retry-After"))


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
