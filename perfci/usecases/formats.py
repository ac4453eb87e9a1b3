"""The input formats perfci reads, as the shells list them."""

from __future__ import annotations

from perfci.formats import registry


def list_formats() -> list[tuple[str, str]]:
    """``(name, description)`` of every format, in detection order."""
    return [(spec.name, spec.description) for spec in registry.formats().values()]
