"""Where formats, store, analysis and report meet. The CLI and the server call only these."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from perfci.analysis.values import compared_value
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
    parser recognises are appended to ``skipped`` when it is given.
    """
    inputs = expand_inputs(paths, format=format)
    if skipped is not None:
        skipped.extend(inputs.skipped)
    profiles: list[Profile] = []
    for path in inputs.files:
        found = format or inputs.detected.get(path)
        profiles.extend(parse_file(path, format=found, options=options))
    return profiles


def metric_value(metric: Metric) -> float | None:
    """The value comparisons use for ``metric`` (per profile, in its unit)."""
    return compared_value(metric, None)


def profiles_document(profiles: list[Profile]) -> dict[str, Any]:
    """The perfci JSON document for parsed profiles."""
    return to_document(profiles)
