"""MLPerf training runs from their ``:::MLLOG`` events, and the profile of each.

One run is ``run_start`` … ``run_stop`` with the set-up logged before it (``cache_clear``,
``init_start``, ``submission_*``, hyper-parameters). A log may hold several runs one after
another (a job that retries, or logs concatenated): a set-up event (:data:`SETUP_KEYS`)
after a ``run_start``, or a second ``run_start`` once the first run has trained or stopped,
begins the next run (which keeps the set-up of the last when it logs none of its own); a run
cut short before its ``run_stop`` keeps what it measured. A ``run_start`` before anything
was trained is another rank's copy of the first.
Events after ``run_stop`` and before the next set-up stay with their run: SSD logs its last
``epoch_stop`` and ``tracked_stats`` just after ``run_stop``.

What each run gives:

* ``measure`` ``time_to_train`` (ns) = ``run_stop.time_ms − run_start.time_ms``, the MLPerf
  score, lower is better; none, with a warning, when the log stops before ``run_stop``.
* ``step`` ``epoch`` or ``block``: each ``epoch_start``/``epoch_stop`` (or ``block_*``) pair's
  duration in ns. Pairs match on ``epoch_num`` (``first_epoch_num`` for blocks) when both
  carry the same one, else a stop closes the latest open start (DLRM and BERT log fractional
  or sample-count epoch numbers at the stop; Llama 2 LoRA blocks carry only
  ``samples_count``, which differs between start and stop). When a log has both, the series
  with more intervals is the step (ResNet: 35 epochs, not its 9 blocks).
* ``measure`` ``throughput``: every ``tracked_stats`` ``{"throughput": x}`` (or a
  ``throughput`` event) in ``samples``, their mean in ``value``, in ``samples/s`` unless the
  event's metadata names a ``unit``; a leading value far below the rest is warm-up.
* ``measure`` ``eval_accuracy``: the last one logged. It is not an accuracy in every
  benchmark: :data:`EVAL_QUALITY` names what it is where lower is better (a loss, a log
  perplexity, a word error rate), as the compliance checker's targets do.
* metadata: scalar ``POINT_IN_TIME`` values logged before ``run_start`` (first value of a
  key wins: ranks log different seeds), and ``status`` from ``run_stop``'s metadata.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perfci.core.model import Better, Metric, MetricKind, Profile
from perfci.formats._steps import detect_warmup, step_metric
from perfci.formats.caps import Budget, budget
from perfci.formats.mlperf._events import Event, Unreadable, finite

NS_PER_MS = 1_000_000
DEFAULT_LABEL = "mlperf"
THROUGHPUT_UNIT = "samples/s"

#: Keys that open a run's set-up: once a run has started they begin the next run.
SETUP_KEYS = frozenset(
    {
        "cache_clear",
        "init_start",
        "submission_benchmark",
        "submission_org",
        "submission_division",
        "submission_status",
        "submission_platform",
    }
)

#: ``<kind>_start`` / ``<kind>_stop`` interval keys, and the metadata field naming each one.
INTERVALS = {"epoch": "epoch_num", "block": "first_epoch_num"}
_STARTS = {f"{kind}_start": kind for kind in INTERVALS}
_STOPS = {f"{kind}_stop": kind for kind in INTERVALS}

#: What ``eval_accuracy`` measures where it is not an accuracy (higher is better otherwise):
#: the benchmarks whose compliance target is an upper bound (mlcommons/logging,
#: ``compliance_checker/training_*/closed_<benchmark>.yaml``: ``v['value'] <= target``).
EVAL_QUALITY: dict[str, tuple[str, Better]] = {
    "gpt3": ("log perplexity", Better.LOWER),
    "llama31_405b": ("log perplexity", Better.LOWER),
    "llama31_8b": ("log perplexity", Better.LOWER),
    "llama2_70b_lora": ("eval loss", Better.LOWER),
    "flux1": ("eval loss", Better.LOWER),
    "rnnt": ("word error rate", Better.LOWER),
}
#: Stable Diffusion logs two ``eval_accuracy`` series, told apart by ``metadata.metric``.
EVAL_METRICS: dict[str, tuple[str, Better]] = {
    "FID": ("FID", Better.LOWER),
    "CLIP": ("CLIP score", Better.HIGHER),
}
EVAL_DEFAULT = ("accuracy", Better.HIGHER)
_POINT_IN_TIME = frozenset({"POINT_IN_TIME", ""})  # "": a logger that leaves the type out


@dataclass(slots=True)
class _Interval:
    """An open ``<kind>_start``: its id (``epoch_num`` …) when logged, and its time."""

    ident: Any
    time_ms: float


@dataclass(slots=True)
class Run:
    """What one run's events say, gathered as they come."""

    config: dict[str, Any] = field(default_factory=dict)
    start_ms: float | None = None
    stop_ms: float | None = None
    status: str | None = None
    extra_starts: int = 0
    extra_stops: int = 0
    trained: bool = False  # an epoch, block, eval or throughput event since run_start
    open: dict[str, list[_Interval]] = field(default_factory=dict)
    durations: dict[str, list[float]] = field(default_factory=dict)
    longest: int = 0  # the most durations of one kind so far (counted as samples)
    unmatched: dict[str, int] = field(default_factory=dict)
    throughput: list[float] = field(default_factory=list)
    throughput_unit: str | None = None
    evals: dict[str, list[float]] = field(default_factory=dict)
    eval_metric: dict[str, str] = field(default_factory=dict)
    skipped_values: int = 0
    unreadable: Unreadable = field(default_factory=Unreadable)

    @property
    def empty(self) -> bool:
        """Nothing measured: no run_start, no interval, throughput or evaluation."""
        return (
            self.start_ms is None
            and not self.durations
            and not self.throughput
            and not self.evals
            and not self.open
        )


