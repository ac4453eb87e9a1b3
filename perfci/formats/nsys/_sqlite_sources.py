"""The event sources of Nsight Systems and nvprof SQLite exports, as data, and their finishing.

Each builder returns a ``Source`` (an inner SELECT yielding ``key, d, b, extra`` per event) for
one table, with column names looked up in the export's ``Schema``; each ``Finish`` turns the
aggregated metrics' ``extra`` tokens into attributes (kernel short name, NCCL collective, NVTX
range style). ``nsys_sources`` and ``nvprof_sources`` list what one export holds.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from typing import Any

from perfci.core.model import Device, Metric, MetricKind
from perfci.formats.nsys._sqlite_schema import (
    CONCURRENT_KERNEL,
    DRIVER,
    KERNEL,
    MARKER,
    MEMCPY,
    MEMSET,
    NVTX,
    OSRT,
    RUNTIME,
    Schema,
    Source,
    number,
    require,
)

Finish = Callable[[list[Metric]], list[Metric]]

# CUpti_ActivityMemcpyKind, labelled as ENUM_CUDA_MEMCPY_OPER labels them (used when the export
# has no enum table, and for nvprof databases, which never have one).
MEMCPY_LABELS: dict[int, str] = {
    0: "Unknown",
    1: "Host-to-Device",
    2: "Device-to-Host",
    3: "Host-to-Array",
    4: "Array-to-Host",
    5: "Array-to-Array",
    6: "Array-to-Device",
    7: "Device-to-Array",
    8: "Device-to-Device",
    9: "Host-to-Host",
    10: "Peer-to-Peer",
    11: "Unified Host-to-Device",
    12: "Unified Device-to-Host",
    13: "Unified Device-to-Device",
}

# ENUM_NSYS_EVENT_TYPE ids, identical in every sampled schema (3.1 to 3.24); read from the enum
# table when it exists.
NVTX_EVENT_TYPES = {"NvtxPushPopRange": 59, "NvtxStartEndRange": 60, "NvtxDomainCreate": 75}
NVTX_STYLES = {59: "PushPop", 60: "StartEnd"}

# nvprof stores API calls by CUPTI callback id only; these are the common ones (cupti_runtime_cbid.h
# / cupti_driver_cbid.h). Unknown ids keep a readable placeholder rather than a guess.
RUNTIME_CBIDS: dict[int, str] = {
    10: "cudaGetLastError",
    11: "cudaPeekAtLastError",
    13: "cudaLaunch",
    17: "cudaGetDevice",
    20: "cudaMalloc",
    22: "cudaFree",
    31: "cudaMemcpy",
    41: "cudaMemcpyAsync",
    49: "cudaMemset",
    51: "cudaMemsetAsync",
    131: "cudaStreamSynchronize",
    137: "cudaEventSynchronize",
    147: "cudaStreamWaitEvent",
    165: "cudaDeviceSynchronize",
    211: "cudaLaunchKernel",
    317: "cudaStreamIsCapturing_v10000",
}
DRIVER_CBIDS: dict[int, str] = {
    17: "cuCtxSynchronize",
    121: "cuEventSynchronize",
    126: "cuStreamSynchronize",
    276: "cuMemcpyHtoD_v2",
    277: "cuMemcpyHtoDAsync_v2",
    278: "cuMemcpyDtoH_v2",
    279: "cuMemcpyDtoHAsync_v2",
    280: "cuMemcpyDtoD_v2",
    281: "cuMemcpyDtoDAsync_v2",
    305: "cuMemcpy",
    306: "cuMemcpyAsync",
    307: "cuLaunchKernel",
}

_NCCL_COLLECTIVE = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)", re.IGNORECASE)


def nsys_sources(conn: sqlite3.Connection, schema: Schema) -> list[tuple[Source, Finish]]:
    sources: list[tuple[Source, Finish]] = []
    if kernel := _kernel_source(schema):
        sources.append((kernel, _kernel_finish))
    if schema.has(MEMCPY):
        sources.append((_memcpy_source(conn, schema, MEMCPY), _plain_finish))
    if schema.has(MEMSET):
        sources.append((_memset_source(schema, MEMSET), _plain_finish))
    if schema.has(RUNTIME):
        sources.append(
            (_named_source(schema, RUNTIME, MetricKind.API, _nsys_api_name), _plain_finish)
        )
    if schema.has(NVTX):
        sources.append((_nvtx_source(conn, schema), _nvtx_finish))
    if schema.has(OSRT):
        sources.append(
            (
                _named_source(schema, OSRT, MetricKind.OS, str, _osrt_calls_only(conn, schema)),
                _plain_finish,
            )
        )
    return sources


def _kernel_source(schema: Schema) -> Source | None:
    if not schema.has(KERNEL):
        return None
    require(schema, KERNEL, ("start", "end"))
    cols = schema.columns(KERNEL)
    names = [c for c in ("demangledName", "shortName") if c in cols]
    if not names:
        raise ValueError(f"table {KERNEL} has neither demangledName nor shortName")
    joins = " ".join(f'LEFT JOIN StringIds {c} ON {c}.id = k."{c}"' for c in names)
    short = "shortName.value" if "shortName" in cols else "NULL"
    sql = (
        f"SELECT COALESCE({', '.join(f'{c}.value' for c in names)}, '<unnamed kernel>') "
        f'AS key, k."end" - k.start AS d, NULL AS b, {short} AS extra FROM {KERNEL} k '
        f"{joins}"
    )
    return Source(MetricKind.KERNEL, Device.GPU, sql)


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


def _memcpy_labels(conn: sqlite3.Connection, schema: Schema) -> dict[int, str]:
    labels = dict(MEMCPY_LABELS)
    if {"id", "label"} <= schema.columns("ENUM_CUDA_MEMCPY_OPER"):
        for ident, label in conn.execute("SELECT id, label FROM ENUM_CUDA_MEMCPY_OPER"):
            if isinstance(ident, int) and isinstance(label, str) and label:
                labels[ident] = label
    return labels


def _memcpy_source(conn: sqlite3.Connection, schema: Schema, table: str) -> Source:
    require(schema, table, ("start", "end", "copyKind"))
    labels = _memcpy_labels(conn, schema)
    size = "bytes" if "bytes" in schema.columns(table) else "NULL"

    def name(kind: Any) -> str:
        label = labels.get(kind) if isinstance(kind, int) else None
        return f"[CUDA memcpy {label or f'kind {kind}'}]"

    sql = f'SELECT copyKind AS key, "end" - start AS d, {size} AS b, NULL AS extra FROM {table}'
    return Source(MetricKind.MEMORY, Device.GPU, sql, name)


def _memset_source(schema: Schema, table: str) -> Source:
    require(schema, table, ("start", "end"))
    size = "bytes" if "bytes" in schema.columns(table) else "NULL"
    sql = f'SELECT 0 AS key, "end" - start AS d, {size} AS b, NULL AS extra FROM {table}'
    return Source(MetricKind.MEMORY, Device.GPU, sql, lambda _: "[CUDA memset]")


def _plain_finish(metrics: list[Metric]) -> list[Metric]:
    for metric in metrics:
        metric.attrs.pop("extra", None)
    return metrics


def _nsys_api_name(name: Any) -> str:
    """nsys stats's own rule: drop a ``_v`` + 4-character version suffix (``_v3020``)."""
    text = str(name)
    return text[:-6] if text[-6:-4] == "_v" else text


