"""Run a benchmark command N times, each repeat a fresh process, and collect its profile files.

Each repeat gets its own output directory in ``PERFCI_OUTPUT_DIR``, its index in
``PERFCI_REPEAT`` and the profiler's name in ``PERFCI_PROFILER``. With ``profiler="nsys"`` the
command is wrapped in ``nsys profile`` and the report exported to SQLite, which perfci parses;
with ``torch`` the command is expected to write its own traces (see ``perfci.torch``); with
``none`` every file the command leaves is collected.

The benchmark is the code under test (a pull request's code, in CI), so it never sees perfci's
or the CI's secrets: it starts without any ``PERFCI_*`` variable except the three perfci sets for
it, and without the CI tokens in :data:`WITHHELD_CI_VARIABLES` (issue 13). ``pass_env`` (the
``pass_env`` setting, ``--pass-env NAME``) lets named variables through.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfci import gpu_state
from perfci.errors import BenchmarkFailed, ConfigError
from perfci.host_load import HostLoadMeter

PROFILERS = ("torch", "nsys", "none")
DEFAULT_GLOBS: dict[str, tuple[str, ...]] = {
    "torch": ("*.pt.trace.json", "*.pt.trace.json.gz"),
    "nsys": ("*.sqlite",),
    "none": ("*",),
}
TAIL_LINES = 40

#: What perfci sets for each repeat; every other ``PERFCI_*`` variable is withheld.
BENCHMARK_VARIABLES = ("PERFCI_OUTPUT_DIR", "PERFCI_REPEAT", "PERFCI_PROFILER")
#: The CI's credentials, withheld from the benchmark: GitHub's API tokens, and the Actions
#: runtime's tokens with the service URLs they unlock (cache, artifacts, OIDC id tokens).
WITHHELD_CI_VARIABLES = (
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_RUNTIME_URL",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
    "ACTIONS_CACHE_URL",
    "ACTIONS_RESULTS_URL",
)


@dataclass(slots=True)
class RepeatResult:
    index: int
    files: list[Path]
    seconds: float
    output_dir: Path
    #: Names (never values) of the variables withheld from this repeat's environment.
    withheld: list[str] = field(default_factory=list)
    #: The GPUs' clocks, temperature, power and throttling during the repeat
    #: (:mod:`perfci.gpu_state`; also left beside the profiles as ``perfci-gpu-state.json``),
    #: and under ``host`` the share of the CPU other processes took (:mod:`perfci.host_load`);
    #: ``None`` when neither could be measured.
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


def benchmark_environment(
    base: Mapping[str, str], *, pass_env: Collection[str] = ()
) -> tuple[dict[str, str], list[str]]:
    """The environment a benchmark starts with: ``base`` without perfci's and the CI's secrets.

    Parameters
    ----------
    base
        The environment perfci runs in (``os.environ``).
    pass_env
        Names to let through although they would be withheld.

    Returns
    -------
    tuple
        The benchmark's environment, and the sorted names withheld from it (names only: the
        values are secrets and go nowhere).
    """
    allowed = set(pass_env)
    withheld = sorted(name for name in base if name not in allowed and _withheld(name))
    dropped = set(withheld)
    return {k: v for k, v in base.items() if k not in dropped}, withheld


def _withheld(name: str) -> bool:
    # Default-deny for perfci's namespace: a setting added later (a webhook, a token) is
    # withheld without anyone having to remember this list.
    if name.startswith("PERFCI_"):
        return name not in BENCHMARK_VARIABLES
    return name in WITHHELD_CI_VARIABLES


def _configured_pass_env(cwd: Path | None) -> list[str]:
    """The ``pass_env`` setting (environment, then config file) when the caller passed none."""
    from perfci.settings import get_settings

    return list(get_settings(start=cwd).pass_env)


def collect_files(output_dir: Path, globs: Sequence[str]) -> list[Path]:
    """Files under ``output_dir`` matching any glob, sorted, each once (perfci's own GPU state
    file is not a profile)."""
    found: dict[Path, None] = {}
    for pattern in globs:
        for path in sorted(output_dir.rglob(pattern)):
            if path.is_file() and path.name != gpu_state.SIDECAR:
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

    ``env`` (default ``os.environ``) is what the benchmark would inherit; it starts with
    perfci's and the CI's secrets removed (:func:`benchmark_environment`) except the names in
    ``pass_env`` (default: the ``pass_env`` setting). ``cwd`` is the directory it runs in.

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
    base_env, withheld = benchmark_environment(os.environ if env is None else env, pass_env=allowed)
    result = RunResult(benchmark=benchmark)
    for index in range(repeats):
        out_dir = work_dir / f"repeat-{index}"
        if out_dir.exists():
            shutil.rmtree(out_dir)
        out_dir.mkdir(parents=True)
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
    child_env["PERFCI_REPEAT"] = str(index)
    # perfci.torch reads it: under nsys, a second CUPTI client (torch.profiler) must stay off.
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
        raise BenchmarkFailed(
            f"repeat {index} of the benchmark exited with code {returncode}; last output:\n"
            + "\n".join(tail),
            returncode=returncode,
            tail="\n".join(tail),
        )
    files = collect_files(out_dir, patterns)
    if not files:
        raise ConfigError(
            f"repeat {index} wrote no profile file matching {', '.join(patterns)} in {out_dir}; "
            "does the benchmark write into $PERFCI_OUTPUT_DIR (see perfci.torch)?"
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
    """Run one repeat's process to its end, keeping the last lines of its output."""
    try:
        process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
    except OSError as exc:
        raise ConfigError(f"cannot start benchmark command {argv[0]!r}: {exc.strerror}") from exc
    assert process.stdout is not None
    for line in process.stdout:
        tail.append(line.rstrip("\n"))
    try:
        return process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise BenchmarkFailed(
            f"repeat {index} timed out after {timeout_s:.0f} s",
            returncode=124,
            tail="\n".join(tail),
        ) from None
