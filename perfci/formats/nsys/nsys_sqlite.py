"""Nsight Systems SQLite exports (``nsys export --type sqlite``; FORMATS.md d3).

Also reads the older nvprof ``--export-profile`` databases (``.nvvp``), which are SQLite files
with ``CUPTI_ACTIVITY_KIND_*`` tables and a ``StringTable``; see "nvprof exports" below.

Detection: ``sniff`` accepts any SQLite database (the ``SQLite format 3\\0`` header). The head
cannot see table names reliably (the schema of an nsys export spans many pages), and no other
registered format is SQLite, so ``parse`` does the real check and answers a database without
Nsight Systems or CUPTI tables with ``ParseError("SQLite database without Nsight Systems
tables ...")``. A gzipped database is refused (SQLite cannot read it in place).

The file is opened read-only and immutable (``file:...?mode=ro&immutable=1``): no lock, no
journal, nothing written beside it, and it works in read-only folders. A database in WAL mode
with a pending ``-wal`` file would be read without the WAL; nsys never writes one.

What becomes which metric (times ns, sizes bytes; every table optional, columns looked up by
name because they change across nsys versions):

=================================== ======== ======= ============================================
table                               kind     device  name
=================================== ======== ======= ============================================
CUPTI_ACTIVITY_KIND_KERNEL          kernel   gpu     demangled name (``shortName`` when absent),
                                                     as ``nsys stats cuda_gpu_kern_sum`` prints it;
                                                     NCCL kernels (``nccl...``) become ``comm``
CUPTI_ACTIVITY_KIND_MEMCPY          memory   gpu     ``[CUDA memcpy Host-to-Device]``: the label of
                                                     ``ENUM_CUDA_MEMCPY_OPER`` (or the same built-in
                                                     labels), as nsys 2023+ prints it; ``bytes``
CUPTI_ACTIVITY_KIND_MEMSET          memory   gpu     ``[CUDA memset]``; ``bytes``
CUPTI_ACTIVITY_KIND_RUNTIME         api      cpu     runtime/driver call with nsys's own clean-up:
                                                     a 4-digit version suffix is dropped
                                                     (``cudaMalloc_v3020`` -> ``cudaMalloc``,
                                                     ``cudaStreamIsCapturing_v10000`` stays)
NVTX_EVENTS (push-pop, start-end)   range    cpu     range text; ``Domain:text`` outside the
                                                     default domain; numbered steps -> ``step``
OSRT_API                            os       cpu     OS runtime call (the zero-length "profiling
                                                     started/finished" marks are left out)
=================================== ======== ======= ============================================

Counts, totals, min and max are aggregated in SQL (``GROUP BY``); median and sample standard
deviation come from the per-event durations when a table has at most ``DETAIL_ROW_LIMIT``
events (else they are left out and the profile says so). NVTX ranges whose names are numbered
steps (``train_step 3``, ``iteration_12``) become ``step`` metrics with per-step samples
(``_steps.collect_steps``) instead of range metrics. NVTX ranges are CPU-thread times, hence
``device=cpu`` for ranges and steps. ``CUDA_GPU_MEMORY_USAGE_EVENTS`` (allocations, no
durations) and ``CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`` (already covered by the API call that
waits) are not read.

nvprof exports: kernels from ``CUPTI_ACTIVITY_KIND_KERNEL`` / ``..._CONCURRENT_KERNEL`` (``name``
-> ``StringTable._id_``; nvprof stores it mangled and it is kept as stored), memcpy / memset as
above, ``CUPTI_ACTIVITY_KIND_RUNTIME`` / ``..._DRIVER`` by callback id (nvprof stores no API
names: well-known ids are named, others read ``cudaRuntimeApi#<cbid>``), NVTX ranges from
``CUPTI_ACTIVITY_KIND_MARKER`` start/end pairs.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perfci.errors import ParseError
from perfci.formats._steps import collect_steps, step_number
from perfci.model import Device, Metric, MetricKind, Profile

if TYPE_CHECKING:
    from perfci.formats.protocol import Head

NAME = "nsys_sqlite"
DESCRIPTION = "Nsight Systems SQLite export (nsys export --type sqlite) and nvprof .nvvp databases"

SQLITE_MAGIC = b"SQLite format 3\x00"

# Fetching every event's duration costs about a microsecond per row; above this many rows in one
# table the median / std are left out rather than making a large export slow to ingest.
DETAIL_ROW_LIMIT = 2_000_000

KERNEL, MEMCPY, MEMSET = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                          "CUPTI_ACTIVITY_KIND_MEMSET")
RUNTIME, DRIVER = "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"
CONCURRENT_KERNEL, MARKER = "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL", "CUPTI_ACTIVITY_KIND_MARKER"
NVTX, OSRT = "NVTX_EVENTS", "OSRT_API"
NSYS_EVENT_TABLES = (KERNEL, MEMCPY, MEMSET, RUNTIME, NVTX, OSRT)
# Newer exports name their metadata table META_DATA_EXPORT, those before schema 3.4
# EXPORT_META_DATA; either (or an event table) beside StringIds marks an nsys export.
NSYS_META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")
NSYS_MARKER_TABLES = (*NSYS_EVENT_TABLES, *NSYS_META_TABLES)

# CUpti_ActivityMemcpyKind, labelled as ENUM_CUDA_MEMCPY_OPER labels them (used when the export
# has no enum table, and for nvprof databases, which never have one).
MEMCPY_LABELS: dict[int, str] = {
    0: "Unknown", 1: "Host-to-Device", 2: "Device-to-Host", 3: "Host-to-Array",
    4: "Array-to-Host", 5: "Array-to-Array", 6: "Array-to-Device", 7: "Device-to-Array",
    8: "Device-to-Device", 9: "Host-to-Host", 10: "Peer-to-Peer",
    11: "Unified Host-to-Device", 12: "Unified Device-to-Host", 13: "Unified Device-to-Device",
}

# ENUM_NSYS_EVENT_TYPE ids, identical in every sampled schema (3.1 to 3.24); read from the enum
# table when it exists.
NVTX_EVENT_TYPES = {"NvtxPushPopRange": 59, "NvtxStartEndRange": 60, "NvtxDomainCreate": 75}
NVTX_STYLES = {59: "PushPop", 60: "StartEnd"}

# nvprof stores API calls by CUPTI callback id only; these are the common ones (cupti_runtime_cbid.h
# / cupti_driver_cbid.h). Unknown ids keep a readable placeholder rather than a guess.
RUNTIME_CBIDS: dict[int, str] = {
    10: "cudaGetLastError", 11: "cudaPeekAtLastError", 13: "cudaLaunch", 17: "cudaGetDevice",
    20: "cudaMalloc", 22: "cudaFree", 31: "cudaMemcpy", 41: "cudaMemcpyAsync", 49: "cudaMemset",
    51: "cudaMemsetAsync", 131: "cudaStreamSynchronize", 137: "cudaEventSynchronize",
    147: "cudaStreamWaitEvent", 165: "cudaDeviceSynchronize", 211: "cudaLaunchKernel",
    317: "cudaStreamIsCapturing_v10000",
}
DRIVER_CBIDS: dict[int, str] = {
    17: "cuCtxSynchronize", 121: "cuEventSynchronize", 126: "cuStreamSynchronize",
    276: "cuMemcpyHtoD_v2", 277: "cuMemcpyHtoDAsync_v2", 278: "cuMemcpyDtoH_v2",
    279: "cuMemcpyDtoHAsync_v2", 280: "cuMemcpyDtoD_v2", 281: "cuMemcpyDtoDAsync_v2",
    305: "cuMemcpy", 306: "cuMemcpyAsync", 307: "cuLaunchKernel",
}

_NCCL_COLLECTIVE = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)", re.IGNORECASE)


def sniff(head: Head) -> bool:
    """Any uncompressed SQLite database; ``parse`` checks for the Nsight Systems tables."""
    return not head.gzipped and head.raw.startswith(SQLITE_MAGIC)


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """The one profile of an export: kernels, memory, API calls, NVTX ranges, steps, OS calls."""
    source = str(path)
    _check_header(path)
    try:
        with _connect(path) as conn:
            schema = _Schema.read(conn)
            reader = _reader(schema)
            if reader is None:
                raise _error(path, "SQLite database without Nsight Systems tables: expected "
                             "StringIds with CUPTI_ACTIVITY_KIND_*, NVTX_EVENTS or OSRT_API "
                             "tables (nsys export --type sqlite), or an nvprof StringTable")
            profile = reader(conn, schema)
    except sqlite3.Error as exc:
        raise _error(path, f"corrupt or unreadable SQLite database ({exc}); re-export it "
                     "with nsys export --type sqlite") from exc
    except ValueError as exc:  # a table without the columns every schema version has
        raise _error(path, f"unexpected export layout: {exc}") from exc
    profile.source = source
    if not profile.metrics:
        profile.warnings.append("the export holds no CUDA, NVTX or OS runtime events")
    return [profile]


def _reader(schema: _Schema) -> Callable[[sqlite3.Connection, _Schema], Profile] | None:
    """The reader for this schema: nsys (``StringIds``) or nvprof (``StringTable``), else none."""
    if schema.has("StringIds") and schema.any_of(NSYS_MARKER_TABLES):
        return _read_nsys
    if schema.has("StringTable") and any(t.startswith("CUPTI_ACTIVITY_KIND_")
                                         for t in schema.tables):
        return _read_nvprof
    return None


def _error(path: Path, message: str) -> ParseError:
    return ParseError(message, source=str(path), format=NAME)


def _check_header(path: Path) -> None:
    """A clear error for files that are not SQLite at all (or are gzipped) before SQLite's own."""
    try:
        with path.open("rb") as handle:
            magic = handle.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise _error(path, f"cannot read file: {exc.strerror}") from exc
    if magic[:2] == b"\x1f\x8b":
        raise _error(path, "gzip-compressed SQLite database: decompress it first (gunzip)")
    if magic != SQLITE_MAGIC:
        raise _error(path, "not an SQLite database: expected the 'SQLite format 3' header "
                     "of an nsys export (nsys export --type sqlite)")


