"""``perfci import-history``: store another tool's benchmark history as runs of its commits.

A project moving from github-action-benchmark keeps its ``data.js``: every run of every suite
since it started. Imported, each entry becomes one run of its commit on the baseline branch,
at the commit's time, so that the first pull request checked by perfci already has a baseline
and the weekly report a trend.

Everything is parsed and checked before anything is written; then each run is stored in its
own transaction under a key made of its commit and content, so an import that stops half way
(a lost connection) is finished by running it again, and importing the same file twice stores
nothing the second time.

Runs are compared only within one environment fingerprint, which the history does not record:
the runs take this machine's fingerprint (plus ``--env``), so the import is run on the kind of
runner the history was measured on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from perfci.context import detect_run_context
from perfci.errors import ConfigError
from perfci.formats.registry import HISTORY_FORMATS, parse_file
from perfci.history import parse_history
from perfci.model import Profile, RunContext
from perfci.settings import Settings, get_settings
from perfci.usecases.history import HistoryEntry, append_history
from perfci.usecases.ingest import check_values, prepare_run


@dataclass(frozen=True, slots=True)
class ImportedRun:
    """One entry of the history as stored: its benchmark, commit and run."""

    benchmark: str
    commit: str
    run_id: int
    created: bool


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What an import stored, where (unredacted: the shells redact what they print)."""

    project: str
    branch: str
    where: str
    runs: list[ImportedRun]
    #: Entries left out because they hold no benches.
    empty: int = 0
    #: The history branch the runs were also pushed to, and how many it took (0: all there).
    history_branch: str | None = None
    history_pushed: int = 0

    @property
    def created(self) -> int:
        return sum(run.created for run in self.runs)

    @property
    def benchmarks(self) -> list[str]:
        return sorted({run.benchmark for run in self.runs})


@dataclass(frozen=True, slots=True)
class _Planned:
    benchmark: str
    context: RunContext
    profile: Profile


