"""Receiving an upload: its body spooled to disk, before it waits for an upload slot.

A body read into memory before the upload's turn came made 10 concurrent 50 MB uploads take
the server from 264 MB to 1.1 GB (issue 31). Here a JSON body is written to a file as it
arrives, and the files of a multipart upload are copied out of Starlette's spooled files (at
most 1 MiB each in memory); what waits for a slot is a folder on disk. The body-size limit
(:class:`~perfci.server.metrics.BodyLimitMiddleware`) refuses a declared length over it before
any byte is read, and counts the others as they stream.

The result names the parse job that turns the files into profiles, in a parse worker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from perfci.core.errors import ConfigError, UnsupportedMediaType
from perfci.server.deps import Limits
from perfci.server.parse_pool import Job
from perfci.server.schemas import RunMeta
from perfci.server.uploads import parse_files_upload, parse_json_upload

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_META_BYTES = 1024 * 1024
_CHUNK = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Received:
    """An upload on disk: the job that parses it and its size; a multipart upload's
    ``benchmark`` and ``context`` came in its ``meta`` field, a JSON one's are in the body."""

    job: Job
    args: tuple[Any, ...]
    size: int
    benchmark: str | None = None
    context: dict[str, Any] | None = None


async def receive(request: Request, limits: Limits, folder: Path) -> Received:
    """The upload's body in ``folder``, as JSON (one perfci document per repeat) or multipart
    (``meta`` and one profile file per repeat).

    Raises
    ------
    UnsupportedMediaType
        Neither content type (415).
    ConfigError
        A multipart upload without ``meta`` or ``files`` (422).
    """
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "application/json":
        path = folder / "body.json"
        size = 0
        with path.open("wb") as handle:
            async for chunk in request.stream():
                handle.write(chunk)
                # What arrived is on disk, not held in the writer's buffer while the client
                # stalls: a waiting upload costs no memory (and its spool shows its progress).
                handle.flush()
                size += len(chunk)
        return Received(parse_json_upload, (str(path), limits), size)
    if content_type == "multipart/form-data":
        return await _receive_form(request, limits, folder)
    raise UnsupportedMediaType("send the run as application/json or multipart/form-data")


async def _receive_form(request: Request, limits: Limits, folder: Path) -> Received:
    async with request.form(
        max_files=limits.max_files, max_fields=10, max_part_size=_MAX_META_BYTES
    ) as form:
        meta_raw = form.get("meta")
        if not isinstance(meta_raw, str):
            raise ConfigError("multipart upload without a `meta` field (JSON: benchmark, context)")
        try:
            meta = RunMeta.model_validate_json(meta_raw)
        except ValidationError as exc:
            raise RequestValidationError(
                [{**e, "loc": ("meta", *e["loc"])} for e in exc.errors(include_input=False)]
            ) from None
        files = [f for f in form.getlist("files") if isinstance(f, UploadFile)]
        if not files:
            raise ConfigError("multipart upload without profile `files`")
        paths = [await _save(f, folder, i) for i, f in enumerate(files)]
    size = sum(path.stat().st_size for path in paths)
    return Received(
        parse_files_upload,
        (paths, meta.format, str(folder), limits),
        size,
        benchmark=meta.benchmark,
        context=meta.context.model_dump(),
    )


async def _save(upload: UploadFile, folder: Path, index: int) -> Path:
    name = _UNSAFE_NAME.sub("_", Path(upload.filename or "profile").name)[-100:] or "profile"
    path = folder / f"{index:04d}" / name
    path.parent.mkdir()
    with path.open("wb") as handle:
        while chunk := await upload.read(_CHUNK):
            handle.write(chunk)
    return path
