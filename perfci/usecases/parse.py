"""Where formats, store, analysis and report meet. The CLI and the server call only these."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from perfci.formats.registry import parse_file
from perfci.jsondoc import to_document
from perfci.model import Profile


def parse_profiles(
    paths: Iterable[Path], *, format: str | None = None, options: Mapping[str, str] | None = None
) -> list[Profile]:
    """Parse every file; the first unreadable one stops with a ``ParseError`` naming it."""
    profiles: list[Profile] = []
    for path in paths:
        profiles.extend(parse_file(Path(path), format=format, options=options))
    return profiles


def profiles_document(profiles: list[Profile]) -> dict[str, Any]:
    """The perfci JSON document for parsed profiles."""
    return to_document(profiles)
