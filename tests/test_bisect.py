"""``perfci bisect`` on throwaway repositories of many commits with a planted slowdown
(``bisect_repo``): the culprit and its kernel named within the probe bound, confirmed by a
rerun, skipped commits reported, two slowdowns told apart, budget and resume, and no worktree
left behind. The search rules themselves are tested on plain probes first.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from ab_repo import assert_cleaned, clean_env, ended
from bisect_repo import make_range

from perfci.analysis.bisection import Side, more_than_one, moved, next_index, side_of
from perfci.cli.main import main
from perfci.core.bisection import BisectAnswer, Probe, ProbeRole, ProbeStatus

__all__ = ["clean_env"]  # a fixture, imported for its name

FAST = ["--ab-pairs", "3", "--max-repeats", "3"]
GEMM = "ampere_sgemm_128x64_tn"


def _probe(status: ProbeStatus, change: float | None, low: float = 0, high: float = 0) -> Probe:
    return Probe("c", "g", ProbeRole.SEARCH, status, change=change, ci_low=low, ci_high=high)


def test_a_probe_is_bad_when_it_carries_at_least_half_the_change() -> None:
    total = _probe(ProbeStatus.CHANGED, 0.375)
    assert side_of(_probe(ProbeStatus.UNCHANGED, 0.001), total) is Side.GOOD
    assert side_of(_probe(ProbeStatus.CHANGED, 0.10), total) is Side.PARTLY
    assert side_of(_probe(ProbeStatus.CHANGED, 0.25), total) is Side.BAD
    assert side_of(_probe(ProbeStatus.CHANGED, -0.2), total) is Side.PARTLY
    assert side_of(_probe(ProbeStatus.INCONCLUSIVE, 0.3, 0.05, 0.6), total) is Side.SKIP
    assert side_of(_probe(ProbeStatus.UNBUILDABLE, None), total) is Side.SKIP


def test_an_inconclusive_probe_is_placed_when_its_interval_clears_the_half_way_point() -> None:
    """On a loaded runner no interval settles inside the 2 % margin, but one of ±10 % tells a
    commit at the good level (0) from one at the bad level (+30 %): half-way is +14.0 %."""
    total = _probe(ProbeStatus.CHANGED, 0.30, 0.22, 0.39)
    assert side_of(_probe(ProbeStatus.INCONCLUSIVE, 0.01, -0.09, 0.12), total) is Side.GOOD
    assert side_of(_probe(ProbeStatus.INCONCLUSIVE, 0.29, 0.16, 0.43), total) is Side.BAD
    # Straddling the half-way point, or no interval: neither side.
    assert side_of(_probe(ProbeStatus.INCONCLUSIVE, 0.08, -0.05, 0.15), total) is Side.SKIP
    assert side_of(Probe("c", "g", ProbeRole.SEARCH, ProbeStatus.INCONCLUSIVE), total) is (
        Side.SKIP
    )
    # A speed-up being bisected: the same rule, turned.
    faster = _probe(ProbeStatus.CHANGED, -0.25, -0.3, -0.2)
    assert side_of(_probe(ProbeStatus.INCONCLUSIVE, -0.2, -0.3, -0.17), faster) is Side.BAD
    assert side_of(_probe(ProbeStatus.INCONCLUSIVE, 0.0, -0.1, 0.1), faster) is Side.GOOD


def test_an_inconclusive_probe_short_of_half_but_past_the_margin_moved_partly() -> None:
    """Two changes under load (+10 % at one commit, +23 % more at a later one): a commit
    between them is inconclusive against GOOD, but its interval (+3 … +13 %) lies short of the
    half-way point of the +35 % range (+16.2 %) and past the 2 % margin: it sits on the good
    side, having moved by part of the change, which is what says the range holds more."""
    total = _probe(ProbeStatus.CHANGED, 0.35, 0.27, 0.43)
    partly = _probe(ProbeStatus.INCONCLUSIVE, 0.08, 0.03, 0.13)
    assert side_of(partly, total, margin=0.02) is Side.PARTLY
    assert side_of(partly, total, margin=0.05) is Side.GOOD  # not past a 5 % margin
    assert side_of(_probe(ProbeStatus.INCONCLUSIVE, 0.06, 0.01, 0.13), total) is Side.GOOD
    # The same for a speed-up: the interval turned.
    faster = _probe(ProbeStatus.CHANGED, -0.3, -0.35, -0.25)
    assert side_of(_probe(ProbeStatus.INCONCLUSIVE, -0.08, -0.13, -0.03), faster) is Side.PARTLY
    # Moved the other way: no part of this change.
    assert side_of(_probe(ProbeStatus.INCONCLUSIVE, -0.08, -0.13, -0.03), total) is Side.GOOD


def test_the_kernel_diff_falls_back_to_lines_whose_own_interval_leaves_out_zero() -> None:
    """Under load the culprit's A/B can leave every kernel inconclusive after its correction
    for many lines while the bisected step was confirmed on its own interval: the diff then
    lists the kernels whose own interval leaves out zero in the culprit's direction, saying
    that none was decided; decided lines, when there are any, are listed alone."""
    from perfci.core.bisection import MetricChange
    from perfci.report.bisect import answer_lines, answer_markdown, kernel_diff

    def line(key: str, verdict: str, low: float, high: float, delta: float) -> MetricChange:
        return MetricChange(key, "kernel", verdict, (low + high) / 2, low, high, delta)

    gemm = line("kernel:gpu:gemm", "inconclusive", 0.12, 0.61, 9e5)
    faster = line("kernel:gpu:copy", "inconclusive", -0.4, -0.1, -2e5)  # the other way
    noise = line("kernel:gpu:softmax_kernel", "inconclusive", -0.05, 0.09, 1e5)
    confirmation = _probe(ProbeStatus.INCONCLUSIVE, 0.21, 0.07, 0.36)
    confirmation.metrics = [noise, faster, gemm]
    answer = BisectAnswer("g" * 40, "b" * 40, "toy", "step", 40)
    answer.culprit, answer.parent, answer.confirmation = "c" * 40, "p" * 40, confirmation
    assert kernel_diff(answer) == [gemm]
    text = "\n".join(answer_lines(answer))
    assert "none decided after the correction" in text
    assert "+36.5 % kernel:gpu:gemm" in text and "softmax" not in text and "copy" not in text
    assert "none decided after the correction" in answer_markdown(answer).lower()
    decided = line("kernel:gpu:elementwise_kernel", "regression", 0.01, 0.05, 1e4)
    confirmation.metrics.append(decided)
    assert kernel_diff(answer) == [decided]
    assert "none decided" not in "\n".join(answer_lines(answer))


def _scripted_search(confirmation: tuple[float, float, float]) -> BisectAnswer:
    """A search over 8 commits whose probes are scripted (commit 5 and after at the bad
    level), ending with ``confirmation`` (change, interval) for the culprit against its
    parent, twice: the search's rules alone, no benchmark."""

    def read(role: ProbeRole, against: int, commit: int) -> Reading:
        if role is ProbeRole.RANGE:
            return ProbeStatus.CHANGED, 0.3, 0.25, 0.35
        if role is ProbeRole.SEARCH:
            return _level(0.3 if commit >= 5 else 0.0)
        change, low, high = confirmation
        return ProbeStatus.CHANGED if low > 0 else ProbeStatus.INCONCLUSIVE, change, low, high

    answer, _ = _scripted(8, read)
    assert answer.culprit == _sha(5)
    return answer


