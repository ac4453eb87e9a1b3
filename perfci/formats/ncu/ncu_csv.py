"""Nsight Compute ``ncu --csv`` output: the details page (long) and the raw page (wide).

What becomes which metric:

* Every kernel name becomes ONE ``kernel`` metric per process: its launches are aggregated
  (``calls`` = launches, ``samples_ns`` = per-launch ``gpu__time_duration.sum`` in launch order,
  ``total_ns``/``avg_ns``/``min_ns``/``max_ns``/``median_ns``/``std_ns`` from them). Launch IDs
  are not series identities: they shift whenever a filter or an extra kernel changes what ncu
  profiled, while the kernel name stays. The duration comes from ``gpu__time_duration.sum`` or,
  in a section-based details page, the Speed Of Light ``Duration`` (the same metric).
* Every other numeric metric of a kernel becomes a ``counter`` with ``scope`` = the kernel name
  and ``name`` = the metric as ncu names it (details: ``Metric Name``, e.g. ``Achieved
  Occupancy``; raw: the metric id, e.g. ``sm__throughput.avg.pct_of_peak_sustained_elapsed``);
  a name two sections share (``Memory Throughput`` is a % in Speed Of Light and a byte rate in
  Memory Workload Analysis) is qualified as ``<section>: <name>``. Units become canonical
  (``_units``): a time counter keeps its per-launch values in ``samples_ns``, any other its
  mean over launches in ``value`` and the per-launch values in ``samples``. ``n/a`` and
  non-numeric values (``CachePreferNone``) are left out.
* The launch configuration (``Block Size``/``Grid Size`` columns or ``launch__block_size`` /
  ``launch__grid_size`` metrics), device, context, stream, CC and NVTX columns go to the kernel
  metric's ``attrs`` (one value, or the distinct values when launches differ), with the ID of
  its first launch.

Each process (``Process ID``; ncu numbers launches per process) is its own profile, labelled by
its process name, ``#2``... when names repeat: the pid changes with every run, and a profile's
label is part of its metrics' identity when a file holds several.

Layout: any application output, ``==PROF==`` / ``==WARNING==`` lines before, between and after
the CSV lines are skipped (only whole, quote-balanced lines starting with ``"`` are CSV).
A header row (``"ID",…,"Kernel Name",…``) starts a table: with ``Metric Name``/``Metric Value``
columns the details page, else the raw page, whose next row holds the units. Numbers are
locale-formatted (``"8,192"``, ``"1,215,000,000.00"``; ``"27.595.520"`` / ``"65,77"`` on a
European-locale machine): the decimal mark is decided once per file from the first value that
shows it, or by ``options["decimal_mark"]`` (``.`` or ``,``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from perfci.core.errors import ParseError
from perfci.core.model import Metric, MetricKind, Profile
from perfci.formats._text_lines import open_text
from perfci.formats._textio import gc_paused
from perfci.formats.ncu._csv_numbers import Converter, choose_decimal_mark, series_numbers
from perfci.formats.ncu._csv_reader import DURATIONS as _DURATIONS
from perfci.formats.ncu._csv_reader import LAUNCH_CONFIG as _LAUNCH_CONFIG
from perfci.formats.ncu._csv_reader import Kernel, Process, Reader, Series
from perfci.formats.ncu._detectors import NCU_CSV
from perfci.formats.ncu._units import NS, better_for, scale

NAME = NCU_CSV.name
DESCRIPTION = NCU_CSV.description
sniff = NCU_CSV.sniff


_MAX_DISTINCT = 16


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """One profile per profiled process, in the order the file first names them."""
    # settle: the cells read stay alive until the end; left young, the first collection
    # after the parse would walk them all for nothing.
    reader = Reader(str(path), NAME)
    with gc_paused(settle=True), open_text(path, format=NAME) as handle:
        reader.read(handle)
        return _profiles(reader, options.get("decimal_mark") or None)


def read_details_rows(
    rows: Iterable[list[str]], *, source: str, options: Mapping[str, str], format_name: str
) -> list[Profile]:
    """The profiles of details-page ``rows`` (a header row, then one row per metric value),
    for ``ncu_text``, which renders its report as them: one reader, one set of rules for both.
    The rows are read as they come, so a generator keeps a large report out of memory."""
    reader = Reader(source, format_name)
    reader.read_rows(rows)
    return _profiles(reader, options.get("decimal_mark") or None)


# --- profiles -------------------------------------------------------------------------------


def _profiles(reader: Reader, decimal_mark: str | None) -> list[Profile]:
    """The reader's processes as profiles, its raw pages' numbers converted."""
    if not reader.tables:
        raise ParseError(
            'no ncu CSV table found: expected a header line "ID","Process ID",…,'
            '"Kernel Name",… with "Metric Name"/"Metric Value" columns (details page) '
            "or metric-id columns (raw page), as ncu --csv prints it",
            source=reader.source,
            format=reader.format_name,
        )
    mark = choose_decimal_mark(decimal_mark, _value_cells(reader), format_name=NAME)
    convert = Converter(mark)
    for process in reader.processes.values():
        for kernel in process.kernels.values():
            _raw_series(reader, kernel, convert)
    if reader.skipped_lines:
        reader.warnings.append(
            f"{reader.skipped_lines} line(s) starting with a quote were not CSV rows of a "
            f"table and were skipped (first at line {reader.first_skipped})"
        )
    labels = _labels(list(reader.processes.values()))
    profiles = []
    for process, label in zip(reader.processes.values(), labels, strict=True):
        profiles.append(_profile(reader, process, label, convert, mark))
    return profiles


def _raw_series(reader: Reader, kernel: Kernel, convert: Converter) -> None:
    """A raw-page kernel's rows as one series of numbers per metric column."""
    for number, rows in kernel.raw_rows.items():
        table = reader.tables[number]
        units = table.units or []
        cols = table.metric_columns
        scales = [scale(units[index] if index < len(units) else "") for index in cols]
        columns = convert.table(rows, cols, [s.power for s in scales])
        for index, scaled, numbers in zip(cols, scales, columns, strict=True):
            name = table.header[index].strip()
            series = kernel.series.get(("", name))
            if series is None:
                unit = units[index] if index < len(units) else ""
                kernel.series[("", name)] = Series(
                    kernel.name, "", name, units=[unit], numbers=numbers
                )
            elif series.numbers is not None and scale(series.units[0]).unit == scaled.unit:
                series.numbers.extend(numbers)
            else:
                reader.warnings.append(
                    f"{name} of {kernel.name[:80]}: the raw table at line {table.line} "
                    f"gives it in {scaled.unit}, an earlier table in another unit; "
                    "its values there were left out"
                )
    kernel.raw_rows.clear()


