"""A/B pairs whose two processes ran on different machines (a busy host, a throttled GPU).

The states are what perfci's runner records (``gpu_state`` with ``host``); the benchmark
values are generated, so that which pairs are left out, and why, is known.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from perfci.analysis.engine import CompareOptions
from perfci.core.model import Device, Metric, MetricKind, Profile
from perfci.usecases.check.ab_compare import Pairs, compare_pairs, screen_pairs
from perfci.usecases.check.ab_git import ABSetup

QUIET, BUSY = 0.01, 0.60


def _process(rng: np.random.Generator, share: float, slow: float = 1.0) -> list[Profile]:
    """One process of the example-like benchmark: 24 operators, the large ones ``slow``x."""
    metrics = [Metric(MetricKind.STEP, "step", device=Device.CPU, samples_ns=[5e7 * slow] * 4)]
    for i in range(24):
        size = 1e6 * 2.0 ** (i % 8)
        factor = slow if size >= 3e7 else 1.0
        value = size * factor * float(np.exp(rng.normal(0, 0.01)))
        metrics.append(
            Metric(MetricKind.OP, f"aten::op{i}", device=Device.CPU, calls=4, total_ns=4 * value)
        )
    state = {"host": {"others_cpu_share": share, "cpus": 2}}
    return [
        Profile(
            label="p",
            format="test",
            source="mem",
            metrics=metrics,
            steps=4,
            metadata={"gpu_state": state},
        )
    ]


def _pairs(base_shares: list[float], pr_shares: list[float], seed: int = 3) -> Pairs:
    rng = np.random.default_rng(seed)
    pairs = Pairs()
    for b, p in zip(base_shares, pr_shares, strict=True):
        pairs.base.append(_process(rng, b, 1.4 if b == BUSY else 1.0))
        pairs.pr.append(_process(rng, p, 1.4 if p == BUSY else 1.0))
    return pairs


def test_a_pair_with_one_busy_process_is_left_out_and_named() -> None:
    pairs = _pairs([QUIET] * 5, [QUIET, QUIET, BUSY, QUIET, QUIET])
    kept, notes = screen_pairs(pairs.base, pairs.pr)
    assert kept == [0, 1, 3, 4]
    assert notes == [
        "pair 3 left out: only its pull request process ran on a busy host: other processes "
        "took 60% of the host's CPU, usually 1%"
    ]


def test_a_busy_process_whose_step_did_not_move_keeps_its_pair() -> None:
    """A neighbour that left the benchmark alone: the pair's step ratio is like the others'."""
    rng = np.random.default_rng(3)
    pairs = Pairs()
    for share in (QUIET, QUIET, BUSY, QUIET, QUIET):
        pairs.base.append(_process(rng, QUIET))
        pairs.pr.append(_process(rng, share))  # busy, yet no slower
    assert screen_pairs(pairs.base, pairs.pr) == ([0, 1, 2, 3, 4], [])


def test_pairs_that_shared_the_load_are_kept() -> None:
    """A neighbour that started during pair 3 and stayed: pairs 4 and 5 were busy on both sides."""
    pairs = _pairs([QUIET, QUIET, QUIET, BUSY, BUSY], [QUIET, QUIET, BUSY, BUSY, BUSY])
    kept, notes = screen_pairs(pairs.base, pairs.pr)
    assert kept == [0, 1, 3, 4]
    assert len(notes) == 1 and notes[0].startswith("pair 3 left out")


def test_a_host_busy_throughout_is_said_once() -> None:
    """No pair stands out when every process shared the load; the note says why the
    intervals are wide, and stays when too few pairs would be left to screen any."""
    pairs = _pairs([BUSY] * 4, [BUSY] * 4)
    kept, notes = screen_pairs(pairs.base, pairs.pr)
    assert kept == [0, 1, 2, 3]
    assert notes == [
        "Every process ran on a busy host (other processes took 60% of its CPU): pairing "
        "cancels what both processes of a pair shared, but the timings spread more than on a "
        "quiet runner."
    ]
    mostly = _pairs([BUSY, BUSY, BUSY], [BUSY, BUSY, QUIET])
    assert not any(n.startswith("Every") for n in screen_pairs(mostly.base, mostly.pr)[1])


def test_too_few_pairs_left_keeps_them_all() -> None:
    pairs = _pairs([QUIET, BUSY, QUIET, QUIET], [BUSY, QUIET, QUIET, BUSY])
    assert screen_pairs(pairs.base, pairs.pr) == ([0, 1, 2, 3], [])


def test_without_states_every_pair_is_compared() -> None:
    pairs = _pairs([QUIET] * 3, [QUIET] * 3)
    for side in (pairs.base, pairs.pr):
        for profiles in side:
            profiles[0].metadata.clear()
    assert screen_pairs(pairs.base, pairs.pr) == ([0, 1, 2], [])


def test_the_comparison_leaves_the_busy_pair_out_and_says_so() -> None:
    pairs = _pairs([QUIET] * 5, [QUIET, QUIET, BUSY, QUIET, QUIET])
    setup = ABSetup(root=Path("."), workdir=Path("."), base_branch="main", base_sha="a" * 40)
    result = compare_pairs(pairs, benchmark="b", options=CompareOptions(), setup=setup)
    assert any(n.startswith("pair 3 left out: only its pull request process") for n in result.notes)
    step = next(m for m in result.metrics if m.key == "step:cpu:step")
    assert step.n_baseline == 4 and step.n_candidate == 4
    # Unchanged code: without the busy pair nothing moved.
    assert step.change is not None and abs(step.change) < 1e-9