Reading = tuple[ProbeStatus, float, float, float]


def _scripted(
    commits: int, read: Callable[[ProbeRole, int, int], Reading | list[Reading]]
) -> tuple[BisectAnswer, list[tuple[ProbeRole, int, int, int | None]]]:
    """A search over ``commits`` commits whose every probe is ``read(role, against, commit)``
    (indices into the chain, GOOD = 0); returns the answer and the probes asked for, with the
    most pairs each might add. A list of readings is a probe's looks, handed to its
    ``settled`` one by one until it holds."""
    from perfci.core.settings import Settings
    from perfci.usecases.bisect import run as bisect_run
    from perfci.usecases.bisect.state import BisectState

    chain = [_sha(index) for index in range(commits + 1)]
    asked: list[tuple[ProbeRole, int, int, int | None]] = []

    def probe(
        search: bisect_run._Search,
        against: str,
        commit: str,
        role: ProbeRole,
        place: int | None,
        settled: Callable[[Probe], bool],
        *,
        pairs_at_most: int | None = None,
    ) -> Probe:
        where = (chain.index(against), chain.index(commit))
        asked.append((role, *where, pairs_at_most))
        readings = read(role, *where)
        for reading in readings if isinstance(readings, list) else [readings]:
            found = Probe(commit, against, role, *reading[:1], "", *reading[1:])  # type: ignore[misc]
            found.pairs += 5
            if settled(found):
                break
        search.state.probes.append(found)
        return found

    search = bisect_run._Search(
        spec=None,  # type: ignore[arg-type]  # unused: probes are scripted
        settings=Settings(),
        workdir=Path("."),
        chain=chain,
        metric="",
        fingerprint="",
        cache=[],
        budget=None,
        state=BisectState("id", chain[0], chain[-1], "toy", ""),
        path=Path("."),
        progress=None,
    )
    answer = BisectAnswer(chain[0], chain[-1], "toy", "step", commits)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bisect_run._Search, "probe", probe)
        search.run(answer)
    answer.probes = list(search.state.probes)
    return answer, asked


