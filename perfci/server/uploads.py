"""Turning an upload into repeats of profiles: JSON documents or multipart profile files.

Everything is parsed and checked here, before the store is touched: a bad file, an unknown
``schema_version`` or a run over the limits writes nothing.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from perfci import jsondoc
from perfci.errors import ConfigError, ParseError, PerfciError
from perfci.model import Profile
from perfci.server.schemas import MAX_NAME, ContextIn, DocumentIn, RunMeta
from perfci.usecases.ingest import parse_repeats

if TYPE_CHECKING:
    from perfci.server.deps import Limits

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_META_BYTES = 1024 * 1024


def documents_to_repeats(documents: list[DocumentIn]) -> list[list[Profile]]:
    """One repeat per perfci JSON document (read by :func:`perfci.jsondoc.from_document`)."""
    repeats = []
    for index, document in enumerate(documents):
        raw = document.model_dump(mode="json", exclude_none=True)
        repeats.append(jsondoc.from_document(raw, source=f"repeats[{index}]"))
    return repeats


async def read_multipart(request: Request,
                         limits: Limits) -> tuple[str, ContextIn, list[list[Profile]]]:
    """``meta`` (RunMeta JSON) and ``files`` (one repeat per file) of a multipart upload."""
    async with request.form(max_files=limits.max_files, max_fields=10,
                            max_part_size=_MAX_META_BYTES) as form:
        meta_raw = form.get("meta")
        if not isinstance(meta_raw, str):
            raise ConfigError("multipart upload without a `meta` field (JSON: benchmark, "
                              "context)")
        try:
            meta = RunMeta.model_validate_json(meta_raw)
        except ValidationError as exc:
            from fastapi.exceptions import RequestValidationError

            raise RequestValidationError(
                [{**e, "loc": ("meta", *e["loc"])} for e in exc.errors(include_input=False)]
            ) from None
        files = [f for f in form.getlist("files") if isinstance(f, UploadFile)]
        if not files:
            raise ConfigError("multipart upload without profile `files`")
        with tempfile.TemporaryDirectory(prefix="perfci-upload-") as folder:
            paths = [await _save(f, Path(folder), i) for i, f in enumerate(files)]
            repeats = await run_in_threadpool(_parse, paths, meta.format, folder)
    return meta.benchmark, meta.context, repeats


async def _save(upload: UploadFile, folder: Path, index: int) -> Path:
    name = _UNSAFE_NAME.sub("_", Path(upload.filename or "profile").name)[-100:] or "profile"
    path = folder / f"{index:04d}" / name
    path.parent.mkdir()
    with path.open("wb") as handle:
        while chunk := await upload.read(1024 * 1024):
            handle.write(chunk)
    return path


def _parse(paths: list[Path], format: str | None, folder: str) -> list[list[Profile]]:
    """Parse each file as one repeat; error messages name the uploaded file, not our copy."""
    ours = re.compile(re.escape(str(Path(folder))) + r"/\d{4}/")
    try:
        repeats = parse_repeats(paths, format=format)
    except ParseError as exc:
        raise ParseError(ours.sub("", exc.message), source=ours.sub("", exc.source),
                         line=exc.line, format=exc.format) from None
    except PerfciError as exc:
        raise type(exc)(ours.sub("", str(exc))) from None
    for group in repeats:
        for profile in group:
            profile.source = ours.sub("", profile.source)
    return repeats


def check_size(repeats: list[list[Profile]], limits: Limits) -> None:
    """Refuse runs with too many metrics or names too long to store (422)."""
    total = sum(len(p.metrics) for group in repeats for p in group)
    if total > limits.max_metrics:
        raise ConfigError(f"the run has {total} metrics; this server accepts at most "
                          f"{limits.max_metrics} per run")
    if len(repeats) > 1000:
        raise ConfigError("a run may have at most 1000 repeats")
    for group in repeats:
        for profile in group:
            _check_profile(profile)


def _check_profile(profile: Profile) -> None:
    if len(profile.format) > 50:
        raise ConfigError(f"profile format name is longer than 50 characters: "
                          f"{profile.format[:50]!r}…")
    for metric in profile.metrics:
        if len(metric.name) > MAX_NAME or len(metric.scope or "") > MAX_NAME:
            raise ConfigError(f"a metric name is longer than {MAX_NAME} characters: "
                              f"{metric.name[:80]!r}…")
        if "\x00" in metric.name or "\x00" in (metric.scope or ""):
            raise ConfigError("metric names may not contain NUL characters")
