"""Nsight Systems SQLite exports (``nsys export --type sqlite``).

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

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from perfci.core.errors import ParseError
from perfci.core.model import Device, Metric, MetricKind, Profile
from perfci.formats._steps import collect_steps, step_number
from perfci.formats.nsys._detectors import NSYS_SQLITE, SQLITE_MAGIC
from perfci.formats.nsys._sqlite_schema import (
    MARKER,
    NSYS_EVENT_TABLES,
    NSYS_MARKER_TABLES,
    NSYS_META_TABLES,
    NVTX,
    Schema,
    aggregate_metrics,
    number,
)
from perfci.formats.nsys._sqlite_sources import (
    marker_sql,
    nsys_sources,
    nvprof_sources,
    nvtx_step_ranges,
)

NAME = NSYS_SQLITE.name
DESCRIPTION = NSYS_SQLITE.description
sniff = NSYS_SQLITE.sniff


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """The one profile of an export: kernels, memory, API calls, NVTX ranges, steps, OS calls."""
    source = str(path)
    _check_header(path)
    try:
        with _connect(path) as conn:
            schema = Schema.read(conn)
            reader = _reader(schema)
            if reader is None:
                raise _error(
                    path,
                    "SQLite database without Nsight Systems tables: expected "
                    "StringIds with CUPTI_ACTIVITY_KIND_*, NVTX_EVENTS or OSRT_API "
                    "tables (nsys export --type sqlite), or an nvprof StringTable",
                )
            profile = reader(conn, schema)
    except sqlite3.Error as exc:
        raise _error(
            path,
            f"corrupt or unreadable SQLite database ({exc}); re-export it "
            "with nsys export --type sqlite",
        ) from exc
    except ValueError as exc:  # a table without the columns every schema version has
        raise _error(path, f"unexpected export layout: {exc}") from exc
    profile.source = source
    if not profile.metrics:
        profile.warnings.append("the export holds no CUDA, NVTX or OS runtime events")
    return [profile]


def _reader(schema: Schema) -> Callable[[sqlite3.Connection, Schema], Profile] | None:
    """The reader for this schema: nsys (``StringIds``) or nvprof (``StringTable``), else none."""
    if schema.has("StringIds") and schema.any_of(NSYS_MARKER_TABLES):
        return _read_nsys
    if schema.has("StringTable") and any(
        t.startswith("CUPTI_ACTIVITY_KIND_") for t in schema.tables
    ):
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
        raise _error(
            path,
            "not an SQLite database: expected the 'SQLite format 3' header "
            "of an nsys export (nsys export --type sqlite)",
        )


@contextmanager
def _connect(path: Path) -> Iterator[sqlite3.Connection]:
    # immutable=1: no locks and no journal lookups, so a read-only folder or share works and
    # nothing is ever written beside the file.
    uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
    with closing(sqlite3.connect(uri, uri=True)) as conn:
        yield conn


# --------------------------------------------------------------------------- nsys exports


def _read_nsys(conn: sqlite3.Connection, schema: Schema) -> Profile:
    """An nsys export: every event source, numbered NVTX ranges as steps, the metadata."""
    metrics, warnings = _gather(conn, nsys_sources(conn, schema))
    steps: list[Metric] = []
    if schema.has(NVTX):
        steps = collect_steps(nvtx_step_ranges(conn, schema), device=Device.CPU)
    return _profile(
        "nsys",
        steps,
        metrics,
        _nsys_metadata(conn, schema),
        warnings,
        ranges_are_steps=schema.has(NVTX),
    )


def _gather(conn: sqlite3.Connection, sources: Iterable[Any]) -> tuple[list[Metric], list[str]]:
    """Every source's metrics, aggregated in SQL, and the warnings met on the way."""
    warnings: list[str] = []
    metrics: list[Metric] = []
    for source, finish in sources:
        metrics += finish(aggregate_metrics(conn, source, warnings))
    return metrics, warnings


def _profile(
    label: str,
    steps: list[Metric],
    metrics: list[Metric],
    metadata: dict[str, Any],
    warnings: list[str],
    *,
    ranges_are_steps: bool,
) -> Profile:
    """The profile; with ``ranges_are_steps``, numbered ranges are steps, not ranges too."""
    if ranges_are_steps:
        metrics = [
            m for m in metrics if m.kind is not MetricKind.RANGE or step_number(m.name) is None
        ]
    return Profile(
        label=label,
        format=NAME,
        source="",
        metrics=steps + metrics,
        steps=max((m.calls or 0 for m in steps), default=None) or None,
        metadata=metadata,
        warnings=warnings,
    )


def _nsys_metadata(conn: sqlite3.Connection, schema: Schema) -> dict[str, Any]:
    meta: dict[str, Any] = {"tables": sorted(t for t in NSYS_EVENT_TABLES if schema.has(t))}
    for table in NSYS_META_TABLES:
        if {"name", "value"} <= schema.columns(table):
            values = dict(conn.execute(f"SELECT name, value FROM {table}").fetchall())
            for key, field_name in (
                ("nsys_version", "EXPORT_PRODUCT_VERSION"),
                ("schema_version", "EXPORT_SCHEMA_VERSION"),
            ):
                if values.get(field_name) is not None:
                    meta[key] = str(values[field_name])
            break
    if "name" in schema.columns("TARGET_INFO_GPU"):
        gpus = conn.execute("SELECT name FROM TARGET_INFO_GPU ORDER BY rowid").fetchall()
        meta["gpus"] = [str(name) for (name,) in gpus if name is not None]
    return meta


# --------------------------------------------------------------------------- nvprof exports


def _read_nvprof(conn: sqlite3.Connection, schema: Schema) -> Profile:
    """An nvprof export: kernels, memory, API calls by callback id, marker ranges, steps."""
    metrics, warnings = _gather(conn, nvprof_sources(conn, schema))
    steps: list[Metric] = []
    if schema.has(MARKER):
        markers = marker_sql(schema)
        rows = conn.execute(f"SELECT key, d FROM ({markers}) WHERE key GLOB '*[0-9]'")
        steps = collect_steps(
            ((str(k), number(d, "a marker duration")) for k, d in rows), device=Device.CPU
        )
    return _profile(
        "nvprof",
        steps,
        metrics,
        {"producer": "nvprof"},
        warnings,
        ranges_are_steps=schema.has(MARKER),
    )