def _sha(index: int) -> str:
    return f"{index:03d}" + "c" * 37


def _level(change: float, half_width: float = 0.07) -> Reading:
    status = ProbeStatus.CHANGED if change - half_width > 0.02 else ProbeStatus.INCONCLUSIVE
    return status, change, change - half_width, change + half_width


def test_skipped_commits_before_the_culprit_are_walked_back_one_by_one() -> None:
    """Under load a probe can straddle the half-way point and its commit be skipped: the search
    ends with candidates. The A/B walks back through them, each against the commit just before
    it, and names the one that shows the change exactly; an unbuildable one ends the walk, the
    culprit is compared with the last good commit and the candidates stay."""
    from perfci.report.bisect import answer_lines

    def planted(at: int, skipped: Reading) -> Callable[[ProbeRole, int, int], Reading]:
        def read(role: ProbeRole, against: int, commit: int) -> Reading:
            if role is ProbeRole.SEARCH and commit == 22:
                return skipped
            level = lambda index: 0.3 if index >= at else 0.0  # noqa: E731
            return _level(level(commit) - level(against))

        return read

    straddles = (ProbeStatus.INCONCLUSIVE, 0.15, 0.0, 0.3)  # across +15 %: skipped
    answer, asked = _scripted(40, planted(23, straddles))
    assert answer.culprit == _sha(23) and answer.parent == _sha(22)
    assert answer.confirmed and answer.candidates == []
    assert [(r, a, c) for r, a, c, _ in asked if r is not ProbeRole.SEARCH][1:] == [
        (ProbeRole.PARENT, 22, 23),
        (ProbeRole.RERUN, 22, 23),
    ]
    assert answer_lines(answer)[0].startswith(f"first bad commit {_sha(23)[:12]}")

    answer, asked = _scripted(40, planted(22, straddles))  # the skipped commit is the culprit
    assert answer.culprit == _sha(22) and answer.parent == _sha(21)
    assert answer.confirmed and answer.candidates == []
    assert [(r, a, c) for r, a, c, _ in asked if r is not ProbeRole.SEARCH][1:] == [
        (ProbeRole.PARENT, 22, 23),
        (ProbeRole.PARENT, 21, 22),
        (ProbeRole.RERUN, 21, 22),
    ]
    assert answer_lines(answer)[0].startswith(f"first bad commit {_sha(22)[:12]}")

    unbuildable = (ProbeStatus.UNBUILDABLE, 0.0, 0.0, 0.0)
    answer, asked = _scripted(40, planted(23, unbuildable))
    assert answer.culprit == _sha(23) and answer.parent == _sha(21)
    assert answer.confirmed and answer.candidates == [_sha(22), _sha(23)]
    assert [(r, a, c) for r, a, c, _ in asked if r is not ProbeRole.SEARCH][1:] == [
        (ProbeRole.PARENT, 21, 23),
        (ProbeRole.RERUN, 21, 23),
    ]
    assert answer_lines(answer)[0].startswith(f"last of the candidate commits {_sha(23)[:12]}")