def _named_source(
    schema: Schema, table: str, kind: MetricKind, name: Callable[[Any], str], where: str = ""
) -> Source:
    require(schema, table, ("start", "end", "nameId"))
    sql = (
        f"SELECT COALESCE(s.value, '<unnamed>') AS key, t.\"end\" - t.start AS d, NULL AS b, "
        f"NULL AS extra FROM {table} t LEFT JOIN StringIds s ON s.id = t.nameId {where}"
    )
    return Source(kind, Device.CPU, sql, name)


def _osrt_calls_only(conn: sqlite3.Connection, schema: Schema) -> str:
    """A filter keeping OS calls and dropping the zero-length "OS runtime libraries profiling
    started/finished" marks that share the table (their own event classes)."""
    if "eventClass" not in schema.columns(OSRT) or not {"id", "name"} <= schema.columns(
        "ENUM_NSYS_EVENT_CLASS"
    ):
        return ""
    row = conn.execute(
        "SELECT id FROM ENUM_NSYS_EVENT_CLASS WHERE name = 'TRACE_PROCESS_EVENT_OS_RUNTIME'"
    ).fetchone()
    return f"WHERE t.eventClass = {int(row[0])}" if row and isinstance(row[0], int) else ""


def _event_types(conn: sqlite3.Connection, schema: Schema) -> dict[str, int]:
    types = dict(NVTX_EVENT_TYPES)
    if {"id", "name"} <= schema.columns("ENUM_NSYS_EVENT_TYPE"):
        for ident, name in conn.execute("SELECT id, name FROM ENUM_NSYS_EVENT_TYPE"):
            if name in types and isinstance(ident, int):
                types[name] = ident
    return types


def _nvtx_text(schema: Schema, alias: str) -> tuple[str, str]:
    """The expression for an NVTX row's text (inline ``text`` or ``textId``) and its join."""
    cols = schema.columns(NVTX)
    parts = [f"{alias}.text"] if "text" in cols else []
    join = ""
    if "textId" in cols:
        parts.append(f"{alias}_s.value")
        join = f"LEFT JOIN StringIds {alias}_s ON {alias}_s.id = {alias}.textId"
    return (f"COALESCE({', '.join(parts)})" if parts else "NULL"), join


