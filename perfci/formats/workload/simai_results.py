"""SimAI's end-to-end results, ``<prefix>EndToEnd.csv``: one row per workload layer with its
compute, exposed and total communication times, and the run's totals.

Source (no public sample exists): aliyun/SimAI ``astra-sim-alibabacloud/astra-sim/workload/``
``Layer.cc`` (the two ``Layer::report`` overloads), ``Workload.cc`` (``report``; the file is
``CSVWriter(path, "EndToEnd.csv")`` with ``path`` the frontend's prefix: ``./ncclFlowModel_``
for the ns-3 simulator, ``./results/<-r value>`` for the analytical one), ``CSVWriter.cc``
(``write_line``; ``write_res``, which *prepends* its text to the file) and
``system/Common.hh`` (``FREQ``, ``GBps``). What the ns-3 build leaves (lines shortened)::

    File name, Expose DP comm, Expose DP_EP comm, ..., total exposed comm, Total time
    test1, 1200 (1.98%), 0 (0.00%), ..., 4612 (7.61%), 60612
    layer_name,test1,fwd compute,wg compute,ig compute,fwd exposed comm,wg exposed comm,
      ig exposed comm,fwd total comm,algbw,busbw,wg total comm,algbw,busbw,ig total comm,
      algbw,busbw,workload finished at
    attention_layer,test1,1500.000000,0.000000,...,60612.345000
    SUM,test1,<the layers' sums of the nine times, NONE for each algbw and busbw>
    total exposed comm,4612.345000,total comp,56000.000000,total time,60612.345000

* The summary (``File name`` keys, then ``<name>, <value> (<percent of total>%), ...,
  <total>``, cells joined by ``", "``) is written last but prepended, so it comes first;
  older releases write no summary. The analytical build (``#ifdef ANALYTI``) writes no
  ``workload finished at`` column and no ``SUM`` / ``total exposed comm`` rows, and whole
  numbers (``setprecision(0)``, ``NaN or Inf`` when not finite) where the ns-3 build writes
  ``std::to_string`` (six decimals). The layer cell is empty on rows of stat rows after the
  first. SimAI joins cells with commas and never quotes them.
* Times are µs: ticks are ns (ns-3 ``NanoSeconds``) and every cell is ``ticks / FREQ`` with
  ``FREQ`` = 1000 (``finalize_csv`` labels that division "time (us)"; the optional HTML
  chart's "ns" label is wrong). Each layer's times are totals over the run's passes; both
  frontends run one pass (``num_passes`` = 1), so the run is one iteration.
* ``algbw`` / ``busbw`` (``compute_busbw``) follow each phase's ``total comm`` column (the
  duplicate names are told apart by position): ``algbw`` = message bytes / total comm time
  in bytes/s × ``GBps`` (1/1024³), so GiB/s; ``busbw`` = ``algbw`` × 2(n−1)/n (all-reduce),
  × (n−1)/n (all-gather, reduce-scatter, all-to-all), else 0. A phase without a collective
  divides 0 by 0 and prints ``nan`` / ``-nan`` (``inf`` for bytes in no time): no rate.

What becomes which metric (times in ns; names as ``_layer_metrics`` gives a SimAI workload's,
so the same layer's series carry the same names, a repeated layer indexed ``mlp_layer#3``):

* per layer row, ``layer`` ``<layer>/<phase>`` (``forward``, ``weight_grad``,
  ``input_grad``): the phase's compute; ``comm`` ``<layer>/<phase>``: its *exposed*
  communication, the wait the iteration pays, with the collective's total time
  (``attrs["total_comm_ns"]``) and rates (``algbw_gib_s``, ``busbw_gib_s``) as attributes.
  Collectives are attribution's primary decomposition, summed against the step: a second
  ``comm`` series for the total time, which contains the exposed part, would count it
  twice, and the rates are SimAI's function of that time and the size, so as series they
  would repeat its change. Zero times are left out (nothing to compute or wait for);
* ``step`` ``iteration``: the run's total time (the ``total time`` row, else the summary's
  ``Total time``, else ``workload finished at``); ``Profile.steps`` is 1;
* ``measure`` (ns, lower is better): ``total compute`` and ``total exposed comm`` (the total
  row, else the summary), the summary's ``exposed DP comm``, ``exposed DP_EP comm``,
  ``exposed TP comm``, ``exposed EP comm``, ``exposed PP comm`` and ``pipeline bubble``
  (SimAI's percent of the total in ``attrs["percent_of_total"]``), and ``total comm/<phase>``
  (the ``SUM`` row, else the layers' sum): a slower simulated network shows there even when
  its collectives are hidden behind compute;
* metadata: ``run_name`` (the header's second cell), ``file_name`` (the summary's), ``layers``.

Blank lines, CRLF, a byte-order mark, trailing commas and lines before the header are
tolerated; empty and placeholder cells mean "no value". A cell that is not a number, a
negative time, or a row with more or fewer cells than the header is a ``ParseError`` naming
the line and column, except a last row the file cut short (no final newline), which is left
out with a warning.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfci.core.errors import ParseError
from perfci.core.model import Metric, MetricKind, Profile
from perfci.formats._steps import step_metric
from perfci.formats._text_lines import open_text
from perfci.formats.workload._aicb import indexed_names
from perfci.formats.workload._detectors import SIMAI_RESULTS
from perfci.formats.workload._layer_metrics import PHASES, TableError
from perfci.formats.workload._simai_rows import RATES, TOTAL_TIME, Reader, Row

NAME = SIMAI_RESULTS.name
DESCRIPTION = SIMAI_RESULTS.description
sniff = SIMAI_RESULTS.sniff


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """The one profile of a SimAI results file, read line by line."""
    reader = Reader(str(path))
    with open_text(path, format=NAME) as handle:
        try:
            for number, line in enumerate(handle, 1):
                reader.feed(number, line)
        except TableError as exc:
            raise ParseError(str(exc), source=str(path), line=exc.line, format=NAME) from exc
    return [_profile(reader)]


def _profile(reader: Reader) -> Profile:
    """The profile of what ``reader`` read."""
    if reader.columns is None:
        raise ParseError(
            "no SimAI results header: expected 'layer_name,<run name>,fwd compute,"
            "wg compute,ig compute,...' (SimAI's EndToEnd.csv)",
            source=reader.source,
            format=NAME,
        )
    if not reader.rows:
        raise ParseError(
            "the results have their header but no layer rows", source=reader.source, format=NAME
        )
    profile = Profile(
        label="simai",
        format=NAME,
        source=reader.source,
        steps=1,
        warnings=reader.warnings,
        metadata=_metadata(reader),
    )
    profile.metrics.extend(_totals_metrics(reader))
    names = indexed_names([row.name for row in reader.rows])
    for name, row in zip(names, reader.rows, strict=True):
        profile.metrics.extend(_row_metrics(name, row))
    if reader.unnamed:
        profile.warnings.append(
            f"{reader.unnamed} row(s) without a layer name (SimAI leaves it empty on stat "
            "rows after the first) were left out"
        )
    if reader.not_finite:
        profile.warnings.append(
            f"{reader.not_finite} time cell(s) hold SimAI's non-finite marker (nan, inf, "
            "'NaN or Inf'): left out"
        )
    return profile


def _metadata(reader: Reader) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "run_name": reader.run_name,
        "layers": len(reader.rows),
        "time_unit": "us (converted to ns)",
        "rate_unit": "GiB/s",
    }
    if reader.file_name is not None:
        meta["file_name"] = reader.file_name
    return meta


def _totals_metrics(reader: Reader) -> list[Metric]:
    """The ``iteration`` step, then the run's totals as ``measure`` metrics."""
    metrics: list[Metric] = []
    step = _step(reader.totals, reader.summary, reader.finished)
    if step is not None:
        metrics.append(step)
    else:
        reader.warnings.append(
            "no total time (total row, summary or 'workload finished at'): no step metric"
        )
    measures = {name: (ns, dict(attrs)) for name, (ns, attrs) in reader.summary.items()}
    for name, ns in reader.totals.items():  # six decimals where the summary has none
        measures[name] = (ns, measures.get(name, (ns, {}))[1])
    measures.pop(TOTAL_TIME, None)
    for phase in PHASES:
        key = (phase, "total")
        known = [row.values[key] for row in reader.rows if key in row.values]
        comm = reader.sums.get(phase, sum(known) if known else None)
        if comm is not None:
            measures[f"total comm/{phase}"] = (comm, {"phase": phase})
    for name, (ns, attrs) in measures.items():
        if ns:
            metrics.append(_timed(MetricKind.MEASURE, name, ns, attrs))
    return metrics


