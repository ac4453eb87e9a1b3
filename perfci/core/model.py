"""The metric model: what every parser produces and every other layer consumes.

Plain dataclasses, no behaviour beyond small derived values. All times are nanoseconds
(floats, so that sub-ns averages survive), sizes are bytes. A metric that is not a time
(throughput, peak memory, accuracy, a hardware counter) says so with its ``unit`` and keeps its
numbers in ``value`` / ``samples``; ``better`` says which way is good for every metric.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from perfci.core.compat import StrEnum


class MetricKind(StrEnum):
    STEP = "step"  # a whole iteration
    RANGE = "range"  # NVTX / record_function ranges
    KERNEL = "kernel"
    MEMORY = "memory"  # memcpy / memset
    API = "api"  # CUDA runtime / driver calls
    COMM = "comm"  # NCCL and other collectives
    OP = "op"  # framework operators (aten::mm)
    LAYER = "layer"  # workload-table layers
    OS = "os"  # OS runtime calls
    BENCH = "bench"  # a named benchmark case (pytest-benchmark, Google Benchmark, BMF, ...)
    MEASURE = "measure"  # a headline value of the whole profile: throughput, peak memory, accuracy
    COUNTER = "counter"  # a measure of one entity (``scope``): ncu section metrics, op memory


class Better(StrEnum):
    """Which way a metric's value is good: times and sizes ``lower``, rates ``higher``."""

    LOWER = "lower"
    HIGHER = "higher"


#: Units with a fixed meaning; any other string a source gives (``tokens/s``, ``J``) is kept.
TIME_UNIT = "ns"
KNOWN_UNITS = ("ns", "bytes", "count", "1/s", "%", "flop", "flop/s")


def default_better(unit: str) -> Better:
    """The direction a unit implies when the source does not say: rates up, the rest down."""
    lowered = unit.strip().lower()
    if lowered.endswith("/s") or lowered.endswith("per_second") or lowered.endswith("per second"):
        return Better.HIGHER
    return Better.LOWER


class Device(StrEnum):
    CPU = "cpu"
    GPU = "gpu"


@dataclass(slots=True)
class Metric:
    """One measured thing in one profile.

    ``scope`` names the enclosing range for per-range breakdowns (nvprof's NVTX blocks,
    Megatron sub-operations); it is ``None`` for top-level metrics. ``warmup`` is the
    number of leading ``samples_ns`` entries that are warm-up iterations and should be
    left out of comparisons. ``attrs`` keeps source-specific extras (comm type, NVTX style).

    ``unit`` is ``ns`` for times, whose numbers live in the ``*_ns`` fields; any other unit
    keeps them in ``value`` (the source's summary) and ``samples`` (per-instance, ``warmup``
    as for times). ``better`` is the good direction.

    ``step_totals_ns`` (a time that is part of every profiled step's work, where the source
    says which step each call ran in) is its summed time in each step, in step order: what
    same-runner A/B compares on the fastest step (:func:`perfci.analysis.values.compared_value`).

    Why the two: a profiler gives a time as summaries (total, self, calls, average, min, max,
    std, median), shown by reports and compared per step; a throughput, a peak memory or a
    counter is one number in its own unit, never divided by steps. Two classes would touch the
    28 modules of ``formats/`` that build metrics, the JSON document and the store for no
    change of behaviour. The invariant every reader keeps (``tests/test_metric_values.py``):
    a time has no ``value``/``samples``; another unit has no ``*_ns`` field
    (``step_totals_ns`` included) and its number in ``value`` or ``samples``.

    Who reads which: comparisons take one number per metric and repeat from
    :func:`perfci.analysis.values.compared_value`, which picks the system by ``unit`` (as
    :meth:`steady_samples` does); the store keeps that number as a sample's ``value`` with the
    ``*_ns`` summaries beside it for display (:func:`perfci.store.prepared.values_of`);
    ``perfci parse`` shows the ``*_ns`` columns; the JSON document (:mod:`.jsondoc`) carries
    every field set. An uploaded document is not forced into the invariant: a field of the
    other system is stored as given and never compared.
    """

    kind: MetricKind
    name: str
    device: Device = Device.GPU
    calls: int | None = None
    total_ns: float | None = None
    self_ns: float | None = None
    avg_ns: float | None = None
    min_ns: float | None = None
    max_ns: float | None = None
    std_ns: float | None = None
    median_ns: float | None = None
    bytes: float | None = None
    samples_ns: list[float] | None = None
    warmup: int = 0
    scope: str | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    unit: str = TIME_UNIT
    better: Better = Better.LOWER
    value: float | None = None
    samples: list[float] | None = None
    step_totals_ns: list[float] | None = None

    @property
    def is_time(self) -> bool:
        return self.unit == TIME_UNIT

    @property
    def key(self) -> str:
        """The metric's series key (:attr:`SeriesKey.key`) within its profile."""
        return SeriesKey.of(self).key

    def steady_samples(self) -> list[float]:
        """Per-instance samples (in the metric's unit) with warm-up iterations left out."""
        samples = self.samples_ns if self.is_time else self.samples
        return list(samples[self.warmup :]) if samples else []

    def steady_mean_ns(self) -> float | None:
        """Mean of the non-warm-up samples, or the average the source gave."""
        steady = self.steady_samples()
        if steady:
            return math.fsum(steady) / len(steady)  # statistics.fmean, without its import
        return self.avg_ns


