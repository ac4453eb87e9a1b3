"""What Nsight Systems ``nsys stats`` reports mean, as data (FORMATS.md d1, d2).

Shared by the console-text parser (``nsys_stats``) and the CSV parser (``nsys_stats_csv``):

* ``REPORTS``: every report name of every era (``cudaapisum`` 2020-2022, ``cuda_api_sum``
  2023+ ...) → what its rows are (metric kind, time or size measure, default unit);
* ``COLUMNS``: column title (without its unit) → the field it fills;
* ``layout_for``: a table's column titles → ``Layout`` (which cell goes where, in what unit);
* ``ProfileBuilder``: rows → metrics of one profile (duplicate names kept apart, memory time and
  size rows of one operation merged, NVTX step ranges turned into ``step`` metrics).
"""

from __future__ import annotations

import gc
import gzip
import io
import math
import re
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from perfci.errors import ParseError
from perfci.formats._steps import collect_steps
from perfci.model import Device, Metric, MetricKind, Profile
from perfci.units import NS_PER_UNIT, to_decimal

K = MetricKind
TIME, SIZE = "time", "size"
# Enum members as plain names: ``K.MEMORY`` is a class lookup that costs ~10x a global in the
# per-row code.
_MEMORY, _RANGE, _KERNEL, _API, _OS, _COMM = K.MEMORY, K.RANGE, K.KERNEL, K.API, K.OS, K.COMM


@dataclass(frozen=True, slots=True)
class ReportSpec:
    """One ``nsys stats`` report: ``kind`` is ``None`` where a ``Category`` column decides."""

    name: str  # canonical (newest) name
    kind: MetricKind | None
    measure: str = TIME  # TIME (durations) or SIZE (memory sizes)
    default_unit: str = "ns"  # for columns whose title carries no unit
    read: bool = True  # False: a trace or a report perfci has no metric for


def _specs(*entries: tuple[tuple[str, ...], ReportSpec]) -> dict[str, ReportSpec]:
    return {alias: spec for aliases, spec in entries for alias in aliases}


# Old names (2020-2022.4) map to the same spec as their 2023+ renames.
REPORTS: dict[str, ReportSpec] = _specs(
    (("nvtx_sum", "nvtxsum"), ReportSpec("nvtx_sum", K.RANGE)),
    (("nvtx_pushpop_sum", "nvtxppsum"), ReportSpec("nvtx_pushpop_sum", K.RANGE)),
    (("nvtx_startend_sum", "nvtxsesum"), ReportSpec("nvtx_startend_sum", K.RANGE)),
    (("openmp_sum", "openmpevtsum"), ReportSpec("openmp_sum", K.RANGE)),
    (("osrt_sum", "osrtsum"), ReportSpec("osrt_sum", K.OS)),
    (("cuda_api_sum", "cudaapisum"), ReportSpec("cuda_api_sum", K.API)),
    (("cuda_gpu_kern_sum", "gpukernsum"), ReportSpec("cuda_gpu_kern_sum", K.KERNEL)),
    (("cuda_gpu_kern_gb_sum",), ReportSpec("cuda_gpu_kern_gb_sum", K.KERNEL)),
    (("cuda_gpu_mem_time_sum", "gpumemtimesum"), ReportSpec("cuda_gpu_mem_time_sum", K.MEMORY)),
    (("cuda_gpu_mem_size_sum",), ReportSpec("cuda_gpu_mem_size_sum", K.MEMORY, SIZE, "MB")),
    # 2020/2021 printed memory sizes in KiB, without a unit in the column titles.
    (("gpumemsizesum",), ReportSpec("cuda_gpu_mem_size_sum", K.MEMORY, SIZE, "KiB")),
    (("cuda_gpu_sum", "gpusum"), ReportSpec("cuda_gpu_sum", None)),
    (("cuda_api_gpu_sum",), ReportSpec("cuda_api_gpu_sum", None)),
    *(((old, new), ReportSpec(new, None, read=False)) for old, new in (
        ("umsum", "um_sum"), ("umtotalsum", "um_total_sum"), ("umcpupagefaults",
         "um_cpu_page_faults_sum"), ("kernexecsum", "cuda_kern_exec_sum"),
        ("kernexectrace", "cuda_kern_exec_trace"), ("gputrace", "cuda_gpu_trace"),
        ("cudaapitrace", "cuda_api_trace"), ("nvtxkernsum", "nvtx_kern_sum"),
        ("nvtxgpuprojsum", "nvtx_gpu_proj_sum"), ("nvtxgpuprojtrace", "nvtx_gpu_proj_trace"),
        ("openaccsum", "openacc_sum"), ("vulkanmarkerssum", "vulkan_marker_sum"),
        ("dx12pixsum", "dx12_pix_sum"), ("mpievtsum", "mpi_event_sum"),
    )),
)

