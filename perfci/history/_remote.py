"""The history branch's remote: its URL, and what authenticates to it.

Authentication: the checkout's own ``http.*.extraheader`` (what ``actions/checkout`` persists)
is reused, else a GitHub token is sent as the same header for an ``https://`` origin on one of
``token_hosts`` (the GitHub server's). Both go to git through ``GIT_CONFIG_*`` environment
variables, never on a command line (``ps`` shows those) and never in a message.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Collection
from pathlib import Path
from urllib.parse import urlsplit

from perfci.core.errors import StorageError
from perfci.history._git import read_checkout

_CREDENTIALS = re.compile(r"://[^/@\s]+@")


def redact(url: str) -> str:
    return _CREDENTIALS.sub("://***@", url)


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return redact(lines[-1]) if lines else "no message"


def remote_url(checkout: Path, remote: str, branch: str) -> str:
    """The URL of the checkout's ``remote``, a relative local path made absolute."""
    done = read_checkout(checkout, "remote", "get-url", remote)
    url = done.stdout.decode().strip()
    if done.returncode != 0 or not url:
        raise StorageError(
            f"the checkout {checkout} has no `{remote}` remote, so "
            f"there is no {branch} branch to read or write history"
        )
    if "://" not in url and not re.match(r"^[^/]+:", url) and not Path(url).is_absolute():
        url = str((checkout / url).resolve())  # a relative local path
    return url


def auth_config(
    checkout: Path, url: str, token: str | None, hosts: Collection[str] | None
) -> list[tuple[str, str]]:
    """The git config that authenticates to ``url``: the checkout's persisted header, else
    ``token`` as that header for an ``https://`` URL on one of ``hosts``; else none."""
    done = read_checkout(checkout, "config", "--local", "--get-regexp", r"^http\..*extraheader$")
    persisted = [
        tuple(line.split(" ", 1)) for line in done.stdout.decode().splitlines() if " " in line
    ]
    if persisted:
        return [(k, v) for k, v in persisted]
    parts = urlsplit(url)
    allowed = hosts is None or (parts.hostname or "").lower() in {h.lower() for h in hosts}
    if token and parts.scheme == "https" and parts.hostname and allowed:
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        host = parts.hostname + (f":{parts.port}" if parts.port else "")
        return [(f"http.https://{host}/.extraheader", f"AUTHORIZATION: basic {basic}")]
    return []
