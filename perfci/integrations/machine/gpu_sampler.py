"""Sampling the GPUs in use while a repeat runs: NVML, else ``nvidia-smi``, else nothing.

The runner samples every :data:`~perfci.integrations.machine.gpu_readings.INTERVAL_MS` through NVML
(``nvidia-ml-py``, imported as ``pynvml``) when it is installed, else through
``nvidia-smi --query-gpu=... -lms 100`` in a background process; without a GPU it samples
nothing and says nothing. Sampling never fails a repeat.
"""

from __future__ import annotations

import contextlib
import importlib
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Mapping
from typing import Any

from perfci.integrations.machine.gpu_readings import (
    INTERVAL_MS,
    SMI_FIELDS,
    GpuSample,
    parse_smi_csv,
    summarise,
)

__all__ = ["GpuSampler", "sample_while"]

_STOP_TIMEOUT_S = 5


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
                [
                    smi,
                    f"--query-gpu={','.join(SMI_FIELDS)}",
                    "--format=csv,noheader,nounits",
                    "-lms",
                    str(INTERVAL_MS),
                ],
                stdout=self._output,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
                env=dict(self._env),
            )
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
        return (
            self._visible is None
            or str(sample.index) in self._visible
            or (sample.uuid in self._visible)
        )

    def _start_nvml(self) -> bool:
        try:
            nvml: Any = importlib.import_module("pynvml")
            nvml.nvmlInit()
        except Exception:  # noqa: BLE001 - no library, no driver, no GPU: no NVML sampling
            return False
        self.source = "nvml"
        self._thread = threading.Thread(
            target=self._poll_nvml, args=(nvml,), daemon=True, name="perfci-gpu-state"
        )
        self._thread.start()
        return True

    def _poll_nvml(self, nvml: Any) -> None:
        try:
            handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
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
        nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    )
    return GpuSample(
        index=index,
        uuid=uuid.decode() if isinstance(uuid, bytes) else str(uuid),
        sm_mhz=float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
        mem_mhz=float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)),
        max_sm_mhz=float(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)),
        temperature_c=float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
        power_w=nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,  # milliwatts
        reasons=int(reasons_of(handle)),
    )


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
