"""A/B on a GPU whose processes differ in speed: the machine factor from the GPU's own lines.

Usage::

    .venv/bin/python benchmarks/ab_gpu_factor.py [--draws 100] [--history]

Semi-synthetic, on real values: the two A/B comparisons recorded on an H200
(``tests/data/h200_ab``: the example, its GELU 8 % slower, and a docs-only change; 5 pairs,
180 lines), with each process's GPU-side times multiplied by a factor of its own (log-normal,
``GPU factor sd``: a card that clocks differently from one process to the next) and its
CPU-side times by another (``host factor sd``: a host whose load comes and goes). That is the
shape the loaded H200 run showed: every kernel's interval ±12 % and identical.

Each draw is compared twice: with the A/B machine factor estimated from every time line (as
before this change) and from the GPU-side lines only (now, on a GPU run). Prints a Markdown
table: how often the slower GELU kernel was found, how often the check failed, and how many
other GPU-side lines were called a regression or an improvement.

``--history`` asks the same of history mode (``compare_run``): the ten base-side processes
are ten one-repeat baseline runs, each with its own GPU and host factor, and the pull
request's five processes are one candidate run of five repeats with one factor of each.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the recorded comparisons' reader

from h200_ab import as_history, recorded, with_process_factors  # noqa: E402

import perfci.analysis.compare as compare  # noqa: E402 - after the path set-up above
import perfci.analysis.paired as paired  # noqa: E402
import perfci.analysis.paired_stats as paired_stats  # noqa: E402
from perfci.analysis.gating import host_timing  # noqa: E402
from perfci.core.model import MetricKind, RunComparison, Verdict  # noqa: E402

DECIDED = (Verdict.REGRESSION, Verdict.IMPROVEMENT)
#: Both recorded comparisons, read once.
RECORDED = {name: recorded(name) for name in ("slower", "unchanged")}


def _ab(name: str, rng: np.random.Generator, gpu_sd: float, host_sd: float) -> RunComparison:
    gpu = rng.normal(0, gpu_sd, (2, 5))
    host = rng.normal(0, host_sd, (2, 5))
    base, pr = with_process_factors(RECORDED[name], gpu, host)
    return paired.compare_paired(base, pr, benchmark="gpt")


def _history(name: str, rng: np.random.Generator, gpu_sd: float, host_sd: float) -> RunComparison:
    """Ten one-repeat baseline runs (both comparisons' base processes) and one candidate run
    of five repeats, each run with its own GPU and host factor."""
    other = RECORDED["unchanged" if name == "slower" else "slower"]
    gpu, host = rng.normal(0, gpu_sd, 11), rng.normal(0, host_sd, 11)
    baseline, candidate = as_history(RECORDED[name], other, gpu, host)
    return compare.compare_run(baseline, candidate, benchmark="gpt")


def score(
    name: str, gpu_sd: float, host_sd: float, draws: int, gpu_side: bool, history: bool
) -> str:
    module = compare if history else paired_stats  # where each mode asks for it
    real = module.gpu_run
    # "All time lines" is the previous behaviour: no line counts as the host's.
    module.gpu_run = real if gpu_side else (lambda series: False)  # type: ignore[assignment]
    try:
        rng = np.random.default_rng(7)
        found = failed = others = 0
        for _ in range(draws):
            result = (_history if history else _ab)(name, rng, gpu_sd, host_sd)
            failed += result.verdict is Verdict.REGRESSION
            for m in result.metrics:
                assert m.series is not None
                if m.series.kind is MetricKind.KERNEL and "GeluCUDAKernelImpl" in m.series.name:
                    found += m.verdict is Verdict.REGRESSION
                elif not host_timing(m.series, True) and m.verdict in DECIDED:
                    others += 1
    finally:
        module.gpu_run = real  # type: ignore[assignment]
    way = "GPU-side lines" if gpu_side else "all time lines"
    gelu = f"{found}/{draws}" if name == "slower" else "—"
    return (
        f"| {name} | {gpu_sd:.2f} | {host_sd:.2f} | {way} | {gelu} | {failed}/{draws} | "
        f"{others / draws:.2f} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=100)
    parser.add_argument(
        "--history", action="store_true", help="history mode (compare_run) instead of A/B"
    )
    args = parser.parse_args(argv)
    print(
        f"{'History mode' if args.history else 'A/B'}:\n\n"
        "| comparison | GPU factor sd | host factor sd | machine factor from | "
        "GELU kernel found | checks failed | other GPU-side lines decided, per check |"
    )
    print("|---|---:|---:|---|---:|---:|---:|")
    for name in ("slower", "unchanged"):
        for gpu_sd, host_sd in ((0.0, 0.0), (0.05, 0.10), (0.10, 0.20)):
            for gpu_side in (False, True):
                print(score(name, gpu_sd, host_sd, args.draws, gpu_side, args.history))
    print(f"\ncommand: benchmarks/ab_gpu_factor.py {' '.join(argv or sys.argv[1:])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
