"""One run as a file on the history branch: perfci JSON of each repeat plus the run's context.

::

    {"kind": "perfci-history-run", "schema_version": 1, "perfci_version": "0.1.0",
     "benchmark": "gpt-tiny", "created_at": "2026-11-23T13:55:00+00:00",
     "context": {"project", "repository", "commit", "branch", "ci_run_id", "environment", ...},
     "repeats": [<perfci JSON document (perfci.core.jsondoc) of repeat 0>, ...]}

gzip-compressed, with a zero timestamp so the same run always gives the same bytes (the same
blob in git). The file name sorts by commit time, which is what retention drops by.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any

from perfci import __version__
from perfci.core.compat import UTC, parse_iso_datetime
from perfci.core.errors import ParseError
from perfci.core.jsondoc import from_document, to_document
from perfci.core.model import Profile, RunContext

KIND = "perfci-history-run"
SCHEMA_VERSION = 1
RUNS_DIR = "runs"
SUFFIX = ".json.gz"
#: Decompressed size beyond which a document is refused: a real run is a few MB at most.
MAX_DOCUMENT_BYTES = 512 * 1024 * 1024
_CONTEXT_FIELDS = {f.name for f in fields(RunContext)}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+|\.{2,}")


@dataclass(frozen=True, slots=True)
class HistoryRun:
    """A run as the branch keeps it: one to append (:func:`encode_run`), or one read back,
    ready for :func:`perfci.usecases.submit.ingest.ingest_run`."""

    benchmark: str
    context: RunContext
    repeats: list[list[Profile]]
    created_at: datetime


def encode_run(
    *,
    context: RunContext,
    benchmark: str,
    repeats: Sequence[Sequence[Profile]],
    created_at: datetime,
) -> bytes:
    """The compressed document of one run (deterministic for the same run)."""
    values = {k: v for k, v in asdict(context).items() if v not in (None, "", {})}
    document = {
        "kind": KIND,
        "schema_version": SCHEMA_VERSION,
        "perfci_version": __version__,
        "benchmark": benchmark,
        "created_at": created_at.astimezone(UTC).isoformat(),
        "context": values,
        "repeats": [to_document(list(r)) for r in repeats],
    }
    text = json.dumps(document, separators=(",", ":"), sort_keys=True)
    return gzip.compress(text.encode(), compresslevel=9, mtime=0)


def run_path(*, context: RunContext, benchmark: str, created_at: datetime, document: bytes) -> str:
    """``runs/<benchmark>/<commit-time>-<key>.json.gz``; unique per run, sortable by time.

    The key is the CI invocation when known (a retried job is the same file), else the content.
    """
    when = _parse_time(context.commit_time) or created_at
    stamp = when.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    if context.ci_run_id:
        identity = "\x1f".join(
            [
                context.project,
                benchmark,
                context.commit or "",
                context.ci_provider or "ci",
                context.ci_run_id,
                str(context.ci_run_attempt or 0),
            ]
        ).encode()
    else:
        identity = document
    key = hashlib.sha256(identity).hexdigest()[:16]
    return f"{RUNS_DIR}/{slug(benchmark)}/{stamp}-{key}{SUFFIX}"


def slug(name: str) -> str:
    """``name`` safe as one path component (never empty, never ``.`` or ``..``)."""
    cleaned = _UNSAFE.sub("_", name).strip(".") or "_"
    return cleaned[:100]


def decode_run(data: bytes, *, source: str) -> HistoryRun:
    """A run from its compressed document; ``ParseError`` names ``source`` when it is bad."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as handle:
            raw = handle.read(MAX_DOCUMENT_BYTES + 1)
    except (OSError, EOFError) as exc:
        raise ParseError(f"not a gzip file: {exc}", source=source) from None
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise ParseError(f"larger than {MAX_DOCUMENT_BYTES} bytes uncompressed", source=source)
    deep = ParseError("JSON nested too deeply to be a run document", source=source)
    try:
        document = json.loads(raw)
    except RecursionError:
        # JSON nested thousands deep: a bomb, or garbage. Never a traceback (issue 31).
        raise deep from None
    except ValueError as exc:
        raise ParseError(f"not JSON: {exc}", source=source) from None
    try:
        return _from_document(document, source)
    except RecursionError:
        raise deep from None


def _from_document(document: Any, source: str) -> HistoryRun:
    if not isinstance(document, dict) or document.get("kind") != KIND:
        raise ParseError(f"not a perfci history run (expected kind {KIND!r})", source=source)
    version = document.get("schema_version")
    if not isinstance(version, int) or not 1 <= version <= SCHEMA_VERSION:
        raise ParseError(
            f"schema_version {version!r} is not one this perfci reads "
            f"(1..{SCHEMA_VERSION}); upgrade perfci",
            source=source,
        )
    benchmark, values = document.get("benchmark"), document.get("context")
    repeats = document.get("repeats")
    if not isinstance(benchmark, str) or not benchmark:
        raise ParseError("'benchmark' must be a non-empty string", source=source)
    if not isinstance(values, dict) or not isinstance(values.get("project"), str):
        raise ParseError("'context' must be an object with a 'project'", source=source)
    if not isinstance(repeats, list) or not repeats:
        raise ParseError("'repeats' must be a non-empty list", source=source)
    unknown = set(values) - _CONTEXT_FIELDS
    if unknown:
        raise ParseError(f"unknown context field(s) {', '.join(sorted(unknown))}", source=source)
    created = _parse_time(document.get("created_at"))
    if created is None:
        raise ParseError("'created_at' must be an ISO 8601 time", source=source)
    return HistoryRun(
        benchmark=benchmark,
        context=RunContext(**values),
        repeats=[from_document(r, source=source) for r in repeats],
        created_at=created,
    )


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = parse_iso_datetime(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