def _two_levels(first: float, noise: float = 0.0) -> Callable[[ProbeRole, int, int], Reading]:
    """A +``first`` change at commit 10, then +27 % more at 31, read with ±7 %, the search's
    probe of the culprit's parent off by ``noise``; the second reading of that parent (role
    EARLIER) with ±2 %, as more pairs give."""

    def level(index: int) -> float:
        return (first if index >= 10 else 0.0) + (0.27 if index >= 31 else 0.0)

    def read(role: ProbeRole, against: int, commit: int) -> Reading:
        change = level(commit) - level(against)
        if role is ProbeRole.SEARCH and commit == 30:
            change += noise
        return _level(change, 0.02 if role is ProbeRole.EARLIER else 0.07)

    return read


def test_an_open_question_of_more_than_one_change_measures_the_parent_again() -> None:
    """+6 % at commit 10 and +27 % at 31, read with ±7 %: the range less the culprit and the
    parent's own probe leave "more than one change" open, so the parent is measured against
    GOOD again with more pairs (up to twice the adaptive maximum), which settles it; with one
    change the same open readings settle as one."""
    answer, asked = _scripted(40, _two_levels(0.06, noise=-0.04))
    assert answer.culprit == _sha(31) and answer.confirmed
    earlier = [(r, a, c, most) for r, a, c, most in asked if r is ProbeRole.EARLIER]
    assert earlier == [(ProbeRole.EARLIER, 0, 30, 30)]
    assert answer.earlier is not None and answer.more_than_one is not None
    from perfci.report.bisect import answer_lines

    cost = answer_lines(answer)[-1]
    assert "1 second reading of its parent against GOOD (+6.0 %" in cost
    assert "probes to find it, 1 confirming rerun, 1 second reading" in cost

    one, asked = _scripted(40, _two_levels(0.0, noise=0.06))
    assert one.culprit == _sha(31) and one.confirmed
    assert [r for r, *_ in asked].count(ProbeRole.EARLIER) == 1
    assert one.earlier is not None and one.more_than_one is None


def test_the_second_reading_ends_as_one_change_only_after_the_usual_pairs() -> None:
    """Its first look (5 pairs) falls near zero by chance; the change shows in the later looks:
    the reading goes on and the range is said to hold more than one change. A reading that
    stays near zero ends at the usual most pairs (15), not at twice that."""
    near_zero = _level(0.0, 0.03)
    first = _two_levels(0.06, noise=-0.04)

    def read(role: ProbeRole, against: int, commit: int) -> Reading | list[Reading]:
        if role is ProbeRole.EARLIER:
            return [near_zero, _level(0.05, 0.04), _level(0.06, 0.03), _level(0.06, 0.025)]
        return first(role, against, commit)

    answer, _ = _scripted(40, read)
    assert answer.earlier is not None and answer.earlier.change == 0.05  # the second look
    assert answer.more_than_one is not None

    looks: list[Reading] = [_level(0.0, 0.08), _level(0.0, 0.05), _level(0.0, 0.04)]

    def stays(role: ProbeRole, against: int, commit: int) -> Reading | list[Reading]:
        if role is ProbeRole.EARLIER:
            return [*looks, _level(0.0, 0.03), _level(0.0, 0.02)]
        return _two_levels(0.0, noise=0.06)(role, against, commit)

    answer, _ = _scripted(40, stays)
    assert answer.earlier is not None and answer.earlier.ci_high == 0.04  # the third look
    assert answer.more_than_one is None


