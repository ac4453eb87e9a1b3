"""A few lines for a benchmark author: profile training steps the way perfci reads them.

::

    from perfci.integrations.torch import profile_steps

    with profile_steps(warmup=2, active=5) as run:
        for _ in run:            # 7 iterations: 2 warm-up (not profiled), then 5 profiled
            train_step()

Warm-up iterations run before the profiler starts, so autotuning and allocator growth never
reach the trace. Each profiled iteration is a ``ProfilerStep#N`` range in the Chrome trace and
is also timed on its own (CUDA events on a GPU, a monotonic clock after a synchronize on the
CPU). The trace and the step times are written to ``$PERFCI_OUTPUT_DIR`` (set by
``perfci run``; ``./perfci-out`` otherwise); the step times are stored inside the trace under
the top-level key ``"perfci"`` so that one file carries the whole repeat.

On CUDA each profiled step also records the peak device memory it allocated and reserved
(``torch.cuda.max_memory_allocated`` / ``max_memory_reserved``, the peak statistics reset
before every step): the ``"perfci"`` block's ``peak_allocated_bytes`` / ``peak_reserved_bytes``,
one value per step, which the Chrome-trace parser turns into "peak allocated memory" / "peak
reserved memory" metrics. The CPU allocator keeps no peak statistics: nothing is recorded there.

Under ``perfci check --profiler nsys`` (``PERFCI_PROFILER=nsys``, set by the runner) nsys is
the profiler: torch.profiler stays off, and each active step is an NVTX range
``ProfilerStep#N`` that ends after a synchronize, which the nsys parsers read as the step.

On the CPU (Linux), the allocator is first made to serve memory that is already paged in
(:func:`steady_cpu_memory`; ``steady_memory=False`` leaves it alone): otherwise the profiler's
own growing records push each step's tensors onto fresh pages, and element-wise operators time
the kernel's page faults rather than their own work.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

STEP_KEY = "perfci"
#: glibc's ``mallopt`` parameters (``malloc.h``).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: What :func:`steady_cpu_memory` pages in up front, by default.
PREFAULT_BYTES = 256 << 20
_PREFAULT_CHUNK = 16 << 20


def output_dir() -> Path:
    """Where a benchmark should write its profiles: ``$PERFCI_OUTPUT_DIR`` or ``./perfci-out``."""
    path = Path(os.environ.get("PERFCI_OUTPUT_DIR", "perfci-out"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@functools.cache
def steady_cpu_memory(prefault_bytes: int = PREFAULT_BYTES) -> bool:
    """Make glibc's allocator hand out memory that is already paged in; ``False`` if not glibc.

    PyTorch's CPU tensors come straight from ``malloc``. Under the profiler, whose event records
    grow the heap all the time, every step's activations land partly on fresh pages, which the
    kernel faults in and zeroes on first touch, so element-wise operators time page faults:
    in the example benchmark on a 2-core VM, 1,500–2,500 page faults per profiled step, and
    ``aten::gelu`` took 0.35 or 1.2 ms per call depending on where its output landed
    (``benchmarks/RESULTS.md``). Here freed memory stays in the process (no ``munmap`` of big
    blocks, no trimming of the heap) and ``prefault_bytes`` are touched once and freed, for
    later allocations to reuse: no page faults per step after that. The process keeps that
    much memory until it exits, which suits a benchmark. CUDA tensors come from PyTorch's
    caching allocator and do not need this. The settings hold for the whole process, so it
    runs once per process (a second ``profile_steps`` reuses what the first paged in).
    """
    if not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    if libc is None or not hasattr(libc, "mallopt"):
        return False  # another C library (musl): its allocator has no such settings
    # Older glibc refuses an mmap threshold above 32 MiB; tensors larger than what it accepts
    # are still mapped afresh, the everyday activations are not.
    if not libc.mallopt(_M_MMAP_THRESHOLD, 1 << 30):
        libc.mallopt(_M_MMAP_THRESHOLD, _PREFAULT_CHUNK * 2)
    if not libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30):
        return False
    if prefault_bytes > 0:
        import torch  # lazy: torch is the optional [torch] extra; perfci imports without it

        # Chunks below the mmap threshold come from the heap and go back to it when freed;
        # the touch is what pages them in (malloc alone only reserves addresses).
        chunks = [
            torch.empty(_PREFAULT_CHUNK, dtype=torch.uint8)
            for _ in range(-(-prefault_bytes // _PREFAULT_CHUNK))
        ]
        for chunk in chunks:
            chunk.fill_(1)
        del chunks
    return True


class _StepTimer:
    """Per-step wall time: CUDA events on a GPU (no host sync inside the loop), else a clock."""

    def __init__(self, use_cuda: bool) -> None:
        import torch  # lazy: torch is the optional [torch] extra; perfci imports without it

        self._torch = torch
        self._use_cuda = use_cuda
        self._events: list[tuple[Any, Any]] = []
        self._host: list[int] = []
        self._start: Any = None

    def begin(self) -> None:
        if self._use_cuda:
            self._start = self._torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            self._start.record()
        else:
            self._start = time.perf_counter_ns()

    def end(self) -> None:
        if self._use_cuda:
            stop = self._torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            stop.record()
            self._events.append((self._start, stop))
        else:
            self._host.append(time.perf_counter_ns() - self._start)

    def samples_ns(self) -> list[float]:
        if self._use_cuda:
            self._torch.cuda.synchronize()
            return [start.elapsed_time(stop) * 1e6 for start, stop in self._events]
        return [float(ns) for ns in self._host]


class _PeakMemory:
    """Per-step peak device memory in bytes, read from the CUDA caching allocator's statistics.

    ``cuda`` is ``torch.cuda``; reading the statistics is host-side bookkeeping, so no
    synchronize is needed inside the loop.
    """

    def __init__(self, cuda: Any) -> None:
        self._cuda = cuda
        self.allocated: list[int] = []
        self.reserved: list[int] = []

    def begin(self) -> None:
        self._cuda.reset_peak_memory_stats()

    def end(self) -> None:
        self.allocated.append(int(self._cuda.max_memory_allocated()))
        self.reserved.append(int(self._cuda.max_memory_reserved()))


def _memory_recorder(cuda: Any) -> _PeakMemory | None:
    """The per-step peak recorder on CUDA; ``None`` elsewhere (no allocator peaks to read)."""
    return _PeakMemory(cuda) if cuda.is_available() else None


class profile_steps:  # noqa: N801 - used as a context manager, reads like a function
    """Profile ``active`` steps after ``warmup`` unprofiled ones; see the module docstring."""

    def __init__(
        self,
        *,
        warmup: int = 1,
        active: int = 5,
        label: str = "train",
        record_shapes: bool = False,
        out_dir: Path | None = None,
        steady_memory: bool = True,
    ) -> None:
        if warmup < 0 or active < 1:
            raise ValueError("warmup must be >= 0 and active >= 1")
        import torch  # lazy: torch is the optional [torch] extra; perfci imports without it

        self._torch = torch
        self.warmup = warmup
        self.active = active
        self.label = label
        self.record_shapes = record_shapes
        self.out_dir = out_dir
        self.steady_memory = steady_memory
        self.use_cuda = bool(torch.cuda.is_available())
        self.trace_path: Path | None = None
        self._profiler: Any = None
        self._timer = _StepTimer(self.use_cuda)
        self._memory = _memory_recorder(torch.cuda)
        #: Under ``perfci check --profiler nsys`` nsys records the process; see _nvtx_steps.
        self.external = os.environ.get("PERFCI_PROFILER") == "nsys"

    def __enter__(self) -> profile_steps:
        return self

    def __iter__(self) -> Iterator[int]:
        # lazy: torch is the optional [torch] extra; perfci imports without it
        from torch.profiler import ProfilerAction, ProfilerActivity, profile

        for index in range(self.warmup):
            yield index
        self._sync()
        if self.steady_memory and not self.use_cuda:
            steady_cpu_memory()
        if self.external:
            yield from self._nvtx_steps()
            return
        activities = [ProfilerActivity.CPU]
        if self.use_cuda:
            activities.append(ProfilerActivity.CUDA)
        last = self.active - 1

        # A schedule makes torch mark each iteration as a ProfilerStep#N range; recording every
        # active step and saving after the last (no torch warm-up phase: ours already ran).
        def schedule(step: int) -> ProfilerAction:
            if step < last:
                return ProfilerAction.RECORD
            return ProfilerAction.RECORD_AND_SAVE if step == last else ProfilerAction.NONE

        self._profiler = profile(
            activities=activities,
            record_shapes=self.record_shapes,
            schedule=schedule,
            on_trace_ready=self._save_trace,
        )
        self._profiler.__enter__()
        try:
            for index in range(self.warmup, self.warmup + self.active):
                if self._memory is not None:
                    self._memory.begin()
                self._timer.begin()
                yield index
                self._timer.end()
                if self._memory is not None:
                    self._memory.end()
                self._profiler.step()
        finally:
            self._sync()
            self._profiler.__exit__(None, None, None)

    def _nvtx_steps(self) -> Iterator[int]:
        """The active steps as NVTX ranges ``ProfilerStep#N``, for an outer nsys to record.

        torch.profiler stays off: a second CUPTI client beside nsys's is refused or steals its
        kernel records. Each range ends after a synchronize, so that it holds the step's GPU
        work (an NVTX range is a CPU-thread interval); the nsys parsers turn the numbered
        ranges into the ``step`` metric. ``cudaProfilerStart``/``Stop`` mark the active steps
        too, for an nsys run with ``--capture-range=cudaProfilerApi``. No trace is written:
        nsys's report is the repeat's profile.
        """
        nvtx = self._torch.cuda.nvtx if self.use_cuda else None
        if self.use_cuda:
            self._torch.cuda.profiler.start()  # type: ignore[no-untyped-call]
        try:
            for index in range(self.warmup, self.warmup + self.active):
                if nvtx is not None:
                    nvtx.range_push(f"ProfilerStep#{index}")
                self._timer.begin()
                yield index
                self._timer.end()
                self._sync()
                if nvtx is not None:
                    nvtx.range_pop()
        finally:
            if self.use_cuda:
                self._torch.cuda.profiler.stop()  # type: ignore[no-untyped-call]

    def _save_trace(self, profiler: Any) -> None:
        directory = self.out_dir or output_dir()
        directory.mkdir(parents=True, exist_ok=True)
        self.trace_path = directory / f"{self.label}.pt.trace.json"
        profiler.export_chrome_trace(str(self.trace_path))

    def _sync(self) -> None:
        if self.use_cuda:
            self._torch.cuda.synchronize()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None or self.trace_path is None:
            return
        self._add_step_times(self.trace_path)

    def _add_step_times(self, path: Path) -> None:
        directory = path.parent
        samples = self._timer.samples_ns()
        with path.open(encoding="utf-8") as handle:
            trace = json.load(handle)
        block: dict[str, Any] = {
            "step_name": "step",
            "device": "gpu" if self.use_cuda else "cpu",
            "samples_ns": samples,
            "warmup_skipped": self.warmup,
            "torch_version": self._torch.__version__,
        }
        sidecar: dict[str, Any] = {"step_times_ns": samples, "device": block["device"]}
        if self._memory is not None:
            memory = {
                "peak_allocated_bytes": self._memory.allocated,
                "peak_reserved_bytes": self._memory.reserved,
            }
            block.update(memory)
            sidecar.update(memory)
        trace[STEP_KEY] = block
        with path.open("w", encoding="utf-8") as handle:
            json.dump(trace, handle)
        (directory / f"{self.label}.steps.json").write_text(
            json.dumps(sidecar) + "\n", encoding="utf-8"
        )
