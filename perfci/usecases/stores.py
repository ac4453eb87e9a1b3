"""A unit of work on the configured store, for the commands that read or change a few rows.

The use-case functions of ``tokens``, ``projects``, ``alerts`` take a Session so that the
service can run them inside a request's session; a CLI command gets its session here, so that
opening the store (URL, migration of the embedded SQLite file, schema check) stays below the
shells.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from perfci.core.settings import get_settings
from perfci.integrations.context import detect_run_context
from perfci.store.db import open_store

if TYPE_CHECKING:
    from perfci.store.work import Session


@contextmanager
def session_for(database_url: str | None) -> Iterator[Session]:
    """A session on the store ``database_url`` (else the settings') names; closed on exit.

    The use-case functions handed this session commit their own work.
    """
    store = open_store(get_settings({"database_url": database_url}))
    try:
        with store.sessions() as session:
            yield session
    finally:
        store.close()


def project_or_default(project: str | None) -> str:
    """The project a ``--project`` flag names, else the settings', else the repository's."""
    return get_settings({"project": project}).project or detect_run_context(None).project
