"""One probe of a bisection: a same-runner A/B of a commit against another, both in worktrees.

The pairs, their order (ABBA…), the adaptive looks and the paired statistics are ``--ab``'s
(:func:`perfci.usecases.check.ab.run_looks`); only the sides differ: here the candidate is a
commit of the range checked out in a worktree of its own, not the user's checkout. Worktrees
are opened when first needed and all removed when the bisection ends, on every way out (an
error, Ctrl-C, SIGTERM raised by the CLI): :class:`Worktrees` is a context manager over
:func:`perfci.integrations.git.worktree`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType

from perfci.core.bisection import MetricChange, Probe, ProbeRole, ProbeStatus
from perfci.core.errors import BenchmarkFailed, ConfigError, ParseError
from perfci.core.model import MetricComparison, RunComparison, Verdict
from perfci.core.settings import Settings
from perfci.integrations import git
from perfci.usecases.check import looks as adaptive
from perfci.usecases.check.ab import command_for, run_looks
from perfci.usecases.check.ab_git import ABSetup
from perfci.usecases.check.spec import BenchmarkSpec

__all__ = ["Worktrees", "probe_of", "run_probe"]

_CHANGED = {Verdict.REGRESSION, Verdict.IMPROVEMENT}


class Worktrees:
    """Detached worktrees of the commits a bisection runs, each made once, all removed at exit.

    At most ``keep`` are held at once (the good end stays; older probes' trees go), so a long
    range does not fill the disk.
    """

    def __init__(self, root: Path, *, pinned: str, keep: int = 3) -> None:
        self.root, self.pinned, self.keep = root, pinned, keep
        self._open: dict[str, tuple[Path, ExitStack]] = {}

    def __enter__(self) -> Worktrees:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        while self._open:
            _, (_, stack) = self._open.popitem()
            stack.close()

    def pair(self, base: str, commit: str) -> tuple[Path, Path]:
        """The trees of both sides of one A/B; opening one never removes the other."""
        return self.get(base, keeping=commit), self.get(commit, keeping=base)

    def get(self, sha: str, *, keeping: str | None = None) -> Path:
        """The tree of ``sha``, opened when it is not; ``keeping`` is a tree still needed."""
        if sha in self._open:
            return self._open[sha][0]
        self._evict(keeping)
        stack = ExitStack()
        try:
            tree = stack.enter_context(git.worktree(self.root, sha))
        except OSError as exc:
            stack.close()
            raise ConfigError(
                f"could not check out {sha[:12]} into a git worktree: {exc}"
            ) from None
        self._open[sha] = (tree, stack)
        return tree

    def _evict(self, keeping: str | None) -> None:
        # The oldest tree that is neither the good end nor the other side of the A/B at hand:
        # a confirmation compares the culprit with its parent, which may be the oldest open.
        spared = {self.pinned, keeping}
        while len(self._open) >= self.keep:
            victim = next((s for s in self._open if s not in spared), None)
            if victim is None:
                return
            self._open.pop(victim)[1].close()


def run_probe(
    spec: BenchmarkSpec,
    settings: Settings,
    trees: Worktrees,
    *,
    workdir: Path,
    against: str,
    commit: str,
    role: ProbeRole,
    metric: str | None,
    fingerprint: str,
    settled: Callable[[Probe], bool] | None = None,
    pairs_at_most: int | None = None,
) -> Probe:
    """The A/B of ``commit`` against ``against``, read for ``metric`` (``None``: the step).

    Pairs are added look by look until ``settled`` holds for the probe so far (the search's
    question about this commit is answered) or the plan ends (at ``pairs_at_most``, default
    the settings' adaptive maximum); without ``settled``, as ``--ab`` does.
    A commit whose benchmark fails or writes a bad profile is *unbuildable*: its probe says
    so, nothing is raised (the search skips it).
    """
    base, tree = trees.pair(against, commit)
    checkout = trees.root / workdir
    command = command_for(spec.command, checkout=checkout, tree=tree / workdir)
    side = dataclasses.replace(spec, command=command)
    setup = ABSetup(root=tree, workdir=workdir, base_branch=against[:12], base_sha=against)
    pairs_at_least = max(2, settings.ab_pairs)
    plan = adaptive.plan_looks(pairs_at_least, pairs_at_most or settings.max_repeats)
    started = time.monotonic()
    try:
        pairs, result = run_looks(
            side,
            setup,
            base,
            plan,
            settings,
            progress=None,
            settled=None
            if settled is None
            else lambda found: settled(
                probe_of(found, commit=commit, against=against, role=role, metric=metric)
            ),
        )
    except (BenchmarkFailed, ParseError) as exc:
        return Probe(
            commit=commit,
            against=against,
            role=role,
            status=ProbeStatus.UNBUILDABLE,
            metric=metric or "",
            seconds=time.monotonic() - started,
            fingerprint=fingerprint,
            message=str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__,
        )
    probe = probe_of(result, commit=commit, against=against, role=role, metric=metric)
    probe.pairs, probe.seconds, probe.fingerprint = len(pairs), pairs.seconds, fingerprint
    return probe


def probe_of(
    result: RunComparison, *, commit: str, against: str, role: ProbeRole, metric: str | None
) -> Probe:
    """A probe from an A/B comparison: every metric's change, and the chosen one's reading."""
    changes = [_change(m) for m in result.metrics]
    probe = Probe(commit=commit, against=against, role=role, status=ProbeStatus.INCONCLUSIVE)
    probe.metrics = changes
    return read_metric(probe, metric or result.primary_step or "")


def read_metric(probe: Probe, metric: str) -> Probe:
    """``probe`` read for ``metric`` (a series key, display name or name; ``""``: the step)."""
    chosen = find_metric(probe.metrics, metric)
    if chosen is None:
        return dataclasses.replace(
            probe,
            metric=metric,
            status=ProbeStatus.INCONCLUSIVE,
            change=None,
            ci_low=None,
            ci_high=None,
            message=f"no metric {metric!r} in this comparison",
        )
    verdict = Verdict(chosen.verdict)
    status = (
        ProbeStatus.CHANGED
        if verdict in _CHANGED
        else ProbeStatus.UNCHANGED
        if verdict is Verdict.UNCHANGED
        else ProbeStatus.INCONCLUSIVE
    )
    return dataclasses.replace(
        probe,
        metric=chosen.key,
        status=status,
        change=chosen.change,
        ci_low=chosen.ci_low,
        ci_high=chosen.ci_high,
        message="",
    )


def find_metric(metrics: list[MetricChange], metric: str) -> MetricChange | None:
    """The metric named ``metric``: its key, else the one whose name (after the last ``:``)
    it is; ``""`` is the step (the first step line; A/B comparisons put the primary first)."""
    if not metric:
        return next((m for m in metrics if m.kind == "step"), None)
    exact = next((m for m in metrics if m.key == metric), None)
    if exact is not None:
        return exact
    named = [m for m in metrics if m.key.rsplit(":", 1)[-1].strip() == metric]
    return named[0] if len(named) == 1 else None


def _change(metric: MetricComparison) -> MetricChange:
    delta = 0.0
    if metric.baseline_median is not None and metric.candidate_median is not None:
        delta = metric.candidate_median - metric.baseline_median
    return MetricChange(
        key=metric.key,
        kind=metric.series.kind.value if metric.series else metric.key.split(":", 1)[0],
        verdict=metric.verdict.value,
        change=metric.adjusted_change if metric.adjusted_change is not None else metric.change,
        ci_low=metric.adjusted_ci_low if metric.adjusted_change is not None else metric.ci_low,
        ci_high=metric.adjusted_ci_high if metric.adjusted_change is not None else metric.ci_high,
        delta_ns=delta,
    )
