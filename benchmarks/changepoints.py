"""Change-point benchmark: perfci's detector against Apache Otava 0.8.0 with its default settings.

Two sets of series:

- **TCPD** (van den Burg & Williams 2020): the univariate series without missing values in
  ``../shared/changepoint-data/tcpd`` (30 of 42; the others are not redistributed, are
  multivariate or have gaps), scored with TCPD's own ``f_measure``: a detection within ±5 points
  of an annotation is a hit (one-to-one), precision is against the union of the annotators'
  points, recall is the mean over annotators, and index 0 is added to both sides as TCPD does.
  The table shows the mean over data sets.
- **Synthetic**: benchmark-like histories (50–500 points, 1–5 level changes of 2–30 % in either
  direction, lognormal noise with CV 0.5–5 %, 1 % of points slowed by 20–100 %), seeded. Scored
  by one-to-one matching within ±5 points, summed over all series (micro-averaged). ``--null``
  flat series of the same kind measure false alarms per series.

Otava runs in its own virtual environment (``benchmarks/.otava-venv``: it pins older numpy and
scipy than perfci's lock file) through ``otava.analysis.compute_change_points`` with its
defaults (window 50, max p-value 0.001, min magnitude 0), in a subprocess that times each
series itself, so process start-up is not counted. Setup::

    python3.11 -m venv benchmarks/.otava-venv
    benchmarks/.otava-venv/bin/pip install -r requirements/bench.txt

Usage::

    .venv/bin/python benchmarks/changepoints.py                    # 1000 synthetic series
    .venv/bin/python benchmarks/changepoints.py --synthetic 200 --seed 1

Prints a Markdown table to paste into benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from perfci.analysis.changepoints import (  # noqa: E402
    ChangePointOptions,
    detect_change_points,
)

SHARED = Path(os.environ.get("PERFCI_SHARED_DIR", REPO.parent / "shared"))
TCPD = SHARED / "changepoint-data" / "tcpd"
OTAVA_PYTHON = REPO / "benchmarks" / ".otava-venv" / "bin" / "python"
MARGIN = 5

#: Runs inside Otava's venv: reads {"series": [[...]]} on stdin, writes indices and seconds.
_OTAVA_SCRIPT = """
import json, sys, time
from otava.analysis import compute_change_points
out = {"cps": [], "seconds": []}
for series in json.load(sys.stdin)["series"]:
    start = time.perf_counter()
    cps, _ = compute_change_points(series)
    out["seconds"].append(time.perf_counter() - start)
    out["cps"].append(sorted(int(cp.index) for cp in cps))
json.dump(out, sys.stdout)
"""


@dataclass(frozen=True)
class Labelled:
    """A series with its true change points: one list per annotator."""

    name: str
    values: list[float]
    annotations: dict[str, list[int]]


@dataclass(frozen=True)
class Detections:
    """A detector's change points per series and its total run time."""

    cps: list[list[int]]
    seconds: float


Detector = Callable[[Sequence[Labelled]], Detections]


# --------------------------------------------------------------------------- detectors


def run_perfci(series: Sequence[Labelled], options: ChangePointOptions | None = None) -> Detections:
    cps, total = [], 0.0
    for item in series:
        start = time.perf_counter()
        found = detect_change_points(item.values, options=options)
        total += time.perf_counter() - start
        cps.append([cp.index for cp in found])
    return Detections(cps, total)


def run_otava(series: Sequence[Labelled]) -> Detections:
    if not OTAVA_PYTHON.exists():
        sys.exit(f"{OTAVA_PYTHON} is missing: create it as the module docstring says")
    payload = json.dumps({"series": [item.values for item in series]})
    done = subprocess.run(
        [str(OTAVA_PYTHON), "-c", _OTAVA_SCRIPT],
        input=payload,
        text=True,
        capture_output=True,
        check=True,
    )
    result = json.loads(done.stdout)
    return Detections(result["cps"], float(sum(result["seconds"])))


# --------------------------------------------------------------------------- scoring


def true_positives(truth: set[int], found: set[int], margin: int = MARGIN) -> int:
    """One-to-one matches within ``margin``, each truth taking its nearest free detection.

    Same greedy rule as TCPDBench's ``true_positives`` (van den Burg & Williams 2020).
    """
    free = set(found)
    hits = 0
    for tau in sorted(truth):
        close = sorted((abs(tau - x), x) for x in free if abs(tau - x) <= margin)
        if close:
            free.remove(close[0][1])
            hits += 1
    return hits


def tcpd_f_measure(
    annotations: dict[str, list[int]], found: Sequence[int]
) -> tuple[float, float, float]:
    """TCPD's F1 for one data set: (precision, recall, F1), 0 added to every set."""
    per_annotator = [set(cps) | {0} for cps in annotations.values()]
    union = set().union(*per_annotator)
    detected = set(found) | {0}
    precision = true_positives(union, detected) / len(detected)
    recall = float(np.mean([true_positives(t, detected) / len(t) for t in per_annotator]))
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def micro_scores(
    series: Sequence[Labelled], found: Sequence[Sequence[int]]
) -> tuple[float, float, float]:
    """Precision, recall and F1 summed over all series (single annotator "truth")."""
    hits = sum(
        true_positives(set(s.annotations["truth"]), set(f))
        for s, f in zip(series, found, strict=True)
    )
    n_found = sum(len(f) for f in found)
    n_true = sum(len(s.annotations["truth"]) for s in series)
    precision = hits / n_found if n_found else 1.0
    recall = hits / n_true if n_true else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def tcpd_scores(
    series: Sequence[Labelled], found: Sequence[Sequence[int]]
) -> tuple[float, float, float]:
    scores = np.array(
        [tcpd_f_measure(s.annotations, f) for s, f in zip(series, found, strict=True)]
    )
    return tuple(float(v) for v in scores.mean(axis=0))  # type: ignore[return-value]


