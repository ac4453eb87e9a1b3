"""The GPU's state during each repeat: clocks, temperature, power and throttle reasons.

A repeat that ran on a throttled GPU (too hot, at its power cap, slowed by the hardware) is
slower for reasons that have nothing to do with the code under test (issue 12 point 10). The
runner samples the GPU(s) in use every 100 ms while a repeat runs, through NVML
(``nvidia-ml-py``, imported as ``pynvml``) when it is installed, else through
``nvidia-smi --query-gpu=... -lms 100`` in a background process; without a GPU it samples
nothing and says nothing. Each repeat's samples are summarised per GPU (:func:`summarise`)
into a JSON-ready ``gpu_state`` that travels in the repeat's profile metadata, and
:func:`judge_repeats` tells which repeats ran throttled or at a low SM clock, for the
comparison to leave out and name.

Throttle reasons are NVML's ``nvmlClocksThrottleReasons`` bits (``nvml.h``; nvidia-smi prints
the same bitmask as ``clocks_throttle_reasons.active``).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import shutil
import statistics
import subprocess
import tempfile
import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
SLOWDOWN_REASONS = frozenset({"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown",
                              "hw_thermal_slowdown", "hw_power_brake_slowdown"})
SMI_FIELDS = ("index", "uuid", "clocks.sm", "clocks.mem", "clocks.max.sm", "temperature.gpu",
              "power.draw", "clocks_throttle_reasons.active")
INTERVAL_MS = 100
_IDLE = 0x1
#: A repeat is throttled when a slowdown reason held in more than this share of its samples...
THROTTLED_SHARE = 0.2
#: ...or when its median SM clock is more than this much below the usual clock.
CLOCK_DROP = 0.10
#: The file the runner leaves in each repeat's output directory.
SIDECAR = "perfci-gpu-state.json"
_STOP_TIMEOUT_S = 5


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
        samples.append(GpuSample(index=int(cells[0]), uuid=cells[1], sm_mhz=_number(cells[2]),
                                 mem_mhz=_number(cells[3]), max_sm_mhz=_number(cells[4]),
                                 temperature_c=_number(cells[5]), power_w=_number(cells[6]),
                                 reasons=reasons))
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
        "sm_clock_median_mhz": _median(busy or sm),
        "sm_clock_min_mhz": min(sm) if sm else None,
        "sm_clock_max_mhz": max(sm) if sm else None,
        "sm_clock_limit_mhz": _max(s.max_sm_mhz for s in samples),
        "mem_clock_median_mhz": _median([s.mem_mhz for s in samples if s.mem_mhz is not None]),
        "temperature_max_c": _max(s.temperature_c for s in samples),
        "power_median_w": _median([s.power_w for s in samples if s.power_w is not None]),
        "throttle_reasons": [n for n in THROTTLE_REASONS.values() if n in counts],
        "throttle_fractions": {n: round(counts[n] / total, 4)
                               for n in THROTTLE_REASONS.values() if n in counts},
        "throttled_fraction": round(slowed / total, 4),
    }


def _median(values: Sequence[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def _max(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


# --- judging ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RepeatJudgement:
    """Why one repeat's GPU state makes its numbers suspect (``suspect`` False: it does not)."""

    suspect: bool
    reasons: tuple[str, ...] = ()
    sm_clock_mhz: float | None = None
    usual_clock_mhz: float | None = None

    def describe(self) -> str:
        """``"1410 MHz against 1980 MHz (hw_slowdown)"``, or the reasons alone."""
        reasons = f"({', '.join(self.reasons)})" if self.reasons else ""
        if self.sm_clock_mhz is not None and self.usual_clock_mhz is not None and (
                self.sm_clock_mhz < (1 - CLOCK_DROP) * self.usual_clock_mhz):
            clock = f"{self.sm_clock_mhz:.0f} MHz against {self.usual_clock_mhz:.0f} MHz"
            return f"{clock} {reasons}".strip()
        return reasons or "a low SM clock"