def _step(
    totals: dict[str, float],
    summary: dict[str, tuple[float, dict[str, Any]]],
    finished: float | None,
) -> Metric | None:
    if TOTAL_TIME in totals:
        ns, where = totals[TOTAL_TIME], "the 'total time' row"
    elif TOTAL_TIME in summary:
        ns, where = summary[TOTAL_TIME][0], "the summary's 'Total time'"
    elif finished is not None:
        ns, where = finished, "'workload finished at'"
    else:
        return None
    metric = step_metric("iteration", [ns])
    metric.attrs = {"definition": f"the simulated run's total time, from {where}"}
    return metric


def _row_metrics(name: str, row: Row) -> list[Metric]:
    """A layer row's compute (``layer``) and exposed communication (``comm``) per phase."""
    metrics: list[Metric] = []
    values = row.values
    for phase in PHASES:
        attrs: dict[str, Any] = {"layer": row.name, "phase": phase}
        compute = values.get((phase, "compute"))
        if compute:
            metrics.append(_timed(MetricKind.LAYER, f"{name}/{phase}", compute, attrs))
        exposed = values.get((phase, "exposed"))
        if exposed:
            comm = {**attrs, "comm_time": "exposed"}
            total = values.get((phase, "total"))
            if total is not None:
                comm["total_comm_ns"] = total
            for rate in RATES:
                if (phase, rate) in values:
                    comm[f"{rate}_gib_s"] = values[(phase, rate)]
            metrics.append(_timed(MetricKind.COMM, f"{name}/{phase}", exposed, comm))
    return metrics


def _timed(kind: MetricKind, name: str, ns: float, attrs: dict[str, Any]) -> Metric:
    return Metric(
        kind=kind,
        name=name,
        calls=1,
        total_ns=ns,
        avg_ns=ns,
        min_ns=ns,
        max_ns=ns,
        attrs=dict(attrs),
    )
