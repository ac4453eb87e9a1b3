"""The variables perfci keeps from every process it starts: which they are, and where they are held.

The benchmark is the code under test (a pull request's, in CI) and runs as the same user as
perfci. Every ``PERFCI_*`` setting, the CI's tokens and the workflow-command files
(``GITHUB_ENV``, ``GITHUB_OUTPUT``, ``GITHUB_PATH``, ``GITHUB_STATE``, ``GITHUB_STEP_SUMMARY``)
are *private* (:func:`is_private`): no process perfci starts inherits them. A process that
starts the benchmark moves them out of its environment at start
(:mod:`perfci.integrations.isolation`, which re-executes the process so that not even
``/proc/$PPID/environ`` shows them) and holds them here, in memory only: :func:`environ` and
:func:`get` are how perfci reads its environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = [
    "BENCHMARK_VARIABLES",
    "SECRETS_FD",
    "SECRETS_FILE",
    "WITHHELD_CI_VARIABLES",
    "WORKFLOW_FILES",
    "environ",
    "get",
    "held",
    "hold",
    "is_private",
]

#: What perfci sets for each repeat of the benchmark; every other ``PERFCI_*`` is private.
BENCHMARK_VARIABLES = ("PERFCI_OUTPUT_DIR", "PERFCI_REPEAT", "PERFCI_PROFILER")
#: The CI's credentials: GitHub's API tokens, and the Actions runtime's tokens with the
#: service URLs they unlock (cache, artifacts, OIDC id tokens).
WITHHELD_CI_VARIABLES = (
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_RUNTIME_URL",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
    "ACTIONS_CACHE_URL",
    "ACTIONS_RESULTS_URL",
)
#: GitHub Actions' workflow-command files: whoever writes to them sets the job's environment
#: (``GITHUB_ENV``, ``GITHUB_PATH``), its outputs and its summary, for every later step.
WORKFLOW_FILES = (
    "GITHUB_ENV",
    "GITHUB_OUTPUT",
    "GITHUB_PATH",
    "GITHUB_STATE",
    "GITHUB_STEP_SUMMARY",
)
#: The inherited file descriptor the re-executed process reads its private variables from.
SECRETS_FD = "PERFCI_SECRETS_FD"
#: A file of private variables, read and deleted at the start (the Action's hand-over).
SECRETS_FILE = "PERFCI_SECRETS_FILE"

#: The private variables this process holds in memory (after :func:`receive`).
_held: dict[str, str] = {}


def is_private(name: str) -> bool:
    """Whether ``name`` is kept from the processes perfci starts (module docstring)."""
    if name.startswith("PERFCI_"):
        # Default-deny for perfci's namespace: a setting added later (a webhook, a token) is
        # private without anyone having to remember this list.
        return name not in BENCHMARK_VARIABLES
    return name in WITHHELD_CI_VARIABLES or name in WORKFLOW_FILES


def held() -> dict[str, str]:
    """The private variables this process received (empty when it was not isolated)."""
    return dict(_held)


def environ() -> dict[str, str]:
    """``os.environ`` with the private variables this process holds: what perfci reads."""
    return {**os.environ, **_held}


def get(name: str, default: str | None = None) -> str | None:
    """One variable of :func:`environ`."""
    return _held.get(name, os.environ.get(name, default))


def hold(values: Mapping[str, str]) -> None:
    """Keep ``values`` in memory as private variables of this process."""
    _held.update(values)