@dataclass(slots=True)
class StateJudge:
    """Judges repeats against what is usual for this benchmark's GPUs.

    ``usual_clock_mhz`` is the median SM clock of the baseline's repeats (the candidate's own
    repeats when the baseline has none); ``usual_reasons`` are slowdown reasons that hold in
    most baseline runs: a GPU that always runs at its power cap is this runner's normal state,
    not a wrecked measurement, so only an unusual reason makes a repeat suspect.
    """

    usual_clock_mhz: float | None = None
    usual_reasons: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_history(cls, baseline_runs: Sequence[Sequence[Mapping[str, Any] | None]],
                     candidate: Sequence[Mapping[str, Any] | None] = ()) -> StateJudge:
        """The usual state, from the baseline runs' per-repeat states (and the candidate's)."""
        clocks = [c for run in baseline_runs for s in run if s and (c := repeat_clock(s))]
        if not clocks:
            clocks = [c for s in candidate if s and (c := repeat_clock(s))]
        per_run = [set().union(*(_slowdowns(s) for s in run if s)) if any(run) else None
                   for run in baseline_runs]
        known = [reasons for reasons in per_run if reasons is not None]
        usual = frozenset(r for r in SLOWDOWN_REASONS
                          if known and sum(r in reasons for reasons in known) > len(known) / 2)
        return cls(usual_clock_mhz=_median(clocks), usual_reasons=usual)

    def judge(self, state: Mapping[str, Any] | None) -> RepeatJudgement:
        """Whether a repeat with ``state`` ran throttled (no state: never suspect)."""
        if not state:
            return RepeatJudgement(suspect=False)
        reasons = tuple(r for r in _slowdowns(state) if r not in self.usual_reasons)
        clock = repeat_clock(state)
        usual = self.usual_clock_mhz or _limit(state)
        slow = clock is not None and usual is not None and clock < (1 - CLOCK_DROP) * usual
        return RepeatJudgement(suspect=bool(reasons) or slow, reasons=reasons,
                               sm_clock_mhz=clock, usual_clock_mhz=usual)


def _slowdowns(state: Mapping[str, Any]) -> list[str]:
    """Slowdown reasons that held in more than ``THROTTLED_SHARE`` of some GPU's samples."""
    found: dict[str, None] = {}
    for gpu in _gpus(state):
        fractions = gpu.get("throttle_fractions") or {}
        for name in THROTTLE_REASONS.values():
            share = fractions.get(name, 0) if isinstance(fractions, Mapping) else 0
            if name in SLOWDOWN_REASONS and isinstance(share, int | float) and (
                    share > THROTTLED_SHARE):
                found[name] = None
    return list(found)


def repeat_clock(state: Mapping[str, Any]) -> float | None:
    """The repeat's median SM clock: the slowest GPU's, since a step waits for every GPU."""
    clocks = [float(c) for gpu in _gpus(state)
              if isinstance(c := gpu.get("sm_clock_median_mhz"), int | float)]
    return min(clocks) if clocks else None


def _limit(state: Mapping[str, Any]) -> float | None:
    limits = [float(c) for gpu in _gpus(state)
              if isinstance(c := gpu.get("sm_clock_limit_mhz"), int | float)]
    return min(limits) if limits else None


