"""The first thing a command that starts the benchmark does: shed perfci's secrets.

``perfci check`` and ``perfci run`` start the code under test as the same user; before anything
else the process becomes one whose environment never held the secrets
(:func:`perfci.integrations.isolation.isolate`: it re-executes itself and keeps them in memory).
"""

from __future__ import annotations

from perfci.integrations import isolation

__all__ = ["isolate_from_secrets"]


def isolate_from_secrets() -> None:
    """Make this process one that never held perfci's secrets in its environment (it may
    re-execute itself and not return)."""
    isolation.isolate()
