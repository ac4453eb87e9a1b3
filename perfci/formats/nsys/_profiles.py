"""Nsight Systems ``nsys stats`` rows → the metrics of profiles.

Shared by the console-text parser (``nsys_stats``) and the CSV parser (``nsys_stats_csv``):
``ProfileBuilder`` turns rows into the metrics of one profile (duplicate names kept apart,
memory time and size rows of one operation merged, NVTX step ranges turned into ``step``
metrics); ``_profile_set`` splits a file into profiles, one builder each.

What each report and column means is ``_reports`` data.
"""

from __future__ import annotations

from typing import Any

from perfci.core.model import Device, Metric, MetricKind, Profile
from perfci.formats._steps import collect_steps
from perfci.formats.caps import budget
from perfci.formats.nsys._reports import (
    CATEGORY_KINDS,
    CUDA_API_NAME,
    DEVICE_OF,
    MEMORY_OLD,
    MEMORY_RENAMES,
    METRIC_FIELDS,
    NCCL_KERNEL,
    REPORTS,
    TIME_ORDER,
    UNNUMBERED_STEP,
    Layout,
)

K = MetricKind
# Enum members as plain names: ``K.MEMORY`` is a class attribute lookup, a global is cheaper in
# the per-row code.
_MEMORY, _RANGE, _KERNEL, _API, _OS, _COMM = K.MEMORY, K.RANGE, K.KERNEL, K.API, K.OS, K.COMM
OSRT_REPORT = REPORTS["osrt_sum"].name


