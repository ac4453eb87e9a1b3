"""A busy neighbour on the runner: what it does to the example, and whether perfci sees it.

Runs the shipped example (``examples/gpt/bench.py``, small settings, torch profiler, CPU) through
perfci's runner in rounds: each round one repeat on a quiet host and one with ``--loops`` busy-loop
processes beside it (another job on a shared runner), in alternating order. Prints, per condition,
the share of the host's CPU the runner measured other processes taking
(:mod:`perfci.integrations.machine.host_load`), the step time, and how much slower the large and the
small operators ran, then which repeats :class:`perfci.integrations.machine.gpu_state.StateJudge`
calls suspect against the quiet repeats as the usual.

Usage::

    .venv/bin/python benchmarks/host_load.py [--rounds 4] [--loops 1]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from children import busy_loops  # noqa: E402

from perfci.core.model import MetricKind  # noqa: E402
from perfci.formats.registry import parse_file  # noqa: E402
from perfci.integrations.machine.gpu_state import StateJudge  # noqa: E402
from perfci.integrations.runner import run_benchmark  # noqa: E402

ARGS = ["--steps", "8", "--warmup", "2", "--batch", "16", "--seq", "128", "--layers", "2"]
#: Operators of at least this many µs a step are "large"; under 50 µs "small".
LARGE_US, SMALL_US = 1000.0, 50.0


def one_repeat(work: Path, loops: int) -> tuple[dict[str, float], dict[str, object]]:
    """Per operator (and the step) µs a step, and the repeat's state, with ``loops`` beside."""
    with busy_loops(loops):
        result = run_benchmark(
            [sys.executable, str(REPO / "examples" / "gpt" / "bench.py"), *ARGS],
            benchmark="gpt",
            repeats=1,
            work_dir=work,
            profiler="torch",
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
    repeat = result.repeats[0]
    values: dict[str, float] = {}
    for path in repeat.files:
        for profile in parse_file(path):
            steps = profile.steps or 1
            for metric in profile.metrics:
                if metric.kind is MetricKind.STEP and metric.steady_samples():
                    values["step"] = statistics.fmean(metric.steady_samples()) / 1e3
                elif metric.kind is MetricKind.OP and metric.total_ns:
                    values[metric.name] = metric.total_ns / steps / 1e3
    return values, repeat.gpu_state or {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--loops", type=int, default=1, help="busy processes beside a repeat")
    args = parser.parse_args(argv)
    quiet: list[tuple[dict[str, float], dict[str, object]]] = []
    loaded: list[tuple[dict[str, float], dict[str, object]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            # Quiet first in even rounds, busy first in odd ones: an order effect (the first
            # process after a pause) must not pass for the load's.
            for busy in (False, True) if i % 2 == 0 else (True, False):
                if busy:
                    loaded.append(one_repeat(Path(tmp) / f"b{i}", args.loops))
                else:
                    quiet.append(one_repeat(Path(tmp) / f"q{i}", 0))
            print(f"round {i + 1}/{args.rounds} done", file=sys.stderr, flush=True)

    def share(state: dict[str, object]) -> float:
        host = state.get("host")
        return float(host["others_cpu_share"]) if isinstance(host, dict) else float("nan")

    ops = sorted(set.intersection(*(set(v) for v, _ in quiet + loaded)) - {"step"})
    level = {op: statistics.median(v[op] for v, _ in quiet) for op in ops}
    judge = StateJudge.from_history([[s for _, s in quiet]])
    print(f"# A busy neighbour ({platform.node()}, {os.cpu_count()} CPUs, {args.loops} loops)\n")
    print(
        "| host | others' CPU share (median) | step (median) | large ops slower "
        "| small ops slower | repeats called busy |"
    )
    print("|:--|--:|--:|--:|--:|--:|")
    base_step = statistics.median(v["step"] for v, _ in quiet)
    for name, rows in (("quiet", quiet), (f"{args.loops} busy loop(s)", loaded)):
        ratios = {op: statistics.median(v[op] for v, _ in rows) / level[op] for op in ops}
        large = [r for op, r in ratios.items() if level[op] >= LARGE_US]
        small = [r for op, r in ratios.items() if level[op] < SMALL_US]
        step = statistics.median(v["step"] for v, _ in rows)
        called = sum(judge.judge(s).suspect for _, s in rows)
        print(
            f"| {name} | {statistics.median(share(s) for _, s in rows):.0%} "
            f"| {step / 1e3:.1f} ms ({step / base_step - 1:+.0%}) "
            f"| {statistics.median(large) - 1:+.0%} ({len(large)} ops ≥ {LARGE_US:.0f} µs) "
            f"| {statistics.median(small) - 1:+.0%} ({len(small)} ops < {SMALL_US:.0f} µs) "
            f"| {called} of {len(rows)} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
