"""uvicorn's HTTP/1.1 protocol (h11) with read deadlines, so slow clients cannot hold sockets.

uvicorn closes idle keep-alive connections (``timeout_keep_alive``) but waits forever for a
request whose headers or body arrive a byte at a time (slowloris: 1,000 trickling connections
stayed open for as long as their senders liked). This protocol closes a connection whose
request head is not complete ``header_timeout`` seconds (``PERFCI_HEADER_TIMEOUT``) after the
connection (or the previous response), or whose body is not complete ``body_timeout`` seconds
(``PERFCI_BODY_TIMEOUT``) after its head. ``perfci serve`` passes it to uvicorn as ``http=``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from perfci.server.served import served_settings


class TimedH11Protocol(H11Protocol):
    """:class:`H11Protocol` plus a deadline for the request head and one for the body."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The settings `perfci serve` handed this worker (resolved once, then cached).
        settings = served_settings()
        self.header_timeout = settings.header_timeout
        self.body_timeout = settings.body_timeout
        self._deadline: asyncio.TimerHandle | None = None
        self._phase = ""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm("head", self.header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow_state()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow_state()

    def _follow_state(self) -> None:
        state = self.conn.their_state
        if state is h11.IDLE:
            if self._phase != "head":
                self._arm("head", self.header_timeout)
        elif state is h11.SEND_BODY:
            if self._phase != "body":
                self._arm("body", self.body_timeout)
        else:  # the whole request is in (or the connection is closing)
            self._disarm()

    def _arm(self, phase: str, seconds: float) -> None:
        self._disarm()
        self._phase = phase
        self._deadline = self.loop.call_later(seconds, self._on_deadline)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._phase = ""

    def _on_deadline(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.logger.info(
                "closing a connection that sent its request %s too slowly", self._phase
            )
            self.transport.close()