def import_history(
    path: Path,
    *,
    suites: Sequence[str] = (),
    benchmark: str | None = None,
    branch: str | None = None,
    project: str | None = None,
    database_url: str | None = None,
    history: str | None = None,
    environment: Mapping[str, str] | None = None,
    format: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ImportResult:
    """Store every entry of the history file ``path`` as a run of its commit.

    Parameters
    ----------
    suites
        The suites to import (default: all); each is a benchmark of the same name.
    benchmark
        The benchmark name to store one suite under, instead of the suite's name.
    branch
        The branch the history was measured on (default: the baseline branch setting).
    history
        A history branch (``git:perfci-data``; default: the ``history`` setting) to push the
        runs to as well, in one push, for CI runners that keep their history there.
    environment
        Fingerprint entries added to this machine's (``--env``).
    progress
        Called with (runs stored so far, runs in all) after each run.

    Raises
    ------
    ConfigError
        The file is not a history, a named suite is not in it, or ``benchmark`` with several
        suites; nothing is written.
    InvalidValue
        An entry holds a value perfci cannot store (negative, not finite); nothing is written.
    ParseError, UnknownFormatError
        The file cannot be read; nothing is written.
    """
    settings = get_settings({"database_url": database_url, "project": project, "history": history})
    branch = branch or settings.baseline_branch
    profiles = _history_profiles(path, format)
    chosen = _choose_suites(profiles, suites, benchmark, path)
    base = detect_run_context(
        settings.project, {"branch": branch, "environment": dict(environment or {})}
    )
    selected = [p for p in profiles if _suite(p) in chosen]
    # An entry without benches (a failed job the action still recorded) is no run.
    planned = [
        _Planned(benchmark or _suite(p), _entry_context(base, p), p) for p in selected if p.metrics
    ]
    for plan in planned:  # every entry checked before the first write
        check_values(prepare_run([[plan.profile]]))
    runs, where = _store(settings, planned, progress)
    history_branch = None if settings.server_url else parse_history(settings.history)
    pushed = 0
    if history_branch and planned:
        entries = [
            HistoryEntry(plan.context, plan.benchmark, [[plan.profile]], _when(plan.profile))
            for plan in planned
        ]
        message = f"perfci: import {len(entries)} run(s) from {path.name}"
        pushed = append_history(settings, history_branch, entries, message=message)
    return ImportResult(
        project=base.project,
        branch=branch,
        where=where,
        runs=runs,
        empty=len(selected) - len(planned),
        history_branch=history_branch,
        history_pushed=pushed,
    )


def _history_profiles(path: Path, format: str | None) -> list[Profile]:
    profiles = parse_file(path, format=format)
    kinds = {p.format for p in profiles}
    if not profiles or not kinds <= HISTORY_FORMATS:
        found = ", ".join(sorted(kinds)) or "no profiles"
        raise ConfigError(
            f"{path}: {found} holds one run, not a history: store it with `perfci ingest`"
            f" (histories: {', '.join(sorted(HISTORY_FORMATS))})"
        )
    return profiles


def _suite(profile: Profile) -> str:
    return str(profile.metadata["suite"])


def _choose_suites(
    profiles: Sequence[Profile], suites: Sequence[str], benchmark: str | None, path: Path
) -> list[str]:
    present = list(dict.fromkeys(_suite(p) for p in profiles))
    missing = [s for s in suites if s not in present]
    if missing:
        raise ConfigError(
            f"{path}: no suite {', '.join(map(repr, missing))}; it holds "
            f"{', '.join(map(repr, present))}"
        )
    chosen = list(suites) or present
    if benchmark and len(chosen) > 1:
        raise ConfigError(
            f"--benchmark names one benchmark, but {len(chosen)} suites would be imported "
            f"({', '.join(map(repr, chosen))}): pick one with --suite"
        )
    return chosen


def _entry_context(base: RunContext, profile: Profile) -> RunContext:
    """The run context of one entry: its commit and time; no CI run or pull request of ours."""
    return replace(
        base,
        commit=str(profile.metadata["commit"]),
        commit_time=profile.metadata.get("commit_time"),
        base_branch=None,
        merge_base=None,
        pr_number=None,
        ci_provider=None,
        ci_run_id=None,
        ci_run_attempt=None,
        ci_url=None,
    )


def _created_at(profile: Profile) -> datetime | None:
    """When the entry was measured (the action's ``date``), else its commit's time."""
    moment = profile.metadata.get("date") or profile.metadata.get("commit_time")
    return datetime.fromisoformat(moment) if moment else None


def _when(profile: Profile) -> datetime:
    return _created_at(profile) or datetime.now(UTC)


def _store(
    settings: Settings, planned: Sequence[_Planned], progress: Callable[[int, int], None] | None
) -> tuple[list[ImportedRun], str]:
    """Store each planned run in its own transaction; the runs and where they went."""
    runs: list[ImportedRun] = []
    if settings.server_url:
        from perfci.usecases.submit import submit_remote

        for plan in planned:
            answer = submit_remote(
                settings, context=plan.context, benchmark=plan.benchmark, repeats=[[plan.profile]]
            ).ingest
            runs.append(_imported(plan, answer.run_id, answer.created))
            if progress:
                progress(len(runs), len(planned))
        return runs, settings.server_url
    from perfci.store.db import open_store
    from perfci.usecases.ingest import ingest_run

    store = open_store(settings)
    try:
        for plan in planned:
            with store.sessions() as session:
                result = ingest_run(
                    session,
                    context=plan.context,
                    benchmark=plan.benchmark,
                    repeats=[[plan.profile]],
                    created_at=_created_at(plan.profile),
                )
            runs.append(_imported(plan, result.run_id, result.created))
            if progress:
                progress(len(runs), len(planned))
    finally:
        store.close()
    return runs, store.url


def _imported(plan: _Planned, run_id: int, created: bool) -> ImportedRun:
    return ImportedRun(plan.benchmark, plan.context.commit or "", run_id, created)