def test_a_settled_question_runs_no_second_reading() -> None:
    """A clear second change (+15 %) is said at once; a culprit whose parent is GOOD has no
    commits before it to read."""
    answer, asked = _scripted(40, _two_levels(0.15))
    assert answer.more_than_one is not None and answer.earlier is None
    assert ProbeRole.EARLIER not in [r for r, *_ in asked]

    def first_commit(role: ProbeRole, against: int, commit: int) -> Reading:
        return _level((0.3 if commit >= 1 else 0.0) - (0.3 if against >= 1 else 0.0))

    answer, asked = _scripted(8, first_commit)
    assert answer.parent == _sha(0) and answer.earlier is None
    assert ProbeRole.EARLIER not in [r for r, *_ in asked]


def test_a_rest_against_the_range_is_not_a_second_change() -> None:
    """One +30 % change at commit 23, but commit 22 (the same code as GOOD) reads −4 % against
    GOOD in every A/B: a steady difference between two checkouts, as seen on the loaded VM in
    stop 43 (−4.3 % and −3.4 %). The culprit then carries more than the whole range; that is
    not a second slowdown, and no second reading is spent on it."""

    def biased(role: ProbeRole, against: int, commit: int) -> Reading:
        level = lambda index: 0.3 if index >= 23 else -0.04 if index == 22 else 0.0  # noqa: E731
        return _level(level(commit) - level(against), 0.02)

    answer, asked = _scripted(40, biased)
    assert answer.culprit == _sha(23) and answer.confirmed
    assert answer.parent_probe is not None and answer.parent_probe.change == -0.04
    assert answer.more_than_one is None
    assert ProbeRole.EARLIER not in [r for r, *_ in asked]


def test_the_range_is_measured_until_its_interval_pins_the_half_way_point() -> None:
    """Every later probe is placed against half the range's change: a first look that reads
    +30 % ± 20 % for a real +17 % would put commits carrying the whole change on the good
    side. The range's A/B adds pairs until its interval's near end is past half its change;
    every probe may take twice the usual pairs (a search probe straddling the half-way point
    reads on rather than being skipped)."""
    from perfci.usecases.bisect.run import _range_settled

    def reading(status: ProbeStatus, change: float, low: float, high: float) -> Probe:
        return Probe("b", "g", ProbeRole.RANGE, status, "", change, low, high)

    assert _range_settled(reading(ProbeStatus.UNCHANGED, 0.001, -0.01, 0.012))
    assert not _range_settled(reading(ProbeStatus.CHANGED, 0.30, 0.10, 0.50))
    assert _range_settled(reading(ProbeStatus.CHANGED, 0.30, 0.20, 0.40))
    assert not _range_settled(reading(ProbeStatus.INCONCLUSIVE, 0.17, -0.05, 0.40))
    assert _range_settled(reading(ProbeStatus.CHANGED, -0.30, -0.45, -0.20))  # a speed-up
    assert not _range_settled(reading(ProbeStatus.CHANGED, -0.30, -0.50, -0.05))

    def one_change(role: ProbeRole, against: int, commit: int) -> Reading:
        level = lambda index: 0.3 if index >= 23 else 0.0  # noqa: E731
        return _level(level(commit) - level(against))

    _, asked = _scripted(40, one_change)
    most = {role: pairs for role, _, _, pairs in asked}
    roles = (ProbeRole.RANGE, ProbeRole.SEARCH, ProbeRole.PARENT, ProbeRole.RERUN)
    assert most == dict.fromkeys(roles, 30)


