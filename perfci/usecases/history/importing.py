"""``perfci import-history``: store another tool's benchmark history as runs of its commits.

Two kinds of history are read:

* a history file (``registry.HISTORY_FORMATS``): github-action-benchmark's ``data.js``, every
  run of every suite since it started, one profile per entry;
* saved runs that each name their commit (``metadata["commit"]``): pytest-benchmark's
  ``.benchmarks/`` folder (``--benchmark-autosave``), one run per file.

Imported, each entry becomes one run of its commit on the baseline branch, at the commit's
time, so that the first pull request checked by perfci already has a baseline and the weekly
report a trend. A saved run that names another branch than the one imported is left out.

Everything is parsed and checked before anything is written; then each run is stored in its
own transaction under a key made of its commit and content, so an import that stops half way
(a lost connection) is finished by running it again, and importing the same file twice stores
nothing the second time.

Runs are compared only within one environment fingerprint, which the history does not record:
the runs take this machine's fingerprint (plus ``--env``), so the import is run on the kind of
runner the history was measured on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from perfci.core.compat import UTC, parse_iso_datetime
from perfci.core.errors import ConfigError
from perfci.core.model import Profile, RunContext
from perfci.core.settings import Settings, get_settings, redact_url
from perfci.formats.registry import HISTORY_FORMATS, parse_file
from perfci.history import HistoryRun, parse_history
from perfci.integrations.context import detect_run_context
from perfci.store.db import open_store
from perfci.store.prepared import PreparedRun
from perfci.usecases.history.branch import append_history
from perfci.usecases.submit.ingest import ingest_prepared
from perfci.usecases.submit.inputs import expand_inputs
from perfci.usecases.submit.prepare import check_values, prepare_run


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
    #: Saved runs left out because they name another branch: branch → runs.
    other_branches: dict[str, int] = field(default_factory=dict)
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
class _Entry:
    """One run of the history: its suite, its profiles, and where its commit is said."""

    suite: str
    profiles: list[Profile]

    @property
    def metadata(self) -> dict[str, object]:
        return self.profiles[0].metadata


@dataclass(frozen=True, slots=True)
class _Planned:
    benchmark: str
    context: RunContext
    entry: _Entry
    prepared: PreparedRun  # the rows to store, prepared once

    @property
    def repeats(self) -> list[list[Profile]]:
        return [self.entry.profiles]


def import_history(
    paths: Path | Sequence[Path],
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
    """Store every entry of the history in ``paths`` as a run of its commit.

    Parameters
    ----------
    paths
        A history file, or saved runs that name their commit (files, or folders of them).
    suites
        The suites to import (default: all); each is a benchmark of the same name (saved runs
        are one suite, named by their format's label, ``pytest-benchmark``).
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
        A file is neither a history nor a run that names its commit, a named suite is not in
        it, ``benchmark`` with several suites, or a server URL without a database URL;
        nothing is written.
    InvalidValue
        An entry holds a value perfci cannot store (negative, not finite); nothing is written.
    ParseError, UnknownFormatError
        The file cannot be read; nothing is written.
    """
    settings = get_settings({"database_url": database_url, "project": project, "history": history})
    if settings.server_url and not database_url:
        # The upload API stamps a run with the time it arrives: a year of history would all
        # land in this week's report. The store takes each run's own time.
        raise ConfigError(
            f"PERFCI_SERVER_URL is set ({redact_url(settings.server_url)}): import-history "
            f"writes to the "
            f"database, not through the upload API (which dates every run by its upload); pass "
            f"the server's --database-url"
        )
    branch = branch or settings.baseline_branch
    entries = _entries([paths] if isinstance(paths, Path) else list(paths), format)
    chosen = _choose_suites(entries, suites, benchmark)
    base = detect_run_context(
        settings.project, {"branch": branch, "environment": dict(environment or {})}
    )
    selected = [e for e in entries if e.suite in chosen]
    elsewhere = Counter(
        str(e.metadata["branch"])
        for e in selected
        if e.metadata.get("branch") not in (None, branch)
    )
    # An entry without benches (a failed job the action still recorded) is no run.
    planned = [
        _Planned(benchmark or e.suite, _entry_context(base, e), e, prepare_run([e.profiles]))
        for e in selected
        if any(p.metrics for p in e.profiles) and e.metadata.get("branch") in (None, branch)
    ]
    for plan in planned:  # every entry checked before the first write
        check_values(plan.prepared)
    runs, where = _store(settings, planned, progress)
    history_branch = parse_history(settings.history)
    pushed = 0
    if history_branch and planned:
        documents = [
            HistoryRun(plan.benchmark, plan.context, plan.repeats, _when(plan.entry))
            for plan in planned
        ]
        message = f"perfci: import {len(documents)} run(s) of {', '.join(sorted(chosen))}"
        pushed = append_history(settings, history_branch, documents, message=message)
    return ImportResult(
        project=base.project,
        branch=branch,
        where=where,
        runs=runs,
        empty=len(selected) - len(planned) - sum(elsewhere.values()),
        other_branches=dict(elsewhere),
        history_branch=history_branch,
        history_pushed=pushed,
    )


def _entries(paths: Sequence[Path], format: str | None) -> list[_Entry]:
    """The runs of the history in ``paths`` (folders opened), each checked to name its commit.

    Raises
    ------
    ConfigError
        A file that is neither a history nor a run naming its commit.
    """
    inputs = expand_inputs(paths, format=format)
    entries: list[_Entry] = []
    for path in inputs.files:
        profiles = parse_file(path, format=format or inputs.detected.get(path))
        if profiles and all(p.format in HISTORY_FORMATS for p in profiles):
            entries += [_Entry(str(p.metadata["suite"]), [p]) for p in profiles]
        elif profiles and all(p.metadata.get("commit") for p in profiles):
            entries.append(_Entry(profiles[0].label, profiles))
        else:
            found = ", ".join(sorted({p.format for p in profiles})) or "no profiles"
            raise ConfigError(
                f"{path}: {found} holds one run that does not say its commit, not a history: "
                f"store it with `perfci ingest --commit SHA` (histories: "
                f"{', '.join(sorted(HISTORY_FORMATS))}, or saved runs that name their commit, "
                f"such as pytest-benchmark's .benchmarks/ files)"
            )
    return entries


def _choose_suites(
    entries: Sequence[_Entry], suites: Sequence[str], benchmark: str | None
) -> list[str]:
    present = list(dict.fromkeys(e.suite for e in entries))
    missing = [s for s in suites if s not in present]
    if missing:
        raise ConfigError(
            f"no suite {', '.join(map(repr, missing))} in the history; it holds "
            f"{', '.join(map(repr, present))}"
        )
    chosen = list(suites) or present
    if benchmark and len(chosen) > 1:
        raise ConfigError(
            f"--benchmark names one benchmark, but {len(chosen)} suites would be imported "
            f"({', '.join(map(repr, chosen))}): pick one with --suite"
        )
    return chosen


def _entry_context(base: RunContext, entry: _Entry) -> RunContext:
    """The run context of one entry: its commit and time; no CI run or pull request of ours."""
    commit_time = entry.metadata.get("commit_time")
    return replace(
        base,
        commit=str(entry.metadata["commit"]),
        commit_time=str(commit_time) if commit_time else None,
        base_branch=None,
        merge_base=None,
        pr_number=None,
        ci_provider=None,
        ci_run_id=None,
        ci_run_attempt=None,
        ci_url=None,
    )


def _when(entry: _Entry) -> datetime:
    """When the entry was measured (its ``date``), else its commit's time, else now."""
    moment = entry.metadata.get("date") or entry.metadata.get("commit_time")
    return parse_iso_datetime(str(moment)) if moment else datetime.now(UTC)


def _store(
    settings: Settings, planned: Sequence[_Planned], progress: Callable[[int, int], None] | None
) -> tuple[list[ImportedRun], str]:
    """Store each planned run in its own transaction; the runs and where they went."""
    runs: list[ImportedRun] = []
    store = open_store(settings)
    try:
        for plan in planned:
            with store.sessions() as session:
                result = ingest_prepared(
                    session,
                    context=plan.context,
                    benchmark=plan.benchmark,
                    prepared=plan.prepared,
                    created_at=_when(plan.entry),
                )
            runs.append(_imported(plan, result.run_id, result.created))
            if progress:
                progress(len(runs), len(planned))
    finally:
        store.close()
    return runs, store.url


def _imported(plan: _Planned, run_id: int, created: bool) -> ImportedRun:
    return ImportedRun(plan.benchmark, plan.context.commit or "", run_id, created)