class RunSplitter:
    """Feeds events to the current :class:`Run` and starts the next run where one begins."""

    def __init__(self, counted: Budget | None = None) -> None:
        self.runs: list[Run] = [Run()]
        # A run (its time to train), an eval metric's name and a step beyond the first count
        # within a service upload's caps (issue 31).
        self.counted = counted or budget("", "")

    @property
    def current(self) -> Run:
        return self.runs[-1]

    def add(self, event: Event) -> bool:
        """Take ``event``; True when it began a new run."""
        run = self.current
        key = event.key
        began = False
        if key == "run_start" and run.start_ms is not None:
            if not run.trained and run.stop_ms is None:
                run.extra_starts += 1  # another rank's run_start: the first one counts
                return False
            run = self._next(config=dict(run.config))
            began = True
        elif key in SETUP_KEYS and run.start_ms is not None:
            run = self._next(config={})
            began = True
        _dispatch(run, event, self.counted)
        return began

    def _next(self, *, config: dict[str, Any]) -> Run:
        self.counted.metric()
        run = Run(config=config)
        self.runs.append(run)
        return run


def _dispatch(run: Run, event: Event, counted: Budget) -> None:
    key, value, metadata = event.key, event.value, event.metadata
    if key == "run_start":
        run.start_ms = event.time_ms
    elif key == "run_stop":
        if run.stop_ms is not None:
            run.extra_stops += 1
            return
        run.stop_ms = event.time_ms
        status = metadata.get("status")
        if isinstance(status, str):
            run.status = status
    elif key in _STARTS:
        kind = _STARTS[key]
        run.open.setdefault(kind, []).append(
            _Interval(metadata.get(INTERVALS[kind]), event.time_ms)
        )
        run.trained = True
    elif key in _STOPS:
        _close(run, _STOPS[key], metadata.get(INTERVALS[_STOPS[key]]), event.time_ms, counted)
        run.trained = True
    elif key == "tracked_stats":
        if isinstance(value, dict) and "throughput" in value:
            _add_throughput(run, value["throughput"], metadata)
    elif key == "throughput":
        _add_throughput(run, value, metadata)
    elif key == "eval_accuracy":
        _add_eval(run, value, metadata, counted)
    elif (
        run.start_ms is None
        and event.event_type in _POINT_IN_TIME
        and key not in run.config
        and _is_scalar(value)
    ):
        run.config[key] = value


def _close(run: Run, kind: str, ident: Any, time_ms: float, counted: Budget) -> None:
    """End the open ``kind`` interval that ``ident`` names, else the latest one."""
    opened = run.open.get(kind)
    if not opened:
        run.unmatched[kind] = run.unmatched.get(kind, 0) + 1
        return
    same = [item for item in opened if ident is not None and item.ident == ident]
    if same:
        # Several starts with one id are ranks logging the same start: the first is it.
        start = same[0]
        opened[:] = [item for item in opened if item.ident != ident]
    else:
        start = opened.pop()
    if not opened:
        del run.open[kind]
    durations = run.durations.setdefault(kind, [])
    durations.append(_ms_to_ns(time_ms - start.time_ms))
    if len(durations) > run.longest:  # the step metric's samples are the longest series
        if run.longest:
            counted.sample()
        run.longest = len(durations)


def _add_throughput(run: Run, value: Any, metadata: dict[str, Any]) -> None:
    if not _is_number(value):
        run.skipped_values += 1
        return
    run.throughput.append(float(value))
    unit = metadata.get("unit")
    if isinstance(unit, str) and unit and run.throughput_unit is None:
        run.throughput_unit = unit
    run.trained = True


def _add_eval(run: Run, value: Any, metadata: dict[str, Any], counted: Budget) -> None:
    if not _is_number(value):
        run.skipped_values += 1
        return
    metric = metadata.get("metric")
    name = f"eval_accuracy ({metric})" if isinstance(metric, str) and metric else "eval_accuracy"
    if name not in run.evals:
        counted.metric()
    run.evals.setdefault(name, []).append(float(value))
    if name != "eval_accuracy":
        run.eval_metric[name] = str(metric)
    run.trained = True


