"""Uploads are parsed in worker processes, each with a CPU-time and a memory budget (issue 31).

A regular expression that backtracks for a minute on a hostile line holds the GIL all that
time: parsed in a thread of the server, one 64 KB upload froze every client, ``/healthz``
included. Here each upload is parsed in a process of its own, forked from a *forkserver* that
imported the parsers once (a fork costs milliseconds, and the server's threads, sockets and
database connections are never copied into it):

- the server's event loop and threads only wait on a pipe;
- the worker's CPU time is capped: ``ITIMER_PROF`` interrupts the parse once it has used its
  budget (with :class:`OverBudget`, a ``BaseException`` that no parser's ``except Exception``
  can swallow; ``re`` checks for signals as it backtracks), and ``RLIMIT_CPU`` kills the
  process a second later should C code hold the interrupt back;
- its address space is capped (``RLIMIT_AS``): an allocation past the budget is a
  ``MemoryError``, answered 413;
- a worker that dies (killed, crashed) costs its own upload only: every upload gets a fresh
  process, so no limit or leak carries over from one upload to the next.

The CPU budget grows with the input, :meth:`Budget.cpu_for`: a slow parse of a small file is
hostile, of a big one may be honest. A worker refuses its upload with the status and message
the server's handlers would give (:class:`~perfci.server.errors.Refusal`); the parsed profiles
come back in chunks, so that unpickling a 200,000-metric run never holds the server's GIL for
long.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import resource
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import ModuleType
from typing import Any

from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from perfci.core.errors import PerfciError
from perfci.core.model import Profile
from perfci.server.errors import Refusal, status_of, validation_message

log = logging.getLogger("perfci.server")

#: What a parse job returns: the benchmark and context of a JSON upload (``None`` for files),
#: and the profiles of each repeat.
Parsed = tuple[str | None, dict[str, Any] | None, list[list[Profile]]]
#: A parse job: a module-level function (workers get it by reference) and its arguments.
Job = Callable[..., Parsed]

_MIB = 1024 * 1024
#: Metrics per message on the way back (see the module docstring).
_CHUNK = 5000
#: The modules every worker needs, imported once in the forkserver (and those of the server's
#: main script: :func:`main_script_modules`).
_PRELOAD = ["__main__", "perfci.server.uploads"]


def main_script_modules(main: ModuleType | None = None) -> list[str]:
    """The modules the server's main script (``main``, default ``__main__``) took its names
    from, to be imported once in the forkserver.

    Every fresh worker runs the parent's main script again before its job: multiprocessing
    does so for a script started by path, and the forkserver cannot import it once for all
    (CPython's forkserver drops the path, so ``"__main__"`` in the preload does nothing for a
    script). For ``perfci serve`` that script imports the whole CLI: 90 ms of every upload
    (a fresh worker took 90 ms, 10 ms with the CLI preloaded). The script's own names say
    which modules it imports (``from perfci.cli.main import main``; uvicorn's or gunicorn's
    scripts alike), and with those already imported, running it again costs next to nothing.
    """
    main = main if main is not None else sys.modules.get("__main__")
    found: set[str] = set()
    for key, value in vars(main).items() if main is not None else ():
        if key.startswith("__"):  # the module's own __loader__, __spec__, __builtins__
            continue
        name = value.__name__ if isinstance(value, ModuleType) else getattr(value, "__module__", "")
        if isinstance(name, str) and name and name not in ("__main__", "builtins"):
            found.add(name)
    return sorted(found)


@dataclass(frozen=True, slots=True)
class Budget:
    """What one upload's parse may spend (``PERFCI_PARSE_*`` settings).

    ``cpu_seconds`` plus ``cpu_seconds_per_mib`` per MiB of input (the inflated size of gzip
    files) of CPU time; ``memory_bytes`` of address space over what the worker starts with;
    ``max_input_bytes`` the largest input an upload can have (the body or inflated-size cap),
    which bounds how far a budget may grow once gzip files are inflated.
    """

    cpu_seconds: float
    cpu_seconds_per_mib: float
    memory_bytes: int
    max_input_bytes: int

    def cpu_for(self, size_bytes: int) -> float:
        """Seconds of CPU the parse of ``size_bytes`` of input may take."""
        return self.cpu_seconds + self.cpu_seconds_per_mib * size_bytes / _MIB

    def wall_for(self, size_bytes: int) -> float:
        """Seconds the server waits for a worker at most (a worker starved of CPU by a busy
        machine, or one that waits on something): far more than its CPU budget."""
        return 30.0 + 10 * self.cpu_for(size_bytes)


class OverBudget(BaseException):
    """Raised in a worker when its parse used up its CPU time."""


class ParsePool:
    """Runs parse jobs, each in a fresh worker process held to the pool's :class:`Budget`.

    The caller bounds how many run at once (the server's upload slots); :meth:`run` blocks a
    thread, never the event loop.
    """

    def __init__(self, budget: Budget, observe: Callable[[float], None] | None = None) -> None:
        self.budget = budget
        #: Called with the CPU time of each worker that answered (for /metrics).
        self.observe = observe or (lambda seconds: None)
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload([*_PRELOAD, *main_script_modules()])
        self._lock = threading.Lock()
        self._live: set[BaseProcess] = set()

    def warm(self) -> None:
        """Start the forkserver (importing the parsers takes a second or two) before the first
        upload needs it."""
        self._run(_nothing, (), 0)

    def run(self, job: Job, args: tuple[Any, ...], size_bytes: int) -> Parsed:
        """``job(*args)`` in a fresh worker, within the budget for ``size_bytes`` of input.

        Raises
        ------
        Refusal
            The job's own error (a parse error, a limit), or the budget it ran out of.
        """
        try:
            parsed, cpu = self._run(job, args, size_bytes)
        except Refusal as refusal:
            if refusal.cpu is not None:
                self.observe(refusal.cpu)
            raise
        self.observe(cpu)
        return parsed

    def _run(self, job: Job, args: tuple[Any, ...], size_bytes: int) -> tuple[Parsed, float]:
        reader, writer = self._context.Pipe(duplex=False)
        process = self._context.Process(
            target=_child,
            args=(writer, job, args, self.budget, size_bytes),
            name="perfci-parse",
            daemon=True,
        )
        with self._lock:  # multiprocessing's bookkeeping of children is not thread-safe
            process.start()
            self._live.add(process)
        writer.close()
        try:
            return _receive(reader, process, self.budget, size_bytes)
        finally:
            reader.close()
            if process.is_alive():
                process.kill()
            process.join(timeout=10)
            with self._lock:
                self._live.discard(process)

    def stop(self) -> None:
        """Kill the workers still running (the server is shutting down)."""
        with self._lock:
            live = list(self._live)
        for process in live:
            if process.is_alive():
                process.kill()


def _nothing() -> Parsed:
    return None, None, []


# --- the server's side ------------------------------------------------------------------------


def _receive(
    reader: Connection, process: BaseProcess, budget: Budget, size: int
) -> tuple[Parsed, float]:
    """The worker's profiles and the CPU time it used; its refusal raised."""
    deadline = time.monotonic() + budget.wall_for(size)
    try:
        first = _next(reader, deadline, process, budget, size)
        if first[0] == "refused":
            _, status, code, message, cpu = first
            raise Refusal(message, status=status, code=code, cpu=cpu)
        _, benchmark, context, repeats, counts = first
        for profiles, wanted in zip(repeats, counts, strict=True):
            for profile, count in zip(profiles, wanted, strict=True):
                while len(profile.metrics) < count:
                    profile.metrics += _next(reader, deadline, process, budget, size)[1]
        _, cpu = _next(reader, deadline, process, budget, size)
    except EOFError:
        raise _died(process, budget, size) from None
    return (benchmark, context, repeats), cpu


def _next(
    reader: Connection, deadline: float, process: BaseProcess, budget: Budget, size: int
) -> Any:
    if not reader.poll(max(0.0, deadline - time.monotonic())):
        process.kill()
        raise Refusal(
            f"parsing the upload took longer than {budget.wall_for(size):.0f} s; nothing was "
            "stored",
            status=422,
            code="parse_budget_exceeded",
        )
    return reader.recv()


def _died(process: BaseProcess, budget: Budget, size: int) -> Refusal:
    """The refusal of an upload whose worker ended without an answer."""
    process.join(timeout=10)
    code = process.exitcode
    if code == -signal.SIGXCPU:  # RLIMIT_CPU: the interrupt was held back
        return _cpu_refusal(budget.cpu_for(size))
    if code == -signal.SIGKILL:  # RLIMIT_CPU's hard limit, or the kernel out of memory
        return Refusal(
            "the parse of the upload was killed: it ran out of CPU time or memory "
            "(PERFCI_PARSE_CPU_SECONDS, PERFCI_PARSE_MEMORY_BYTES); nothing was stored",
            status=422,
            code="parse_budget_exceeded",
        )
    log.warning("a parse worker ended with exit code %s", code)
    return Refusal(
        f"the parser stopped without an answer (exit code {code}); nothing was stored",
        status=422,
        code="invalid_profile",
    )


def _cpu_refusal(seconds: float) -> Refusal:
    return Refusal(
        f"parsing the upload took more than {seconds:.1f} s of CPU time, this server's "
        "budget for an upload of its size (PERFCI_PARSE_CPU_SECONDS, "
        "PERFCI_PARSE_CPU_SECONDS_PER_MIB); nothing was stored",
        status=422,
        code="parse_budget_exceeded",
    )


# --- the worker's side ------------------------------------------------------------------------


class _Worker:
    """The state of the worker process this code runs in (none in the server itself)."""

    budget: Budget | None = None
    #: Seconds of its own CPU time the worker may use in all.
    ceiling = 0.0


def _child(writer: Connection, job: Job, args: tuple[Any, ...], budget: Budget, size: int) -> None:
    """A worker: set its limits, run ``job``, send back the profiles or the refusal."""
    _limit(budget, size)
    try:
        try:
            benchmark, context, repeats = job(*args)
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
    except OverBudget:
        answer = _fields(_cpu_refusal(_Worker.ceiling))
        writer.send(("refused", *answer, time.process_time()))
        return
    except BaseException as exc:  # noqa: BLE001 - every error becomes the upload's answer
        writer.send(("refused", *_answer(exc, budget), time.process_time()))
        return
    counts = [[len(p.metrics) for p in profiles] for profiles in repeats]
    metrics = [p.metrics for profiles in repeats for p in profiles]
    for profiles in repeats:
        for profile in profiles:
            profile.metrics = []
    writer.send(("parsed", benchmark, context, repeats, counts))
    for listed in metrics:
        for start in range(0, len(listed), _CHUNK):
            writer.send(("metrics", listed[start : start + _CHUNK]))
    writer.send(("done", time.process_time()))


def _limit(budget: Budget, size: int) -> None:
    """No core dumps; ``memory_bytes`` more address space than now; the CPU budget armed."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    mapped = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
    memory = mapped + budget.memory_bytes
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    # The kernel's hard stop, in whole seconds: room for the largest budget an upload can get
    # (grow_budget lowers the soft limit to the actual one).
    most = math.ceil(time.process_time() + budget.cpu_for(budget.max_input_bytes)) + 2
    resource.setrlimit(resource.RLIMIT_CPU, (most, most))
    signal.signal(signal.SIGPROF, _over_budget)
    _Worker.budget = budget
    _Worker.ceiling = 0.0
    grow_budget(size)


def grow_budget(size: int) -> None:
    """In a worker: allow the CPU time of ``size`` bytes of input (called once gzip files are
    inflated: their budget is that of their inflated size). In the server: nothing."""
    if _Worker.budget is None:
        return
    seconds = _Worker.budget.cpu_for(size)
    if seconds <= _Worker.ceiling:
        return
    _Worker.ceiling = seconds
    signal.setitimer(signal.ITIMER_PROF, max(seconds - time.process_time(), 0.001))
    # SIGXCPU (fatal) a second after the interrupt, should C code hold the interrupt back.
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (min(math.ceil(seconds) + 1, hard), hard))


def _over_budget(signum: int, frame: Any) -> None:
    raise OverBudget


def _answer(exc: BaseException, budget: Budget) -> tuple[int, str, str]:
    """The status, code and message the server answers for ``exc``, raised in a worker."""
    if isinstance(exc, PerfciError):
        return _fields(exc)
    if isinstance(exc, RequestValidationError | ValidationError):
        return 422, "invalid_request", validation_message(list(exc.errors()))
    if isinstance(exc, MemoryError):
        limit = budget.memory_bytes // _MIB
        return (
            413,
            "payload_too_large",
            f"parsing the upload needs more than {limit} MiB of memory, this server's "
            "budget for one upload (PERFCI_PARSE_MEMORY_BYTES); nothing was stored",
        )
    if isinstance(exc, RecursionError):
        return 422, "invalid_request", "the upload is nested too deeply to read"
    log.error("unexpected error while parsing an upload:\n%s", traceback.format_exc())
    return 500, "internal_error", "internal server error"


def _fields(exc: PerfciError) -> tuple[int, str, str]:
    status, code = status_of(exc)
    return status, code, str(exc)
