"""The profile files of one run, parsed into its repeats; errors name the file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from perfci.core.errors import ConfigError, ParseError, UnknownFormatError
from perfci.core.model import Profile
from perfci.formats.caps import ParseLimits, parse_limits
from perfci.formats.registry import HISTORY_FORMATS, parse_file
from perfci.usecases.check.repeats import check_repeats_match
from perfci.usecases.submit.inputs import expand_inputs, parse_each

_T = TypeVar("_T")


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
    """The profiles of each repeat (see
    :func:`perfci.usecases.submit.ingest.parse_and_ingest`); errors name the file.

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
