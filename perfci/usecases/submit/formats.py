"""The input formats perfci reads, as the shells list them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perfci.formats import registry

if TYPE_CHECKING:  # the model loads when a document is read, not to list the formats
    from perfci.core.model import Profile


def list_formats() -> list[tuple[str, str]]:
    """``(name, description)`` of every format, in detection order."""
    return [(spec.name, spec.description) for spec in registry.formats().values()]


def profiles_from_document(document: Any, *, source: str = "") -> list[Profile]:
    """The profiles of one perfci JSON document (``perfci parse --json``); ``source`` names it
    in a ``ParseError``."""
    # lazy: perfci.core.model loads to read a document, not to list the formats
    from perfci.core.jsondoc import from_document

    return from_document(document, source=source)
