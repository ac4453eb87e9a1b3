"""One GPU reading (NVML or ``nvidia-smi``), parsed, and a repeat's readings summarised.

Throttle reasons are NVML's ``nvmlClocksThrottleReasons`` bits (``nvml.h``; nvidia-smi prints
the same bitmask as ``clocks_throttle_reasons.active``). A repeat's summary is a JSON-ready
``gpu_state`` that travels in the repeat's profile metadata.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CLOCK_DROP",
    "INTERVAL_MS",
    "SLOWDOWN_REASONS",
    "SMI_FIELDS",
    "THROTTLED_SHARE",
    "THROTTLE_REASONS",
    "GpuSample",
    "median",
    "parse_smi_csv",
    "reason_names",
    "summarise",
]

#: NVML's throttle-reason bits, by the names perfci reports.
THROTTLE_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
#: The reasons that slow a busy GPU down (thermal, power, hardware); idle, the application
#: clock setting, sync boost and the display clock say nothing about a wrecked measurement.
SLOWDOWN_REASONS = frozenset(
    {
        "sw_power_cap",
        "hw_slowdown",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
    }
)
SMI_FIELDS = (
    "index",
    "uuid",
    "clocks.sm",
    "clocks.mem",
    "clocks.max.sm",
    "temperature.gpu",
    "power.draw",
    "clocks_throttle_reasons.active",
)
INTERVAL_MS = 100
_IDLE = 0x1
#: A repeat is throttled when a slowdown reason held in more than this share of its samples...
THROTTLED_SHARE = 0.2
#: ...or when its median SM clock is more than this much below the usual clock.
CLOCK_DROP = 0.10


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One reading of one GPU (``None`` where the GPU does not report the field)."""

    index: int
    uuid: str
    sm_mhz: float | None
    mem_mhz: float | None
    max_sm_mhz: float | None
    temperature_c: float | None
    power_w: float | None
    reasons: int


# --- parsing ---------------------------------------------------------------------------------


def parse_smi_csv(text: str) -> list[GpuSample]:
    """Samples from ``nvidia-smi --query-gpu=<SMI_FIELDS> --format=csv,noheader,nounits``.

    Lines that are not a complete reading (a header, a line cut short when the sampler was
    stopped, an error message) are skipped: a partial record must not become a number.
    """
    samples = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(SMI_FIELDS) or not cells[0].isdigit():
            continue
        reasons = _bitmask(cells[7])
        if reasons is None:
            continue
        samples.append(
            GpuSample(
                index=int(cells[0]),
                uuid=cells[1],
                sm_mhz=_number(cells[2]),
                mem_mhz=_number(cells[3]),
                max_sm_mhz=_number(cells[4]),
                temperature_c=_number(cells[5]),
                power_w=_number(cells[6]),
                reasons=reasons,
            )
        )
    return samples


def _number(cell: str) -> float | None:
    """A reading; ``[N/A]``, ``[Not Supported]`` and the like are ``None``."""
    try:
        return float(cell)
    except ValueError:
        return None


def _bitmask(cell: str) -> int | None:
    if cell.startswith("[") or not cell:  # [N/A], [Not Supported]: no reasons known
        return 0
    try:
        return int(cell, 16)
    except ValueError:
        return None


def reason_names(mask: int) -> list[str]:
    """The names of the bits set in a throttle-reason bitmask, in bit order."""
    return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]


# --- summary ---------------------------------------------------------------------------------


def summarise(samples: Iterable[GpuSample], *, source: str) -> dict[str, Any] | None:
    """A repeat's ``gpu_state``: per GPU, its clocks, temperature, power and throttling.

    Returns ``None`` when there is no sample (no GPU, or the repeat was over too soon).
    """
    by_gpu: dict[str, list[GpuSample]] = {}
    for sample in samples:
        by_gpu.setdefault(sample.uuid, []).append(sample)
    if not by_gpu:
        return None
    gpus = [_summarise_gpu(group) for group in by_gpu.values()]
    gpus.sort(key=lambda gpu: int(gpu["index"]))
    return {"source": source, "interval_ms": INTERVAL_MS, "gpus": gpus}


def _summarise_gpu(samples: Sequence[GpuSample]) -> dict[str, Any]:
    sm = [s.sm_mhz for s in samples if s.sm_mhz is not None]
    # The median clock is the clock the work ran at: an idle GPU parks at its lowest clock
    # between phases, which says nothing about throttling.
    busy = [s.sm_mhz for s in samples if s.sm_mhz is not None and not s.reasons & _IDLE]
    counts: dict[str, int] = {}
    slowed = 0
    for sample in samples:
        names = reason_names(sample.reasons)
        for name in names:
            counts[name] = counts.get(name, 0) + 1
        slowed += any(name in SLOWDOWN_REASONS for name in names)
    total = len(samples)
    return {
        "index": samples[0].index,
        "uuid": samples[0].uuid,
        "samples": total,
        "sm_clock_median_mhz": median(busy or sm),
        "sm_clock_min_mhz": min(sm) if sm else None,
        "sm_clock_max_mhz": max(sm) if sm else None,
        "sm_clock_limit_mhz": _max(s.max_sm_mhz for s in samples),
        "mem_clock_median_mhz": median([s.mem_mhz for s in samples if s.mem_mhz is not None]),
        "temperature_max_c": _max(s.temperature_c for s in samples),
        "power_median_w": median([s.power_w for s in samples if s.power_w is not None]),
        "throttle_reasons": [n for n in THROTTLE_REASONS.values() if n in counts],
        "throttle_fractions": {
            n: round(counts[n] / total, 4) for n in THROTTLE_REASONS.values() if n in counts
        },
        "throttled_fraction": round(slowed / total, 4),
    }


def median(values: Sequence[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def _max(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None
