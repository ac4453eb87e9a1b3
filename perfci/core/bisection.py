"""What ``perfci bisect`` finds: its probes and its answer, as plain records.

A *probe* is one same-runner A/B comparison of a commit against another (the range's good end,
or the culprit's parent); the bisection's answer names the first commit where the chosen
metric moved. These types are shared by the use case that runs the search
(:mod:`perfci.usecases.bisect`), the state file it resumes from and the report that prints it
(:mod:`perfci.report.bisect`), so they hold no behaviour beyond reading and writing JSON.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from perfci.core.compat import StrEnum

__all__ = [
    "BisectAnswer",
    "MetricChange",
    "Probe",
    "ProbeRole",
    "ProbeStatus",
    "log_change",
]


class ProbeStatus(StrEnum):
    """A probe's reading of the chosen metric (the A/B verdict), or why it has none."""

    CHANGED = "changed"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"
    UNBUILDABLE = "unbuildable"


class ProbeRole(StrEnum):
    """Why a probe ran: the whole range, a step of the search, the culprit against its
    parent, the rerun that confirms it, and the culprit's parent against GOOD measured again
    with more pairs when the readings leave open whether the range holds more than one
    change."""

    RANGE = "range"
    SEARCH = "search"
    PARENT = "parent"
    RERUN = "rerun"
    EARLIER = "earlier"

    @property
    def repeats_a_reading(self) -> bool:
        """A second reading of an A/B already run: never reused for another role, never
        counted among the probes that found the culprit."""
        return self in (ProbeRole.RERUN, ProbeRole.EARLIER)


@dataclass(frozen=True, slots=True)
class MetricChange:
    """One metric of a probe's A/B comparison (``change`` relative, +0.05 = 5 % slower)."""

    key: str
    kind: str
    verdict: str
    change: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    #: Per-step time added (candidate − base, ns): what orders a kernel-level diff.
    delta_ns: float = 0.0

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> MetricChange:
        return cls(
            key=str(raw["key"]),
            kind=str(raw["kind"]),
            verdict=str(raw["verdict"]),
            change=_number(raw.get("change")),
            ci_low=_number(raw.get("ci_low")),
            ci_high=_number(raw.get("ci_high")),
            delta_ns=float(raw.get("delta_ns") or 0.0),
        )


@dataclass(slots=True)
class Probe:
    """One A/B comparison of ``commit`` (the candidate side) against ``against`` (the base).

    ``metrics`` keeps every metric's change, so a probe stored by one bisection serves another
    that follows a different metric; ``fingerprint`` is the environment's key
    (:func:`perfci.core.fingerprint.fingerprint_hash`): a probe is reused only on a match.
    """

    commit: str
    against: str
    role: ProbeRole
    status: ProbeStatus
    metric: str = ""
    change: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    pairs: int = 0
    seconds: float = 0.0
    fingerprint: str = ""
    message: str = ""
    reused: bool = False
    metrics: list[MetricChange] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["role"], out["status"] = self.role.value, self.status.value
        return out

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Probe:
        return cls(
            commit=str(raw["commit"]),
            against=str(raw["against"]),
            role=ProbeRole(raw["role"]),
            status=ProbeStatus(raw["status"]),
            metric=str(raw.get("metric") or ""),
            change=_number(raw.get("change")),
            ci_low=_number(raw.get("ci_low")),
            ci_high=_number(raw.get("ci_high")),
            pairs=int(raw.get("pairs") or 0),
            seconds=float(raw.get("seconds") or 0.0),
            fingerprint=str(raw.get("fingerprint") or ""),
            message=str(raw.get("message") or ""),
            metrics=[MetricChange.from_json(m) for m in raw.get("metrics") or []],
        )


@dataclass(slots=True)
class BisectAnswer:
    """The bisection's answer.

    ``culprit`` is the first commit whose level is the bad one, ``parent`` the commit before it
    (the good end when the culprit is the range's first commit); both ``None`` when the search
    did not finish (``stopped`` says why). ``confirmation`` is the culprit against its parent,
    ``rerun`` the same again. ``more_than_one`` holds the sentence saying that the range holds
    more than one change, when the probes show it; ``earlier`` the culprit's parent against
    GOOD measured again to settle that question, when it ran.
    """

    good: str
    bad: str
    benchmark: str
    metric: str
    commits: int
    total: Probe | None = None
    culprit: str | None = None
    parent: str | None = None
    parent_probe: Probe | None = None
    confirmation: Probe | None = None
    rerun: Probe | None = None
    earlier: Probe | None = None
    confirmed: bool = False
    #: When skipped commits hide the exact culprit: the first and last candidates.
    candidates: list[str] = field(default_factory=list)
    skipped: list[Probe] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)
    more_than_one: str | None = None
    stopped: str | None = None
    subjects: dict[str, str] = field(default_factory=dict)
    state_file: str = ""

    @property
    def search_probes(self) -> int:
        """Probes run or reused to find the culprit: the confirming rerun and the second
        reading of the commits before it left out."""
        return sum(1 for p in self.probes if not p.role.repeats_a_reading)


def log_change(change: float | None) -> float | None:
    """``log(1 + change)``: changes add up along a range in this scale, not in percent."""
    if change is None or change <= -1:
        return None
    return math.log1p(change)


def _number(raw: object) -> float | None:
    return float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else None