def test_the_rest_of_a_range_is_more_open_or_one() -> None:
    from perfci.analysis.bisection import SEQUENTIAL_BOUND, Rest, judge_rest

    assert judge_rest(None, margin=0.02) is Rest.ONE
    assert judge_rest((0.06, 0.02), margin=0.02) is Rest.MORE  # 3 standard errors
    assert judge_rest((0.06, 0.04), margin=0.02) is Rest.OPEN  # 1.5
    assert judge_rest((0.01, 0.04), margin=0.02) is Rest.ONE
    assert judge_rest((0.015, 0.001), margin=0.02) is Rest.OPEN  # inside the margin, not zero
    # Looked at again and again, the bound is stricter: 2.2 errors are not yet enough.
    assert judge_rest((0.066, 0.03), margin=0.02) is Rest.MORE
    assert judge_rest((0.066, 0.03), margin=0.02, bound=SEQUENTIAL_BOUND) is Rest.OPEN
    # Against the range's direction the rest is no second change of its kind.
    assert judge_rest((-0.06, 0.02), margin=0.02, direction=1.0) is Rest.ONE
    assert judge_rest((-0.06, 0.04), margin=0.02, direction=1.0) is Rest.ONE  # not even open
    assert judge_rest((-0.06, 0.02), margin=0.02, direction=-1.0) is Rest.MORE


def test_an_unconfirmed_culprit_says_nothing_of_more_than_one_change() -> None:
    """A side taken wrongly under load ends on a commit that shows nothing against its parent:
    NOT confirmed, and its small change says nothing about the range holding more."""
    unconfirmed = _scripted_search((-0.01, -0.1, 0.08))
    assert not unconfirmed.confirmed and unconfirmed.more_than_one is None
    smaller = _scripted_search((0.12, 0.08, 0.16))  # confirmed, short of the range's +30 %
    assert smaller.confirmed and smaller.more_than_one is not None


def test_opening_one_side_of_an_ab_never_removes_the_other(tmp_path: Path, clean_env: Path) -> None:
    """At most three trees are held; the culprit's confirmation against its parent must not
    evict the parent when it is the oldest open tree (under load, stop 41: the search had
    probed the parent before its neighbour, and the A/B failed with its directory gone)."""
    from perfci.usecases.bisect.probe import Worktrees

    shas = make_range(tmp_path, 5, {})
    with Worktrees(tmp_path / "repo", pinned=shas[0], keep=3) as trees:
        trees.get(shas[0])
        trees.get(shas[3])  # the parent, probed first
        trees.get(shas[2])
        base, tree = trees.pair(shas[3], shas[4])  # the culprit against its parent
        assert base.is_dir() and tree.is_dir()
        assert (base / "bench.py").is_file() and (tree / "bench.py").is_file()
    assert_cleaned(tmp_path / "repo", clean_env)


def test_a_probe_moved_when_changed_or_its_interval_leaves_out_zero() -> None:
    assert moved(_probe(ProbeStatus.CHANGED, 0.2, 0.1, 0.3))
    assert moved(_probe(ProbeStatus.INCONCLUSIVE, 0.2, 0.03, 0.4))
    assert moved(_probe(ProbeStatus.INCONCLUSIVE, 0.2, 0.03, 0.4), direction=1.0)
    assert not moved(_probe(ProbeStatus.INCONCLUSIVE, 0.2, 0.03, 0.4), direction=-1.0)
    assert not moved(_probe(ProbeStatus.INCONCLUSIVE, 0.1, -0.02, 0.3))
    assert not moved(_probe(ProbeStatus.UNCHANGED, 0.01, 0.005, 0.015))
    assert not moved(_probe(ProbeStatus.UNBUILDABLE, None))


def test_the_next_probe_is_the_middle_or_its_nearest_unskipped_neighbour() -> None:
    assert next_index(0, 40, set()) == 20
    assert next_index(0, 40, {20}) == 21
    assert next_index(0, 40, {20, 21}) == 19
    assert next_index(3, 5, {4}) is None
    assert next_index(3, 4, set()) is None


def test_a_found_change_short_of_the_whole_says_there_is_more() -> None:
    total = _probe(ProbeStatus.CHANGED, 0.39, 0.37, 0.41)
    assert more_than_one(
        total, _probe(ProbeStatus.CHANGED, 0.31, 0.29, 0.33), margin=0.02, partly=False
    )
    assert not more_than_one(
        total, _probe(ProbeStatus.CHANGED, 0.385, 0.36, 0.41), margin=0.02, partly=False
    )
    assert more_than_one(total, total, margin=0.02, partly=True)


