"""``POST /api/v1/projects/{project}/runs``: upload a run, store it and answer its comparison."""

from __future__ import annotations

import pathlib
import tempfile
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request, Response
from sqlalchemy.orm import Session

from perfci.core.model import Profile, RunContext
from perfci.server import auth
from perfci.server.api_params import ERRORS, NO_NUL, PREFIX, ProjectName
from perfci.server.deps import (
    LimitsDep,
    RegistryDep,
    SettingsDep,
    UploadTokenDep,
    run_upload_work,
    upload_slot,
)
from perfci.server.parse_pool import ParsePool
from perfci.server.receive import receive
from perfci.server.schemas import ComparisonPublic, ErrorPublic, RunCreated
from perfci.usecases.submit.run import SubmitResult, submit_run

router = APIRouter(prefix=PREFIX, responses=ERRORS)


_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/RunCreate"}},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["meta", "files"],
                    "properties": {
                        "meta": {
                            "type": "string",
                            "description": "RunMeta as JSON: benchmark, "
                            "context and an optional format name.",
                        },
                        "files": {
                            "type": "array",
                            "items": {"type": "string", "format": "binary"},
                            "description": "Profile files, one repeat per file.",
                        },
                    },
                }
            },
        },
    },
}


@router.post(
    "/projects/{project:path}/runs",
    status_code=201,
    response_model=RunCreated,
    openapi_extra=_UPLOAD_BODY,
    tags=["runs"],
    responses={
        200: {"model": RunCreated, "description": "Already stored (a retry)"},
        409: {
            "model": ErrorPublic,
            "description": "The CI run is stored "
            "with other content; `error.run_id` is the stored run",
        },
    },
)
async def upload_run(
    project: ProjectName,
    request: Request,
    settings: SettingsDep,
    limits: LimitsDep,
    registry: RegistryDep,
    token: UploadTokenDep,
    idempotency_key: Annotated[str | None, Header(max_length=200, pattern=NO_NUL)] = None,
) -> Response:
    """Store one run (JSON: a perfci document per repeat; multipart: one file per repeat),
    compare it with its baseline and return the comparison. A retry with the same
    ``Idempotency-Key`` (or the same CI run) returns the stored run with 200.

    In order, each step before the costlier next one: the token (its database session closed
    at once), the token's rate limit (429), the body spooled to disk, then an upload slot,
    within which a parse worker reads the body and the run is stored in a session of its own.
    """
    allowed = auth.require_scope(token, project, "upload")
    async with AsyncExitStack() as stack:
        try:
            request.app.state.rate_limit.check(allowed.id)
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="perfci-upload-"))
            received = await receive(request, limits, pathlib.Path(folder))
            await stack.enter_async_context(upload_slot(request))
            pool: ParsePool = request.app.state.parse_pool
            benchmark, context_in, repeats = await run_upload_work(
                request, pool.run, received.job, received.args, received.size
            )
        except Exception:
            registry.count_upload("rejected")
            raise
        context = RunContext(project=project, **(received.context or context_in or {}))
        key = f"http:{idempotency_key}" if idempotency_key else None
        created, answer = await run_upload_work(
            request,
            _submit,
            request.app.state.sessions,
            project,
            context,
            received.benchmark or benchmark,
            repeats,
            settings,
            key,
        )
    registry.count_upload("created" if created else "duplicate")
    return Response(answer, status_code=201 if created else 200, media_type="application/json")


def _submit(
    sessions: Callable[[], Session],
    project: str,
    context: RunContext,
    benchmark: str,
    repeats: list[list[Profile]],
    settings: Any,
    key: str | None,
) -> tuple[bool, bytes]:
    """``submit_run`` (the client's Idempotency-Key is the run key when it sent one), and the
    answer as JSON: a comparison of many metrics takes seconds to serialise, which must not
    happen on the event loop."""
    with sessions() as session:  # opened only now: a connection only to write (issue 31)
        result: SubmitResult = submit_run(
            session,
            context=context,
            benchmark=benchmark,
            repeats=repeats,
            settings=settings,
            idempotency_key=key,
        )
    return result.ingest.created, answer_json(result, project, benchmark)


def answer_json(result: SubmitResult, project: str, benchmark: str) -> bytes:
    """:class:`RunCreated` of ``result`` as JSON. A comparison this upload stored is sent as
    the text stored (the same bytes its model gives), not validated and encoded again: for
    hundreds of metrics that was a tenth of an upload's CPU."""
    ingest = result.ingest
    fields: dict[str, Any] = {
        "run_id": ingest.run_id,
        "created": ingest.created,
        "project": project,
        "benchmark": benchmark,
        "series": ingest.series,
        "samples": ingest.samples,
        "url": f"/runs/{ingest.run_id}",
    }
    if result.document is None:
        answer = RunCreated(**fields, comparison=ComparisonPublic.of(result.comparison))
        return answer.model_dump_json().encode()
    # `comparison` is RunCreated's last field: the rest of the model, then the stored text.
    head = RunCreated.model_construct(**fields).model_dump_json(exclude={"comparison"})
    return f'{head[:-1]},"comparison":{result.document}}}'.encode()