# 2020.x printed a title instead of a report name: "CUDA API Statistics (nanoseconds)".
TITLES_2020: dict[str, str] = {
    "CUDA API Statistics": "cudaapisum",
    "CUDA Kernel Statistics": "gpukernsum",
    "Operating System Runtime API Statistics": "osrtsum",
    "NVTX Push-Pop Range Statistics": "nvtxppsum",
    "NVTX Start-End Range Statistics": "nvtxsesum",
    "OpenMP Event Statistics": "openmpevtsum",
}
MEMORY_TITLE_2020 = "CUDA Memory Operation Statistics"  # time or size by the title's unit
TITLE_UNITS: dict[str, str] = {"nanoseconds": "ns", "microseconds": "us", "milliseconds": "ms",
                               "seconds": "s", "KiB": "KiB", "KB": "KiB", "MB": "MB", "B": "B"}

# Column title (lower case, unit removed) → field. Titles differ by era: "Num Calls" / "Calls" /
# "Instances" / "Count" / "Operations" all count the rows' events.
COLUMNS: dict[str, str] = {
    "time": "pct", "total time": "total", "total": "total",
    "num calls": "calls", "calls": "calls", "instances": "calls", "count": "calls",
    "operations": "calls",
    "avg": "avg", "average": "avg", "med": "median", "median": "median",
    "min": "min", "minimum": "min", "max": "max", "maximum": "max",
    "stddev": "std", "std dev": "std",
    "name": "name", "range": "name", "operation": "name",
    "style": "style", "category": "category", "gridxyz": "grid", "blockxyz": "block",
}
TEXT_FIELDS = frozenset({"style", "category", "grid", "block"})
# Where a numeric field goes: a Metric attribute for time reports; bytes / attrs for sizes.
TIME_TARGETS = {"total": "total_ns", "avg": "avg_ns", "median": "median_ns", "min": "min_ns",
                "max": "max_ns", "std": "std_ns"}
SIZE_TARGETS = {"total": "bytes", "avg": "avg_bytes", "median": "median_bytes",
                "min": "min_bytes", "max": "max_bytes", "std": "std_bytes"}
METRIC_FIELDS = frozenset({*TIME_TARGETS.values(), "bytes", "calls"})
TIME_ORDER = ("total_ns", "avg_ns", "min_ns", "max_ns", "std_ns", "median_ns")

# nsys prints decimal megabytes (4,194,304 B → 4.194 MB); 2020/2021 printed KiB.
BYTES_PER_UNIT: dict[str, int] = {"B": 1, "KB": 1000, "KiB": 1024, "MB": 1_000_000,
                                  "MiB": 1024**2, "GB": 1_000_000_000, "GiB": 1024**3}

# cuda_gpu_sum / cuda_api_gpu_sum rows say what they are in a Category column.
CATEGORY_KINDS: dict[str, MetricKind] = {"CUDA_KERNEL": K.KERNEL, "MEMORY_OPER": K.MEMORY,
                                         "CUDA_API": K.API}
DEVICE_OF: dict[MetricKind, Device] = {K.KERNEL: Device.GPU, K.MEMORY: Device.GPU,
                                       K.COMM: Device.GPU, K.API: Device.CPU,
                                       K.OS: Device.CPU, K.RANGE: Device.CPU}
# Older names (still printed by some 2024 builds), renamed so that series stay comparable
# across nsys versions; the printed name is kept in attrs["nsys_name"].
MEMORY_RENAMES: dict[str, str] = {"HtoD": "Host-to-Device", "DtoH": "Device-to-Host",
                                  "DtoD": "Device-to-Device", "HtoH": "Host-to-Host",
                                  "PtoP": "Peer-to-Peer"}