def _gpus(state: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    gpus = state.get("gpus")
    return [g for g in gpus if isinstance(g, Mapping)] if isinstance(gpus, list) else []


# --- sampling --------------------------------------------------------------------------------


class GpuSampler:
    """Samples the GPUs in use while a repeat runs: ``start()`` before, ``stop()`` after.

    NVML when ``pynvml`` imports and initialises, else ``nvidia-smi`` on ``PATH`` (of
    ``env``), else nothing. ``CUDA_VISIBLE_DEVICES`` (indices or ``GPU-`` UUIDs) limits the
    GPUs reported to those the benchmark can use. Sampling never fails a repeat.
    """

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = env
        self._visible = _visible(env.get("CUDA_VISIBLE_DEVICES"))
        self._process: subprocess.Popen[bytes] | None = None
        self._output: Any = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._nvml_samples: list[GpuSample] = []
        self.source: str | None = None

    def start(self) -> None:
        if self._start_nvml():
            return
        smi = shutil.which("nvidia-smi", path=self._env.get("PATH"))
        if smi is None:
            return
        self._output = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        try:
            self._process = subprocess.Popen(
                [smi, f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader,nounits",
                 "-lms", str(INTERVAL_MS)], stdout=self._output, stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL, env=dict(self._env))
        except OSError:
            self._output.close()
            self._output = None
            return
        self.source = "nvidia-smi"

    def stop(self) -> dict[str, Any] | None:
        """Stop sampling; the repeat's ``gpu_state`` (``None`` without samples)."""
        if self._thread is not None:
            self._stopping.set()
            self._thread.join(_STOP_TIMEOUT_S)
            samples = list(self._nvml_samples)
        elif self._process is not None:
            samples = self._stop_smi()
        else:
            return None
        wanted = [s for s in samples if self._wanted(s)]
        return summarise(wanted, source=self.source or "")

    def _stop_smi(self) -> list[GpuSample]:
        assert self._process is not None and self._output is not None
        self._process.terminate()
        try:
            self._process.wait(_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._output.seek(0)
        text = self._output.read().decode("utf-8", errors="replace")
        self._output.close()
        return parse_smi_csv(text)

    def _wanted(self, sample: GpuSample) -> bool:
        return self._visible is None or str(sample.index) in self._visible or (
            sample.uuid in self._visible)

    def _start_nvml(self) -> bool:
        try:
            nvml: Any = importlib.import_module("pynvml")
            nvml.nvmlInit()
        except Exception:  # noqa: BLE001 - no library, no driver, no GPU: no NVML sampling
            return False
        self.source = "nvml"
        self._thread = threading.Thread(target=self._poll_nvml, args=(nvml,), daemon=True,
                                        name="perfci-gpu-state")
        self._thread.start()
        return True

    def _poll_nvml(self, nvml: Any) -> None:
        try:
            handles = [nvml.nvmlDeviceGetHandleByIndex(i)
                       for i in range(nvml.nvmlDeviceGetCount())]
            while True:
                for index, handle in enumerate(handles):
                    self._nvml_samples.append(_nvml_sample(nvml, index, handle))
                if self._stopping.wait(INTERVAL_MS / 1000):
                    break
        except Exception:  # noqa: BLE001 - a GPU that stops answering ends sampling, not the run
            return
        finally:
            with contextlib.suppress(Exception):  # shutting down a library that failed
                nvml.nvmlShutdown()


def _nvml_sample(nvml: Any, index: int, handle: Any) -> GpuSample:
    uuid = nvml.nvmlDeviceGetUUID(handle)
    reasons_of = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or (
        nvml.nvmlDeviceGetCurrentClocksThrottleReasons)
    return GpuSample(
        index=index, uuid=uuid.decode() if isinstance(uuid, bytes) else str(uuid),
        sm_mhz=float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
        mem_mhz=float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)),
        max_sm_mhz=float(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)),
        temperature_c=float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
        power_w=nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,  # milliwatts
        reasons=int(reasons_of(handle)))


def _visible(value: str | None) -> set[str] | None:
    """The GPUs ``CUDA_VISIBLE_DEVICES`` names (indices or UUIDs); ``None``: all of them."""
    if value is None or not value.strip():
        return None
    return {part.strip() for part in value.split(",") if part.strip()}


def sample_while(env: Mapping[str, str]) -> GpuSampler:
    """A started sampler (see :class:`GpuSampler`)."""
    sampler = GpuSampler(env)
    sampler.start()
    return sampler


# --- carrying the state with the repeat --------------------------------------------------------


def write_sidecar(directory: Path, state: Mapping[str, Any]) -> Path:
    """Leave a repeat's state beside its profiles (``SIDECAR``), for :func:`read_sidecar`."""
    path = directory / SIDECAR
    path.write_text(json.dumps(state, indent=1), encoding="utf-8")
    return path


def read_sidecar(files: Collection[Path]) -> dict[str, Any] | None:
    """The ``gpu_state`` the runner left beside a repeat's profile ``files``, if any."""
    for folder in dict.fromkeys(Path(f).parent for f in files):
        for candidate in (folder, *folder.parents[:2]):
            path = candidate / SIDECAR
            if path.is_file():
                try:
                    state = json.loads(path.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    return None
                return state if isinstance(state, dict) else None
    return None


def attach(repeats: Sequence[Sequence[Any]], files: Sequence[Collection[Path]]) -> None:
    """Put each repeat's sidecar state into its profiles' metadata under ``gpu_state``.

    ``repeats`` are the parsed profiles of each repeat (:class:`perfci.model.Profile`) and
    ``files`` the files they came from, in the same order. Profile metadata is stored per
    repeat and carried by perfci JSON documents, so remote uploads carry the state too.
    """
    for profiles, paths in zip(repeats, files, strict=False):
        state = read_sidecar(paths)
        if state is None:
            continue
        for profile in profiles:
            profile.metadata["gpu_state"] = state


__all__ = ["SIDECAR", "SLOWDOWN_REASONS", "THROTTLE_REASONS", "GpuSample", "GpuSampler",
           "RepeatJudgement", "StateJudge", "attach", "parse_smi_csv", "read_sidecar",
           "reason_names", "repeat_clock", "sample_while", "summarise", "write_sidecar"]
