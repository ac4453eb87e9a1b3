"""How long :func:`perfci.analysis.kernel_family.family_of` takes on hostile and real names.

Kernel names come from the code under test; each rule must stay linear in the name's length.
Prints the median of 21 calls per name (µs) for the hostile names of
``tests/test_kernel_family.py`` cut to 2 KB and at their full 8 KB (the cap below which names
are normalised: time should grow about 4x, linearly), and for the example's real H200 kernel
names.

    python benchmarks/kernel_family.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfci.analysis.kernel_family import family_of  # noqa: E402
from tests.test_kernel_family import HOSTILE  # noqa: E402


def median_us(name: str) -> float:
    times = []
    for _ in range(21):
        start = time.perf_counter()
        family_of(name)
        times.append(time.perf_counter() - start)
    return sorted(times)[10] * 1e6


def main() -> None:
    family_of("warm up the patterns")
    print(f"{'name':<12} {'µs at 2 KB':>11} {'µs at 8 KB':>11} {'ratio':>6}")
    for i, name in enumerate(HOSTILE):
        short, full = median_us(name[:2000]), median_us(name)
        print(f"{'hostile ' + str(i):<12} {short:>11.0f} {full:>11.0f} {full / short:>6.1f}")
    data = json.loads((ROOT / "tests/data/h200_ab/gelu_ab.json").read_text(encoding="utf-8"))
    names = [r["name"] for r in data["slower"] if r["kind"] == "kernel"]
    each = sorted(median_us(n) for n in names)
    print(
        f"real H200 kernels: {len(names)} names, median {each[len(each) // 2]:.0f} µs, "
        f"slowest {each[-1]:.0f} µs"
    )


if __name__ == "__main__":
    main()