_MEMORY_OLD = re.compile(r"\b(HtoD|DtoH|DtoD|HtoH|PtoP)\b")
NCCL_KERNEL = re.compile(r"^(?:void\s+)?nccl", re.IGNORECASE)
# Without a report name, "Num Calls ... Name" tables are CUDA API or OS runtime summaries:
# their names tell which.
CUDA_API_NAME = re.compile(r"^(?:cu|nccl|nvrtc|nvjpeg)[A-Za-z]")
# NVTX ranges that are a whole iteration even without a number (numbered ones go through
# _steps.collect_steps).
UNNUMBERED_STEP = re.compile(
    r"^(?:profiled_step|profile_step|train_step|training_step|train_iter|train_iteration|"
    r"step|iteration|iter|ProfilerStep)$", re.IGNORECASE)
_TITLE = re.compile(r"^(?P<base>.*?)\s*(?:\((?P<unit>[^)]*)\))?$")

# Inference for tables without a report name: (field present, calls title, size?) → report.
INFER_RULES: tuple[tuple[str | None, str | None, bool | None, str], ...] = (
    ("style", None, None, "nvtx_sum"),
    ("category", None, None, "cuda_gpu_sum"),
    ("range", None, None, "nvtx_sum"),
    (None, None, True, "cuda_gpu_mem_size_sum"),
    ("operation", None, False, "cuda_gpu_mem_time_sum"),
    (None, "instances", None, "cuda_gpu_kern_sum"),
    (None, "operations", None, "cuda_gpu_mem_time_sum"),
    (None, "count", None, "cuda_gpu_mem_time_sum"),
    (None, "num calls", None, "cuda_api_sum"),
    (None, "calls", None, "cuda_api_sum"),
)


class LayoutError(ValueError):
    """A header that is not a usable summary table."""


@dataclass(slots=True)
class Layout:
    """Where each cell of a table's rows goes.

    ``numeric``: (cell index, target key, unit factor, column title); ``calls`` and ``name``
    are cell indexes; ``api_or_os``: the report was inferred from the columns and the row name
    decides between CUDA API and OS runtime.
    """

    report: ReportSpec
    titles: list[str]
    numeric: list[tuple[int, str, int, str]]
    name: int
    calls: int | None = None
    avg: int | None = None
    text: list[tuple[int, str]] = field(default_factory=list)
    api_or_os: bool = False
    # (cell index, Metric field) when every number is a time already in ns: the fast path.
    plain: tuple[tuple[int, str], ...] | None = None
    # Cell indexes of the TIME_ORDER columns when a table has all six and a count column.
    ordered: tuple[int, ...] | None = None
    # The report's kind when rows need no per-row decision beyond NCCL kernels / NVTX domain.
    fixed_kind: MetricKind | None = None


def split_title(title: str) -> tuple[str, str | None]:
    """``"Avg (ns)"`` → ``("avg", "ns")``; ``"Time(%)"`` → ``("time", "%")``."""
    match = _TITLE.match(title.strip())
    assert match is not None  # the pattern matches any string
    return match.group("base").strip().lower(), match.group("unit")


def layout_for(titles: list[str], report: ReportSpec | None, unit: str | None = None) -> Layout:
    """The layout of a table with these column titles, under ``report`` (inferred when None).

    ``unit`` overrides the report's default unit for titles without one (2020 table titles).
    Layouts are never modified, so one is shared by every table with the same titles: a long
    log repeats the same few tables thousands of times.
    """
    return _layout(tuple(titles), report, unit)


@lru_cache(maxsize=256)
def _layout(titles_key: tuple[str, ...], report: ReportSpec | None, unit: str | None) -> Layout:
    titles = list(titles_key)
    parsed = [split_title(title) for title in titles]
    fields = [COLUMNS.get(base) for base, _ in parsed]
    if "name" not in fields:
        raise LayoutError(f"no Name/Range/Operation column in {titles}")
    has_size = any(u in BYTES_PER_UNIT for _, u in parsed if u)
    inferred = report is None
    if report is None:
        report = _infer(parsed, fields, has_size)
    default = unit or report.default_unit
    layout = Layout(report=report, titles=titles, numeric=[], name=fields.index("name"),
                    api_or_os=inferred and report.kind is K.API)
    targets = SIZE_TARGETS if report.measure == SIZE else TIME_TARGETS
    for index, ((_, col_unit), name) in enumerate(zip(parsed, fields, strict=True)):
        if name == "calls":
            layout.calls = index
        elif name in TEXT_FIELDS:
            layout.text.append((index, name))
        elif name in targets:
            factor = _factor(col_unit or default, titles[index])
            layout.numeric.append((index, targets[name], factor, titles[index]))
            if name == "avg":
                layout.avg = index
    if not layout.numeric:
        raise LayoutError(f"no time or size column in {titles}")
    if report.kind in (K.API, K.OS, K.KERNEL, K.RANGE) and not layout.api_or_os:
        layout.fixed_kind = report.kind
    if report.measure == TIME and all(factor == 1 for _, _, factor, _ in layout.numeric):
        layout.plain = tuple((index, target) for index, target, _, _ in layout.numeric)
        where = {target: index for index, target in layout.plain}
        if layout.calls is not None and all(target in where for target in TIME_ORDER):
            layout.ordered = tuple(where[target] for target in TIME_ORDER)
    return layout


