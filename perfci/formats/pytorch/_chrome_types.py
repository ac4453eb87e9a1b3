"""A Chrome trace's events as the stream reader (``_chrome_stream``) hands them to the
aggregation (``_chrome_events``): the structs ``msgspec`` decodes each event into, and the error
a consumer raises on an event it cannot use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec


class Args(msgspec.Struct, gc=False):
    """The ``args`` fields perfci reads (type checked by the caller): memcpy/memset sizes, and
    the allocator totals of ``[memory]`` instants (``profile_memory=True``)."""

    bytes: Any = None
    total_allocated: Any = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Any = msgspec.field(default=None, name="Total Reserved")
    device_type: Any = msgspec.field(default=None, name="Device Type")
    device_id: Any = msgspec.field(default=None, name="Device Id")


class Event(msgspec.Struct, gc=False):
    """One trace event, reduced to what the aggregation needs. ``ts`` and ``dur`` are in
    microseconds."""

    ph: str | None = None
    name: str | None = None
    cat: str | None = None
    ts: Any = None  # a number in valid traces; anything else only loses per-step totals
    dur: float | None = None
    pid: Any = None
    args: Args | None = None


class EventError(Exception):
    """An event that decoded but cannot be used; raised by the batch consumer.

    ``index`` is the event's position in the batch it was handed.
    """

    def __init__(self, message: str, index: int) -> None:
        super().__init__(message)
        self.message = message
        self.index = index


BatchConsumer = Callable[[list[Event]], None]
