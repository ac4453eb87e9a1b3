"""What page faults do to per-operator times of the example on the CPU, with and without
``perfci.integrations.torch.steady_cpu_memory``.

Usage::

    .venv/bin/python benchmarks/cpu_page_faults.py [--processes 8] [--steps 8]

Runs ``examples/gpt/bench.py`` (the torch profiler, one CPU thread) ``--processes`` times in
each setting, alternating, each a fresh process, and reads every trace's operator times. Per
operator and setting it prints the mean time per step over the processes and the spread of one
process's value (standard deviation of log values, in %): the noise a comparison of two
processes sees, which is what a same-runner A/B pair measures.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OPERATORS = (
    "aten::gelu",
    "aten::gelu_backward",
    "aten::native_layer_norm",
    "aten::addmm",
    "aten::mm",
)
SETTINGS = {"steady (default)": [], "glibc defaults": ["--no-steady-memory"]}


def one_process(out: Path, steps: int, extra: list[str]) -> dict[str, float]:
    """Per operator, its total time per profiled step (µs) in one fresh process."""
    env = dict(os.environ, PERFCI_OUTPUT_DIR=str(out))
    command = [sys.executable, str(ROOT / "examples" / "gpt" / "bench.py")]
    command += ["--steps", str(steps), "--warmup", "1", *extra]
    subprocess.run(command, env=env, check=True, capture_output=True)
    events = json.loads((out / "gpt.pt.trace.json").read_text(encoding="utf-8"))["traceEvents"]
    totals = dict.fromkeys(OPERATORS, 0.0)
    for event in events:
        if event.get("ph") == "X" and event.get("name") in totals:
            totals[event["name"]] += float(event["dur"])
    return {name: total / steps for name, total in totals.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args(argv)
    found: dict[str, list[dict[str, float]]] = {name: [] for name in SETTINGS}
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        for index in range(args.processes):
            for name, extra in SETTINGS.items():
                out = Path(scratch) / f"{index}-{len(found[name])}-{extra!r}".replace(" ", "")
                found[name].append(one_process(out, args.steps, extra))
            print(f"  {index + 1}/{args.processes} processes per setting", file=sys.stderr)
    print(f"| operator | {' | '.join(f'{n}: µs per step (spread)' for n in SETTINGS)} |")
    print(f"|---|{'---:|' * len(SETTINGS)}")
    for op in OPERATORS:
        cells = []
        for name in SETTINGS:
            values = [row[op] for row in found[name]]
            spread = statistics.stdev(math.log(v) for v in values) if len(values) > 1 else 0.0
            cells.append(f"{statistics.fmean(values):,.0f} (±{spread:.1%})")
        print(f"| `{op}` | {' | '.join(cells)} |")
    print(
        f"\n{args.processes} processes per setting, {args.steps} profiled steps each, "
        f"{time.monotonic() - started:.0f} s; {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f} at the end"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