def _infer(parsed: list[tuple[str, str | None]], fields: list[str | None],
           has_size: bool) -> ReportSpec:
    bases = {base for base, _ in parsed}
    present = bases | {f for f in fields if f}
    calls_title = next((base for (base, _), f in zip(parsed, fields, strict=True)
                        if f == "calls"), None)
    for needed, calls, size, name in INFER_RULES:
        if needed is not None and needed not in present:
            continue
        if calls is not None and calls != calls_title:
            continue
        if size is not None and size != has_size:
            continue
        return REPORTS[name]
    raise LayoutError(f"cannot tell which nsys report has the columns {sorted(bases)}")


def _factor(unit: str, title: str) -> int:
    factor = NS_PER_UNIT.get(unit) or BYTES_PER_UNIT.get(unit)
    if factor is None:
        raise LayoutError(f"unknown unit {unit!r} in column {title!r}")
    return factor


class Numbers:
    """Cell → number in the table's locale: ``3,509,732,403.0``, ``2.176,0``, ``12 373 190``.

    The decimal mark is read from an ``Avg`` cell (nsys always prints it with decimals: one
    for times, three for MB), so that ``.`` can be told from a thousands separator.
    """

    __slots__ = ("fast", "grouping")

    def __init__(self, grouping: str = ",", *, spaces: bool = False) -> None:
        self.grouping = grouping
        # Spaces (or NBSP) inside numbers leave them to units.to_decimal, which strips them.
        self.fast = grouping == "," and not spaces

    @staticmethod
    def grouping_of(avg_cell: str, default: str = ",") -> str:
        """``"."`` when ``,`` is the decimal mark, ``","`` when ``.`` is, else ``default``."""
        comma, dot = avg_cell.rfind(","), avg_cell.rfind(".")
        if comma < 0 and dot < 0:
            return default
        return "." if comma > dot else ","

    def value(self, cell: str, factor: int = 1) -> float | None:
        """A time (ns) or size (bytes) from a cell in units of ``factor``."""
        if not cell or cell.isspace():
            return None  # CSV leaves a cell empty where nsys has no value
        if self.fast and factor == 1:
            # Same result as units.to_decimal for "," grouping, at a fifth of the cost: a
            # 100 MB log has millions of cells.
            number = float(cell.replace(",", ""))
            if not math.isfinite(number):
                raise ValueError(f"not a finite number: {cell!r}")
            return number
        return float(to_decimal(cell, grouping=self.grouping) * factor)

    def count(self, cell: str) -> int | None:
        if not cell or cell.isspace():
            return None
        if self.fast:
            return int(cell.replace(",", ""))
        value = to_decimal(cell, grouping=self.grouping)
        if value != value.to_integral_value():
            raise ValueError(f"not an integer: {cell!r}")
        return int(value)


