"""perfci's own JSON document (see ``perfci.core.jsondoc``), so that any tool can feed perfci."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from perfci.core.errors import ParseError
from perfci.core.jsondoc import from_document
from perfci.core.model import Profile
from perfci.formats._textio import open_maybe_gzip
from perfci.formats.native._detectors import PERFCI_JSON

NAME = PERFCI_JSON.name
DESCRIPTION = PERFCI_JSON.description
sniff = PERFCI_JSON.sniff


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
