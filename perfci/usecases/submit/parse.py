"""Where formats, store, analysis and report meet. The CLI and the server call only these."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from perfci.analysis.values import compared_value
from perfci.core.model import Metric, Profile
from perfci.formats.registry import parse_file
from perfci.usecases.submit.inputs import expand_inputs, parse_each


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
    parsed = parse_each(
        inputs,
        lambda path, name: parse_file(path, format=name, options=options),
        format=format,
        skipped=skipped,
    )
    return [profile for profiles in parsed for profile in profiles]


def metric_value(metric: Metric) -> float | None:
    """The value comparisons use for ``metric`` (per profile, in its unit)."""
    return compared_value(metric, None)


def profiles_document(profiles: list[Profile]) -> dict[str, Any]:
    """The perfci JSON document for parsed profiles."""
    from perfci.core.jsondoc import to_document  # lazy: --json only; a table needs none of it

    return to_document(profiles)