def row_values(layout: Layout, cells: list[str], numbers: Numbers) -> dict[str, Any]:
    """The numeric cells of one row under their target keys; ``ValueError`` names the column."""
    if numbers.fast and layout.plain is not None:
        # The common case (ns columns, "," grouping) in one pass: a 100 MB log has millions
        # of cells. Anything odd (empty or bad cells) falls through to the checked path.
        try:
            values: dict[str, Any] = {target: float(cells[index].replace(",", ""))
                                      for index, target in layout.plain}
            if layout.calls is not None:
                values["calls"] = int(cells[layout.calls].replace(",", ""))
            if math.isfinite(sum(values.values())):
                return values
        except ValueError:
            pass
    values = {}
    for index, target, factor, title in layout.numeric:
        try:
            values[target] = numbers.value(cells[index], factor)
        except (ValueError, ArithmeticError) as exc:
            raise ValueError(f"expected a number in column {title!r}, got "
                             f"{cells[index].strip()!r}") from exc
    if layout.calls is not None:
        try:
            values["calls"] = numbers.count(cells[layout.calls])
        except (ValueError, ArithmeticError) as exc:
            raise ValueError(f"expected a count in column {layout.titles[layout.calls]!r}, "
                             f"got {cells[layout.calls].strip()!r}") from exc
    return values


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

    def add(self, layout: Layout, name: str, values: dict[str, Any],
            text: dict[str, str] | None = None) -> None:
        """One row: its numbers under Metric field names (or size keys for attrs)."""
        resolved = self._resolve(layout, name, text)
        if resolved is None:
            return
        kind, name, attrs = resolved
        if kind is _MEMORY:
            self._add_memory(name, values, attrs)
            return
        self.metrics.append(Metric(kind=kind, name=self._claim(kind, name, attrs),
                                   device=DEVICE_OF[kind], attrs=attrs, **values))

    def add_times(self, layout: Layout, name: str, text: dict[str, str] | None,
                  calls: int, times: tuple[float, ...]) -> None:
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
            total, avg, low, high, std, median = times
            self.metrics.append(Metric(
                kind=kind, name=name, device=DEVICE_OF[kind], attrs=attrs, calls=calls,
                total_ns=total, avg_ns=avg, min_ns=low, max_ns=high, std_ns=std,
                median_ns=median))
            return
        resolved = self._resolve(layout, name, text)
        if resolved is None:
            return
        kind, name, attrs = resolved
        if kind is _MEMORY:
            self._add_memory(name, {"calls": calls, **dict(zip(TIME_ORDER, times, strict=True))},
                             attrs)
            return
        total, avg, low, high, std, median = times
        self.metrics.append(Metric(
            kind=kind, name=self._claim(kind, name, attrs), device=DEVICE_OF[kind],
            attrs=attrs, calls=calls, total_ns=total, avg_ns=avg, min_ns=low, max_ns=high,
            std_ns=std, median_ns=median))

    def _resolve(self, layout: Layout, name: str, text: dict[str, str] | None
                 ) -> tuple[MetricKind, str, dict[str, Any]] | None:
        """The row's kind, cleaned name and attrs; ``None`` (with a warning) to skip it."""
        report = layout.report
        kind = report.kind
        if kind is None or kind is _KERNEL or layout.api_or_os:
            kind = self._kind(layout, name, text or {})
            if kind is None:
                self.warnings.append(f"{report.name}: row {name!r} has an unknown category "
                                     f"{(text or {}).get('category')!r}; skipped")
                return None
        attrs: dict[str, Any] = {"report": report.name}
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
        metric = Metric(kind=_MEMORY, name=self._claim(_MEMORY, name, attrs),
                        device=Device.GPU, attrs=attrs)
        _assign(metric, values)
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
        # processes/threads whose key columns are hidden (seed 003's cuda_api_sum), or
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
        steps = _step_metrics(self.metrics)
        profile = Profile(label=label, format=self.format, source=self.source,
                          metrics=self.metrics + steps, metadata=self.metadata,
                          warnings=self.warnings)
        if steps:
            profile.steps = steps[0].calls
        return profile


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
    if kind is _MEMORY and _MEMORY_OLD.search(name):
        attrs["nsys_name"] = name
        return _MEMORY_OLD.sub(lambda m: MEMORY_RENAMES[m.group(1)], name)
    return name


def _step_metrics(metrics: list[Metric]) -> list[Metric]:
    """Step metrics from NVTX ranges: numbered (``train_step-3``) or one repeated range."""
    ranges = [m for m in metrics if m.kind is _RANGE and "occurrence" not in m.attrs]
    steps = collect_steps(((m.name, m.avg_ns) for m in ranges if m.avg_ns is not None),
                          device=Device.CPU)
    for metric in ranges:
        if UNNUMBERED_STEP.match(metric.name):
            steps.append(Metric(
                kind=K.STEP, name=metric.name, device=Device.CPU, calls=metric.calls,
                total_ns=metric.total_ns, avg_ns=metric.avg_ns, min_ns=metric.min_ns,
                max_ns=metric.max_ns, median_ns=metric.median_ns, std_ns=metric.std_ns,
                attrs={"from_range": metric.name}))
    return steps