def _is_number(value: Any) -> bool:
    return finite(value) is not None


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | bool) or _is_number(value)


def _ms_to_ns(ms: float) -> float:
    # Integer milliseconds stay exact: multiply before converting.
    return float(ms * NS_PER_MS)


# --- profiles -------------------------------------------------------------------------------


def build_profiles(runs: list[Run], *, source: str, format: str) -> list[Profile]:
    """One profile per run that measured something, labelled by its benchmark."""
    kept = [run for run in runs if not run.empty]
    profiles = []
    for index, run in enumerate(kept, start=1):
        label = _label(run)
        if len(kept) > 1:
            label = f"{label} #{index}"
        profiles.append(_profile(run, label=label, source=source, format=format))
    return profiles


def _label(run: Run) -> str:
    benchmark = run.config.get("submission_benchmark")
    return benchmark if isinstance(benchmark, str) and benchmark.strip() else DEFAULT_LABEL


def _profile(run: Run, *, label: str, source: str, format: str) -> Profile:
    metadata = dict(run.config)
    warnings: list[str] = []
    metrics: list[Metric] = []
    if run.status is not None:
        metadata["status"] = run.status
        if run.status != "success":
            warnings.append(f"run_stop status is {run.status!r}, not 'success'")
    ttt = _time_to_train(run, warnings)
    if ttt is not None:
        metrics.append(ttt)
    step = _step(run, warnings)
    if step is not None:
        metrics.append(step)
    if run.throughput:
        metrics.append(_throughput(run))
    metrics.extend(_evals(run))
    if run.extra_starts or run.extra_stops:
        warnings.append(
            f"{run.extra_starts} more run_start and {run.extra_stops} more run_stop event(s) "
            f"in one run: the first of each counts"
        )
    bad = run.unreadable
    if bad.count:
        warnings.append(
            f"{bad.count} :::MLLOG line(s) could not be read and were skipped (first at line "
            f"{bad.first_line}: {bad.first_problem})"
        )
    if run.skipped_values:
        warnings.append(
            f"{run.skipped_values} throughput or eval_accuracy value(s) were not finite "
            f"numbers and were left out"
        )
    return Profile(
        label=label,
        format=format,
        source=source,
        metrics=metrics,
        steps=step.calls if step is not None else None,
        metadata=metadata,
        warnings=warnings,
    )


def _time_to_train(run: Run, warnings: list[str]) -> Metric | None:
    if run.start_ms is None:
        warnings.append("no run_start event: no time_to_train")
        return None
    if run.stop_ms is None:
        warnings.append("no run_stop event (the log ends before the run did): no time_to_train")
        return None
    if run.stop_ms < run.start_ms:
        warnings.append("run_stop is logged before run_start: no time_to_train")
        return None
    ns = _ms_to_ns(run.stop_ms - run.start_ms)
    return Metric(
        kind=MetricKind.MEASURE,
        name="time_to_train",
        calls=1,
        total_ns=ns,
        avg_ns=ns,
        better=Better.LOWER,
    )


def _step(run: Run, warnings: list[str]) -> Metric | None:
    for kind in INTERVALS:
        left_open = len(run.open.get(kind, ()))
        if left_open:
            warnings.append(f"{left_open} {kind}_start event(s) without a {kind}_stop")
        if run.unmatched.get(kind):
            warnings.append(f"{run.unmatched[kind]} {kind}_stop event(s) without a {kind}_start")
    if not run.durations:
        return None
    # The finer series has more samples to compare; epochs win a tie (BERT: 1 and 1).
    kind = max(INTERVALS, key=lambda k: len(run.durations.get(k, ())))
    return step_metric(kind, run.durations[kind])


def _throughput(run: Run) -> Metric:
    samples = run.throughput
    unit = run.throughput_unit or THROUGHPUT_UNIT
    # A rate is warm-up when far *below* the rest: detect on its inverse, a time per sample.
    positive = all(value > 0 for value in samples)
    warmup = detect_warmup([1 / value for value in samples]) if positive else 0
    return Metric(
        kind=MetricKind.MEASURE,
        name="throughput",
        calls=len(samples),
        unit=unit,
        better=Better.HIGHER,
        value=sum(samples) / len(samples),
        samples=list(samples),
        warmup=warmup,
    )


def _evals(run: Run) -> list[Metric]:
    benchmark = run.config.get("submission_benchmark")
    default = EVAL_QUALITY.get(benchmark, EVAL_DEFAULT) if isinstance(benchmark, str) else None
    metrics = []
    for name, values in run.evals.items():
        metric = run.eval_metric.get(name)
        unit, better = EVAL_METRICS.get(metric, EVAL_DEFAULT) if metric else default or EVAL_DEFAULT
        metrics.append(
            Metric(
                kind=MetricKind.MEASURE,
                name=name,
                calls=len(values),
                unit=unit,
                better=better,
                value=values[-1],
            )
        )
    return metrics