def _nvtx_ranges_sql(conn: sqlite3.Connection, schema: Schema) -> str:
    """Every NVTX range as ``key`` (``Domain:text`` or ``text``), ``d`` and ``extra`` (type)."""
    require(schema, NVTX, ("start", "end", "eventType"))
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
            f" GROUP BY 1, 2) dom ON dom.id = n.domainId AND dom.pid = n.globalTid >> 24"
        )
        key = f"COALESCE(dom.name || ':', '') || {text}"
    return (
        f"SELECT COALESCE({key}, '<unnamed range>') AS key, n.\"end\" - n.start AS d, "
        f"NULL AS b, n.eventType AS extra FROM {NVTX} n {join} {domain_join} "
        f'WHERE n.eventType IN {ranges} AND n."end" > n.start'
    )


def _nvtx_source(conn: sqlite3.Connection, schema: Schema) -> Source:
    return Source(MetricKind.RANGE, Device.CPU, _nvtx_ranges_sql(conn, schema))


def _nvtx_finish(metrics: list[Metric]) -> list[Metric]:
    for metric in metrics:
        kinds = metric.attrs.pop("extra", [])
        styles = sorted(NVTX_STYLES.get(int(k), k) for k in kinds if k.isdigit())
        if styles:
            metric.attrs["style"] = "/".join(styles)
    return metrics


def nvtx_step_ranges(conn: sqlite3.Connection, schema: Schema) -> list[tuple[str, float]]:
    """``(name, duration)`` of each range whose name ends in a number: step candidates."""
    sql = _nvtx_ranges_sql(conn, schema)
    rows = conn.execute(f"SELECT key, d FROM ({sql}) WHERE key GLOB '*[0-9]'")
    return [(str(name), number(duration, "an NVTX duration")) for name, duration in rows]


def nvprof_sources(conn: sqlite3.Connection, schema: Schema) -> list[tuple[Source, Finish]]:
    sources: list[tuple[Source, Finish]] = []
    kernels = [t for t in (KERNEL, CONCURRENT_KERNEL) if schema.has(t)]
    if kernels:
        for table in kernels:
            require(schema, table, ("start", "end", "name"))
        union = " UNION ALL ".join(
            f"SELECT COALESCE(s.value, '<unnamed kernel>') AS key, k.\"end\" - k.start AS d, "
            f"NULL AS b, NULL AS extra FROM {t} k LEFT JOIN StringTable s ON s._id_ = k.name"
            for t in kernels
        )
        sources.append((Source(MetricKind.KERNEL, Device.GPU, union), _kernel_finish))
    if schema.has(MEMCPY):
        sources.append((_memcpy_source(conn, schema, MEMCPY), _plain_finish))
    if schema.has(MEMSET):
        sources.append((_memset_source(schema, MEMSET), _plain_finish))
    for table, names, prefix in (
        (RUNTIME, RUNTIME_CBIDS, "cudaRuntimeApi"),
        (DRIVER, DRIVER_CBIDS, "cudaDriverApi"),
    ):
        if schema.has(table):
            sources.append((_cbid_source(schema, table, names, prefix), _plain_finish))
    if schema.has(MARKER):
        sources.append((Source(MetricKind.RANGE, Device.CPU, marker_sql(schema)), _plain_finish))
    return sources


def _cbid_source(schema: Schema, table: str, names: dict[int, str], prefix: str) -> Source:
    require(schema, table, ("start", "end", "cbid"))

    def name(cbid: Any) -> str:
        return names.get(cbid, f"{prefix}#{cbid}") if isinstance(cbid, int) else f"{prefix}#?"

    sql = f'SELECT cbid AS key, "end" - start AS d, NULL AS b, NULL AS extra FROM {table}'
    return Source(MetricKind.API, Device.CPU, sql, name)


def marker_sql(schema: Schema) -> str:
    """NVTX ranges of an nvprof export: a start marker (flag 2) and an end marker (flag 4)
    share ``id``; the name is on the start marker."""
    require(schema, MARKER, ("flags", "timestamp", "id", "name"))
    return (
        f"SELECT COALESCE(s.value, '<unnamed range>') AS key, e.timestamp - b.timestamp AS d,"
        f" NULL AS b, NULL AS extra FROM {MARKER} b JOIN {MARKER} e ON e.id = b.id "
        f"AND (e.flags & 4) != 0 LEFT JOIN StringTable s ON s._id_ = b.name "
        f"WHERE (b.flags & 2) != 0 AND e.timestamp > b.timestamp"
    )