# --------------------------------------------------------------------------- data


def load_tcpd(folder: Path = TCPD) -> list[Labelled]:
    """Univariate TCPD series without missing values, with all their annotations."""
    annotations = json.loads((folder / "annotations.json").read_text())
    found = []
    for path in sorted(folder.glob("datasets/*/*.json")):
        data = json.loads(path.read_text())
        raw = data["series"][0]["raw"]
        if data["n_dim"] != 1 or any(v is None for v in raw) or data["name"] not in annotations:
            continue
        found.append(Labelled(data["name"], [float(v) for v in raw], annotations[data["name"]]))
    return found


def synthetic_series(rng: np.random.Generator, *, changes: bool = True) -> Labelled:
    """One benchmark-like history; ``changes=False`` gives a flat one (false-alarm check)."""
    n = int(rng.integers(50, 501))
    k = int(rng.integers(1, 6)) if changes else 0
    cps = _change_positions(rng, n, k)
    log_level = np.zeros(n)
    for cp in cps:
        size = np.exp(rng.uniform(np.log(0.02), np.log(0.30)))
        log_level[cp:] += np.log1p(size) * rng.choice([-1.0, 1.0])
    cv = np.exp(rng.uniform(np.log(0.005), np.log(0.05)))
    values = 1e6 * np.exp(log_level + rng.normal(0.0, cv, n))
    slow = rng.random(n) < 0.01
    values[slow] *= 1.0 + rng.uniform(0.2, 1.0, int(slow.sum()))
    return Labelled(f"synthetic-{n}-{k}", values.tolist(), {"truth": cps})


def _change_positions(rng: np.random.Generator, n: int, k: int, gap: int = 8) -> list[int]:
    """``k`` sorted change indices at least ``gap`` apart and from both ends."""
    while True:
        cps = sorted(int(c) for c in rng.choice(np.arange(gap, n - gap + 1), k, replace=False))
        if all(b - a >= gap for a, b in itertools.pairwise(cps)):
            return cps


# --------------------------------------------------------------------------- report


def _row(
    detector: str, dataset: str, scores: tuple[float, float, float], seconds: float, count: int
) -> str:
    p, r, f = scores
    return (
        f"| {dataset} | {detector} | {p:.3f} | {r:.3f} | **{f:.3f}** | {seconds:.2f} | "
        f"{1000 * seconds / max(count, 1):.1f} |"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--synthetic", type=int, default=1000, help="series with changes")
    parser.add_argument("--null", type=int, default=300, help="flat series (false alarms)")
    parser.add_argument("--penalty", type=float, default=None, help="override (tuning)")
    parser.add_argument("--significance", type=float, default=None, help="override (tuning)")
    args = parser.parse_args(argv)
    overrides = {
        k: v
        for k, v in (("penalty", args.penalty), ("significance", args.significance))
        if v is not None
    }
    options = ChangePointOptions(**overrides)

    rng = np.random.default_rng(args.seed)
    synthetic = [synthetic_series(rng) for _ in range(args.synthetic)]
    null = [synthetic_series(rng, changes=False) for _ in range(args.null)]
    tcpd = load_tcpd() if TCPD.exists() else []

    print(
        f"Seed {args.seed}; {len(synthetic)} synthetic series, {len(null)} flat series, "
        f"{len(tcpd)} TCPD series; tolerance ±{MARGIN} points; "
        f"{platform.processor() or platform.machine()}, Python {platform.python_version()}."
        "\n"
    )
    print("| Set | Detector | Precision | Recall | F1 | Total s | ms / series |")
    print("|---|---|---|---|---|---|---|")
    detectors: dict[str, Detector] = {
        "perfci": lambda s: run_perfci(s, options),
        "Otava 0.8.0": run_otava,
    }
    false_alarms = {}
    for name, detect in detectors.items():
        if tcpd:
            found = detect(tcpd)
            print(
                _row(name, "TCPD (mean F1)", tcpd_scores(tcpd, found.cps), found.seconds, len(tcpd))
            )
        found = detect(synthetic)
        print(
            _row(
                name, "synthetic", micro_scores(synthetic, found.cps), found.seconds, len(synthetic)
            )
        )
        flat = detect(null)
        false_alarms[name] = (
            sum(len(c) for c in flat.cps) / max(len(null), 1),
            sum(bool(c) for c in flat.cps) / max(len(null), 1),
        )
    print("\n| Detector | False alarms per flat series | Flat series with any alarm |")
    print("|---|---|---|")
    for name, (per_series, share) in false_alarms.items():
        print(f"| {name} | {per_series:.3f} | {share:.1%} |")


if __name__ == "__main__":
    main()
