"""``perfci bisect GOOD BAD -b BENCH``: the first commit of a range where a metric moved.

1. The range is ``git rev-list --first-parent GOOD..BAD``; ``BAD`` against ``GOOD`` (the
   *range probe*) gives the change to look for. Unchanged, there is nothing to find.
2. Binary search: each probe is a same-runner A/B of a commit against ``GOOD``
   (:mod:`perfci.usecases.bisect.probe`), placed on the good or bad side of the change by
   :func:`perfci.analysis.bisection.side_of`; inconclusive and unbuildable commits are skipped
   and reported.
3. The search ends at a commit whose A/B against its parent shows the change; a rerun of that
   A/B confirms it. When skipped commits lie between the search's last good commit and the
   first bad one, the A/B walks back through them, each against the commit just before it,
   so that the culprit is named exactly. Compared with the range's change, it says
   whether the range holds more; where the readings leave that open, the culprit's parent is
   measured against GOOD again, adding pairs until it is settled.

Every probe is saved in ``.perfci/bisect-<id>.json`` as it ends (``--resume`` goes on from
there); ``budget`` bounds the probes one invocation runs; probes saved by other bisections of
the same benchmark in the same environment are reused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from perfci.analysis.bisection import (
    SEQUENTIAL_BOUND,
    Rest,
    Side,
    judge_rest,
    moved,
    next_index,
    rest_of_range,
    side_of,
)
from perfci.core.bisection import BisectAnswer, Probe, ProbeRole, ProbeStatus, log_change
from perfci.core.errors import ConfigError
from perfci.core.fingerprint import fingerprint_hash
from perfci.core.settings import Settings, get_settings
from perfci.integrations import git
from perfci.usecases.bisect.probe import Worktrees, read_metric, run_probe
from perfci.usecases.bisect.state import BisectState, bisect_id, reusable, save_state, state_path
from perfci.usecases.check.outcome import context_of
from perfci.usecases.check.spec import BenchmarkSpec, CheckRequest, resolve_benchmark

__all__ = ["BisectRequest", "ProbeProgress", "run_bisect"]

#: Called as each probe ends (run or reused): the probe, and the commit's place in the range
#: (1 = the first commit after GOOD, ``None`` for a comparison of the culprit with its parent).
ProbeProgress = Callable[[Probe, int | None, int], None]


@dataclass(frozen=True, slots=True)
class BisectRequest:
    good: str
    bad: str
    benchmark: str | None = None
    #: A series key or name; ``None``: the step.
    metric: str | None = None
    #: Most probes this invocation runs (reused ones are free); ``None``: no bound.
    budget: int | None = None
    resume: bool = False


class _BudgetSpent(Exception):
    pass


def run_bisect(
    request: BisectRequest,
    *,
    settings: Settings | None = None,
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    progress: ProbeProgress | None = None,
) -> BisectAnswer:
    """Bisect ``request.good..request.bad`` for the commit that moved the metric.

    Raises
    ------
    ConfigError
        Not a git checkout, an unknown revision, an empty range, a benchmark that fails at
        either end, or ``--resume`` with no saved state. Worktrees are removed on every way out.
    """
    settings = settings or get_settings(overrides, start=cwd)
    spec = resolve_benchmark(settings, CheckRequest(benchmark=request.benchmark))
    settings = settings.for_benchmark(spec.name, overrides)
    here = (cwd or Path.cwd()).resolve()
    root = _root(here)
    good, bad = _sha(root, request.good, "GOOD"), _sha(root, request.bad, "BAD")
    try:
        commits = git.first_parent_commits(root, good, bad)
    except OSError as exc:
        raise ConfigError(f"git cannot list {request.good}..{request.bad}: {exc}") from None
    if not commits:
        raise ConfigError(
            f"{request.bad} ({bad[:12]}) has no commit after {request.good} ({good[:12]}) on its "
            "first-parent line: BAD must come after GOOD"
        )
    fingerprint = _fingerprint(settings, env=env, cwd=here)
    ident = bisect_id(good, bad, spec.name, request.metric or "")
    path = state_path(root / ".perfci", ident)
    if request.resume and not path.exists():
        raise ConfigError(f"--resume: no saved bisection of this range at {path}")
    cache = [
        p
        for p in reusable(path.parent, spec.name, own=path, resume=request.resume)
        if p.fingerprint == fingerprint
    ]
    state = BisectState(ident, good, bad, spec.name, request.metric or "")
    search = _Search(
        spec=spec,
        settings=settings,
        workdir=here.relative_to(root),
        chain=[good, *commits],
        metric=request.metric or "",
        fingerprint=fingerprint,
        cache=cache,
        budget=request.budget,
        state=state,
        path=path,
        progress=progress,
    )
    answer = BisectAnswer(
        good=good,
        bad=bad,
        benchmark=spec.name,
        metric=request.metric or "",
        commits=len(commits),
        state_file=str(path),
    )
    save_state(path, state)
    with Worktrees(root, pinned=good) as trees:
        search.trees = trees
        try:
            search.run(answer)
        except _BudgetSpent:
            answer.stopped = _budget_sentence(request.budget or 0, search)
    answer.probes = list(state.probes)
    answer.subjects = {
        sha: git.output(root, "log", "-1", "--format=%s", sha) or ""
        for sha in {answer.good, answer.bad, answer.culprit, answer.parent} - {None}
        if sha
    }
    return answer


def _root(here: Path) -> Path:
    top = git.output(here, "rev-parse", "--show-toplevel")
    if not top:
        raise ConfigError(f"perfci bisect needs a git checkout; {here} is not inside one")
    return Path(top).resolve()


def _sha(root: Path, revision: str, what: str) -> str:
    found = git.output(root, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    if not found:
        raise ConfigError(f"{what} {revision!r} is not a commit git knows in {root}")
    return found


def _fingerprint(settings: Settings, *, env: Mapping[str, str] | None, cwd: Path) -> str:
    context = context_of(settings, CheckRequest(), env=env, cwd=cwd)
    return fingerprint_hash(context.environment)


def _budget_sentence(budget: int, search: _Search) -> str:
    low, high = search.low, search.high
    return (
        f"the budget of {budget} probe{'s' if budget != 1 else ''} is spent; the change lies "
        f"in commits {low + 1}..{high} of the range ({search.chain[low + 1][:12]}.."
        f"{search.chain[high][:12]}): run the same command with --resume (and a larger "
        "--budget) to go on"
    )


@dataclass(slots=True)
class _Search:
    """The binary search's moving parts: the chain (GOOD first), the bounds, the probes."""

    spec: BenchmarkSpec
    settings: Settings
    workdir: Path
    chain: list[str]
    metric: str
    fingerprint: str
    cache: list[Probe]
    budget: int | None
    state: BisectState
    path: Path
    progress: ProbeProgress | None
    trees: Worktrees | None = None
    spent: int = 0
    low: int = 0
    high: int = 0

    def run(self, answer: BisectAnswer) -> None:
        self.low, self.high = 0, len(self.chain) - 1
        total = self.probe(
            self.chain[0],
            self.chain[-1],
            ProbeRole.RANGE,
            self.high,
            _range_settled,
            pairs_at_most=self._most_pairs(),
        )
        answer.total = total
        if total.status is ProbeStatus.UNBUILDABLE:
            raise ConfigError(
                f"the benchmark does not run at both ends of the range ({total.message}); "
                "bisect needs a GOOD and a BAD commit that both run"
            )
        if not moved(total):
            answer.stopped = _unmoved(total)
            return
        self.metric = total.metric  # the step's key when no metric was named
        partly = self._bisect(total, answer)
        self._confirm(total, answer, partly=partly)

    def _bisect(self, total: Probe, answer: BisectAnswer) -> Probe | None:
        """Halve the range; the first probe found on the good side that moved by part of the
        range's change, if any."""
        skipped: set[int] = set()
        partly: Probe | None = None
        margin = self.settings.delta
        while (index := next_index(self.low, self.high, skipped)) is not None:
            probe = self.probe(
                self.chain[0],
                self.chain[index],
                ProbeRole.SEARCH,
                index,
                lambda found: side_of(found, total, margin=margin) is not Side.SKIP,
                # A commit whose interval straddles the half-way point is read on rather
                # than skipped: more pairs of it answer more than a neighbour's first five.
                pairs_at_most=self._most_pairs(),
            )
            side = side_of(probe, total, margin=margin)
            if side is Side.SKIP:
                skipped.add(index)
                answer.skipped.append(probe)
            elif side is Side.BAD:
                self.high = index
            else:
                self.low = index
                if side is Side.PARTLY and partly is None:
                    partly = probe
        return partly

    def _confirm(self, total: Probe, answer: BisectAnswer, *, partly: Probe | None) -> None:
        """The culprit against its parent, and a rerun of that A/B.

        When skipped commits lie between the last good commit and the first bad one, the A/B
        walks back through them: each candidate against the commit just before it, until one
        shows the change (that candidate is the culprit, named exactly) or the walk reaches
        the last good commit, which is then the parent. Unbuildable candidates end the walk.
        """

        def shows(found: Probe) -> bool:
            return _same_way(found, total) or found.status is ProbeStatus.UNCHANGED

        # The answer's evidence: each A/B may take twice the usual pairs before it fails to
        # show the change.
        most = self._most_pairs()
        index = self.high
        while True:
            before = index - 1
            direct = before > self.low and not self._unbuildable(before, index)
            parent_index = before if direct else self.low
            culprit, parent = self.chain[index], self.chain[parent_index]
            found = self.probe(parent, culprit, ProbeRole.PARENT, None, shows, pairs_at_most=most)
            if direct and not _same_way(found, total):
                index = before  # not at this commit: the change lies before it
                continue
            break
        answer.culprit, answer.parent, answer.confirmation = culprit, parent, found
        answer.rerun = self.probe(parent, culprit, ProbeRole.RERUN, None, shows, pairs_at_most=most)
        answer.confirmed = all(_same_way(p, total) for p in (found, answer.rerun))
        answer.parent_probe = self._against_good(parent_index)
        answer.candidates = (
            [] if parent_index == index - 1 else self.chain[self.low + 1 : index + 1]
        )
        # An unconfirmed culprit (a side taken wrongly under load) says nothing of the range.
        if answer.confirmed and self._more_than_one(total, answer, partly):
            answer.more_than_one = _more_sentence(total, found, partly)

    def _usual_pairs(self) -> int:
        """The adaptive maximum of ``--ab`` (``--max-repeats``, default three times
        ``--ab-pairs``)."""
        return self.settings.max_repeats or 3 * max(2, self.settings.ab_pairs)

    def _most_pairs(self) -> int:
        """The most pairs any probe of a bisection may add: twice ``--ab``'s, since each one
        answers a question the rest of the search builds on."""
        return 2 * self._usual_pairs()

    def _unbuildable(self, *indices: int) -> bool:
        commits = {self.chain[index] for index in indices}
        return any(
            p.commit in commits and p.status is ProbeStatus.UNBUILDABLE for p in self.state.probes
        )

    def _against_good(self, index: int) -> Probe | None:
        """The search's probe of commit ``index`` against GOOD (none for GOOD itself)."""
        commit = self.chain[index]
        return next(
            (
                p
                for p in self.state.probes
                if index and p.commit == commit and p.against == self.chain[0]
            ),
            None,
        )

    def _more_than_one(self, total: Probe, answer: BisectAnswer, partly: Probe | None) -> bool:
        """Whether the range holds more than the culprit's change (see
        :func:`perfci.analysis.bisection.rest_of_range`); when the readings leave it open, the
        culprit's parent is measured against GOOD again until they settle it."""
        if partly is not None:
            return True
        found, parent = answer.confirmation, answer.parent
        assert found is not None and parent is not None
        before = [answer.parent_probe] if answer.parent_probe is not None else []

        def judged(*more: Probe, bound: float | None = None) -> Rest:
            """The rest of the range with ``more`` readings of the parent, in its direction."""
            rest = rest_of_range(total, found, rerun=answer.rerun, before=[*before, *more])
            return judge_rest(
                rest, margin=self.settings.delta, bound=bound, direction=log_change(total.change)
            )

        verdict = judged()
        if verdict is not Rest.OPEN or parent == answer.good:
            return verdict is Rest.MORE

        initial = max(2, self.settings.ab_pairs)
        usual = self._usual_pairs()
        looks: list[Probe] = []

        def settled(found: Probe) -> bool:
            """More at any look; one only once the usual most pairs ran: a look of a few pairs
            that happens to fall near zero must not end the reading of a real change."""
            looks.append(found)
            verdict = judged(found, bound=SEQUENTIAL_BOUND)
            return verdict is Rest.MORE or (verdict is Rest.ONE and len(looks) * initial >= usual)

        try:
            answer.earlier = self.probe(
                self.chain[0],
                parent,
                ProbeRole.EARLIER,
                self.chain.index(parent),
                settled,
                pairs_at_most=self._most_pairs(),
            )
        except _BudgetSpent:
            return False  # the budget is for finding the culprit: say nothing unsettled
        return judged(answer.earlier, bound=SEQUENTIAL_BOUND) is Rest.MORE

    def probe(
        self,
        against: str,
        commit: str,
        role: ProbeRole,
        place: int | None,
        settled: Callable[[Probe], bool],
        *,
        pairs_at_most: int | None = None,
    ) -> Probe:
        """The probe of ``commit`` against ``against`` (reused when stored); a new one adds
        pairs until ``settled`` (the question this probe answers) or the plan's end."""
        found = self._reuse(against, commit, role)
        if found is None:
            if self.budget is not None and self.spent >= self.budget:
                raise _BudgetSpent
            assert self.trees is not None
            found = run_probe(
                self.spec,
                self.settings,
                self.trees,
                workdir=self.workdir,
                against=against,
                commit=commit,
                role=role,
                metric=self.metric or None,
                fingerprint=self.fingerprint,
                settled=settled,
                pairs_at_most=pairs_at_most,
            )
            self.spent += 1
            self.cache.append(found)
        self.state.probes.append(found)
        save_state(self.path, self.state)
        if self.progress is not None:
            self.progress(found, place, len(self.chain) - 1)
        return found

    def _reuse(self, against: str, commit: str, role: ProbeRole) -> Probe | None:
        for stored in self.cache:
            if (
                stored.against != against
                or stored.commit != commit
                or _reading(stored.role) != _reading(role)
            ):
                continue
            if stored.status is ProbeStatus.UNBUILDABLE:
                return replace(stored, role=role, reused=True)
            return replace(read_metric(stored, self.metric), role=role, reused=True)
        return None


