"""The history branch in a check: read it into the embedded store first, append to it after.

``perfci check`` with ``history = "git:perfci-data"`` (``--history``, ``PERFCI_HISTORY``, or a
database URL of ``git:perfci-data``):

1. :func:`sync_history`, before the run is stored: fetch the branch and ingest the run documents
   the store has not seen. The branch commit last imported is kept beside perfci's cached
   repository of the branch (``~/.cache/perfci/history/<branch>-<digest>.imported``, with a
   digest of the store's URL), so a persistent runner reads only the files added since; a fresh
   runner reads them all. Either way ingest is idempotent (a run's key is its CI invocation),
   so a file read twice is stored once. A file that cannot be read (not gzip, not a run, JSON
   nested thousands deep) is skipped and named in a warning; the others are stored.
2. :func:`record_history`, after the run is stored and compared: when the run is a push to the
   base branch (no pull request, branch = baseline branch), append its document and push.
   Pull requests read the branch and never write it (a fork's token could not anyway).

Problems (no ``origin``, no permission to push, a bad file on the branch) come back as warnings
and never fail the check, unless ``history_required`` is set; with a server URL the server holds
the history and both steps are skipped. A branch that is a base branch of the code (the
``baseline_branch``, a ``base_branches`` pattern, the remote's default branch) or that perfci
did not make is refused (issue 31: ``history = "git:main"`` once squashed ``main``).
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from perfci.core import private_env
from perfci.core.compat import UTC
from perfci.core.errors import ConfigError, PerfciError
from perfci.core.model import Profile, RunContext
from perfci.core.settings import Settings
from perfci.core.settings_sources import find_project_root
from perfci.history import (
    GitBranch,
    HistoryRun,
    cache_root,
    decode_run,
    encode_run,
    parse_history,
    run_path,
)
from perfci.history.documents import RUNS_DIR
from perfci.store.db import open_store
from perfci.store.engines import sqlite_file
from perfci.usecases.submit.ingest import ingest_run

if TYPE_CHECKING:
    from perfci.store.work import SessionFactory

logger = logging.getLogger("perfci.history")
#: What a bad run file on the branch may raise while it is read and stored: skipped, named.
_BAD_FILE = (PerfciError, RecursionError, ValueError, TypeError, KeyError, AttributeError)


@dataclass(frozen=True, slots=True)
class SyncResult:
    """What a sync did: the branch tip read (``None``: no branch yet) and runs ingested."""

    commit: str | None
    files: int
    stored: int
    warnings: list[str]


def sync_history(settings: Settings, *, cwd: Path | None = None) -> list[str]:
    """Read the history branch into the store (when a history is configured); the warnings."""
    branch = parse_history(settings.history)
    if branch is None or settings.server_url:
        return []
    return _guarded(settings, lambda: sync_branch(settings, branch, cwd=cwd).warnings)


def record_history(
    settings: Settings,
    context: RunContext,
    benchmark: str,
    repeats: Sequence[Sequence[Profile]],
    *,
    baseline_branch: str | None = None,
    cwd: Path | None = None,
) -> list[str]:
    """Append the run to the history branch when it is a base-branch push; the warnings."""
    branch = parse_history(settings.history)
    if (
        branch is None
        or settings.server_url
        or not is_base_branch_push(context, baseline_branch or settings.baseline_branch)
    ):
        return []

    def append() -> list[str]:
        entry = HistoryRun(benchmark, context, [list(r) for r in repeats], datetime.now(UTC))
        message = f"perfci: {benchmark} at {(context.commit or 'unknown')[:12]}"
        append_history(settings, branch, [entry], message=message, cwd=cwd)
        return []

    return _guarded(settings, append)


def append_history(
    settings: Settings,
    branch: str,
    entries: Sequence[HistoryRun],
    *,
    message: str,
    cwd: Path | None = None,
) -> int:
    """Append the runs' documents to the history ``branch`` in one push; how many it pushed
    (0 when every one was there already: an import run twice).

    Raises
    ------
    StorageError
        git failed: no ``origin``, no permission to push, or the race lost too often.
    """
    documents: dict[str, bytes] = {}
    for entry in entries:
        document = encode_run(
            context=entry.context,
            benchmark=entry.benchmark,
            repeats=entry.repeats,
            created_at=entry.created_at,
        )
        path = run_path(
            context=entry.context,
            benchmark=entry.benchmark,
            created_at=entry.created_at,
            document=document,
        )
        documents[path] = document
    done = _branch(settings, branch, find_project_root(cwd)).append(
        documents, max_bytes=settings.history_max_bytes, prefix=f"{RUNS_DIR}/", message=message
    )
    logger.info("history: %s", _pushed_words(entries, branch, done.already_there))
    if done.attempts > 1 or done.dropped:
        logger.debug(
            "history: %d push attempt(s), %d old run(s) dropped", done.attempts, len(done.dropped)
        )
    return 0 if done.already_there else len(documents)


def _pushed_words(entries: Sequence[HistoryRun], branch: str, already_there: bool) -> str:
    """One line for the job's log: which run went to which branch (a push is otherwise
    silent, and a reader of the log could not tell the history was written)."""
    if len(entries) == 1:
        entry = entries[0]
        what = f"run of {entry.benchmark} at {(entry.context.commit or 'unknown')[:12]}"
    else:
        what = f"{len(entries)} runs"
    if already_there:
        return f"{what} already on git:{branch}, nothing pushed"
    return f"pushed {what} to git:{branch}"


def is_base_branch_push(context: RunContext, baseline_branch: str) -> bool:
    """A run that belongs in the base branch's history: no pull request, on that branch."""
    return (
        context.pr_number is None and bool(context.branch) and (context.branch == baseline_branch)
    )