@dataclass(slots=True)
class Profile:
    """One parsed profile: a file, or one of several profiles inside one file."""

    label: str
    format: str
    source: str
    metrics: list[Metric] = field(default_factory=list)
    steps: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def by_kind(self, kind: MetricKind) -> list[Metric]:
        return [m for m in self.metrics if m.kind is kind]

    def find(
        self, kind: MetricKind, name: str, *, device: Device | None = None, scope: str | None = None
    ) -> Metric | None:
        """The first metric with this kind and name (and device/scope when given)."""
        for metric in self.metrics:
            if metric.kind is not kind or metric.name != name or metric.scope != scope:
                continue
            if device is None or metric.device is device:
                return metric
        return None


#: A series' identity as plain strings, in the order of :data:`SERIES_FIELDS`: what the store
#: keys series by and digests into ``series.key_hash`` (cheaper to hash than a SeriesKey).
SeriesParts = tuple[str, str, str, str, str]
SERIES_FIELDS = ("kind", "device", "scope", "section", "name")
#: Joins a series' parts before they are digested: no part may hold it, else two series
#: (scope ``s\x1f`` and name ``n``; scope ``s`` and name ``\x1fn``) would digest alike.
KEY_SEPARATOR = "\x1f"


@dataclass(frozen=True, slots=True)
class SeriesKey:
    """Identity of a metric across runs of one benchmark: THE series key.

    ``section`` is the profile label when one repeat yields several profiles (a trace's
    forward / backward / train), else ``""``; ``scope`` is the enclosing range of a breakdown.
    Every other form of the identity is derived from these fields: :attr:`key` (the string
    comparisons and reports use), :attr:`parts` (the store's, and its ``key_hash``) and
    :attr:`Metric.key`.

    ``unit`` and ``better`` travel with the key (reports and verdicts need them) but are not
    part of the identity: they take no part in equality, hashing or :attr:`parts`.
    """

    kind: MetricKind
    name: str
    device: Device = Device.GPU
    scope: str = ""
    section: str = ""
    unit: str = field(default=TIME_UNIT, compare=False)
    better: Better = field(default=Better.LOWER, compare=False)

    @property
    def is_time(self) -> bool:
        return self.unit == TIME_UNIT

    @property
    def key(self) -> str:
        """A readable, unique string: ``kernel:gpu:[train] Layer 0 ▸ volta_sgemm``."""
        # ``_value_``: the plain attribute (``.value`` is a slow descriptor); a comparison
        # asks for every line's key several times.
        if not self.section and not self.scope:
            return f"{self.kind._value_}:{self.device._value_}:{self.name}"
        return f"{self.kind._value_}:{self.device._value_}:{self.display_name}"

    @property
    def display_name(self) -> str:
        section = f"[{self.section}] " if self.section else ""
        scope = f"{self.scope} ▸ " if self.scope else ""
        return f"{section}{scope}{self.name}"

    @property
    def parts(self) -> SeriesParts:
        """The fields as plain strings, in :data:`SERIES_FIELDS` order."""
        return (self.kind.value, self.device.value, self.scope, self.section, self.name)

    @classmethod
    def from_parts(
        cls, parts: SeriesParts, *, unit: str = TIME_UNIT, better: str = Better.LOWER
    ) -> SeriesKey:
        """The inverse of :attr:`parts` (with the unit and direction stored beside them)."""
        kind, device, scope, section, name = parts
        return cls(
            kind=MetricKind(kind),
            name=name,
            device=Device(device),
            scope=scope,
            section=section,
            unit=unit,
            better=Better(better),
        )

    @classmethod
    def of(cls, metric: Metric, section: str = "") -> SeriesKey:
        return cls(
            kind=metric.kind,
            name=metric.name,
            device=metric.device,
            scope=metric.scope or "",
            section=section,
            unit=metric.unit,
            better=metric.better,
        )