def test_more_than_one_pools_the_rerun_and_the_parent_against_good() -> None:
    """Two changes under load (+6 % at one commit, then +27 % more): no single reading settles
    the first beside the second, the range's change less the culprit's, pooled with its rerun,
    and the parent's own A/B against GOOD do; one change reads as one."""
    total = _probe(ProbeStatus.CHANGED, 0.35, 0.25, 0.46)
    found = _probe(ProbeStatus.INCONCLUSIVE, 0.25, 0.12, 0.39)
    rerun = _probe(ProbeStatus.CHANGED, 0.28, 0.19, 0.38)
    parent = _probe(ProbeStatus.INCONCLUSIVE, 0.06, -0.01, 0.13)
    assert not more_than_one(total, found, margin=0.02, partly=False)
    assert not more_than_one(total, found, margin=0.02, partly=False, rerun=rerun)
    assert more_than_one(total, found, margin=0.02, partly=False, rerun=rerun, parent=parent)
    # One change: the culprit carries the range's, the parent sits at GOOD's level.
    alone = _probe(ProbeStatus.CHANGED, 0.36, 0.24, 0.49)
    still = _probe(ProbeStatus.INCONCLUSIVE, 0.01, -0.06, 0.08)
    assert not more_than_one(total, alone, margin=0.02, partly=False, rerun=alone, parent=still)


def _bisect(repo: Path, *args: str) -> int:
    os.chdir(repo)
    return main(["bisect", *args, "-b", "tiny", *FAST])


def _state(repo: Path) -> dict[str, object]:
    (path,) = (repo / ".perfci").glob("bisect-*.json")
    found = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(found, dict)
    return found


