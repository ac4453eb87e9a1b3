"""Nsight Compute's metric units: the canonical unit, the power of ten to it, the good direction.

ncu scales units per value (``nsecond``/``usecond``/``msecond``/``second``, ``byte``/``Kbyte``/
``Mbyte``, ``Gbyte/second``, ``hz``/``Ghz``, ``cycle/nsecond``) unless run with ``--print-units
base``; newer releases print ``ns``/``us`` and ``Ghz`` as well. Its prefixes are decimal (SI), sizes
included: the Launch Statistics section prints the 32 KiB shared-memory configuration as ``Kbyte
32.77`` and the 1 KiB driver reservation as ``Kbyte/block 1.02`` (corpus
``ncu_text/duoan_playground-cuda__blog_kernel_ncu.txt``). So ``Kbyte`` is 1000 bytes and
``Gbyte/second`` 1e9 bytes/s, unlike the binary ``KB`` of PyTorch and nvprof in
``perfci.core.units``.

Canonical units: times ``ns``, sizes ``bytes`` (``byte/block`` too: the metric's name says per
block), byte rates ``bytes/s``, frequencies ``Hz`` (``hz`` and ``cycle/nsecond`` alike, as ncu
versions print the same clocks either way), ``%``, an empty unit ``count``; any other unit
(``register/thread``, ``inst/cycle``, ``warp``) is kept as ncu prints it, with its SI prefix
taken off when it has one (``Kinst`` → ``inst``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from perfci.core.model import Better

_PREFIX_POWER = {"": 0, "K": 3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15}
_TIME_POWER = {
    "psecond": -3,
    "ps": -3,
    "nsecond": 0,
    "ns": 0,
    "usecond": 3,
    "us": 3,
    "µs": 3,
    "μs": 3,
    "msecond": 6,
    "ms": 6,
    "second": 9,
    "s": 9,
}
_SIZE = re.compile(r"([KkMGTP]?)(?:byte|bytes|B)")
_HERTZ = re.compile(r"([KkMGTP]?)(?:hz|Hz|HZ)")
_PREFIXED = re.compile(r"([KMGTP])([a-z]+)")
#: Words ncu scales with a prefix when a count is large (``Kinst``, ``Mcycle``).
_COUNT_WORDS = frozenset({"cycle", "inst", "sector", "request", "warp", "thread", "block"})

#: A ``%`` metric is good when high (throughput, occupancy, hit rate) unless it counts waste.
_LOWER_PERCENT_WORDS = (
    "no eligible",
    "no_eligible",
    "stall",
    "conflict",
    "diverg",
    "miss",
    "overhead",
    "excessive",
    "uncoalesced",
    "idle",
)
#: Other metrics are good when low (time, size, cycles, registers) unless the name says
#: they measure achieved work or residency.
_HIGHER_WORDS = (
    "occupancy",
    "throughput",
    "warps_active",
    "active warps",
    "eligible warps",
    "ipc",
    "hit rate",
    "hit_rate",
    "efficiency",
)


@dataclass(frozen=True, slots=True)
class UnitScale:
    """How a value in one of ncu's units becomes a value in the canonical ``unit``:
    times ``10**power``. ``better`` is the direction the unit alone implies, if any."""

    unit: str
    power: int
    better: Better | None


NS = "ns"


@lru_cache(maxsize=512)
def scale(unit: str) -> UnitScale:
    """The canonical unit and power of ten for ncu's ``unit`` (see the module docstring)."""
    text = unit.strip()
    if not text:
        return UnitScale("count", 0, None)
    if text == "%":
        return UnitScale("%", 0, None)
    if text in _TIME_POWER:
        return UnitScale(NS, _TIME_POWER[text], Better.LOWER)
    if match := _SIZE.fullmatch(text):
        return UnitScale("bytes", _PREFIX_POWER[match.group(1)], Better.LOWER)
    if match := _HERTZ.fullmatch(text):
        return UnitScale("Hz", _PREFIX_POWER[match.group(1)], Better.HIGHER)
    counted, slash, per = text.partition("/")
    if slash and per in _TIME_POWER:
        return _rate(counted, 9 - _TIME_POWER[per])
    if slash and per in ("block", "thread"):
        if size := _SIZE.fullmatch(counted):  # byte/block: the name says per block
            return UnitScale("bytes", _PREFIX_POWER[size.group(1)], Better.LOWER)
        return UnitScale(text, 0, Better.LOWER)  # register/thread
    if slash and per == "cycle":
        return UnitScale(text, 0, Better.HIGHER)  # inst/cycle, warp/cycle: work per cycle
    if match := _PREFIXED.fullmatch(text):
        word = match.group(2)
        if word in _COUNT_WORDS:
            return UnitScale(word, _PREFIX_POWER[match.group(1)], None)
    return UnitScale(text, 0, None)


def _rate(counted: str, per_second_power: int) -> UnitScale:
    """``<counted>/<time>`` as a per-second rate (``Gbyte/second`` → ``bytes/s``)."""
    if size := _SIZE.fullmatch(counted):
        power = _PREFIX_POWER[size.group(1)] + per_second_power
        return UnitScale("bytes/s", power, Better.HIGHER)
    prefixed = _PREFIXED.fullmatch(counted)
    prefix, word = prefixed.groups() if prefixed else ("", counted)
    if word == "cycle":  # cycle/nsecond: a clock
        return UnitScale("Hz", _PREFIX_POWER[prefix] + per_second_power, Better.HIGHER)
    return UnitScale(f"{word}/s", _PREFIX_POWER[prefix] + per_second_power, Better.HIGHER)


def better_for(name: str, scaled: UnitScale) -> Better:
    """Which way ``name`` (a metric measured in ``scaled.unit``) is good."""
    if scaled.better is not None:
        return scaled.better
    lowered = name.lower()
    if scaled.unit == "%":
        if any(word in lowered for word in _LOWER_PERCENT_WORDS):
            return Better.LOWER
        return Better.HIGHER
    if any(word in lowered for word in _HIGHER_WORDS):
        return Better.HIGHER
    return Better.LOWER
