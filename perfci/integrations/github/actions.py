"""What a GitHub Actions job needs besides the REST API: the job summary, workflow-command
annotations, and whether the pull request comes from a fork (whose token is read-only)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfci.core import private_env

__all__ = ["annotation", "is_fork_pull_request", "write_job_summary"]


def write_job_summary(markdown: str, path: str | os.PathLike[str] | None = None) -> bool:
    """Append ``markdown`` to the job summary (``$GITHUB_STEP_SUMMARY``, or ``path``).

    Returns whether it was written: ``False`` outside GitHub Actions.
    """
    target = path if path is not None else private_env.get("GITHUB_STEP_SUMMARY")
    if not target:
        return False
    with Path(target).open("a", encoding="utf-8") as handle:
        handle.write(markdown if markdown.endswith("\n") else markdown + "\n")
    return True


_LEVELS = frozenset({"debug", "notice", "warning", "error"})


def annotation(
    level: str,
    message: str,
    *,
    title: str | None = None,
    file: str | None = None,
    line: int | None = None,
) -> str:
    """A workflow command such as ``::error file=a.py,title=Slower::step time +5 %``.

    Escaped as the Actions runner expects: ``%``, CR and LF in the message; also ``:`` and
    ``,`` in property values.
    """
    if level not in _LEVELS:
        raise ValueError(f"annotation level must be one of {sorted(_LEVELS)}, got {level!r}")
    props = [
        (key, str(value))
        for key, value in (("file", file), ("line", line), ("title", title))
        if value is not None
    ]
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