def test_one_slowdown_in_40_commits_is_named_with_its_kernel_and_confirmed(
    tmp_path: Path, clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shas = make_range(tmp_path, 40, {23: {"gemm": 1.3}})
    repo = tmp_path / "repo"
    code = _bisect(repo, shas[0], shas[-1])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert f'first bad commit {shas[23][:12]} "commit 23"' in out
    assert f"its parent {shas[22][:12]} unchanged against GOOD" in out
    assert "confirmed by a rerun" in out
    diff = out.split("kernel-level diff")[1].splitlines()
    assert GEMM in diff[1] and "+30" in diff[1]  # the gemm kernel, first, about +30 %
    assert "softmax_kernel" not in out.split("note:")[0]
    assert "more than one change" not in out
    probes = _state(repo)["probes"]
    assert isinstance(probes, list)
    searched = [p for p in probes if p["role"] != "rerun" and not p["reused"]]
    reruns = [p for p in probes if p["role"] == "rerun"]
    assert len(searched) <= math.ceil(math.log2(40)) + 2
    assert len(reruns) == 1 and reruns[0]["status"] == "changed"
    assert err.count("probe ") == len(probes)  # a progress line per probe
    assert_cleaned(repo, clean_env)


def test_two_slowdowns_name_the_larger_and_say_the_range_holds_more(
    tmp_path: Path, clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # +6 % of the step at commit 10, then +31 % more at commit 30.
    shas = make_range(tmp_path, 40, {10: {"gemm": 1.1}, 30: {"gemm": 1.65}})
    repo = tmp_path / "repo"
    code = _bisect(repo, shas[0], shas[-1])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert f"first bad commit {shas[30][:12]}" in out
    assert "the range holds more than one change" in out
    # The evidence: a commit between the two changes that moved by the first one's +6 %.
    assert re.search(r"[0-9a-f]{12}, before it, already moved \+[0-9.]+ %", out), out
    assert_cleaned(repo, clean_env)


def test_an_unbuildable_commit_is_skipped_and_reported(
    tmp_path: Path, clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shas = make_range(tmp_path, 8, {4: {"fail": True}, 5: {"gemm": 1.3}})
    repo = tmp_path / "repo"
    code = _bisect(repo, shas[0], shas[-1])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert f"skipped {shas[4][:12]}: unbuildable" in out
    assert "out of memory" in out or "exit" in out
    assert f"one of {shas[4][:12]}, {shas[5][:12]}" in out
    assert f"{shas[5][:12]}" in out.splitlines()[0]
    assert_cleaned(repo, clean_env)


def test_a_spent_budget_stops_and_resume_goes_on_without_running_again(
    tmp_path: Path, clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shas = make_range(tmp_path, 6, {4: {"gemm": 1.3}})
    repo = tmp_path / "repo"
    assert _bisect(repo, shas[0], shas[-1], "--budget", "2") == 1
    out, _ = capsys.readouterr()
    assert "budget of 2 probes is spent" in out and "--resume" in out
    assert len(_state(repo)["probes"]) == 2  # type: ignore[arg-type]
    assert _bisect(repo, shas[0], shas[-1], "--resume") == 0
    out, err = capsys.readouterr()
    assert f"first bad commit {shas[4][:12]}" in out
    assert err.count("reused") == 2
    assert_cleaned(repo, clean_env)


def test_no_change_between_the_ends_is_said_and_bad_before_good_refused(
    tmp_path: Path, clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shas = make_range(tmp_path, 3, {})
    repo = tmp_path / "repo"
    assert _bisect(repo, shas[0], shas[-1]) == 1
    out, _ = capsys.readouterr()
    assert "no change to bisect" in out
    assert _bisect(repo, shas[-1], shas[0]) == 2
    _, err = capsys.readouterr()
    assert "BAD must come after GOOD" in err
    assert _bisect(repo, "nope", shas[0]) == 2
    assert "GOOD 'nope' is not a commit" in capsys.readouterr().err
    assert_cleaned(repo, clean_env)


def test_sigterm_mid_probe_removes_the_worktrees_and_keeps_the_state(
    tmp_path: Path, clean_env: Path
) -> None:
    """A stopped bisection (a cancelled CI job) cleans up as ``--ab`` does: its worktrees and
    temporary folders go, the benchmark ends, and the probes done so far stay for --resume."""
    shas = make_range(tmp_path, 4, {2: {"hang": True}, 3: {"gemm": 1.3}})
    repo = tmp_path / "repo"
    marker = tmp_path / "started"
    env = {**os.environ, "HANG_MARKER": str(marker), "TMPDIR": str(clean_env)}
    process = subprocess.Popen(
        [sys.executable, "-m", "perfci.cli.main", "bisect", shas[0], shas[-1], "-b", "tiny",
         *FAST],
        cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() or len(marker.read_text().split()) < 2:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the hanging commit was never probed"
            time.sleep(0.05)
        benchmark = [int(pid) for pid in marker.read_text().split()]
        os.kill(process.pid, signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 143, err
    assert "Traceback" not in err
    assert_cleaned(repo, clean_env)
    assert all(ended(pid) for pid in benchmark), "the benchmark outlived perfci"
    assert [p["role"] for p in _state(repo)["probes"]] == ["range"]  # type: ignore[union-attr]


def test_another_bisection_of_the_same_commits_reuses_their_probes(
    tmp_path: Path, clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shas = make_range(tmp_path, 6, {4: {"gemm": 1.3}})
    repo = tmp_path / "repo"
    assert _bisect(repo, shas[0], shas[-1]) == 0
    capsys.readouterr()
    # Following the gemm kernel instead of the step: the same A/Bs, read for another metric.
    assert _bisect(repo, shas[0], shas[-1], "--metric", GEMM) == 0
    out, err = capsys.readouterr()
    assert f"first bad commit {shas[4][:12]}" in out
    probes = err.count("\nprobe ") + err.startswith("probe ")
    assert err.count("reused") == probes - 1  # all but the rerun, which measures again
    assert "(+30." in out.splitlines()[0]  # the kernel's own change, not the step's +18 %
    assert_cleaned(repo, clean_env)