@contextmanager
def _connect(path: Path) -> Iterator[sqlite3.Connection]:
    # immutable=1: no locks and no journal lookups, so a read-only folder or share works and
    # nothing is ever written beside the file.
    uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
    with closing(sqlite3.connect(uri, uri=True)) as conn:
        yield conn


@dataclass(slots=True)
class _Schema:
    """Table names and (lazily) their columns; only real tables, never views."""

    tables: set[str]
    conn: sqlite3.Connection
    _columns: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def read(cls, conn: sqlite3.Connection) -> _Schema:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        return cls(tables={str(name) for (name,) in rows}, conn=conn)

    def has(self, table: str) -> bool:
        return table in self.tables

    def any_of(self, tables: tuple[str, ...]) -> bool:
        return any(table in self.tables for table in tables)

    def columns(self, table: str) -> set[str]:
        if table not in self.tables:
            return set()
        if table not in self._columns:
            rows = self.conn.execute(f'PRAGMA table_info("{table}")').fetchall()
            self._columns[table] = {str(row[1]) for row in rows}
        return self._columns[table]


# --------------------------------------------------------------------------- aggregation


@dataclass(frozen=True, slots=True)
class _Source:
    """One event source as data: an inner SELECT yielding ``key, d, b, extra`` per event.

    ``key`` groups events, ``d`` is the duration in ns, ``b`` bytes (or NULL), ``extra`` a token
    whose smallest and largest values are kept per group (kernel short name, NVTX event type:
    both styles show when a name is used as push-pop and as start-end); ``name`` turns a key into
    the metric name (several keys may share one name: they are merged).
    """

    kind: MetricKind
    device: Device
    sql: str
    name: Callable[[Any], str] = str