def sync_branch(settings: Settings, branch: str, *, cwd: Path | None = None) -> SyncResult:
    """Fetch ``branch`` and ingest its run files the store has not seen (see module doc).

    Raises
    ------
    StorageError
        git failed (no remote, no access) or the store did.
    """
    root = find_project_root(cwd)
    history = _branch(settings, branch, root)
    tip = history.fetch()
    if tip is None:
        logger.info("history: git:%s holds no runs yet", branch)
        return SyncResult(commit=None, files=0, stored=0, warnings=[])
    url = settings.resolved_database_url(root)
    marker = history.repo.with_suffix(".imported")
    previous = _read_marker(marker, url)
    if previous == tip and _store_exists(url):
        logger.info("history: no new runs on git:%s since the last read", branch)
        return SyncResult(commit=tip, files=0, stored=0, warnings=[])
    prefix = f"{RUNS_DIR}/"
    if previous and _store_exists(url) and history.has_commit(previous):
        files = history.added(previous, tip, prefix)
    else:
        files = history.files(tip, prefix)
    warnings: list[str] = []
    stored = 0
    store = open_store(settings, root=root)
    try:
        for entry, data in zip(files, history.read([f.blob for f in files]), strict=True):
            stored += _ingest_file(store.sessions, entry.path, data, branch, warnings)
    finally:
        store.close()
    _write_marker(marker, tip, url)
    logger.info(
        "history: read %d run%s from git:%s (at %s), %d new to the store",
        len(files),
        "" if len(files) == 1 else "s",
        branch,
        tip[:12],
        stored,
    )
    return SyncResult(commit=tip, files=len(files), stored=stored, warnings=warnings)


def _ingest_file(
    sessions: SessionFactory, path: str, data: bytes, branch: str, warnings: list[str]
) -> int:
    try:
        run = decode_run(data, source=f"{branch}:{path}")
        with sessions() as session:
            result = ingest_run(
                session,
                context=run.context,
                benchmark=run.benchmark,
                repeats=run.repeats,
                created_at=run.created_at,
            )
    except _BAD_FILE as exc:
        # One bad or conflicting file must not cost the job the rest of its baseline.
        reason = str(exc) if isinstance(exc, PerfciError) else type(exc).__name__
        warnings.append(f"history branch {branch}: skipped {path}: {reason}")
        return 0
    return int(result.created)


def _branch(settings: Settings, branch: str, root: Path) -> GitBranch:
    """The history branch of the checkout at ``root``, cached in perfci's own cache folder.

    The GitHub token goes only to the GitHub server of the job (``GITHUB_SERVER_URL``,
    default github.com): ``origin`` is the checkout's config to say, which the benchmark
    can write.
    """
    refuse_code_branch(settings, branch)
    token = settings.github_token.get_secret_value() if settings.github_token else None
    server = private_env.get("GITHUB_SERVER_URL") or "https://github.com"
    host = urlsplit(server).hostname or "github.com"
    return GitBranch(
        checkout=root, branch=branch, cache=cache_root(), token=token, token_hosts={host}
    )


def refuse_code_branch(settings: Settings, branch: str) -> None:
    """A base branch of the code is no history branch: perfci would rewrite it.

    Raises
    ------
    ConfigError
        ``branch`` is the ``baseline_branch`` or matches a ``base_branches`` pattern.
    """
    patterns = [settings.baseline_branch, *settings.base_branches]
    hit = next((p for p in patterns if fnmatch.fnmatchcase(branch, p)), None)
    if hit is not None:
        raise ConfigError(
            f"history = git:{branch} names a branch of the code (base branch {hit!r}): perfci "
            "keeps its runs on a branch of their own, e.g. git:perfci-data, and never writes "
            "to a branch it did not create"
        )


def _guarded(settings: Settings, action: Callable[[], list[str]]) -> list[str]:
    try:
        return action()
    except PerfciError as exc:
        if settings.history_required:
            raise
        return [f"history branch not used: {exc} (set history_required to fail instead)"]


def _url_digest(url: str) -> str:
    # The marker never holds the URL itself: it may carry a password.
    return hashlib.sha256(url.encode()).hexdigest()[:16]


def _read_marker(path: Path, url: str) -> str | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("store") != _url_digest(url):
        return None
    commit = data.get("commit")
    return commit if isinstance(commit, str) else None


def _write_marker(path: Path, commit: str, url: str) -> None:
    with contextlib.suppress(OSError):  # only the next sync's speed depends on it
        path.write_text(
            json.dumps({"commit": commit, "store": _url_digest(url)}) + "\n", encoding="utf-8"
        )


def _store_exists(url: str) -> bool:
    """False for a SQLite file that is gone (a new runner): the marker is stale then."""
    path = sqlite_file(url)
    return path is None or path.is_file()
