"""Run a benchmark command N times, each repeat a fresh process, and collect its profile files.

Each repeat gets its own output directory in ``PERFCI_OUTPUT_DIR``, its index in ``PERFCI_REPEAT``
and the profiler's name in ``PERFCI_PROFILER``. With ``profiler="nsys"`` the command is wrapped in
``nsys profile`` and the report exported to SQLite, which perfci parses; with ``torch`` the command
is expected to write its own traces (see ``perfci.integrations.torch``); with ``none`` every file
the command leaves is collected.

The benchmark is the code under test (a pull request's code, in CI), so it never sees perfci's or
the CI's secrets: it starts without any ``PERFCI_*`` variable except the three perfci sets for it,
without the CI tokens in :data:`WITHHELD_CI_VARIABLES` (issue 13) and without the workflow command
files (:data:`~perfci.core.private_env.WORKFLOW_FILES`: ``GITHUB_ENV``, ``GITHUB_OUTPUT`` …,
issue 31). ``pass_env`` (the ``pass_env`` setting, ``--pass-env NAME``) lets named variables
through. ``perfci check`` and ``perfci run`` hold those variables in memory only
(:mod:`perfci.core.private_env`), so the benchmark does not find them in its parent's
environment either.

Each repeat runs in a process group of its own, with no terminal input. Whatever way a repeat
ends (its exit, a timeout, Ctrl-C, SIGTERM or SIGHUP turned into an exception by the CLI), the
group is ended: SIGTERM, then SIGKILL after :data:`STOP_GRACE_S`, so that no process of the
benchmark outlives its repeat (issue 31).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfci.core import private_env
from perfci.core.errors import BenchmarkFailed, ConfigError
from perfci.core.private_env import BENCHMARK_VARIABLES, WITHHELD_CI_VARIABLES, WORKFLOW_FILES
from perfci.core.settings import get_settings
from perfci.integrations.benchmark_env import benchmark_environment, workflow_files_kept
from perfci.integrations.machine import gpu_state
from perfci.integrations.machine.host_load import HostLoadMeter

PROFILERS = ("torch", "nsys", "none")
DEFAULT_GLOBS: dict[str, tuple[str, ...]] = {
    "torch": ("*.pt.trace.json", "*.pt.trace.json.gz"),
    "nsys": ("*.sqlite",),
    "none": ("*",),
}
TAIL_LINES = 40
#: Seconds a stopped benchmark's process group gets between SIGTERM and SIGKILL.
STOP_GRACE_S = 5.0

# What perfci sets for each repeat, and what it withholds: defined with the private variables.
__all__ = [
    "BENCHMARK_VARIABLES",
    "DEFAULT_GLOBS",
    "PROFILERS",
    "WITHHELD_CI_VARIABLES",
    "WORKFLOW_FILES",
    "RepeatResult",
    "RunResult",
    "collect_files",
    "run_benchmark",
    "wrap_command",
]


@dataclass(slots=True)
class RepeatResult:
    index: int
    files: list[Path]
    seconds: float
    output_dir: Path
    #: Names (never values) of the variables withheld from this repeat's environment.
    withheld: list[str] = field(default_factory=list)
    #: The GPUs' clocks, temperature, power and throttling during the repeat #:
    #: (:mod:`perfci.integrations.machine.gpu_state`; also left beside the profiles as
    #: ``perfci-gpu-state.json``), #: and under ``host`` the share of the CPU other processes took
    #: (:mod:`perfci.integrations.machine.host_load`); #: ``None`` when neither could be measured.
    gpu_state: dict[str, Any] | None = None


@dataclass(slots=True)
class RunResult:
    benchmark: str
    repeats: list[RepeatResult] = field(default_factory=list)

    @property
    def files_per_repeat(self) -> list[list[Path]]:
        return [r.files for r in self.repeats]


def wrap_command(command: Sequence[str], profiler: str, output_dir: Path) -> list[str]:
    """The command line to run for one repeat under ``profiler``."""
    if profiler == "nsys":
        nsys = shutil.which("nsys")
        if nsys is None:
            raise ConfigError("--profiler nsys needs Nsight Systems' `nsys` on PATH")
        return [
            nsys,
            "profile",
            "--force-overwrite=true",
            "--export=sqlite",
            "--trace=cuda,nvtx,osrt",
            "-o",
            str(output_dir / "report"),
            *command,
        ]
    return list(command)


def _configured_pass_env(cwd: Path | None) -> list[str]:
    """The ``pass_env`` setting (environment, then config file) when the caller passed none."""
    return list(get_settings(start=cwd).pass_env)


def collect_files(output_dir: Path, globs: Sequence[str]) -> list[Path]:
    """Files under ``output_dir`` matching any glob, sorted, each once (perfci's own GPU state
    file is not a profile).

    A link that leads out of ``output_dir`` (the benchmark is the code under test: it may
    leave ``trace.json -> ~/.ssh/id_rsa``), or nowhere, is not a profile: never opened, so
    nothing of what it points to reaches an error message (issue 31).
    """
    root = output_dir.resolve()
    found: dict[Path, None] = {}
    for pattern in globs:
        for path in sorted(output_dir.rglob(pattern)):
            if path.name == gpu_state.SIDECAR:
                continue
            try:
                real = path.resolve(strict=True)
            except (OSError, RuntimeError):
                continue
            if real.is_relative_to(root) and real.is_file():
                found[path] = None
    return list(found)


def run_benchmark(
    command: Sequence[str],
    *,
    benchmark: str,
    repeats: int,
    work_dir: Path,
    profiler: str = "torch",
    globs: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    on_repeat: Callable[[int, RepeatResult], None] | None = None,
    timeout_s: float | None = None,
    pass_env: Collection[str] | None = None,
) -> RunResult:
    """Run ``command`` ``repeats`` times; stop at the first failing repeat.

    ``env`` (default: :func:`perfci.core.private_env.environ`) is what the benchmark would
    inherit; it starts with perfci's and the CI's secrets removed
    (:func:`perfci.integrations.benchmark_env.benchmark_environment`) except the names in
    ``pass_env`` (default: the ``pass_env`` setting). ``cwd`` is the directory
    it runs in.

    Raises ``BenchmarkFailed`` (carrying the exit code and the output tail) when a repeat
    fails, and ``ConfigError`` when a repeat produced no profile file.
    """
    if not command:
        raise ConfigError("no benchmark command given (perfci run ... -- CMD ARGS)")
    if profiler not in PROFILERS:
        raise ConfigError(f"unknown profiler {profiler!r}; choose one of {', '.join(PROFILERS)}")
    if repeats < 1:
        raise ConfigError("--repeats must be at least 1")
    patterns = tuple(globs) if globs else DEFAULT_GLOBS[profiler]
    allowed = _configured_pass_env(cwd) if pass_env is None else pass_env
    full_env = private_env.environ() if env is None else env
    base_env, withheld = benchmark_environment(full_env, pass_env=allowed)
    result = RunResult(benchmark=benchmark)
    for index in range(repeats):
        out_dir = work_dir / f"repeat-{index}"
        if out_dir.exists():
            shutil.rmtree(out_dir)
        out_dir.mkdir(parents=True)
        with workflow_files_kept(full_env):
            repeat = _run_once(
                command,
                index=index,
                out_dir=out_dir,
                profiler=profiler,
                patterns=patterns,
                env=base_env,
                cwd=cwd,
                timeout_s=timeout_s,
            )
        repeat.withheld = withheld
        result.repeats.append(repeat)
        if on_repeat is not None:
            on_repeat(index, repeat)
    return result


def _run_once(
    command: Sequence[str],
    *,
    index: int,
    out_dir: Path,
    profiler: str,
    patterns: Sequence[str],
    env: Mapping[str, str],
    cwd: Path | None,
    timeout_s: float | None,
) -> RepeatResult:
    child_env = dict(env)
    child_env["PERFCI_OUTPUT_DIR"] = str(out_dir)
    child_env["PERFCI_REPEAT"] = str(index)  # 0-based for programs; messages say index + 1
    # A Python benchmark's output reaches the tail even when it dies without flushing
    # (os._exit, a crash, a kill): piped, its stdout is block-buffered (issue 36: a benchmark
    # that exited 3 gave an empty "last output:").
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    # perfci.integrations.torch reads it: under nsys, a second CUPTI client (torch.profiler) must
    # stay off.
    child_env["PERFCI_PROFILER"] = profiler
    argv = wrap_command(command, profiler, out_dir)
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    # The GPU is sampled for exactly the repeat's lifetime (issue 12: its state is evidence).
    sampler = gpu_state.sample_while(child_env)
    host = HostLoadMeter()  # and so is the CPU time other processes took meanwhile
    host.start()
    started = time.perf_counter()
    try:
        returncode = _wait(
            argv, cwd=cwd, env=child_env, tail=tail, index=index, timeout_s=timeout_s
        )
    finally:
        seconds = time.perf_counter() - started
        state = sampler.stop()
        host_state = host.stop()
    if host_state is not None:
        state = {**(state or {}), "host": host_state}
    if returncode != 0:
        shown = "\n".join(tail) if tail else "(nothing: the benchmark printed no output)"
        raise BenchmarkFailed(
            f"repeat {index + 1} of the benchmark exited with code {returncode}; last output:\n"
            + shown,
            returncode=returncode,
            tail="\n".join(tail),
        )
    files = collect_files(out_dir, patterns)
    if not files:
        raise ConfigError(
            f"repeat {index + 1} wrote no profile file matching {', '.join(patterns)} "
            f"in {out_dir}; "
            "does the benchmark write into $PERFCI_OUTPUT_DIR (see perfci.integrations.torch)?"
        )
    if state is not None:
        gpu_state.write_sidecar(out_dir, state)
    return RepeatResult(
        index=index, files=files, seconds=seconds, output_dir=out_dir, gpu_state=state
    )


def _wait(
    argv: Sequence[str],
    *,
    cwd: Path | None,
    env: Mapping[str, str],
    tail: deque[str],
    index: int,
    timeout_s: float | None,
) -> int:
    """Run one repeat's process to its end, keeping the last lines of its output.

    The process leads a process group of its own, ended on every way out (module docstring).
    """
    try:
        process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            **_own_group(),
        )
    except OSError as exc:
        if cwd is not None and not cwd.is_dir():  # Popen names the command either way
            raise ConfigError(
                f"cannot start benchmark command {argv[0]!r}: its directory {str(cwd)!r} "
                "does not exist"
            ) from exc
        raise ConfigError(f"cannot start benchmark command {argv[0]!r}: {exc.strerror}") from exc
    assert process.stdout is not None
    finished = False
    try:
        for line in process.stdout:
            tail.append(line.rstrip("\n"))
        try:
            code = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise BenchmarkFailed(
                f"repeat {index + 1} timed out after {timeout_s:.0f} s",
                returncode=124,
                tail="\n".join(tail),
            ) from None
        finished = True
        return code
    finally:
        _end_group(process, grace_s=0.0 if finished else STOP_GRACE_S)
        process.stdout.close()


def _own_group() -> dict[str, Any]:
    """Popen's arguments for a process group of its own (POSIX)."""
    return {"process_group": 0} if os.name == "posix" else {}


def _end_group(process: subprocess.Popen[str], *, grace_s: float) -> None:
    """End every process of ``process``'s group: SIGTERM, then SIGKILL after ``grace_s``.

    After a repeat that exited by itself only strays are left (a server the benchmark started
    and forgot): they get SIGKILL at once. The group is ``process.pid`` (``process_group=0``).
    """
    if os.name != "posix":
        if process.poll() is None:
            process.kill()
            process.wait()
        return
    if grace_s > 0 and _signal_group(process.pid, signal.SIGTERM):
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace_s)
    _signal_group(process.pid, signal.SIGKILL)
    process.wait()


def _signal_group(group: int, signum: signal.Signals) -> bool:
    """Send ``signum`` to the process group; False when it has no process left."""
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member changed user (setuid): nothing more perfci may do
        return False
    return True
