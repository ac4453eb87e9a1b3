"""The ``history`` setting: which branch of ``origin`` keeps the run documents, if any."""

from __future__ import annotations

import re

from perfci.core.errors import ConfigError

DEFAULT_BRANCH = "perfci-data"
_BRANCH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,199}")


def parse_history(value: str | None) -> str | None:
    """The history branch named by a ``history`` setting, or ``None`` for no history.

    ``git:BRANCH``, or ``git`` for :data:`DEFAULT_BRANCH`; ``none``/``off``/empty: no history.
    """
    if value is None or value.strip().lower() in ("", "none", "off", "false"):
        return None
    scheme, _, branch = value.strip().partition(":")
    if scheme != "git":
        raise ConfigError(
            f"history {value!r}: expected git:BRANCH (e.g. git:{DEFAULT_BRANCH}) or none"
        )
    branch = branch or DEFAULT_BRANCH
    if not _BRANCH.fullmatch(branch) or ".." in branch or branch.endswith((".lock", "/", ".")):
        raise ConfigError(f"history {value!r}: {branch!r} is not a valid branch name")
    return branch