def _value_cells(reader: Reader) -> Iterator[str]:
    """Every value cell, the details page's then the raw page's, for ``choose_decimal_mark``."""
    for process in reader.processes.values():
        for kernel in process.kernels.values():
            for series in kernel.series.values():
                yield from series.values
            for number, rows in kernel.raw_rows.items():
                cols = reader.tables[number].metric_columns
                for row in rows:
                    yield from (row[index] for index in cols)


def _profile(
    reader: Reader, process: Process, label: str, convert: Converter, mark: str
) -> Profile:
    metrics: list[Metric] = []
    warnings = list(reader.warnings)
    for kernel in process.kernels.values():
        metrics.extend(_kernel_metrics(kernel, convert, warnings))
    untimed = [m.name for m in metrics if m.kind is MetricKind.KERNEL and m.total_ns is None]
    if untimed:
        warnings.append(
            f"{len(untimed)} kernel(s) have no gpu__time_duration.sum / Duration metric, "
            f"so no time (first: {untimed[0][:80]}); profile with --metrics "
            "gpu__time_duration.sum or the SpeedOfLight section"
        )
    metadata: dict[str, Any] = {
        "process": process.name,
        "host": process.host,
        "page": ", ".join(process.pages),
        "decimal_mark": mark,
        "launches": process.launches,
        "kernels": len(process.kernels),
    }
    if process.pid.isdigit():
        metadata["pid"] = int(process.pid)
    return Profile(
        label=label,
        format=reader.format_name,
        source=reader.source,
        metrics=metrics,
        metadata=metadata,
        warnings=warnings,
    )


def _labels(processes: list[Process]) -> list[str]:
    """Process names, ``#2``, ``#3`` on repeats; ``pid N`` for a nameless process."""
    bases = [p.name or (f"pid {p.pid}" if p.pid else "ncu") for p in processes]
    seen: dict[str, int] = {}
    labels = []
    for base in bases:
        seen[base] = seen.get(base, 0) + 1
        labels.append(base if seen[base] == 1 else f"{base} #{seen[base]}")
    return labels