@contextmanager
def open_lines(path: Path, *, format: str) -> Iterator[Iterable[str]]:
    """The lines of ``path`` (gunzipped when gzip) as a stream, newlines kept, BOM dropped.

    Undecodable bytes become U+FFFD: a stray byte in application output must not lose a file.
    Read errors, also those met while iterating, become a ``ParseError``. The cyclic garbage
    collector is paused meanwhile: a parser keeps one Metric and one dict per row, none in
    cycles, and CPython 3.11 re-scans that growing heap so often that it took 60 % of the
    time on a 100 MB log.
    """
    collecting = gc.isenabled()
    try:
        with path.open("rb") as raw:
            gzipped = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            binary: Any = gzip.GzipFile(fileobj=raw) if gzipped else raw
            gc.disable()
            yield io.TextIOWrapper(binary, encoding="utf-8-sig", errors="replace", newline="")
    except (OSError, EOFError, zlib.error) as exc:
        raise ParseError(f"cannot read file: {exc}", source=str(path), format=format) from exc
    finally:
        if collecting:
            gc.enable()


def unique_labels(labels: list[str | None], stem: str) -> list[str]:
    """Labels for a file's profiles: unlabeled ones named after the file, repeats numbered."""
    out: list[str] = []
    taken: set[str] = set()
    repeats: dict[str, int] = {}
    for index, label in enumerate(labels, start=1):
        base = label or (stem if len(labels) == 1 else f"{stem}#{index}")
        candidate = base
        while candidate in taken:
            repeats[base] = repeats.get(base, 1) + 1
            candidate = f"{base}#{repeats[base]}"
        taken.add(candidate)
        out.append(candidate)
    return out


class ProfileSet:
    """Splits one file into profiles: a new one starts at a ``Profiling:`` line, at a new report
    file (``[1/8] ... x.nsys-rep``, ``Processing [x.sqlite]``), or when a report repeats."""

    def __init__(self, *, format: str, source: str) -> None:
        self.format = format
        self.source = source
        self.current = ProfileBuilder(format=format, source=source)
        self.done: list[ProfileBuilder] = []

    def boundary(self) -> None:
        if self.current.announced or self.current.metrics:
            self.done.append(self.current)
            self.current = ProfileBuilder(format=self.format, source=self.source)

    def start(self, hint: str, metadata: dict[str, Any]) -> None:
        """A ``Profiling: ...`` line: always a new profile."""
        self.boundary()
        self.current.label_hint = hint
        self.current.metadata.update(metadata)

    def report_file(self, name: str) -> None:
        """``x.nsys-rep`` / ``x.qdrep`` / ``x.sqlite``: the profile's label is ``x``."""
        stem = re.sub(r"\.(nsys-rep|qdrep|sqlite|qdstrm)$", "", name.replace("\\", "/"))
        stem = stem.rsplit("/", 1)[-1]
        if self.current.announced and self.current.label not in (None, stem):
            self.boundary()
        self.current.label = stem
        self.current.metadata.setdefault("report_file", name)

    def announce(self, report: str, index: tuple[int, int] | None = None) -> ReportSpec | None:
        """A report starts (or is skipped); a report already seen starts a new profile."""
        if report in self.current.announced:
            self.boundary()
        self.current.announced.add(report)
        self.current.metadata.setdefault("reports", []).append(report)
        if index is not None:
            self.step(index)
        return REPORTS.get(report)

    def step(self, index: tuple[int, int]) -> None:
        """``[k/n]``: remembered to tell a profile cut short."""
        seen, _ = self.current.progress
        self.current.progress = (max(seen, index[0]), index[1])

    def profiles(self, stem: str) -> list[Profile]:
        self.boundary()
        kept = [builder for builder in self.done if builder.metrics]
        labels = unique_labels([b.label or b.label_hint for b in kept], stem)
        out = []
        for builder, label in zip(kept, labels, strict=True):
            seen, total = builder.progress
            if seen < total:
                builder.warnings.append(f"only steps 1-{seen} of the {total} that nsys "
                                        "announced appear: the output may be cut short")
            out.append(builder.build(label))
        return out


def file_stem(path: Path) -> str:
    """``report1`` for ``report1.txt.gz``."""
    name = path.name
    for suffix in (".gz", ".txt", ".log", ".csv", ".out", ".md"):
        name = name.removesuffix(suffix)
    return name or path.name
