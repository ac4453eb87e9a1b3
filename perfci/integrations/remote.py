"""Remote mode: upload a run to a perfci server over HTTP with a project token.

Used by ``perfci ingest`` / ``perfci check`` when ``PERFCI_SERVER_URL`` and ``PERFCI_TOKEN`` are
set, so that CI needs no database credentials. Uploads go over perfci's one HTTP layer
(:mod:`perfci.integrations.http`) and are retried on connection errors, 5xx answers and rate limits
(``Retry-After`` honoured); a POST is safe to retry because every upload carries an
``Idempotency-Key`` (the caller's, else a digest of the upload itself), so a retry can never
store a run twice.

Errors come back as :class:`~perfci.core.errors.PerfciError` with the server's own message; the
token is never part of a message or a log line.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests

from perfci.core.errors import (
    AuthError,
    ConfigError,
    NotFoundError,
    PerfciError,
    RunConflict,
    StorageError,
)
from perfci.core.jsondoc import to_document
from perfci.core.model import Profile, RunComparison, RunContext
from perfci.core.transfer import comparison_from_dict
from perfci.integrations import http as _http

__all__ = ["comparison_of", "make_session", "upload_run"]

#: (connect, read) seconds. The server parses and compares before it answers: allow minutes.
TIMEOUT = (10.0, 300.0)
_CONTEXT_FIELDS = (
    "commit",
    "branch",
    "base_branch",
    "merge_base",
    "pr_number",
    "ci_provider",
    "ci_run_id",
    "ci_run_attempt",
    "ci_url",
    "commit_time",
    "repository",
    "environment",
)


def make_session(
    *, retries: int = 5, backoff: float = 0.5, max_wait_s: float = 300.0
) -> requests.Session:
    """A session that retries connection errors, 5xx and rate limits (POST included).

    Every method is retried because every upload carries an ``Idempotency-Key``. A server
    asking to wait longer than ``max_wait_s`` in all gets its answer reported instead.
    """
    return _http.make_session(
        retries=retries,
        retry_methods=None,
        backoff=backoff,
        max_wait_s=max_wait_s,
        timeout=TIMEOUT,
        label="perfci server",
    )


def upload_run(
    server_url: str,
    token: str,
    *,
    project: str,
    benchmark: str,
    context: RunContext,
    repeats: Sequence[Sequence[Profile]] | Sequence[Path],
    idempotency_key: str | None = None,
    format: str | None = None,
    session: requests.Session | None = None,
    timeout: tuple[float, float] = TIMEOUT,
) -> dict[str, Any]:
    """Upload one run; returns the server's answer (``run_id``, ``created``, ``comparison``).

    ``repeats`` is either the parsed profiles of each repeat (sent as perfci JSON documents)
    or profile files (sent as they are, one repeat per file, parsed by the server with
    ``format`` or detection).
    """
    url = f"{server_url.rstrip('/')}/api/v1/projects/{quote(project, safe='/')}/runs"
    meta = {"benchmark": benchmark, "context": _context(context)}
    if _are_files(repeats):
        paths = [Path(p) for p in repeats]  # type: ignore[arg-type]
        request = _multipart_request(meta, paths, format)
    else:
        documents = [to_document(list(r)) for r in repeats]  # type: ignore[arg-type]
        body = json.dumps({**meta, "repeats": documents})
        request = {"data": body.encode(), "headers": {"Content-Type": "application/json"}}
    key = idempotency_key or _digest(request)
    headers = {
        **request.pop("headers", {}),
        "Authorization": f"Bearer {token}",
        "Idempotency-Key": key,
        "Accept": "application/json",
    }
    http = session or make_session()
    try:
        response = http.post(url, headers=headers, timeout=timeout, **request)
    except requests.RequestException as exc:
        raise StorageError(
            f"could not reach the perfci server at {server_url}: {type(exc).__name__}"
        ) from exc
    finally:
        for handle in request.get("files", []):
            handle[1][1].close()
        if session is None:
            http.close()
    return _answer(response, server_url)


def comparison_of(answer: dict[str, Any]) -> RunComparison:
    """The comparison of an :func:`upload_run` answer, ready for perfci's renderers."""
    return comparison_from_dict(answer["comparison"])


def _are_files(repeats: Sequence[Any]) -> bool:
    return bool(repeats) and all(isinstance(r, str | Path) for r in repeats)


def _context(context: RunContext) -> dict[str, Any]:
    values = asdict(context)
    return {k: values[k] for k in _CONTEXT_FIELDS if values.get(k) not in (None, "", {})}


def _multipart_request(
    meta: dict[str, Any], paths: list[Path], format: str | None
) -> dict[str, Any]:
    if format:
        meta = {**meta, "format": format}
    try:
        files = [("files", (p.name, p.open("rb"))) for p in paths]
    except OSError as exc:
        raise ConfigError(f"cannot read profile file: {exc}") from exc
    return {"data": {"meta": json.dumps(meta)}, "files": files}


def _digest(request: dict[str, Any]) -> str:
    """A key for this upload's content: the same data uploaded again is the same run."""
    digest = hashlib.sha256()
    data = request["data"]
    digest.update(data if isinstance(data, bytes) else data["meta"].encode())
    for _, (_, handle) in request.get("files", []):
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
        handle.seek(0)
    return "sha256:" + digest.hexdigest()


def _answer(response: requests.Response, server_url: str) -> dict[str, Any]:
    try:
        payload = response.json()
    except ValueError:
        payload = None
    if response.ok and isinstance(payload, dict):
        return payload
    message = _message(payload) or f"HTTP {response.status_code}"
    if response.status_code == 409:
        run_id = _conflicting_run(payload, message)
        if run_id is not None:
            raise RunConflict(f"perfci server {server_url}: {message}", run_id=run_id)
    raise _error(response.status_code, f"perfci server {server_url}: {message}")


def _conflicting_run(payload: Any, message: str) -> int | None:
    """The stored run's id of a 409 answer: its ``run_id`` field, else the message's."""
    error = payload.get("error") if isinstance(payload, dict) else None
    for holder in (error, payload):
        if isinstance(holder, dict) and isinstance(holder.get("run_id"), int):
            return int(holder["run_id"])
    found = re.search(r"\brun (\d+)\b", message)
    return int(found[1]) if found else None


def _message(payload: Any) -> str | None:
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        return str(payload["error"].get("message") or "") or None
    return None


def _error(status: int, message: str) -> PerfciError:
    if status in (401, 403):
        return AuthError(message, status=status)
    if status == 404:
        return NotFoundError(message)
    if 400 <= status < 500:
        return ConfigError(message)
    return StorageError(message)
