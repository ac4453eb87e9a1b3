"""A per-token upload rate limit: a token bucket per API token, in this process (issue 31).

Each token may send ``burst`` uploads at once and ``per_minute`` a minute after that; an upload
over the limit is answered 429 with ``Retry-After`` before its body is read (perfci's client
waits that long and retries). The buckets live in the server process: with ``--workers N`` or
several replicas a token may send N times as much in all, which still bounds what one token
can make one process do.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from starlette.exceptions import HTTPException

#: Buckets kept at most; full ones (idle tokens) are dropped first when there are more.
_MAX_BUCKETS = 10_000


class UploadRateLimit:
    """Token buckets by key (an API token's id)."""

    def __init__(
        self, per_minute: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.per_second = per_minute / 60.0
        self.burst = burst
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[int, tuple[float, float]] = {}  # key -> (tokens, as of when)

    def wait(self, key: int) -> float:
        """Take one upload from ``key``'s bucket: 0 when allowed, else the seconds until one
        is (nothing is taken then)."""
        now = self._clock()
        with self._lock:
            tokens, then = self._buckets.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - then) * self.per_second)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                if len(self._buckets) > _MAX_BUCKETS:
                    self._forget_full(now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / self.per_second

    def check(self, key: int) -> None:
        """:meth:`wait`, as a 429 with ``Retry-After`` when the upload must wait.

        Raises
        ------
        HTTPException
            429, naming the limit and when to retry.
        """
        seconds = self.wait(key)
        if seconds > 0:
            retry = max(1, math.ceil(seconds))
            raise HTTPException(
                429,
                detail=f"this token sent more uploads than this server accepts ({self.burst} "
                f"at once, then {self.per_second * 60:g} a minute: PERFCI_UPLOAD_BURST, "
                f"PERFCI_UPLOAD_RATE); retry in {retry} s",
                headers={"Retry-After": str(retry)},
            )

    def _forget_full(self, now: float) -> None:
        full = [
            key
            for key, (tokens, then) in self._buckets.items()
            if tokens + (now - then) * self.per_second >= self.burst
        ]
        for key in full:
            del self._buckets[key]