class ProfileBuilder:
    """The metrics of one profile, row by row."""

    def __init__(self, *, format: str, source: str) -> None:
        self.format = format
        self.source = source
        self.label: str | None = None  # from the report file name (x.nsys-rep, x.sqlite)
        self.label_hint: str | None = None  # from a "Profiling: ..." line
        self.progress: tuple[int, int] = (0, 0)  # highest "[k/n]" seen, n
        self.metadata: dict[str, Any] = {}
        self.warnings: list[str] = []
        self.metrics: list[Metric] = []
        self.announced: set[str] = set()  # report names seen (run, skipped or empty)
        # kind → name → rows seen (nested rather than keyed by tuple: one object less per row)
        self._taken: dict[MetricKind, dict[str, int]] = {kind: {} for kind in K}
        self._memory: dict[str, list[Metric]] = {}
        # Every row kept is a metric, counted within the caps of a service upload (issue 31);
        # rows of a combined report that a per-kind one repeats count too (left out later).
        self.count_metric = budget(source, format).metric  # bound once: called per row

    def add(
        self, layout: Layout, name: str, values: dict[str, Any], text: dict[str, str] | None = None
    ) -> None:
        """One row: its numbers under Metric field names (or size keys for attrs)."""
        resolved = self._resolve(layout, name, text)
        if resolved is None:
            return
        kind, name, attrs = resolved
        if kind is _MEMORY:
            self._add_memory(name, values, attrs)
            return
        self.count_metric()
        self.metrics.append(
            Metric(
                kind=kind,
                name=self._claim(kind, name, attrs),
                device=DEVICE_OF[kind],
                attrs=attrs,
                **values,
            )
        )

    def add_times(
        self,
        layout: Layout,
        name: str,
        text: dict[str, str] | None,
        calls: int,
        times: tuple[float, ...],
    ) -> None:
        """One row of the six ``TIME_ORDER`` times in ns: ``add`` without the dict."""
        kind = layout.fixed_kind
        if kind is not None:
            # The hot path (most rows of a long log): same outcome as _resolve + _claim.
            attrs: dict[str, Any] = {"report": layout.report.name}
            if text:
                attrs.update(text)
            if name[-1] in "…." and name.endswith(("…", "...")):
                attrs["truncated"] = True
            if kind is _KERNEL:
                if "ccl" in name and NCCL_KERNEL.match(name):
                    kind = _COMM
            elif kind is _RANGE and name[0] == ":":
                name = name[1:]
            seen = self._taken[kind]
            if name in seen:
                name = self._unique(seen, name, attrs)
            else:
                seen[name] = 1
            self._add_timed(kind, name, attrs, calls, times)
            return
        resolved = self._resolve(layout, name, text)
        if resolved is None:
            return
        kind, name, attrs = resolved
        if kind is _MEMORY:
            self._add_memory(
                name, {"calls": calls, **dict(zip(TIME_ORDER, times, strict=True))}, attrs
            )
            return
        self._add_timed(kind, self._claim(kind, name, attrs), attrs, calls, times)

    def _add_timed(
        self,
        kind: MetricKind,
        name: str,
        attrs: dict[str, Any],
        calls: int,
        times: tuple[float, ...],
    ) -> None:
        """The metric of a row of the six ``TIME_ORDER`` times, its name already claimed."""
        total, avg, low, high, std, median = times
        self.count_metric()
        self.metrics.append(
            Metric(
                kind=kind,
                name=name,
                device=DEVICE_OF[kind],
                attrs=attrs,
                calls=calls,
                total_ns=total,
                avg_ns=avg,
                min_ns=low,
                max_ns=high,
                std_ns=std,
                median_ns=median,
            )
        )

    def _resolve(
        self, layout: Layout, name: str, text: dict[str, str] | None
    ) -> tuple[MetricKind, str, dict[str, Any]] | None:
        """The row's kind, cleaned name and attrs; ``None`` (with a warning) to skip it."""
        report = layout.report
        kind = report.kind
        if kind is None or kind is _KERNEL or layout.api_or_os:
            kind = self._kind(layout, name, text or {})
            if kind is None:
                self.warnings.append(
                    f"{report.name}: row {name!r} has an unknown category "
                    f"{(text or {}).get('category')!r}; skipped"
                )
                return None
        # A table inferred from its columns ("Num Calls ... Name") is CUDA API or OS runtime
        # by its row names: an OS row is the OS runtime report's, whatever was inferred.
        name_of = OSRT_REPORT if kind is _OS and layout.api_or_os else report.name
        attrs: dict[str, Any] = {"report": name_of}
        if text:
            attrs.update(text)
        if kind is _MEMORY or kind is _RANGE or name[-1] in "….":
            name = _clean_name(kind, name, attrs)
        return kind, name, attrs

    def _claim(self, kind: MetricKind, name: str, attrs: dict[str, Any]) -> str:
        seen = self._taken[kind]
        if name in seen:
            return self._unique(seen, name, attrs)
        seen[name] = 1
        return name

    def _add_memory(self, name: str, values: dict[str, Any], attrs: dict[str, Any]) -> None:
        if self._merge(name, values, attrs):
            return
        metric = Metric(
            kind=_MEMORY, name=self._claim(_MEMORY, name, attrs), device=Device.GPU, attrs=attrs
        )
        _assign(metric, values)
        self.count_metric()
        self.metrics.append(metric)
        self._memory.setdefault(name, []).append(metric)

    def _kind(self, layout: Layout, name: str, text: dict[str, str]) -> MetricKind | None:
        kind = layout.report.kind
        if kind is None:
            kind = CATEGORY_KINDS.get(text.get("category", ""))
        elif layout.api_or_os and not CUDA_API_NAME.match(name):
            kind = _OS
        if kind is _KERNEL and NCCL_KERNEL.match(name):
            kind = _COMM
        return kind

    def _merge(self, name: str, values: dict[str, Any], attrs: dict[str, Any]) -> bool:
        """Fill the time (or size) of an operation the other memory report already gave."""
        size_row = "bytes" in values
        for metric in self._memory.get(name, []):
            if (metric.bytes is None) if size_row else (metric.total_ns is None):
                _assign(metric, values, keep_calls=True)
                metric.attrs["reports"] = [metric.attrs.pop("report"), attrs.pop("report")]
                metric.attrs.update(attrs)
                return True
        return False

    @staticmethod
    def _unique(seen: dict[str, int], name: str, attrs: dict[str, Any]) -> str:
        # nsys can print one name on several rows of a report: the same call from two
        # processes/threads whose key columns are hidden (nsys 2023+ ``cuda_api_sum``), or
        # different kernels whose names the 100-character cap made equal. Merging them would
        # add up unrelated work and dropping one would lose time, so the second and later
        # rows are kept as "<name> #2", "#3" ... in the report's order (by total time, which
        # keeps the numbering stable between runs of the same program), with
        # attrs["occurrence"] and attrs["base_name"] to say so.
        count = seen[name] + 1
        seen[name] = count
        attrs["occurrence"] = count
        attrs["base_name"] = name
        return f"{name} #{count}"

    def build(self, label: str) -> Profile:
        self.metrics = _without_overlaps(self.metrics, self.warnings)
        steps = _step_metrics(self.metrics)
        profile = Profile(
            label=label,
            format=self.format,
            source=self.source,
            metrics=self.metrics + steps,
            metadata=self.metadata,
            warnings=self.warnings,
        )
        if steps:
            profile.steps = steps[0].calls
        return profile


