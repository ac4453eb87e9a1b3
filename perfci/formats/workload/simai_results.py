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

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfci.core.errors import ParseError
from perfci.core.model import Metric, MetricKind, Profile
from perfci.core.units import NS_PER_UNIT
from perfci.formats._steps import step_metric
from perfci.formats._text_lines import open_text
from perfci.formats.caps import Budget, budget
from perfci.formats.workload._aicb import indexed_names
from perfci.formats.workload._detectors import SIMAI_RESULTS
from perfci.formats.workload._layer_metrics import PHASES, TableError, number_cell, summary_cell

NAME = SIMAI_RESULTS.name
DESCRIPTION = SIMAI_RESULTS.description
sniff = SIMAI_RESULTS.sniff

_HEADER_FIRST = "layer_name"
_SUMMARY_FIRST = "File name"
_SUM_FIRST = "SUM"
_TOTALS_FIRST = "total exposed comm"
_PHASE = {"fwd": "forward", "wg": "weight_grad", "ig": "input_grad"}
_SHORT = {phase: short for short, phase in _PHASE.items()}
_TIME_COLUMN = re.compile(r"^(fwd|wg|ig) (compute|exposed comm|total comm)$")
_QUANTITY = {"compute": "compute", "exposed comm": "exposed", "total comm": "total"}
_RATES = ("algbw", "busbw")
_FINISHED = "workload finished at"
#: How SimAI prints a number that is not finite (glibc ``%f``, and its own ``NaN or Inf``).
_NOT_FINITE = frozenset({"nan", "-nan", "+nan", "inf", "-inf", "+inf", "nan or inf"})
_NS_PER_US = NS_PER_UNIT["us"]
_TOTAL_COMPUTE = "total compute"
_TOTAL_EXPOSED = "total exposed comm"
_TOTAL_TIME = "total time"
#: The total row's labels and the summary's keys (lower-cased) → metric names.
_NAMES = {
    "total comp": _TOTAL_COMPUTE,
    "total exposed comm": _TOTAL_EXPOSED,
    "total time": _TOTAL_TIME,
    "expose dp comm": "exposed DP comm",
    "expose dp_ep comm": "exposed DP_EP comm",
    "expose tp comm": "exposed TP comm",
    "expose_ep_comm": "exposed EP comm",
    "expose_pp_comm": "exposed PP comm",
    "bubble time": "pipeline bubble",
}

#: A column's meaning: (phase, quantity), quantity one of compute, exposed, total, algbw,
#: busbw; ("", "finished") for ``workload finished at``.
_Column = tuple[str, str]
_METRIC = frozenset({"compute", "exposed"})  # the quantities that are a row's metrics


@dataclass(slots=True)
class _Row:
    name: str
    values: dict[_Column, float]


