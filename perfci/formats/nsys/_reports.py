"""What Nsight Systems ``nsys stats`` reports mean, as data.

Shared by the console-text parser (``nsys_stats``) and the CSV parser (``nsys_stats_csv``):

* ``REPORTS``: every report name of every era (``cudaapisum`` 2020-2022, ``cuda_api_sum``
  2023+ ...) → what its rows are (metric kind, time or size measure, default unit);
* ``COLUMNS``: column title (without its unit) → the field it fills;
* ``layout_for``: a table's column titles → ``Layout`` (which cell goes where, in what unit).

What rows become is ``_profiles``; reading a table's cells is ``_tables``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from perfci.core.model import Device, MetricKind
from perfci.core.units import NS_PER_UNIT

K = MetricKind
TIME, SIZE = "time", "size"


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
    *(
        ((old, new), ReportSpec(new, None, read=False))
        for old, new in (
            ("umsum", "um_sum"),
            ("umtotalsum", "um_total_sum"),
            ("umcpupagefaults", "um_cpu_page_faults_sum"),
            ("kernexecsum", "cuda_kern_exec_sum"),
            ("kernexectrace", "cuda_kern_exec_trace"),
            ("gputrace", "cuda_gpu_trace"),
            ("cudaapitrace", "cuda_api_trace"),
            ("nvtxkernsum", "nvtx_kern_sum"),
            ("nvtxgpuprojsum", "nvtx_gpu_proj_sum"),
            ("nvtxgpuprojtrace", "nvtx_gpu_proj_trace"),
            ("openaccsum", "openacc_sum"),
            ("vulkanmarkerssum", "vulkan_marker_sum"),
            ("dx12pixsum", "dx12_pix_sum"),
            ("mpievtsum", "mpi_event_sum"),
        )
    ),
)

# 2020.x and early 2021.x printed a title instead of a report name: "CUDA API Statistics
# (nanoseconds)" (2020), "CUDA API Statistics:" (2021).
TITLES_2020: dict[str, str] = {
    "CUDA API Statistics": "cudaapisum",
    "CUDA Kernel Statistics": "gpukernsum",
    "Operating System Runtime API Statistics": "osrtsum",
    "NVTX Push-Pop Range Statistics": "nvtxppsum",
    "NVTX Start-End Range Statistics": "nvtxsesum",
    "OpenMP Event Statistics": "openmpevtsum",
}
MEMORY_TITLE_2020 = "CUDA Memory Operation Statistics"  # time or size by the title's unit
TITLE_UNITS: dict[str, str] = {
    "nanoseconds": "ns",
    "microseconds": "us",
    "milliseconds": "ms",
    "seconds": "s",
    "KiB": "KiB",
    "KB": "KiB",
    "MB": "MB",
    "B": "B",
}
_TIME_UNITS = frozenset({"ns", "us", "ms", "s"})


def title_report(line: str) -> tuple[str, str | None] | None:
    """The report and the unit of a 2020/2021 title line; ``None`` when it is not one.

    ``CUDA API Statistics (nanoseconds)`` → ``("cudaapisum", "ns")``; ``CUDA Kernel
    Statistics:`` → ``("gpukernsum", None)``; the memory title names its table:
    ``(by time)`` / ``(nanoseconds)`` → ``gpumemtimesum``, ``(by size in KiB)`` / ``(KiB)`` →
    ``gpumemsizesum`` in KiB. Read with ``str`` methods, linear on any line.
    """
    text = line.strip().removesuffix(":").rstrip()
    said = ""
    if text.endswith(")"):
        opening = text.rfind(" (")
        if opening < 0:
            return None
        text, said = text[:opening], text[opening + 2 : -1].strip()
    if not text.endswith(" Statistics"):
        return None
    words = said.split()
    # "by size in KiB" and "by time" (2021); "nanoseconds", "KiB" (2020).
    unit = TITLE_UNITS.get(words[-1]) if words else None
    if text == MEMORY_TITLE_2020:
        sized = "size" in words or (unit is not None and unit not in _TIME_UNITS)
        if sized:
            return "gpumemsizesum", unit or "KiB"
        return "gpumemtimesum", unit
    report = TITLES_2020.get(text)
    return None if report is None else (report, unit)


# Column title (lower case, unit removed) → field. Titles differ by era: "Num Calls" / "Calls" /
# "Instances" / "Count" / "Operations" all count the rows' events.
COLUMNS: dict[str, str] = {
    "time": "pct",
    "total time": "total",
    "total": "total",
    "num calls": "calls",
    "calls": "calls",
    "instances": "calls",
    "count": "calls",
    "operations": "calls",
    "avg": "avg",
    "average": "avg",
    "med": "median",
    "median": "median",
    "min": "min",
    "minimum": "min",
    "max": "max",
    "maximum": "max",
    "stddev": "std",
    "std dev": "std",
    "name": "name",
    "range": "name",
    "operation": "name",
    "style": "style",
    "category": "category",
    "gridxyz": "grid",
    "blockxyz": "block",
}
TEXT_FIELDS = frozenset({"style", "category", "grid", "block"})
# Where a numeric field goes: a Metric attribute for time reports; bytes / attrs for sizes.
TIME_TARGETS = {
    "total": "total_ns",
    "avg": "avg_ns",
    "median": "median_ns",
    "min": "min_ns",
    "max": "max_ns",
    "std": "std_ns",
}
SIZE_TARGETS = {
    "total": "bytes",
    "avg": "avg_bytes",
    "median": "median_bytes",
    "min": "min_bytes",
    "max": "max_bytes",
    "std": "std_bytes",
}
METRIC_FIELDS = frozenset({*TIME_TARGETS.values(), "bytes", "calls"})
TIME_ORDER = ("total_ns", "avg_ns", "min_ns", "max_ns", "std_ns", "median_ns")

# nsys prints decimal megabytes (4,194,304 B → 4.194 MB); 2020/2021 printed KiB.
BYTES_PER_UNIT: dict[str, int] = {
    "B": 1,
    "KB": 1000,
    "KiB": 1024,
    "MB": 1_000_000,
    "MiB": 1024**2,
    "GB": 1_000_000_000,
    "GiB": 1024**3,
}

# cuda_gpu_sum / cuda_api_gpu_sum rows say what they are in a Category column.
CATEGORY_KINDS: dict[str, MetricKind] = {
    "CUDA_KERNEL": K.KERNEL,
    "MEMORY_OPER": K.MEMORY,
    "CUDA_API": K.API,
}
DEVICE_OF: dict[MetricKind, Device] = {
    K.KERNEL: Device.GPU,
    K.MEMORY: Device.GPU,
    K.COMM: Device.GPU,
    K.API: Device.CPU,
    K.OS: Device.CPU,
    K.RANGE: Device.CPU,
}
# Older names (still printed by some 2024 builds), renamed so that series stay comparable
# across nsys versions; the printed name is kept in attrs["nsys_name"].
MEMORY_RENAMES: dict[str, str] = {
    "HtoD": "Host-to-Device",
    "DtoH": "Device-to-Host",
    "DtoD": "Device-to-Device",
    "HtoH": "Host-to-Host",
    "PtoP": "Peer-to-Peer",
}
MEMORY_OLD = re.compile(r"\b(HtoD|DtoH|DtoD|HtoH|PtoP)\b")
NCCL_KERNEL = re.compile(r"^(?:void\s+)?nccl", re.IGNORECASE)
# Without a report name, "Num Calls ... Name" tables are CUDA API or OS runtime summaries:
# their names tell which.
CUDA_API_NAME = re.compile(r"^(?:cu|nccl|nvrtc|nvjpeg)[A-Za-z]")
# NVTX ranges that are a whole iteration even without a number (numbered ones go through
# _steps.collect_steps).
UNNUMBERED_STEP = re.compile(
    r"^(?:profiled_step|profile_step|train_step|training_step|train_iter|train_iteration|"
    r"step|iteration|iter|ProfilerStep)$",
    re.IGNORECASE,
)
# 2022 console output and CSV dumps both name the report file and the report script:
# "Processing [x.sqlite] with [/opt/nvidia/.../cuda_api_sum.py]..." (see ``processing``).
_WITH = "] with ["
_SCRIPT = re.compile(r"([\w.-]+?)\.py\]")
_SCRIPT_AFTER_SEPARATOR = re.compile(r".*[/\\]([\w.-]+?)\.py\]")
ELISION = ("...", "…")  # rows an author cut out of a pasted table

# Inference for tables without a report name: (field present, calls title, size?) → report.
INFER_RULES: tuple[tuple[str | None, str | None, bool | None, str], ...] = (
    ("style", None, None, "nvtx_sum"),
    ("category", None, None, "cuda_gpu_sum"),
    ("range", None, None, "nvtx_sum"),
    (None, None, True, "cuda_gpu_mem_size_sum"),
    # 2020/2021 printed sizes without a unit in any title ("Total  Operations  Average ...
    # Operation", KiB): a memory table with no time column is never read as times.
    ("untimed operation", None, None, "gpumemsizesum"),
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
    """``"Avg (ns)"`` → ``("avg", "ns")``; ``"Time(%)"`` → ``("time", "%")``.

    The unit is the last parenthesis, closing the title: from the first ``(`` after the
    ``)`` before it. Found with ``str.find``: the pattern ``^(.*?)\\s*(?:\\(([^)]*)\\))?$``
    it replaces tried the rest of the title from each character (issue 31).
    """
    text = title.strip()
    base, unit = text, None
    if text.endswith(")"):
        close = len(text) - 1
        opening = text.find("(", text.rfind(")", 0, close) + 1)
        if opening >= 0:
            base, unit = text[:opening], text[opening + 1 : close]
    return base.strip().lower(), unit


def processing(line: str) -> tuple[str, str] | None:
    """``Processing [REPORT] with [.../SCRIPT.py]`` → ``(REPORT, SCRIPT)``; else ``None``.

    What ``^Processing \\[(.+?)\\] with \\[(?:.*[/\\\\])?([\\w.-]+?)\\.py\\]`` matched, in
    linear time: that pattern re-read the rest of the line for every ``] with [`` in it, and
    a line of them took minutes (issue 31). The report is up to the first ``] with [`` that
    a script name follows; the script's name follows the last path separator that leaves one
    (whatever the ``] with [`` taken, so the first one decides), or else directly.
    """
    if not line.startswith("Processing ["):
        return None
    at = line.find(_WITH, 13)  # the report's name is one character at least
    if at < 0:
        return None
    script = _SCRIPT_AFTER_SEPARATOR.match(line, at + len(_WITH))
    if script is not None:
        return line[12:at], script[1]
    while at >= 0:
        script = _SCRIPT.match(line, at + len(_WITH))
        if script is not None:
            return line[12:at], script[1]
        at = line.find(_WITH, at + 1)
    return None


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
    layout = Layout(
        report=report,
        titles=titles,
        numeric=[],
        name=fields.index("name"),
        api_or_os=inferred and report.kind is K.API,
    )
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


def _infer(
    parsed: list[tuple[str, str | None]], fields: list[str | None], has_size: bool
) -> ReportSpec:
    bases = {base for base, _ in parsed}
    present = bases | {f for f in fields if f}
    if "operation" in present and not bases & {"time", "total time"}:
        present.add("untimed operation")
    calls_title = next(
        (base for (base, _), f in zip(parsed, fields, strict=True) if f == "calls"), None
    )
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