def _reading(role: ProbeRole) -> ProbeRole | None:
    """What a stored probe may stand in for: a second reading only for the same role (it must
    be a new measurement, not the first one again), any other probe for any other."""
    return role if role.repeats_a_reading else None


def _range_settled(probe: Probe) -> bool:
    """Whether the range's probe has its answer: none within the margin, or a change whose
    interval's near end lies past half of it. The range's change sets the half-way point that
    places every later probe; read from a first look of a few pairs under load (+30 % for a
    real +17 %), it put commits carrying the whole change on the good side."""
    if probe.status is ProbeStatus.UNCHANGED:
        return True
    if not moved(probe):
        return False
    whole = log_change(probe.change)
    low, high = log_change(probe.ci_low), log_change(probe.ci_high)
    if whole is None or low is None or high is None:
        return True
    near = low if whole > 0 else high
    return near * whole > 0 and abs(near) >= abs(whole) / 2


def _same_way(probe: Probe, total: Probe) -> bool:
    whole = log_change(total.change)
    return whole is not None and moved(probe, whole)


def _unmoved(total: Probe) -> str:
    if total.status is ProbeStatus.UNCHANGED:
        return (
            "BAD does not differ from GOOD in this metric on this runner (its A/B is "
            "unchanged): there is no change to bisect"
        )
    reason = f" ({total.message})" if total.message else ""
    return (
        f"the A/B of BAD against GOOD is inconclusive{reason}: run with more pairs "
        "(--ab-pairs, --max-repeats) or name another --metric"
    )


def _more_sentence(total: Probe, found: Probe, partly: Probe | None) -> str:
    sentence = (
        f"the range holds more than one change: GOOD→BAD moved {_pct(total.change)}, this "
        f"commit {_pct(found.change)}; the commit named is the larger change"
    )
    if partly is None:
        return sentence
    return (
        f"{sentence}; {partly.commit[:12]}, before it, already moved {_pct(partly.change)} "
        f"(interval {_pct(partly.ci_low)} … {_pct(partly.ci_high)})"
    )


def _pct(change: float | None) -> str:
    return "?" if change is None else f"{change * 100:+.1f} %"