# --- metrics --------------------------------------------------------------------------------


def _duration(kernel: Kernel) -> Series | None:
    """The series that is the kernel's time: ``gpu__time_duration.sum``, else ``Duration``."""
    for wanted in _DURATIONS:
        for (_, name), series in kernel.series.items():
            if name == wanted and _is_time(series):
                return series
    return None


def _is_time(series: Series) -> bool:
    return scale(series.units[0]).unit == NS


def _kernel_metrics(kernel: Kernel, convert: Converter, warnings: list[str]) -> list[Metric]:
    """The kernel's ``kernel`` metric, then its counters."""
    shared: dict[str, int] = {}
    for _, name in kernel.series:
        shared[name] = shared.get(name, 0) + 1
    duration = _duration(kernel)
    counters: list[Metric] = []
    for (section, name), series in kernel.series.items():
        if name in _DURATIONS and _is_time(series):
            continue  # the kernel's own time (or its duplicate under the other name)
        if name in _LAUNCH_CONFIG:
            key = _LAUNCH_CONFIG[name]
            if key not in kernel.attrs:  # the Block Size / Grid Size columns win
                for value in series_numbers(series, convert, warnings)[1]:
                    kernel.note(key, _int_text(value))
            continue
        qualified = f"{section}: {name}" if shared[name] > 1 and section else name
        counter = _counter(kernel.name, qualified, series, convert, warnings)
        if counter is not None:
            if section:
                counter.attrs["section"] = section
            counters.append(counter)
    times = series_numbers(duration, convert, warnings)[1] if duration is not None else []
    if times and len(times) < kernel.calls:
        warnings.append(
            f"kernel {kernel.name[:80]}: {kernel.calls - len(times)} of its {kernel.calls} "
            "launches have no duration (n/a); its total covers the others"
        )
    return [_kernel_metric(kernel, times), *counters]


def _kernel_attrs(kernel: Kernel) -> dict[str, Any]:
    attrs: dict[str, Any] = {"first_launch": _int_or_text(kernel.first_launch)}
    for key, values in kernel.attrs.items():
        distinct = list(values)
        if key == "nvtx" or len(distinct) > 1:
            attrs[key] = [_int_or_text(value) for value in distinct[:_MAX_DISTINCT]]
        else:
            attrs[key] = _int_or_text(distinct[0])
    return attrs


def _kernel_metric(kernel: Kernel, times: list[float]) -> Metric:
    attrs = _kernel_attrs(kernel)
    if not times:
        return Metric(kind=MetricKind.KERNEL, name=kernel.name, calls=kernel.calls, attrs=attrs)
    total = math.fsum(times)
    return Metric(
        kind=MetricKind.KERNEL,
        name=kernel.name,
        calls=kernel.calls,
        total_ns=total,
        avg_ns=total / len(times),
        min_ns=min(times),
        max_ns=max(times),
        median_ns=statistics.median(times),
        std_ns=statistics.stdev(times) if len(times) > 1 else None,
        samples_ns=times,
        attrs=attrs,
    )


def _counter(
    scope: str, name: str, series: Series, convert: Converter, warnings: list[str]
) -> Metric | None:
    """A ``counter`` for one metric of one kernel; ``None`` when it has no number."""
    unit_scale, values = series_numbers(series, convert, warnings)
    if not values:
        return None  # n/a everywhere, or a string metric
    better = better_for(name, unit_scale)
    mean = math.fsum(values) / len(values)  # fsum: no drift over many launches
    if unit_scale.unit == NS:
        return Metric(
            kind=MetricKind.COUNTER,
            name=name,
            scope=scope,
            calls=len(values),
            avg_ns=mean,
            min_ns=min(values),
            max_ns=max(values),
            samples_ns=values,
            better=better,
        )
    return Metric(
        kind=MetricKind.COUNTER,
        name=name,
        scope=scope,
        calls=len(values),
        unit=unit_scale.unit,
        better=better,
        value=mean,
        samples=values,
    )


def _int_text(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


def _int_or_text(text: str) -> int | str:
    return int(text) if text.isdigit() else text
