"""Every number of ``compare_run`` on generated comparisons, to check a speed-up changed none.

Generates ``--cases`` comparisons from fixed seeds, runs :func:`perfci.analysis.compare.compare_run`
on each and writes every field of every result, floats as hex (bit for bit), one line per case.
Run it with two trees and compare the files: a change that only makes the comparison faster
must leave them byte-identical.

    git archive <commit> | tar -x -C /tmp/before
    .venv/bin/python benchmarks/same_verdicts.py --tree /tmp/before --out /tmp/before.txt
    .venv/bin/python benchmarks/same_verdicts.py --out /tmp/after.txt
    cmp /tmp/before.txt /tmp/after.txt

The cases cover what the hot paths branch on: 2-300 metrics, 0-30 baseline runs, 1-7 repeats
(the candidate's may differ), every other case with missing runs, repeats, series and zeros,
higher-is-better rows, a repeat wrecked in every metric, shifted kernels, Student-t run noise,
a step (the step's parts pooled) or none (the work step), and a NaN in a few candidates. The
script prints how many cases gave each run verdict, so that a generator gone flat is seen.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[1])
parser.add_argument("--out", type=Path, required=True)
parser.add_argument("--cases", type=int, default=600)
ARGS = parser.parse_args()
sys.path.insert(0, str(ARGS.tree))

from perfci.analysis.compare import compare_run  # noqa: E402  (from --tree)
from perfci.core.errors import SampleError  # noqa: E402
from perfci.core.model import Better, Device, MetricKind, SeriesKey  # noqa: E402

Baseline = dict[SeriesKey, list[list[float]]]
Candidate = dict[SeriesKey, list[float]]


def case(seed: int) -> tuple[Baseline, Candidate]:
    """One comparison; odd seeds are messy (gaps, zeros), even ones as a stored baseline."""
    rng = random.Random(seed)
    messy = seed % 2 == 1
    n = rng.choice([2, 5, 12, 30, 80, 300])
    runs = rng.choice([0, 1, 2, 3, 5, 8, 15, 30])
    repeats = rng.choice([1, 2, 3, 5, 7])
    cand_repeats = rng.choice([repeats, repeats, 1, 2, 3, 5])
    kinds = [MetricKind.KERNEL] * 6 + [MetricKind.MEMORY, MetricKind.COMM]
    keys = [
        SeriesKey(
            rng.choice(kinds),
            f"k{i}<T|*_>",
            device=Device.GPU,
            better=Better.HIGHER if rng.random() < 0.05 else Better.LOWER,
        )
        for i in range(n)
    ]
    if rng.random() < 0.4:
        keys.append(SeriesKey(MetricKind.STEP, "step", device=Device.GPU))
    tail = rng.choice([0, 0, 3])
    shift = rng.choice([0.0, 0.0, 0.1, -0.05])
    sigma = rng.choice([0.01, 0.03, 0.1])

    def draw(j: int, scale: float) -> float:
        if tail:
            x = sigma * rng.gauss(0, 1) / math.sqrt(max(rng.gammavariate(tail / 2, 2 / tail), 1e-9))
        else:
            x = rng.gauss(0, sigma)
        return 0.0 if messy and rng.random() < 0.01 else 1000.0 * (1 + j) * math.exp(x) * scale

    baseline: Baseline = {}
    for j, key in enumerate(keys):
        runs_k = max(0, runs - rng.randint(0, 3)) if messy and rng.random() < 0.1 else runs
        per_run: list[list[float]] = []
        for r in range(runs_k):
            if messy and rng.random() < 0.03:
                per_run.append([])
                continue
            count = max(1, repeats - 1) if messy and rng.random() < 0.05 else repeats
            level = 1.05 if r > runs_k * 0.6 and seed % 7 == 0 else 1.0
            per_run.append([draw(j, level) for _ in range(count)])
        if per_run or not messy or rng.random() < 0.5:
            baseline[key] = per_run
    if runs and repeats >= 3 and rng.random() < 0.3:
        wrecked = rng.randrange(runs)
        for values in baseline.values():
            if len(values) > wrecked and values[wrecked]:
                values[wrecked][0] *= 1.4
    candidate: Candidate = {}
    for j, key in enumerate(keys):
        if not (messy and rng.random() < 0.03):
            moved = math.exp(shift if j % 3 == 0 else 0.0)
            candidate[key] = [draw(j, moved) for _ in range(cand_repeats)]
    if candidate and rng.random() < 0.02:
        candidate[rng.choice(list(candidate))][0] = float("nan")
    return baseline, candidate


def plain(value: Any) -> Any:
    """``value`` with every float as its hex (bit for bit) and every object as its fields."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {repr(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, float):
        return value.hex() if value == value else "nan"
    return repr(value)


def main() -> int:
    verdicts: Counter[str] = Counter()
    with ARGS.out.open("w") as out:
        for seed in range(ARGS.cases):
            baseline, candidate = case(seed)
            try:
                result = compare_run(baseline, candidate, benchmark="b")
            except SampleError as error:
                out.write(f"{seed} SampleError {error}\n")
                verdicts["refused (a bad value)"] += 1
                continue
            out.write(f"{seed} {plain(result)}\n")
            verdicts[result.verdict.value] += 1
    code = Path(sys.modules[compare_run.__module__].__file__ or "?").parents[2]
    print(f"{ARGS.cases} comparisons by the perfci of {code} written to {ARGS.out}")
    print("| run verdict | cases |\n|:--|--:|")
    for verdict, count in sorted(verdicts.items()):
        print(f"| {verdict} | {count} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
