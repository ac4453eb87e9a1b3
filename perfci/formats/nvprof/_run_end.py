"""The end of an nvprof run (``_runs.Run``): its trace tables' metrics (less what the summary
gave), its steps from the numbered NVTX ranges, and warnings for what was not read."""

from __future__ import annotations

from perfci.core.model import Device, MetricKind, Profile
from perfci.formats._steps import collect_steps
from perfci.formats.nvprof._runs import Run
from perfci.formats.nvprof._trace import (
    API_TRACE,
    GPU_TRACE,
    UM_TRACE,
    trace_metrics,
)


def finish_run(run: Run) -> Profile:
    """The trace metrics, steps from the numbered ranges, and warnings for what was not read."""
    profile = run.profile
    if run.traces:
        _add_traces(run)
    steps = collect_steps(run.ranges, device=Device.CPU)
    if steps:
        profile.metrics.extend(steps)
        profile.steps = max(len(step.samples_ns or ()) for step in steps)
    for what, count in run.skipped.items():
        profile.warnings.append(f"{count} {what} were not read")
    metered = [
        m for m in profile.metrics if "nvprof_metrics" in m.attrs or "nvprof_events" in m.attrs
    ]
    if metered:
        profile.metadata["mode"] = "metrics/events"
        profile.warnings.append(
            f"metrics/events mode: {len(metered)} kernels carry their "
            "values in attrs['nvprof_metrics'] / attrs['nvprof_events'] "
            "and have no times"
        )
    return profile


def _add_traces(run: Run) -> None:
    """The trace tables' metrics, less the groups and names other tables already give."""
    names = run.names
    covered = {
        group
        for group, summarised in (
            (
                GPU_TRACE,
                names[MetricKind.KERNEL] or names[MetricKind.MEMORY] or names[MetricKind.COMM],
            ),
            (API_TRACE, names[MetricKind.API]),
            (UM_TRACE, run.um_names),
        )
        if summarised
    }
    profile = run.profile
    taken = {(m.kind, m.name) for m in profile.metrics if m.scope is None}
    metrics, warnings = trace_metrics(run.traces, covered=covered, taken=taken)
    profile.metrics.extend(metrics)
    profile.warnings.extend(warnings)