@dataclass(slots=True)
class _Group:
    calls: int = 0
    total: float = 0.0
    low: float = float("inf")
    high: float = float("-inf")
    bytes: float | None = None
    extras: set[str] = field(default_factory=set)
    durations: list[float] = field(default_factory=list)

    def add(self, calls: int, total: float, low: float, high: float, size: float | None,
            extras: list[str]) -> None:
        self.calls += calls
        self.total += total
        self.low, self.high = min(self.low, low), max(self.high, high)
        if size is not None:
            self.bytes = (self.bytes or 0.0) + size
        self.extras.update(extras)


def _number(value: Any, what: str) -> float:
    """A numeric cell; a text or blob where a number belongs means a damaged table."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} is {value!r}, expected a number")
    return float(value)


def _aggregate(conn: sqlite3.Connection, source: _Source,
               warnings: list[str]) -> dict[str, _Group]:
    """Per-name groups of ``source``: SQL does the counting, Python only merges names."""
    groups: dict[str, _Group] = {}
    names: dict[Any, str] = {}
    # MIN/MAX of ``extra`` rather than GROUP_CONCAT: no separator can clash with a name.
    query = (f"SELECT key, COUNT(*), SUM(d), MIN(d), MAX(d), SUM(b), MIN(extra), MAX(extra)"
             f" FROM ({source.sql}) WHERE d IS NOT NULL GROUP BY key")
    for key, calls, total, low, high, size, *extras in conn.execute(query):
        name = names.setdefault(key, source.name(key))
        groups.setdefault(name, _Group()).add(
            int(calls), _number(total, "a duration sum"), _number(low, "a duration"),
            _number(high, "a duration"), None if size is None else _number(size, "a size"),
            [str(extra) for extra in extras if extra is not None])
    rows = sum(group.calls for group in groups.values())
    if rows > DETAIL_ROW_LIMIT:
        warnings.append(f"{rows} {source.kind.value} events: median and std left out "
                        f"(more than {DETAIL_ROW_LIMIT})")
        return groups
    for key, duration in conn.execute(f"SELECT key, d FROM ({source.sql}) WHERE d IS NOT NULL"):
        known = names.get(key)
        if known is None:  # only a damaged database changes between two reads of a table
            continue
        groups[known].durations.append(_number(duration, "a duration"))
    return groups


def _metric(source: _Source, name: str, group: _Group) -> Metric:
    durations = np.asarray(group.durations, dtype=float)
    complete = len(durations) == group.calls
    return Metric(
        kind=source.kind, name=name, device=source.device, calls=group.calls,
        total_ns=group.total, avg_ns=group.total / group.calls, min_ns=group.low,
        max_ns=group.high, bytes=group.bytes,
        median_ns=float(np.median(durations)) if complete else None,
        std_ns=float(np.std(durations, ddof=1)) if complete and group.calls > 1 else None,
    )


def _metrics(conn: sqlite3.Connection, source: _Source, warnings: list[str]) -> list[Metric]:
    groups = _aggregate(conn, source, warnings)
    metrics = []
    for name, group in groups.items():
        metric = _metric(source, name, group)
        if group.extras:
            metric.attrs["extra"] = sorted(group.extras)
        metrics.append(metric)
    return metrics


# --------------------------------------------------------------------------- nsys exports


def _read_nsys(conn: sqlite3.Connection, schema: _Schema) -> Profile:
    warnings: list[str] = []
    metrics: list[Metric] = []
    for source, finish in _nsys_sources(conn, schema):
        metrics += finish(_metrics(conn, source, warnings))
    steps: list[Metric] = []
    if schema.has(NVTX):
        steps = collect_steps(_nvtx_step_ranges(conn, schema), device=Device.CPU)
        metrics = [m for m in metrics if m.kind is not MetricKind.RANGE
                   or step_number(m.name) is None]
    metadata = _nsys_metadata(conn, schema)
    return Profile(label="nsys", format=NAME, source="", metrics=steps + metrics,
                   steps=max((m.calls or 0 for m in steps), default=None) or None,
                   metadata=metadata, warnings=warnings)


_Finish = Callable[[list[Metric]], list[Metric]]


def _nsys_sources(conn: sqlite3.Connection, schema: _Schema) -> list[tuple[_Source, _Finish]]:
    sources: list[tuple[_Source, _Finish]] = []
    if kernel := _kernel_source(schema):
        sources.append((kernel, _kernel_finish))
    if schema.has(MEMCPY):
        sources.append((_memcpy_source(conn, schema, MEMCPY), _plain_finish))
    if schema.has(MEMSET):
        sources.append((_memset_source(schema, MEMSET), _plain_finish))
    if schema.has(RUNTIME):
        sources.append((_named_source(schema, RUNTIME, MetricKind.API, _nsys_api_name),
                        _plain_finish))
    if schema.has(NVTX):
        sources.append((_nvtx_source(conn, schema), _nvtx_finish))
    if schema.has(OSRT):
        sources.append((_named_source(schema, OSRT, MetricKind.OS, str,
                                      _osrt_calls_only(conn, schema)), _plain_finish))
    return sources


def _require(schema: _Schema, table: str, columns: tuple[str, ...]) -> None:
    missing = [c for c in columns if c not in schema.columns(table)]
    if missing:
        raise ValueError(f"table {table} lacks column(s) {', '.join(missing)}")


def _kernel_source(schema: _Schema) -> _Source | None:
    if not schema.has(KERNEL):
        return None
    _require(schema, KERNEL, ("start", "end"))
    cols = schema.columns(KERNEL)
    names = [c for c in ("demangledName", "shortName") if c in cols]
    if not names:
        raise ValueError(f"table {KERNEL} has neither demangledName nor shortName")
    joins = " ".join(f'LEFT JOIN StringIds {c} ON {c}.id = k."{c}"' for c in names)
    short = "shortName.value" if "shortName" in cols else "NULL"
    sql = (f"SELECT COALESCE({', '.join(f'{c}.value' for c in names)}, '<unnamed kernel>') "
           f"AS key, k.\"end\" - k.start AS d, NULL AS b, {short} AS extra FROM {KERNEL} k "
           f"{joins}")
    return _Source(MetricKind.KERNEL, Device.GPU, sql)


def _kernel_finish(metrics: list[Metric]) -> list[Metric]:
    """Keep the short name; NCCL kernels are collectives, not compute."""
    for metric in metrics:
        short = metric.attrs.pop("extra", None)
        if short:
            metric.attrs["short_name"] = short[0]
        match = _NCCL_COLLECTIVE.match(short[0] if short else metric.name)
        if match or metric.name.lower().startswith("nccl"):
            metric.kind = MetricKind.COMM
            if match:
                metric.attrs["collective"] = match.group(1)
    return metrics


def _memcpy_labels(conn: sqlite3.Connection, schema: _Schema) -> dict[int, str]:
    labels = dict(MEMCPY_LABELS)
    if {"id", "label"} <= schema.columns("ENUM_CUDA_MEMCPY_OPER"):
        for ident, label in conn.execute("SELECT id, label FROM ENUM_CUDA_MEMCPY_OPER"):
            if isinstance(ident, int) and isinstance(label, str) and label:
                labels[ident] = label
    return labels


def _memcpy_source(conn: sqlite3.Connection, schema: _Schema, table: str) -> _Source:
    _require(schema, table, ("start", "end", "copyKind"))
    labels = _memcpy_labels(conn, schema)
    size = "bytes" if "bytes" in schema.columns(table) else "NULL"

    def name(kind: Any) -> str:
        label = labels.get(kind) if isinstance(kind, int) else None
        return f"[CUDA memcpy {label or f'kind {kind}'}]"

    sql = (f'SELECT copyKind AS key, "end" - start AS d, {size} AS b, NULL AS extra '
           f"FROM {table}")
    return _Source(MetricKind.MEMORY, Device.GPU, sql, name)


def _memset_source(schema: _Schema, table: str) -> _Source:
    _require(schema, table, ("start", "end"))
    size = "bytes" if "bytes" in schema.columns(table) else "NULL"
    sql = f'SELECT 0 AS key, "end" - start AS d, {size} AS b, NULL AS extra FROM {table}'
    return _Source(MetricKind.MEMORY, Device.GPU, sql, lambda _: "[CUDA memset]")


def _plain_finish(metrics: list[Metric]) -> list[Metric]:
    for metric in metrics:
        metric.attrs.pop("extra", None)
    return metrics


def _nsys_api_name(name: Any) -> str:
    """nsys stats's own rule: drop a ``_v`` + 4-character version suffix (``_v3020``)."""
    text = str(name)
    return text[:-6] if text[-6:-4] == "_v" else text


