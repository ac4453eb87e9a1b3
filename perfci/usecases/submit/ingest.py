"""Ingest a run: parsed profiles + run context → one transaction in the store.

Idempotent: a run is identified by its key (commit + CI run id + attempt, or the content when
there is no CI run id), unique in the database, so the same run ingested twice, even by two
processes at once, is stored once; the same key with different numbers is a
:class:`~perfci.core.errors.RunConflict` naming the stored run. Everything is parsed and checked
before the transaction opens (every value finite and non-negative, see :func:`check_values`),
so bad input writes nothing.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import numpy as np

from perfci.analysis.values import compared_value
from perfci.core.compat import UTC
from perfci.core.errors import (
    ConfigError,
    DatabaseFailure,
    InvalidValue,
    KeyTaken,
    ParseError,
    UnknownFormatError,
)
from perfci.core.limits import MAX_VALUE
from perfci.core.model import MetricKind, Profile, RunContext, SeriesParts
from perfci.formats.caps import ParseLimits, parse_limits
from perfci.formats.registry import HISTORY_FORMATS, parse_file
from perfci.store.prepared import Cell, PreparedRun, Values, cell_values
from perfci.store.runs import IngestResult, storage_error, stored_run, write_run
from perfci.store.work import Session, reading, unit_of_work
from perfci.usecases.check.repeats import check_repeats_match
from perfci.usecases.submit.inputs import expand_inputs, parse_each

_T = TypeVar("_T")

__all__ = [
    "IngestResult",
    "Values",
    "check_values",
    "group_files",
    "ingest_prepared",
    "ingest_run",
    "parse_and_ingest",
    "parse_repeats",
    "prepare_run",
    "run_key",
]


def ingest_run(
    session: Session,
    *,
    context: RunContext,
    benchmark: str,
    repeats: Sequence[Sequence[Profile]],
    idempotency_key: str | None = None,
    created_at: datetime | None = None,
) -> IngestResult:
    """Store one run of ``benchmark`` in one unit of work (committed here, or with the unit
    of work the caller has open: the run and its comparison are stored together).

    Parameters
    ----------
    session
        The store's session; what this writes is rolled back on any error.
    context
        Project, commit, branch, CI ids and the environment fingerprint of the run.
    benchmark
        The benchmark's name within the project.
    repeats
        The profiles of each repeat, in repeat order. A repeat with several profiles (e.g.
        forward / backward / train sections) keys its series by section = profile label.
    idempotency_key
        Overrides the run key derived from the context (and the content, without a CI run id).
    created_at
        When the run was made (default: now); tests and imports of old runs pass it.

    Raises
    ------
    ConfigError
        Empty repeats, or two profiles with the same label in one repeat.
    InvalidValue
        A value is not finite, is negative, or overflows; nothing was written.
    RunConflict
        The run's key (CI run id and attempt, or ``idempotency_key``) is stored with other
        numbers; ``run_id`` names the stored run.
    StorageError
        The database failed; nothing was written.
    """
    prepared = prepare_run(repeats)
    check_values(prepared)  # before any SQL: bad input writes nothing
    return ingest_prepared(
        session,
        context=context,
        benchmark=benchmark,
        prepared=prepared,
        idempotency_key=idempotency_key,
        created_at=created_at,
    )


def ingest_prepared(
    session: Session,
    *,
    context: RunContext,
    benchmark: str,
    prepared: PreparedRun,
    idempotency_key: str | None = None,
    created_at: datetime | None = None,
) -> IngestResult:
    """:func:`ingest_run` for a run already prepared and checked (:func:`check_values`): an
    import that checks every run before its first write prepares each once."""
    key = idempotency_key or run_key(context, prepared)
    try:
        with unit_of_work(session):
            return write_run(
                session,
                context=context,
                benchmark=benchmark,
                prepared=prepared,
                key=key,
                created_at=created_at or datetime.now(UTC),
            )
    except KeyTaken as exc:
        # A concurrent ingest of the same run committed between our checks: keep theirs.
        with reading(session):
            existing = stored_run(
                session, context=context, benchmark=benchmark, key=key, prepared=prepared
            )
        if existing is None:
            raise storage_error(benchmark, prepared, exc.reason) from exc
        return existing
    except DatabaseFailure as exc:
        raise storage_error(benchmark, prepared, exc.reason) from exc


def parse_and_ingest(
    session: Session,
    files: Sequence[Path],
    *,
    benchmark: str,
    context: RunContext,
    format: str | None = None,
    repeat: int | None = None,
) -> IngestResult:
    """Parse ``files`` and ingest them as one run; a bad file stops before anything is written.

    With ``repeat=None`` each file is one repeat; with ``repeat=N`` the files hold N repeats,
    split into N consecutive groups of equal size (``r0_fwd r0_bwd r1_fwd r1_bwd``, N=2).
    """
    repeats = parse_repeats(files, format=format, repeat=repeat)
    return ingest_run(session, context=context, benchmark=benchmark, repeats=repeats)


def parse_repeats(
    files: Sequence[Path],
    *,
    format: str | None = None,
    repeat: int | None = None,
    skipped: list[Path] | None = None,
    options: Mapping[str, str] | None = None,
    found: bool = False,
    max_metrics: int | None = None,
    max_samples: int | None = None,
) -> list[list[Profile]]:
    """The profiles of each repeat (see :func:`parse_and_ingest`); errors name the file.

    A folder stands for the profile files in it (:mod:`.inputs`); those no parser recognises,
    and those that hold no measurement yet (:class:`~perfci.core.errors.NoMeasurements`), are
    appended to ``skipped`` when it is given. ``found``: every file was found by a benchmark's
    globs rather than named, so an empty one is skipped like a folder's.

    ``max_metrics`` / ``max_samples``: the caps of the whole run (all files together), counted
    by the readers as they read (:mod:`perfci.formats.caps`): a file past one stops with
    :class:`~perfci.core.errors.InputTooLarge` at the first metric or sample over it (issue 31).
    """
    inputs = expand_inputs(files, format=format)
    if skipped is not None:
        skipped.extend(inputs.skipped)
    with parse_limits(ParseLimits(max_metrics=max_metrics, max_samples=max_samples)):
        parsed = parse_each(
            inputs,
            lambda path, name: _parse_one(path, name, options),
            format=format,
            found=found,
            skipped=skipped,
        )
    repeats = [[p for file in group for p in file] for group in group_files(parsed, repeat)]
    check_repeats_match(repeats)  # unrelated profiles as repeats of one run (issue 16)
    return repeats


def group_files(files: Sequence[_T], repeats: int | None) -> list[list[_T]]:
    """Files (or their parsed profiles) per repeat: one each, or ``repeats`` equal consecutive
    groups."""
    if not files:
        raise ConfigError("no profile files given")
    if repeats is None:
        return [[f] for f in files]
    if repeats < 1 or len(files) % repeats:
        raise ConfigError(
            f"{len(files)} files cannot be split into {repeats} repeats of equal size"
        )
    size = len(files) // repeats
    return [list(files[i : i + size]) for i in range(0, len(files), size)]


def _parse_one(
    path: Path, format: str | None, options: Mapping[str, str] | None = None
) -> list[Profile]:
    try:
        profiles = parse_file(path, format=format, options=options)
    except UnknownFormatError as exc:
        if str(path) in str(exc):
            raise
        raise UnknownFormatError(f"{path}: {exc}") from exc
    if not profiles:
        raise ParseError("no profiles found in this file", source=str(path))
    if profiles[0].format in HISTORY_FORMATS:
        commits = len({p.metadata.get("commit") for p in profiles})
        raise ConfigError(
            f"{path}: a history of {commits} commit(s) ({profiles[0].format}), not "
            f"one run; store it with `perfci import-history {path}`"
        )
    return profiles


def run_key(context: RunContext, prepared: PreparedRun) -> str:
    """The idempotency key: the CI invocation when known, else the run's content.

    Without a CI run id, ingesting the same files again is the same run, while new
    measurements at the same commit (a laptop re-run) are a new one.
    """
    commit = context.commit or ""
    if context.ci_run_id:
        provider = context.ci_provider or "ci"
        return f"ci:{provider}:{context.ci_run_id}:{context.ci_run_attempt or 0}:{commit}"[:255]
    digest = hashlib.sha256()
    for parts in sorted(prepared.cells):
        digest.update("\x1f".join(parts).encode())
        for repeat, values in cell_values(prepared.cells[parts]):
            # The plain tuple's repr: the keys of runs stored before Values was named. Without
            # the fastest-step value (revision 0007), which derives from the per-step totals
            # the other numbers sum: the same files keep the key they were stored under.
            digest.update(repr((repeat, tuple(values)[:-1])).encode())
    return f"content:{commit}:{digest.hexdigest()}"


# --- preparing (no SQL) -----------------------------------------------------------------------


def prepare_run(repeats: Sequence[Sequence[Profile]]) -> PreparedRun:
    """Key the metrics of ``repeats`` by series, no SQL: what :func:`write_run` writes.

    Raises
    ------
    ConfigError
        No repeats, an empty repeat, or two profiles labelled alike in one repeat.
    """
    if not repeats:
        raise ConfigError("a run needs at least one repeat")
    cells: dict[SeriesParts, list[Cell]] = {}
    profiles: list[tuple[int, Profile]] = []
    samples = metrics = 0
    for index, repeat in enumerate(repeats):
        if not repeat:
            raise ConfigError(f"repeat {index + 1} has no profiles")
        labels = [p.label for p in repeat]
        if len(repeat) > 1 and len(set(labels)) != len(labels):
            raise ConfigError(
                f"repeat {index + 1} has several profiles labelled alike "
                f"({', '.join(labels)}); their metrics would collide"
            )
        for profile in repeat:
            profiles.append((index, profile))
            samples += _add_profile(cells, index, profile, profile.label if len(repeat) > 1 else "")
            metrics += len(profile.metrics)
    if not cells:
        raise ConfigError(_nothing_to_store(profiles))
    return PreparedRun(
        cells=cells,
        samples=samples,
        merges=metrics != samples,
        profiles=profiles,
        repeats=len(repeats),
    )


def _nothing_to_store(profiles: Sequence[tuple[int, Profile]]) -> str:
    """Why a run of profiles without a single metric is refused: a run with nothing in it
    would only stand in the history as an empty baseline run."""
    sources = ", ".join(dict.fromkeys(p.source or p.label for _, p in profiles))
    why = next((w for _, p in profiles for w in p.warnings), "")
    return f"no metrics in {sources}: nothing to store" + (f" ({why})" if why else "")


# A metric's stored numbers: each a time in ns, a count or a size, so finite and non-negative.
_NUMBER_FIELDS = (
    "total_ns",
    "calls",
    "self_ns",
    "avg_ns",
    "min_ns",
    "max_ns",
    "std_ns",
    "median_ns",
    "bytes",
)
_VALUE_NAMES = ("value (per step)", *_NUMBER_FIELDS)


def check_values(prepared: PreparedRun) -> None:
    """Refuse a run holding a number that is not finite and non-negative, before any SQL.

    Every number perfci stores is a time, a count or a size. A negative duration (clock skew
    between the host and the GPU timestamps) is refused with the metric named rather than
    clamped: a clamped 0 would pass as a real measurement and bend the baseline, while a
    refused upload is seen and fixed at its source. Derived numbers are checked too: the
    per-step value of a step metric (``[1.7e308, 1.7e308]`` averages to infinity), ``avg ×
    calls`` without a total, and the sums of a series listed twice in one repeat.

    One vectorised pass over the numbers; the search for the culprit, to name it, runs only
    when that pass fails.

    Raises
    ------
    InvalidValue
        Naming the profile, the metric, the field and the value.
    """
    # The stored fields of every metric: the one per-value Python pass, kept to a bare
    # comprehension (numpy's own None handling measured slower).
    numbers = [
        v
        for _, p in prepared.profiles
        for m in p.metrics
        for v in (
            m.total_ns,
            m.calls,
            m.self_ns,
            m.avg_ns,
            m.min_ns,
            m.max_ns,
            m.std_ns,
            m.median_ns,
            m.bytes,
        )
        if v is not None
    ]
    # Every metric's per-instance numbers, whatever its kind: a `bench` or `measure` metric
    # carrying a total was once let through with negative samples, which its comparison
    # uses, and a pull request 2x slower passed (issue 31). Derived values: only step metrics
    # (means of samples) and metrics without a total (avg × calls) can come out worse than
    # the fields they are made of.
    for _, profile in prepared.profiles:
        if profile.steps is not None:
            numbers.append(profile.steps)
        for m in profile.metrics:
            if m.samples_ns:
                numbers += m.samples_ns
            if m.samples:
                numbers += m.samples
            if m.step_totals_ns:
                numbers += m.step_totals_ns
            if m.value is not None:
                numbers.append(m.value)
            if m.kind is MetricKind.STEP or m.total_ns is None:
                value = compared_value(m, profile.steps)
                if value is not None:
                    numbers.append(value)
    if prepared.merges:
        numbers += [
            v
            for cell in prepared.cells.values()
            if len(cell) > 1
            for _, values in cell_values(cell)
            for v in values
            if v is not None
        ]
    try:
        array = np.array(numbers, dtype=np.float64)
    except (OverflowError, TypeError, ValueError):  # an int beyond any float, or not a number
        raise _invalid_value(prepared) from None
    if not (
        np.isfinite(array).all()
        and (array.size == 0 or (array.min() >= 0 and array.max() <= MAX_VALUE))
    ):
        raise _invalid_value(prepared)


def _invalid_value(prepared: PreparedRun) -> InvalidValue:
    """The error naming the first bad number of ``prepared`` (the slow path of check_values)."""
    for repeat, profile in prepared.profiles:
        where = f"profile {profile.label!r} ({profile.source or 'upload'}, repeat {repeat + 1})"
        if profile.steps is not None and not _valid(profile.steps):
            return _refusal(f"{where}: steps is {profile.steps!r}")
        for metric in profile.metrics:
            fields = [(name, getattr(metric, name)) for name in _NUMBER_FIELDS]
            fields += [(f"samples_ns #{i}", v) for i, v in enumerate(metric.samples_ns or ())]
            fields += [(f"samples #{i}", v) for i, v in enumerate(metric.samples or ())]
            fields += [
                (f"step_totals_ns #{i}", v) for i, v in enumerate(metric.step_totals_ns or ())
            ]
            fields.append(("value", metric.value))
            fields.append((_VALUE_NAMES[0], compared_value(metric, profile.steps)))
            for name, value in fields:
                if value is not None and not _valid(value):
                    return _refusal(f"{where}, metric {metric.key!r}, {name} is {value!r}")
    for parts, cell in prepared.cells.items():
        for repeat, values in cell_values(cell):
            for name, value in zip(_VALUE_NAMES, values, strict=True):
                if value is not None and not _valid(value):
                    return _refusal(
                        f"repeat {repeat + 1}, metric {':'.join(parts)!r}: the "
                        f"sum of its entries, {name}, is {value!r}"
                    )
    return _refusal("a value is not a finite, non-negative number")  # not reached


def _valid(value: float) -> bool:
    try:
        return math.isfinite(value) and 0 <= value <= MAX_VALUE
    except (TypeError, OverflowError):  # an int beyond any float is not a plausible number
        return False


def _refusal(what: str) -> InvalidValue:
    return InvalidValue(
        f"{what}: expected a finite, non-negative number of at most 1e18 (a "
        f"time in ns, a count or bytes); nothing was stored"
    )


def _add_profile(
    cells: dict[SeriesParts, list[Cell]], repeat: int, profile: Profile, section: str
) -> int:
    """Key ``profile``'s metrics into ``cells`` (the per-metric loop of every ingest).

    Returns the number of new (series, repeat) pairs.
    """
    steps = profile.steps
    added = 0
    for metric in profile.metrics:
        # ``_value_``: the plain string (``.value`` is a slow descriptor, and the members
        # themselves would reach the driver as enums).
        parts = (
            metric.kind._value_,
            metric.device._value_,
            metric.scope or "",
            section,
            metric.name,
        )
        cell = cells.get(parts)
        if cell is None:
            cells[parts] = [(repeat, metric, steps)]
            added += 1
        else:
            added += cell[-1][0] != repeat
            cell.append((repeat, metric, steps))
    return added
