"""What a busy neighbour does to the example's operator times, per step: mean against fastest.

Usage::

    .venv/bin/python benchmarks/fastest_step.py [--rounds 10] [--steps 8]

Runs ``examples/gpt/bench.py`` (the torch profiler, one CPU thread) as fresh processes, each
round one process on a quiet host, one beside one busy loop and one beside two (on a 2-core
runner, two take both cores), in rotating order. Every trace goes through perfci's own parser
(``chrome_trace``: each host-side operator's total in each profiled step, ``step_totals_ns``),
and each process's value of an operator is taken two ways: the mean over its steps (history
mode and the store) and its fastest step (same-runner A/B, :mod:`perfci.analysis.values`).

For each way and host it prints, per operator, the spread of one process's value beyond the
process's own factor (the median over operators of its distance from the mean, taken out as
same-runner A/B does) — the noise a pair of processes leaves — and the level against the quiet
processes: how far the neighbour moved it.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from children import busy_loops

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfci.analysis.values import PerStep, compared_value  # noqa: E402 - after sys.path
from perfci.core.model import MetricKind  # noqa: E402
from perfci.formats.pytorch import chrome_trace  # noqa: E402

SHOWN = ("aten::addmm", "aten::mm", "aten::gelu", "aten::native_layer_norm", "AddmmBackward0")
LOADS = (0, 1, 2)
#: Operators below this per step (µs) are left out of the process factor: too few to matter.
MIN_US = 50.0


def one_process(out: Path, steps: int) -> dict[str, dict[PerStep, float]]:
    """Per operator, its per-step time (µs) in one fresh process, both ways."""
    env = dict(os.environ, PERFCI_OUTPUT_DIR=str(out))
    command = [sys.executable, str(ROOT / "examples" / "gpt" / "bench.py")]
    command += ["--steps", str(steps), "--warmup", "2", "--batch", "16", "--seq", "128"]
    subprocess.run(command, env=env, check=True, capture_output=True)
    [profile] = chrome_trace.parse(out / "gpt.pt.trace.json", options={})
    values: dict[str, dict[PerStep, float]] = {}
    for metric in profile.metrics:
        if metric.kind is MetricKind.OP and metric.step_totals_ns:
            values[metric.name] = {
                way: (compared_value(metric, profile.steps, way) or 0.0) / 1000 for way in PerStep
            }
    return values


def spreads(
    processes: list[dict[str, dict[PerStep, float]]], way: PerStep, names: list[str]
) -> dict[str, float]:
    """Per operator, the spread (sd of logs, %) of one process's value beyond its factor."""
    logs = [[math.log(p[name][way]) for name in names] for p in processes]
    means = [statistics.fmean(column) for column in zip(*logs, strict=True)]
    centred = [[v - m for v, m in zip(row, means, strict=True)] for row in logs]
    beyond = [[v - statistics.median(row) for v in row] for row in centred]
    return {name: 100 * statistics.stdev(row[i] for row in beyond) for i, name in enumerate(names)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args(argv)
    found: dict[int, list[dict[str, dict[PerStep, float]]]] = {load: [] for load in LOADS}
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(args.rounds):
            order = LOADS[round_ % 3 :] + LOADS[: round_ % 3]
            for load in order:
                out = Path(scratch) / f"r{round_}-{load}"
                out.mkdir()
                with busy_loops(load):
                    found[load].append(one_process(out, args.steps))
            print(f"round {round_ + 1}/{args.rounds}", file=sys.stderr)
    common = set.intersection(*(set(p) for runs in found.values() for p in runs))
    quiet = found[0]
    names = sorted(
        name for name in common if statistics.median(p[name][PerStep.MEAN] for p in quiet) >= MIN_US
    )
    shown = [name for name in SHOWN if name in names]
    print(
        f"{args.rounds} rounds, {args.steps} profiled steps a process, {len(names)} operators "
        f"of {MIN_US:.0f} µs or more a step in the process factor, "
        f"{time.monotonic() - started:.0f} s, load average {os.getloadavg()[0]:.1f} at the end\n"
    )
    header = ["busy loops", "per step", *[f"`{name}`" for name in shown], "median operator"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join([":--", ":--"] + ["--:"] * (len(shown) + 1)) + "|")
    for load in LOADS:
        for way in PerStep:
            spread = spreads(found[load], way, names)
            cells = []
            for name in shown:
                level = statistics.median(p[name][way] for p in found[load])
                base = statistics.median(p[name][way] for p in quiet)
                shift = "" if load == 0 else f", {100 * (level / base - 1):+.1f} %"
                cells.append(f"±{spread[name]:.1f} %{shift}")
            middle = statistics.median(spread.values())
            print(f"| {load} | {way.value} | " + " | ".join(cells) + f" | ±{middle:.1f} % |")
    print(
        "\nEach cell: the spread of one process's value beyond its own factor, and (under load) "
        "the median level against the quiet processes."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