def _named_source(schema: _Schema, table: str, kind: MetricKind,
                  name: Callable[[Any], str], where: str = "") -> _Source:
    _require(schema, table, ("start", "end", "nameId"))
    sql = (f"SELECT COALESCE(s.value, '<unnamed>') AS key, t.\"end\" - t.start AS d, NULL AS b, "
           f"NULL AS extra FROM {table} t LEFT JOIN StringIds s ON s.id = t.nameId {where}")
    return _Source(kind, Device.CPU, sql, name)


def _osrt_calls_only(conn: sqlite3.Connection, schema: _Schema) -> str:
    """A filter keeping OS calls and dropping the zero-length "OS runtime libraries profiling
    started/finished" marks that share the table (their own event classes)."""
    if ("eventClass" not in schema.columns(OSRT)
            or not {"id", "name"} <= schema.columns("ENUM_NSYS_EVENT_CLASS")):
        return ""
    row = conn.execute("SELECT id FROM ENUM_NSYS_EVENT_CLASS "
                       "WHERE name = 'TRACE_PROCESS_EVENT_OS_RUNTIME'").fetchone()
    return f"WHERE t.eventClass = {int(row[0])}" if row and isinstance(row[0], int) else ""


def _event_types(conn: sqlite3.Connection, schema: _Schema) -> dict[str, int]:
    types = dict(NVTX_EVENT_TYPES)
    if {"id", "name"} <= schema.columns("ENUM_NSYS_EVENT_TYPE"):
        for ident, name in conn.execute("SELECT id, name FROM ENUM_NSYS_EVENT_TYPE"):
            if name in types and isinstance(ident, int):
                types[name] = ident
    return types


