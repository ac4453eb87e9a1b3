"""The HTTP API under ``/api/v1``: upload runs, read runs, comparisons, benchmarks, history.

Project names hold a slash (``owner/repo``), and benchmark names may, so both path parameters
use Starlette's ``path`` converter; send them as-is (``/api/v1/projects/acme/model/runs``) or
percent-encoded.

What a token may not see answers as if it did not exist (see :mod:`perfci.server.auth`).

The routes live by resource in ``api_*`` modules (each under ``api_params.PREFIX``); this one
puts them together in an order that matters: ``PATCH /projects/{project:path}`` takes any
path under a project, so the upload comes before it (a wrong method on ``…/runs`` answers 405
naming POST) and the other project routes after it.
"""

from __future__ import annotations

from fastapi import APIRouter

from perfci.server import (
    api_alerts,
    api_benchmarks,
    api_projects,
    api_reports,
    api_runs,
    api_upload,
)

router = APIRouter()
for resource in (api_upload, api_projects, api_runs, api_benchmarks, api_alerts, api_reports):
    router.include_router(resource.router)
