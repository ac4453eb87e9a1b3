"""perfci's own JSON document (see ``perfci.core.jsondoc``), so that any tool can feed perfci."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from perfci.core.errors import ParseError
from perfci.core.jsondoc import from_document
from perfci.core.model import Profile
from perfci.formats._textio import open_maybe_gzip

if TYPE_CHECKING:
    from perfci.formats.protocol import Head

NAME = "perfci_json"
DESCRIPTION = "perfci's own JSON document (perfci parse --json)"


def sniff(head: Head) -> bool:
    start = head.text.lstrip()[:4096]
    return start.startswith("{") and '"perfci_version"' in start and '"profiles"' in start


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    try:
        # Inflated within _textio's caps: a gzip bomb stops with InputTooLarge (issue 13).
        with open_maybe_gzip(path, format=NAME) as handle:
            doc = json.load(handle)
    except json.JSONDecodeError as exc:
        raise ParseError(
            f"invalid JSON: {exc.msg}", source=str(path), line=exc.lineno, format=NAME
        ) from exc
    return from_document(doc, source=str(path))