@dataclass(slots=True)
class _Reader:
    """A line-driven reader of one results file; ``profile`` builds what it read."""

    source: str
    columns: dict[int, _Column] | None = None
    labels: dict[int, str] = field(default_factory=dict)
    width: int = 0
    run_name: str = ""
    rows: list[_Row] = field(default_factory=list)
    sums: dict[str, float] = field(default_factory=dict)
    totals: dict[str, float] = field(default_factory=dict)
    summary: dict[str, tuple[float, dict[str, Any]]] = field(default_factory=dict)
    summary_keys: list[str] | None = None
    summary_pending: bool = False
    file_name: str | None = None
    finished: float | None = None
    unnamed: int = 0
    not_finite: int = 0
    warnings: list[str] = field(default_factory=list)
    counted: Budget = field(init=False)  # a service upload's caps (issue 31)

    def __post_init__(self) -> None:
        self.counted = budget(self.source, NAME)

    def feed(self, number: int, line: str) -> None:
        cut = not line.endswith("\n")  # only the last line can lack one: cut short, or no EOL
        text = line.rstrip("\r\n").removeprefix("\ufeff")
        if not text.strip():
            return
        cells = [cell.strip() for cell in text.split(",")]
        first = cells[0]
        if self.summary_pending:  # the line after the summary's keys holds its values
            self.summary_pending = False
            if first != _HEADER_FIRST:
                self._summary(cells, number, cut)
                return
        if first == _SUMMARY_FIRST:
            self.summary_keys, self.summary_pending = cells, True
        elif first == _HEADER_FIRST:
            self._header(cells, number)
        elif self.columns is None:
            return  # before the header: not ours to judge
        elif first == _SUM_FIRST:
            self._sum(cells, number, cut)
        elif first == _TOTALS_FIRST:
            self._totals(cells, number, cut)
        else:
            self._layer(cells, number, cut)

    # --- lines ----------------------------------------------------------------------------

    def _header(self, cells: list[str], number: int) -> None:
        if self.columns is not None:
            raise TableError("a second 'layer_name,...' header: one SimAI run per file", number)
        while cells and not cells[-1]:
            cells.pop()  # a trailing comma
        columns: dict[int, _Column] = {}
        total_phase = ""
        for index, name in enumerate(cells[2:], 2):
            if match := _TIME_COLUMN.match(name):
                phase, quantity = _PHASE[match[1]], _QUANTITY[match[2]]
                columns[index], self.labels[index] = (phase, quantity), name
                total_phase = phase if quantity == "total" else total_phase
            elif name in _RATES and total_phase:
                columns[index] = (total_phase, name)
                self.labels[index] = f"{name} of {_SHORT[total_phase]} total comm"
            elif name == _FINISHED:
                columns[index], self.labels[index] = ("", "finished"), name
        if not any(quantity == "compute" for _, quantity in columns.values()):
            raise TableError(
                "expected SimAI's columns 'fwd compute,wg compute,ig compute,...' after "
                "'layer_name,<run name>'",
                number,
            )
        self.columns, self.width = columns, len(cells)
        self.run_name = cells[1] if len(cells) > 1 else ""

    def _layer(self, cells: list[str], number: int, cut: bool) -> None:
        assert self.columns is not None
        if not self._fits(cells, self.width, number, cut):
            return
        if not cells[0]:
            self.unnamed += 1
            return
        values: dict[_Column, float] = {}
        for index, column in self.columns.items():
            value = self._value(cells[index], number, index, column)
            if value is not None:
                values[column] = value
        finished = values.pop(("", "finished"), None)
        if finished is not None:
            self.finished = max(finished, self.finished or 0.0)
        self.counted.metric(sum(1 for key, value in values.items() if key[1] in _METRIC and value))
        self.rows.append(_Row(cells[0], values))

    def _sum(self, cells: list[str], number: int, cut: bool) -> None:
        """The ``SUM`` row: its per-phase total comm (it has no ``workload finished at``)."""
        assert self.columns is not None
        wanted = {i: c for i, c in self.columns.items() if c[1] == "total"}
        if not wanted or not self._fits(cells, max(wanted) + 1, number, cut, exact=False):
            return
        for index, column in wanted.items():
            value = self._value(cells[index], number, index, column)
            if value is not None:
                self.sums[column[0]] = value

    def _totals(self, cells: list[str], number: int, cut: bool) -> None:
        """``total exposed comm,<x>,total comp,<y>,total time,<z>``: label, value pairs."""
        while cells and not cells[-1]:
            cells.pop()
        if len(cells) % 2 and cut:
            self.warnings.append(f"line {number}, the file's last line, was cut short: left out")
            return
        if len(cells) % 2:
            raise TableError(f"expected label,value pairs, found {len(cells)} cells", number)
        for index in range(0, len(cells), 2):
            label = cells[index]
            ns = self._time(cells[index + 1], number, index + 1, label)
            if ns is not None:
                self.totals[_NAMES.get(label.lower(), label)] = ns

    def _summary(self, cells: list[str], number: int, cut: bool) -> None:
        """The values under the summary's keys: ``<name>, 123 (1.23%), ..., <total>``."""
        keys = self.summary_keys or []
        extra = len(cells) - len(keys)
        if extra > 0:  # commas in the file name
            cells = [",".join(cells[: extra + 1]), *cells[extra + 1 :]]
        elif extra < 0:
            if not cut:
                raise TableError(
                    f"expected {len(keys)} summary values as the line before names, "
                    f"found {len(cells)}",
                    number,
                )
            self.warnings.append(f"line {number}, the file's last line, was cut short")
            cells = cells[:-1]  # its last cell may be cut too
        self.file_name = cells[0]
        for index, (key, cell) in enumerate(zip(keys[1:], cells[1:], strict=False), 1):
            text, percent = summary_cell(cell)
            ns = self._time(text, number, index, key)
            if ns is None:
                continue
            attrs: dict[str, Any] = {}
            if percent and percent.strip().lower() not in _NOT_FINITE:
                value = number_cell(percent, number, f"the percent of column {index + 1} ({key})")
                if value is not None:
                    attrs["percent_of_total"] = float(value)
            self.summary[_NAMES.get(key.lower(), key)] = (ns, attrs)

    # --- cells ----------------------------------------------------------------------------

    def _fits(
        self, cells: list[str], width: int, number: int, cut: bool, *, exact: bool = True
    ) -> bool:
        """Whether a row has the cells it needs; a cut-short last row warns, others raise."""
        while exact and len(cells) > width and not cells[-1]:
            cells.pop()  # trailing commas
        if len(cells) < width:
            if cut:
                self.warnings.append(
                    f"line {number}, the file's last line, was cut short: left out"
                )
                return False
            raise TableError(
                f"expected {width} comma-separated cells as the header has, found {len(cells)}",
                number,
            )
        if exact and len(cells) > width:
            raise TableError(
                f"found {len(cells)} cells, more than the header's {width} columns", number
            )
        return True

    def _value(self, text: str, number: int, index: int, column: _Column) -> float | None:
        label = self.labels[index]
        if column[1] in _RATES:
            if text.lower() in _NOT_FINITE:
                return None  # 0 bytes in 0 time: the phase has no collective
            rate = number_cell(text, number, f"column {index + 1} ({label})")
            return None if rate is None else float(rate)
        return self._time(text, number, index, label)

    def _time(self, text: str, number: int, index: int, label: str) -> float | None:
        """A µs cell in ns; ``None`` for an empty, placeholder or non-finite cell."""
        if text.strip().lower() in _NOT_FINITE:
            self.not_finite += 1
            return None
        value = number_cell(text, number, f"column {index + 1} ({label})")
        if value is None:
            return None
        if value < 0:
            raise TableError(
                f"expected a non-negative time in column {index + 1} ({label}), found {text!r}",
                number,
            )
        return float(value * _NS_PER_US)

    # --- the profile ------------------------------------------------------------------------

    def profile(self) -> Profile:
        if self.columns is None:
            raise ParseError(
                "no SimAI results header: expected 'layer_name,<run name>,fwd compute,"
                "wg compute,ig compute,...' (SimAI's EndToEnd.csv)",
                source=self.source,
                format=NAME,
            )
        if not self.rows:
            raise ParseError(
                "the results have their header but no layer rows", source=self.source, format=NAME
            )
        profile = Profile(
            label="simai",
            format=NAME,
            source=self.source,
            steps=1,
            warnings=self.warnings,
            metadata=self._metadata(),
        )
        profile.metrics.extend(self._totals_metrics())
        names = indexed_names([row.name for row in self.rows])
        for name, row in zip(names, self.rows, strict=True):
            profile.metrics.extend(_row_metrics(name, row))
        if self.unnamed:
            profile.warnings.append(
                f"{self.unnamed} row(s) without a layer name (SimAI leaves it empty on stat "
                "rows after the first) were left out"
            )
        if self.not_finite:
            profile.warnings.append(
                f"{self.not_finite} time cell(s) hold SimAI's non-finite marker (nan, inf, "
                "'NaN or Inf'): left out"
            )
        return profile

    def _metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "run_name": self.run_name,
            "layers": len(self.rows),
            "time_unit": "us (converted to ns)",
            "rate_unit": "GiB/s",
        }
        if self.file_name is not None:
            meta["file_name"] = self.file_name
        return meta

    def _totals_metrics(self) -> list[Metric]:
        """The ``iteration`` step, then the run's totals as ``measure`` metrics."""
        metrics: list[Metric] = []
        step = _step(self.totals, self.summary, self.finished)
        if step is not None:
            metrics.append(step)
        else:
            self.warnings.append(
                "no total time (total row, summary or 'workload finished at'): no step metric"
            )
        measures = {name: (ns, dict(attrs)) for name, (ns, attrs) in self.summary.items()}
        for name, ns in self.totals.items():  # six decimals where the summary has none
            measures[name] = (ns, measures.get(name, (ns, {}))[1])
        measures.pop(_TOTAL_TIME, None)
        for phase in PHASES:
            key = (phase, "total")
            known = [row.values[key] for row in self.rows if key in row.values]
            comm = self.sums.get(phase, sum(known) if known else None)
            if comm is not None:
                measures[f"total comm/{phase}"] = (comm, {"phase": phase})
        for name, (ns, attrs) in measures.items():
            if ns:
                metrics.append(_timed(MetricKind.MEASURE, name, ns, attrs))
        return metrics


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """The one profile of a SimAI results file, read line by line."""
    reader = _Reader(str(path))
    with open_text(path, format=NAME) as handle:
        try:
            for number, line in enumerate(handle, 1):
                reader.feed(number, line)
        except TableError as exc:
            raise ParseError(str(exc), source=str(path), line=exc.line, format=NAME) from exc
    return [reader.profile()]


def _step(
    totals: dict[str, float],
    summary: dict[str, tuple[float, dict[str, Any]]],
    finished: float | None,
) -> Metric | None:
    if _TOTAL_TIME in totals:
        ns, where = totals[_TOTAL_TIME], "the 'total time' row"
    elif _TOTAL_TIME in summary:
        ns, where = summary[_TOTAL_TIME][0], "the summary's 'Total time'"
    elif finished is not None:
        ns, where = finished, "'workload finished at'"
    else:
        return None
    metric = step_metric("iteration", [ns])
    metric.attrs = {"definition": f"the simulated run's total time, from {where}"}
    return metric


def _row_metrics(name: str, row: _Row) -> list[Metric]:
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
            for rate in _RATES:
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
