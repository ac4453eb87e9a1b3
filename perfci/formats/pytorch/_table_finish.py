"""A PyTorch ``key_averages()`` table once its rows are read (``_table_rows``): colliding names
told apart (``name_rows``), the step rows as ``step`` metrics (``table_steps``), and the memory
cells of the rows as ``counter`` metrics in bytes (``memory_counters``)."""

from __future__ import annotations

from collections import Counter

from perfci.core.model import Better, Device, Metric, MetricKind
from perfci.formats._steps import collect_steps
from perfci.formats.pytorch._table_rows import STEP_WILDCARD, Row, Table


def name_rows(rows: list[Row]) -> None:
    """Give colliding (kind, device, name) metrics distinct names, keeping table order.

    The input shapes (or the first stack frame) are appended only where they tell the
    colliding rows apart (legacy tables print ``[]`` for every row); what still collides is
    numbered.
    """
    for row in rows:
        if row.name.endswith("..."):
            for metric in row.metrics:
                metric.attrs["truncated"] = True
    keys = [(metric.kind, metric.device, metric.name) for row in rows for metric in row.metrics]
    if len(set(keys)) == len(keys):
        return
    clashing = {key for key, count in Counter(keys).items() if count > 1}
    details: dict[tuple[MetricKind, Device, str], set[str | None]] = {}
    for row in rows:
        for metric in row.metrics:
            key = (metric.kind, metric.device, metric.name)
            if key in clashing:
                details.setdefault(key, set()).add(_detail(row))
    seen: Counter[tuple[MetricKind, Device, str]] = Counter()
    for row in rows:
        for metric in row.metrics:
            base = name = metric.name
            if (metric.kind, metric.device, base) not in clashing:
                continue
            detail = _detail(row)
            if detail and len(details[(metric.kind, metric.device, base)]) > 1:
                name = f"{base} {detail}"
            seen[(metric.kind, metric.device, name)] += 1
            ordinal = seen[(metric.kind, metric.device, name)]
            if ordinal > 1:
                name = f"{name} ({ordinal})"
            if name != base:
                metric.attrs["table_name"] = base
                metric.name = name


def _detail(row: Row) -> str | None:
    """What tells grouped rows apart: input shapes, else the first stack frame (``@ frame``)."""
    if row.shapes:
        return row.shapes
    stack = row.metrics[0].attrs.get("stack")
    return f"@ {stack[0]}" if stack else None


# A side's device name (CPU, CUDA, XPU ...) → its memory columns' headers.
_MEMORY_HEADERS: dict[str, tuple[str, str]] = {}


def memory_counters(rows: list[Row]) -> list[Metric]:
    """One ``counter`` per non-negative memory cell: scope = the row's metric name, name = the
    column (``CUDA Mem``, ``Self CPU Mem`` ...), value in bytes, lower is better.

    A negative cell is a net free (``-540.00 MB``): a quantity perfci's store refuses and not
    an allocation to watch grow, so it gives no counter (``attrs`` still hold every cell).
    Only the kept side metrics of a row give counters, after ``name_rows``: an all-zero side
    was left out, and colliding names are already told apart. Step rows give none.
    """
    counters: list[Metric] = []
    seen: set[tuple[Device, str, str]] = set()
    counter, lower = MetricKind.COUNTER, Better.LOWER
    for row in rows:
        for metric in row.metrics:
            attrs = metric.attrs
            sizes = (attrs.get("mem_bytes"), attrs.get("self_mem_bytes"))
            if sizes == (None, None):
                continue
            side = "CPU" if metric.device is Device.CPU else attrs.get("device_name") or "CUDA"
            headers = _MEMORY_HEADERS.get(side)
            if headers is None:
                headers = _MEMORY_HEADERS[side] = (f"{side} Mem", f"Self {side} Mem")
            for size, name in zip(sizes, headers, strict=True):
                if size is None or size < 0:
                    continue
                ident = (metric.device, metric.name, name)
                if ident in seen:
                    continue
                seen.add(ident)
                counters.append(
                    Metric(
                        counter,
                        name,
                        metric.device,
                        scope=metric.name,
                        unit="bytes",
                        better=lower,
                        value=float(size),
                    )
                )
    return counters


def table_steps(table: Table) -> tuple[list[Metric], int | None]:
    """Step metrics from the step rows, and the number of profiled steps.

    Numbered rows give one sample each (their ``total``: the range's wall time on the CPU, or
    its time on the device); the merged ``ProfilerStep*`` row gives an aggregate per side.
    """
    numbered = [row for row in table.step_rows if not STEP_WILDCARD.match(row.name)]
    metrics: list[Metric] = []
    for device in (Device.CPU, Device.GPU):
        pairs = [
            (row.name, metric.total_ns)
            for row in numbered
            for metric in row.metrics
            if metric.device is device and metric.total_ns is not None
        ]
        metrics += collect_steps(pairs, device=device)
    count = max((metric.calls or 0 for metric in metrics), default=0)
    for row in table.step_rows:
        wildcard = STEP_WILDCARD.match(row.name)
        if wildcard is None:
            continue
        for side in row.metrics:
            metrics.append(
                Metric(
                    kind=MetricKind.STEP,
                    name=wildcard.group("stem"),
                    device=side.device,
                    calls=side.calls,
                    total_ns=side.total_ns,
                    self_ns=side.self_ns,
                    avg_ns=side.avg_ns,
                    attrs=side.attrs,
                )
            )
            count = max(count, side.calls or 0)
    return metrics, count or None