class Verdict(StrEnum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"
    NEW = "new"
    MISSING = "missing"
    NO_BASELINE = "no-baseline"


@dataclass(frozen=True, slots=True)
class MetricComparison:
    """The comparison of one metric: PR candidate repeats against baseline runs.

    ``change`` is relative (+0.05 = 5 % slower for times); ``ci_low``/``ci_high`` bound it.
    ``gated`` says whether this metric can fail the check (step time, or a large share of it).
    ``repeats_needed`` estimates the candidate repeats that would settle an inconclusive result.
    ``baseline_median`` and ``candidate_median`` are the two values the change is computed
    from (``change = candidate / baseline − 1``): in run comparisons the geometric mean of
    the baseline runs and this run's value, each run being the median of its repeats.
    ``adjusted_change`` (with its interval) is the change beyond the run's machine-wide
    factor, when that factor was estimated; the verdict is decided on it then.
    ``detectable_change`` (on inconclusive lines of run comparisons) is the smallest change,
    either way, that this run would have called with 80 % probability at its own noise and
    test level: what the run could and could not have seen.
    """

    key: str
    verdict: Verdict
    baseline_median: float | None = None
    candidate_median: float | None = None
    change: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    q_value: float | None = None
    n_baseline: int = 0
    n_candidate: int = 0
    gated: bool = False
    share_of_step: float | None = None
    repeats_needed: int | None = None
    series: SeriesKey | None = None
    adjusted_change: float | None = None
    adjusted_ci_low: float | None = None
    adjusted_ci_high: float | None = None
    detectable_change: float | None = None
    #: On a line that pairs a renamed kernel (missing on the base side's name, new under
    #: this one): the base side's name, the family both belong to and the rule that derived
    #: it (:mod:`perfci.analysis.kernel_family`). The line compares the two as one metric.
    replaces: str | None = None
    family: str | None = None
    family_rule: str | None = None


@dataclass(frozen=True, slots=True)
class Contribution:
    """How much one metric's per-step time change explains of the step-time change."""

    key: str
    delta_ns: float  # per step, candidate median − baseline median
    share: float  # delta_ns / step-time delta (can exceed 1 or be negative)
    series: SeriesKey | None = None


@dataclass(slots=True)
class BaselineInfo:
    branch: str
    runs: int
    first_commit: str | None = None
    last_commit: str | None = None
    run_ids: list[int] = field(default_factory=list)
    #: Same-runner A/B (``--ab``): the pairs compared (the base side is one run of them).
    pairs: int | None = None


@dataclass(slots=True)
class RunComparison:
    """Everything a report needs about one run of one benchmark against its baseline."""

    benchmark: str
    verdict: Verdict  # regression if any gated regression, improvement, unchanged, ...
    metrics: list[MetricComparison]
    contributions: list[Contribution] = field(default_factory=list)
    baseline: BaselineInfo | None = None
    environment: dict[str, str] = field(default_factory=dict)
    run_id: int | None = None
    commit: str | None = None
    branch: str | None = None
    pr_number: int | None = None
    ci_url: str | None = None
    shared_factor: MetricComparison | None = None
    notes: list[str] = field(default_factory=list)
    #: Indexes (oldest first) of the baseline runs the comparison used, and of the first run
    #: of the base branch's current level when the baseline was cut at a change point.
    baseline_runs_used: list[int] = field(default_factory=list)
    baseline_level_start: int | None = None
    #: Key of the step series the comparison judged as "the step" (analysis.steps), so that
    #: every view shows the series the verdict was about.
    primary_step: str | None = None
    #: The practical margin the verdicts used: a change whose interval lies inside ± it is
    #: *unchanged*, one beyond it (and significant) a regression or an improvement.
    margin: float | None = None

    @property
    def steps(self) -> list[MetricComparison]:
        return [m for m in self.metrics if m.series and m.series.kind is MetricKind.STEP]

    @property
    def regressions(self) -> list[MetricComparison]:
        return [m for m in self.metrics if m.verdict is Verdict.REGRESSION]

    @property
    def gated_regressions(self) -> list[MetricComparison]:
        return [m for m in self.regressions if m.gated]


@dataclass(slots=True)
class RunContext:
    """Where and what a run measured: source control, CI and the hardware/software environment.

    ``environment`` is the fingerprint (GPU model and count, driver, CUDA, torch, CPU, OS ...);
    runs are only ever compared within one fingerprint.
    """

    project: str
    repository: str | None = None
    commit: str | None = None
    branch: str | None = None
    base_branch: str | None = None
    merge_base: str | None = None
    pr_number: int | None = None
    ci_provider: str | None = None
    ci_run_id: str | None = None
    ci_run_attempt: int | None = None
    ci_url: str | None = None
    commit_time: str | None = None  # ISO 8601
    environment: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One stored run, as reports, comparisons and the API need it."""

    id: int
    project: str
    benchmark: str
    environment_id: int
    created_at: datetime
    repeats: int
    commit: str | None = None
    commit_time: datetime | None = None
    branch: str | None = None
    base_branch: str | None = None
    merge_base: str | None = None
    pr_number: int | None = None
    ci_provider: str | None = None
    ci_run_id: str | None = None
    ci_run_attempt: int | None = None
    ci_url: str | None = None
    environment: dict[str, str] = field(default_factory=dict)
