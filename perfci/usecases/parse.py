"""Where formats, store, analysis and report meet. The CLI and the server call only these."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from perfci.analysis.values import compared_value
from perfci.errors import NoMeasurements
from perfci.formats.registry import parse_file
from perfci.jsondoc import to_document
from perfci.model import Metric, Profile
from perfci.usecases.inputs import expand_inputs


def parse_profiles(
    paths: Iterable[Path],
    *,
    format: str | None = None,
    options: Mapping[str, str] | None = None,
    skipped: list[Path] | None = None,
) -> list[Profile]:
    """Parse every file, and every profile file of every folder (:mod:`.inputs`).

    The first unreadable file stops with a ``ParseError`` naming it; a folder's files that no
    parser recognises, or that hold no measurement yet, are appended to ``skipped`` when it is
    given.
    """
    inputs = expand_inputs(paths, format=format)
    if skipped is not None:
        skipped.extend(inputs.skipped)
    profiles: list[Profile] = []
    empty: list[NoMeasurements] = []
    for path in inputs.files:
        found = format or inputs.detected.get(path)
        try:
            profiles.extend(parse_file(path, format=found, options=options))
        except NoMeasurements as exc:
            if path not in inputs.found:
                raise
            empty.append(exc)
            if skipped is not None:
                skipped.append(path)
    if empty and len(empty) == len(inputs.files):
        raise empty[0]  # every file of the folders is empty: say why for the first
    return profiles


def metric_value(metric: Metric) -> float | None:
    """The value comparisons use for ``metric`` (per profile, in its unit)."""
    return compared_value(metric, None)


def profiles_document(profiles: list[Profile]) -> dict[str, Any]:
    """The perfci JSON document for parsed profiles."""
    return to_document(profiles)
