"""Prometheus metrics and the request-body limit, as two small ASGI middlewares.

The metrics are kept in-process (one registry per worker process; scrape each worker, or run
one worker per container) and rendered in the Prometheus text format 0.0.4:

- ``perfci_http_requests_total{method, route, status}``: the route is the path *template*
  (``/api/v1/runs/{run_id}``), never the raw path, and a path no route matches is counted as
  ``unmatched``; the method is one of :data:`METHODS` or ``other``. Clients choose paths and
  methods freely, so every label must come from a fixed set, or the series grow without bound;
- ``perfci_http_request_duration_seconds{route}``: a latency histogram;
- ``perfci_uploads_total{result}``: ``created``, ``duplicate`` or ``rejected``;
- ``perfci_parse_cpu_seconds``: a histogram of the CPU time each upload's parse worker used
  (:mod:`perfci.server.parse_pool`), and ``perfci_parse_cpu_seconds_max``, the most one used:
  how close honest uploads come to ``PERFCI_PARSE_CPU_SECONDS``.
"""

from __future__ import annotations

import bisect
import json
import threading
import time
from collections import defaultdict
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from perfci.core.errors import RequestTooLarge
from perfci.server.errors import error_body

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
PARSE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 5.0, 10.0, 30.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: The methods counted by name; any other (``FOO``, ``PROPFIND``) is counted as ``other``.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: At most this many HTTP status labels (100-599); anything else is counted as ``other``.
_STATUS_RANGE = range(100, 600)


class Registry:
    """Thread-safe counters and one histogram."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: dict[tuple[str, str, str], int] = defaultdict(int)
        self._uploads: dict[str, int] = defaultdict(int)
        self._buckets: dict[str, list[int]] = {}
        self._sums: dict[str, float] = defaultdict(float)
        self._parse = [0] * (len(PARSE_BUCKETS) + 1)
        self._parse_sum = self._parse_max = 0.0

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        method = method if method in METHODS else "other"
        code = str(status) if status in _STATUS_RANGE else "other"
        with self._lock:
            self._requests[(method, route, code)] += 1
            counts = self._buckets.setdefault(route, [0] * (len(BUCKETS) + 1))
            counts[bisect.bisect_left(BUCKETS, seconds)] += 1
            self._sums[route] += seconds

    def count_upload(self, result: str) -> None:
        with self._lock:
            self._uploads[result] += 1

    def observe_parse(self, cpu_seconds: float) -> None:
        with self._lock:
            self._parse[bisect.bisect_left(PARSE_BUCKETS, cpu_seconds)] += 1
            self._parse_sum += cpu_seconds
            self._parse_max = max(self._parse_max, cpu_seconds)

    def render(self) -> str:
        """The metrics in the Prometheus text exposition format."""
        with self._lock:
            lines = [
                "# HELP perfci_http_requests_total HTTP requests by route and status.",
                "# TYPE perfci_http_requests_total counter",
            ]
            for (method, route, status), count in sorted(self._requests.items()):
                labels = _labels(method=method, route=route, status=status)
                lines.append(f"perfci_http_requests_total{{{labels}}} {count}")
            lines += [
                "# HELP perfci_uploads_total Run uploads by result.",
                "# TYPE perfci_uploads_total counter",
            ]
            for result in ("created", "duplicate", "rejected"):
                lines.append(
                    f'perfci_uploads_total{{result="{result}"}} {self._uploads.get(result, 0)}'
                )
            lines += [
                "# HELP perfci_http_request_duration_seconds Request latency by route.",
                "# TYPE perfci_http_request_duration_seconds histogram",
            ]
            for route, counts in sorted(self._buckets.items()):
                lines += _histogram(route, counts, self._sums[route])
            lines += [
                "# HELP perfci_parse_cpu_seconds CPU time of each upload's parse worker.",
                "# TYPE perfci_parse_cpu_seconds histogram",
                *_histogram(None, self._parse, self._parse_sum, PARSE_BUCKETS),
                "# HELP perfci_parse_cpu_seconds_max The most CPU time one parse worker used.",
                "# TYPE perfci_parse_cpu_seconds_max gauge",
                f"perfci_parse_cpu_seconds_max {self._parse_max:.6f}",
            ]
        return "\n".join(lines) + "\n"


def _histogram(
    route: str | None, counts: list[int], total: float, buckets: tuple[float, ...] = BUCKETS
) -> list[str]:
    """A latency histogram by route, or (``route=None``) the parse-CPU histogram."""
    name = "perfci_http_request_duration_seconds" if route else "perfci_parse_cpu_seconds"
    by = {"route": route} if route else {}
    lines, running = [], 0
    for bound, count in zip((*buckets, float("inf")), counts, strict=True):
        running += count
        le = "+Inf" if bound == float("inf") else repr(bound)
        lines.append(f"{name}_bucket{{{_labels(**by, le=le)}}} {running}")
    braces = f"{{{_labels(**by)}}}" if by else ""
    lines.append(f"{name}_sum{braces} {total:.6f}")
    lines.append(f"{name}_count{braces} {running}")
    return lines


def _labels(**values: str) -> str:
    def escape(value: str) -> str:
        return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')

    return ",".join(f'{key}="{escape(value)}"' for key, value in values.items())


class _HttpMiddleware:
    """A pure ASGI middleware for HTTP requests: lifespan and websocket scopes pass through."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.http(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError


class MetricsMiddleware(_HttpMiddleware):
    """Counts every HTTP request by method, route template and status, and times it."""

    def __init__(self, app: ASGIApp, registry: Registry) -> None:
        super().__init__(app)
        self.registry = registry

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            # Only a matched route's template: never the client's path.
            route = getattr(scope.get("route"), "path", None)
            route = route if isinstance(route, str) else "unmatched"
            self.registry.observe_request(
                scope["method"], route, status, time.perf_counter() - started
            )


class BodyLimitMiddleware(_HttpMiddleware):
    """Refuses request bodies over ``max_bytes`` with 413, by Content-Length and by counting.

    A declared length over the limit is refused before any of the body is read; a body without
    one (chunked) is counted as it streams and refused at the first byte over the limit.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        super().__init__(app)
        self.max_bytes = max_bytes

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await _send_413(send, self.max_bytes)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise RequestTooLarge(_too_large(self.max_bytes))
            return message

        await self.app(scope, counting_receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _too_large(limit: int) -> str:
    return f"request body is larger than the server's limit of {limit} bytes"


async def _send_413(send: Send, limit: int) -> None:
    body = json.dumps(error_body("payload_too_large", _too_large(limit))).encode()
    headers: list[Any] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})
