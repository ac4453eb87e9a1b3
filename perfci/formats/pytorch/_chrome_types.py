"""A Chrome trace's events as a reader hands them to the aggregation (``_chrome_events``): the
fields perfci reads, and the error a consumer raises on an event it cannot use.

Two readers produce them: ``_chrome_stream`` (``msgspec`` structs, for files of any size) and
``_chrome_small`` (plain objects from ``json``, for small files, so that reading one imports
neither ``msgspec`` nor numpy). The aggregation sees only these protocols.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol


class TraceArgs(Protocol):
    """The ``args`` fields perfci reads (type checked by the caller): memcpy/memset sizes, and
    the allocator totals of ``[memory]`` instants (``profile_memory=True``)."""

    @property
    def bytes(self) -> Any: ...
    @property
    def total_allocated(self) -> Any: ...  # "Total Allocated"
    @property
    def total_reserved(self) -> Any: ...  # "Total Reserved"
    @property
    def device_type(self) -> Any: ...  # "Device Type"
    @property
    def device_id(self) -> Any: ...  # "Device Id"


class TraceEvent(Protocol):
    """One trace event, reduced to what the aggregation needs. ``ts`` and ``dur`` are in
    microseconds; ``ts`` is a number in valid traces (anything else only loses per-step
    totals)."""

    @property
    def ph(self) -> str | None: ...
    @property
    def name(self) -> str | None: ...
    @property
    def cat(self) -> str | None: ...
    @property
    def ts(self) -> Any: ...
    @property
    def dur(self) -> float | None: ...
    @property
    def pid(self) -> Any: ...
    @property
    def args(self) -> TraceArgs | None: ...


class EventError(Exception):
    """An event that decoded but cannot be used; raised by the batch consumer.

    ``index`` is the event's position in the batch it was handed.
    """

    def __init__(self, message: str, index: int) -> None:
        super().__init__(message)
        self.message = message
        self.index = index


BatchConsumer = Callable[[Sequence[TraceEvent]], None]
