"""Post a message to a Slack incoming webhook, over perfci's one HTTP layer
(:mod:`perfci.integrations.http`).

- Connection errors and 5xx answers are retried (``retries`` times, exponential backoff capped
  at 10 s). Slack offers no idempotency key, so a 5xx after Slack posted the message can, rarely,
  post it twice; a lost weekly report is worse than a duplicate.
- 429 is waited out per ``Retry-After`` (seconds or an HTTP date), at most ``max_wait_s`` in
  all; a longer wait is an error.
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

from perfci.core.errors import ConfigError, SlackError
from perfci.integrations.http import TIMEOUT, mount_retrying, retry_after_wait, retrying_adapter

__all__ = ["SlackError", "post_slack"]

log = logging.getLogger(__name__)

#: Slack's documented limit for one message's text.
MAX_TEXT_CHARS = 40_000


def post_slack(
    webhook_url: str,
    text: str,
    *,
    session: requests.Session | None = None,
    retries: int = 3,
    max_wait_s: float = 60.0,
    sleep: Callable[[float], None] = time.sleep,
    timeout: tuple[float, float] = TIMEOUT,
) -> None:
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
        raise ConfigError(
            "the Slack webhook URL must be an http(s) URL (https://hooks.slack.com/services/...)"
        )
    if len(text) > MAX_TEXT_CHARS:
        text = text[: MAX_TEXT_CHARS - 1] + "…"
    where = f"Slack webhook on {parts.hostname}"  # the path is the secret
    http = session or requests.Session()
    # POST is retried after a 5xx too: see the module's docstring.
    adapter = retrying_adapter(
        retries=retries,
        retry_methods={"POST"},
        max_wait_s=max_wait_s,
        sleep=sleep,
        timeout=timeout,
        label=where,
    )
    mount_retrying(http, f"{parts.scheme}://{parts.netloc}/", adapter)
    try:
        response = http.post(webhook_url.strip(), json={"text": text}, timeout=timeout)
    except requests.RequestException as exc:
        # str(exc) names the URL, i.e. the secret: keep the exception's class only.
        raise SlackError(
            f"{where} kept failing after {retries} retries (could not connect: "
            f"{type(exc).__name__})"
        ) from None
    finally:
        if session is None:
            http.close()
    _check(response, where=where, retries=retries, max_wait_s=max_wait_s)


def _check(response: requests.Response, *, where: str, retries: int, max_wait_s: float) -> None:
    """Nothing when Slack took the message; else the :class:`SlackError` saying why."""
    status = response.status_code
    if 200 <= status < 300:
        return
    reason = response.text.strip()[:200] or response.reason or ""
    wait = retry_after_wait(status, response.headers, time.time())
    if wait is not None:
        raise SlackError(
            f"{where} is rate limiting ({status}) and asks to wait {wait:.0f} s, "
            f"beyond the {max_wait_s:.0f} s perfci waits",
            status=status,
        )
    if status < 500:
        raise SlackError(f"{where} refused the message ({status}: {reason})", status=status)
    raise SlackError(
        f"{where} kept failing after {retries} retries ({status}: {reason})", status=status
    )