#: Reports that list again, by Category, what the per-kind reports list.
COMBINED_REPORTS = frozenset({"cuda_gpu_sum", "cuda_api_gpu_sum"})


def _reports_of(metric: Metric) -> list[str]:
    reports = metric.attrs.get("reports")
    return list(reports) if reports else [metric.attrs.get("report", "")]


def _without_overlaps(metrics: list[Metric], warnings: list[str]) -> list[Metric]:
    """Leave out the combined reports' rows that a per-kind report in the same profile gave.

    ``cuda_gpu_sum`` lists every kernel and memory operation that ``cuda_gpu_kern_sum`` and
    ``cuda_gpu_mem_time_sum`` list (``cuda_api_gpu_sum`` those and the API calls): read both,
    each would count twice, the second as ``<name> #2``. The per-kind report wins (it has the
    kind's own columns); the names left are numbered again in their order.
    """

    def base(metric: Metric) -> tuple[MetricKind, str]:
        return metric.kind, metric.attrs.get("base_name", metric.name)

    dedicated = {base(m) for m in metrics if not set(_reports_of(m)) <= COMBINED_REPORTS}
    dropped = [
        m for m in metrics if set(_reports_of(m)) <= COMBINED_REPORTS and base(m) in dedicated
    ]
    if not dropped:
        return metrics
    gone = {id(m) for m in dropped}
    kept = [m for m in metrics if id(m) not in gone]
    touched = {base(m) for m in dropped}
    count: dict[tuple[MetricKind, str], int] = {}
    for metric in kept:
        key = base(metric)
        if key not in touched:
            continue
        count[key] = count.get(key, 0) + 1
        metric.attrs.pop("occurrence", None)
        metric.attrs.pop("base_name", None)
        if count[key] == 1:
            metric.name = key[1]
        else:
            metric.name = f"{key[1]} #{count[key]}"
            metric.attrs.update(occurrence=count[key], base_name=key[1])
    reports = sorted({r for m in dropped for r in _reports_of(m)})
    warnings.append(
        f"{', '.join(reports)}: {len(dropped)} rows left out, the kernels, copies or calls "
        f"another report of this profile lists too (counted once)"
    )
    return kept


def _assign(metric: Metric, values: dict[str, Any], *, keep_calls: bool = False) -> None:
    for key, value in values.items():
        if key in METRIC_FIELDS:
            if key == "calls" and keep_calls and metric.calls is not None:
                continue
            setattr(metric, key, value)
        else:
            metric.attrs[key] = value


def _clean_name(kind: MetricKind, name: str, attrs: dict[str, Any]) -> str:
    # Keep ProfileBuilder.add_times's hot path in step with this.
    if name.endswith(("…", "...")):
        attrs["truncated"] = True  # nsys caps names at 100 characters
    if kind is _RANGE and name.startswith(":"):
        # nsys 2024+ prints "Domain:Name" and ":Name" for the default domain; 2023 printed
        # "Name". Dropping the empty domain keeps series comparable across versions.
        return name[1:]
    if kind is _MEMORY and MEMORY_OLD.search(name):
        attrs["nsys_name"] = name
        return MEMORY_OLD.sub(lambda m: MEMORY_RENAMES[m.group(1)], name)
    return name


def _step_metrics(metrics: list[Metric]) -> list[Metric]:
    """Step metrics from NVTX ranges: numbered (``train_step-3``) or one repeated range."""
    ranges = [m for m in metrics if m.kind is _RANGE and "occurrence" not in m.attrs]
    steps = collect_steps(
        ((m.name, m.avg_ns) for m in ranges if m.avg_ns is not None), device=Device.CPU
    )
    for metric in ranges:
        if UNNUMBERED_STEP.match(metric.name):
            steps.append(
                Metric(
                    kind=K.STEP,
                    name=metric.name,
                    device=Device.CPU,
                    calls=metric.calls,
                    total_ns=metric.total_ns,
                    avg_ns=metric.avg_ns,
                    min_ns=metric.min_ns,
                    max_ns=metric.max_ns,
                    median_ns=metric.median_ns,
                    std_ns=metric.std_ns,
                    attrs={"from_range": metric.name},
                )
            )
    return steps