def _nvtx_text(schema: _Schema, alias: str) -> tuple[str, str]:
    """The expression for an NVTX row's text (inline ``text`` or ``textId``) and its join."""
    cols = schema.columns(NVTX)
    parts = [f"{alias}.text"] if "text" in cols else []
    join = ""
    if "textId" in cols:
        parts.append(f"{alias}_s.value")
        join = f"LEFT JOIN StringIds {alias}_s ON {alias}_s.id = {alias}.textId"
    return (f"COALESCE({', '.join(parts)})" if parts else "NULL"), join


def _nvtx_ranges_sql(conn: sqlite3.Connection, schema: _Schema) -> str:
    """Every NVTX range as ``key`` (``Domain:text`` or ``text``), ``d`` and ``extra`` (type)."""
    _require(schema, NVTX, ("start", "end", "eventType"))
    types = _event_types(conn, schema)
    ranges = (types["NvtxPushPopRange"], types["NvtxStartEndRange"])
    text, join = _nvtx_text(schema, "n")
    key, domain_join = text, ""
    if {"domainId", "globalTid"} <= schema.columns(NVTX):
        # Domain ids are per process, so the domain's name is looked up within the same pid.
        dtext, djoin = _nvtx_text(schema, "dc")
        domain_join = (
            f"LEFT JOIN (SELECT dc.domainId AS id, dc.globalTid >> 24 AS pid, MIN({dtext}) AS name"
            f" FROM {NVTX} dc {djoin} WHERE dc.eventType = {types['NvtxDomainCreate']}"
            f" GROUP BY 1, 2) dom ON dom.id = n.domainId AND dom.pid = n.globalTid >> 24")
        key = f"COALESCE(dom.name || ':', '') || {text}"
    return (f"SELECT COALESCE({key}, '<unnamed range>') AS key, n.\"end\" - n.start AS d, "
            f"NULL AS b, n.eventType AS extra FROM {NVTX} n {join} {domain_join} "
            f"WHERE n.eventType IN {ranges} AND n.\"end\" > n.start")


def _nvtx_source(conn: sqlite3.Connection, schema: _Schema) -> _Source:
    return _Source(MetricKind.RANGE, Device.CPU, _nvtx_ranges_sql(conn, schema))


def _nvtx_finish(metrics: list[Metric]) -> list[Metric]:
    for metric in metrics:
        kinds = metric.attrs.pop("extra", [])
        styles = sorted(NVTX_STYLES.get(int(k), k) for k in kinds if k.isdigit())
        if styles:
            metric.attrs["style"] = "/".join(styles)
    return metrics


def _nvtx_step_ranges(conn: sqlite3.Connection, schema: _Schema) -> list[tuple[str, float]]:
    """``(name, duration)`` of each range whose name ends in a number: step candidates."""
    sql = _nvtx_ranges_sql(conn, schema)
    rows = conn.execute(f"SELECT key, d FROM ({sql}) WHERE key GLOB '*[0-9]'")
    return [(str(name), _number(duration, "an NVTX duration")) for name, duration in rows]


def _nsys_metadata(conn: sqlite3.Connection, schema: _Schema) -> dict[str, Any]:
    meta: dict[str, Any] = {"tables": sorted(t for t in NSYS_EVENT_TABLES if schema.has(t))}
    for table in NSYS_META_TABLES:
        if {"name", "value"} <= schema.columns(table):
            values = dict(conn.execute(f"SELECT name, value FROM {table}").fetchall())
            for key, field_name in (("nsys_version", "EXPORT_PRODUCT_VERSION"),
                                    ("schema_version", "EXPORT_SCHEMA_VERSION")):
                if values.get(field_name) is not None:
                    meta[key] = str(values[field_name])
            break
    if "name" in schema.columns("TARGET_INFO_GPU"):
        gpus = conn.execute("SELECT name FROM TARGET_INFO_GPU ORDER BY rowid").fetchall()
        meta["gpus"] = [str(name) for (name,) in gpus if name is not None]
    return meta


# --------------------------------------------------------------------------- nvprof exports


def _read_nvprof(conn: sqlite3.Connection, schema: _Schema) -> Profile:
    warnings: list[str] = []
    metrics: list[Metric] = []
    for source, finish in _nvprof_sources(conn, schema):
        metrics += finish(_metrics(conn, source, warnings))
    steps: list[Metric] = []
    if schema.has(MARKER):
        marker_sql = _marker_sql(schema)
        rows = conn.execute(f"SELECT key, d FROM ({marker_sql}) WHERE key GLOB '*[0-9]'")
        steps = collect_steps(((str(k), _number(d, "a marker duration")) for k, d in rows),
                              device=Device.CPU)
        metrics = [m for m in metrics if m.kind is not MetricKind.RANGE
                   or step_number(m.name) is None]
    return Profile(label="nvprof", format=NAME, source="", metrics=steps + metrics,
                   steps=max((m.calls or 0 for m in steps), default=None) or None,
                   metadata={"producer": "nvprof"}, warnings=warnings)


def _nvprof_sources(conn: sqlite3.Connection, schema: _Schema) -> list[tuple[_Source, _Finish]]:
    sources: list[tuple[_Source, _Finish]] = []
    kernels = [t for t in (KERNEL, CONCURRENT_KERNEL) if schema.has(t)]
    if kernels:
        for table in kernels:
            _require(schema, table, ("start", "end", "name"))
        union = " UNION ALL ".join(
            f"SELECT COALESCE(s.value, '<unnamed kernel>') AS key, k.\"end\" - k.start AS d, "
            f"NULL AS b, NULL AS extra FROM {t} k LEFT JOIN StringTable s ON s._id_ = k.name"
            for t in kernels)
        sources.append((_Source(MetricKind.KERNEL, Device.GPU, union), _kernel_finish))
    if schema.has(MEMCPY):
        sources.append((_memcpy_source(conn, schema, MEMCPY), _plain_finish))
    if schema.has(MEMSET):
        sources.append((_memset_source(schema, MEMSET), _plain_finish))
    for table, names, prefix in ((RUNTIME, RUNTIME_CBIDS, "cudaRuntimeApi"),
                                 (DRIVER, DRIVER_CBIDS, "cudaDriverApi")):
        if schema.has(table):
            sources.append((_cbid_source(schema, table, names, prefix), _plain_finish))
    if schema.has(MARKER):
        sources.append((_Source(MetricKind.RANGE, Device.CPU, _marker_sql(schema)),
                        _plain_finish))
    return sources


def _cbid_source(schema: _Schema, table: str, names: dict[int, str], prefix: str) -> _Source:
    _require(schema, table, ("start", "end", "cbid"))

    def name(cbid: Any) -> str:
        return names.get(cbid, f"{prefix}#{cbid}") if isinstance(cbid, int) else f"{prefix}#?"

    sql = f'SELECT cbid AS key, "end" - start AS d, NULL AS b, NULL AS extra FROM {table}'
    return _Source(MetricKind.API, Device.CPU, sql, name)


def _marker_sql(schema: _Schema) -> str:
    """NVTX ranges of an nvprof export: a start marker (flag 2) and an end marker (flag 4)
    share ``id``; the name is on the start marker."""
    _require(schema, MARKER, ("flags", "timestamp", "id", "name"))
    return (f"SELECT COALESCE(s.value, '<unnamed range>') AS key, e.timestamp - b.timestamp AS d,"
            f" NULL AS b, NULL AS extra FROM {MARKER} b JOIN {MARKER} e ON e.id = b.id "
            f"AND (e.flags & 4) != 0 LEFT JOIN StringTable s ON s._id_ = b.name "
            f"WHERE (b.flags & 2) != 0 AND e.timestamp > b.timestamp")
