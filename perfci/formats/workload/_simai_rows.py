"""The rows of SimAI's ``EndToEnd.csv`` (``simai_results``): a line-driven reader of its header,
layer rows, ``SUM`` and totals rows and summary, cell by cell, times in ns.

What the file holds and what becomes which metric is in ``simai_results``, which builds the
profile from what this reads."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from perfci.core.units import NS_PER_UNIT
from perfci.formats.caps import Budget, budget
from perfci.formats.workload._detectors import SIMAI_RESULTS
from perfci.formats.workload._layer_metrics import TableError, number_cell, summary_cell

_HEADER_FIRST = "layer_name"
_SUMMARY_FIRST = "File name"
_SUM_FIRST = "SUM"
_TOTALS_FIRST = "total exposed comm"
_PHASE = {"fwd": "forward", "wg": "weight_grad", "ig": "input_grad"}
_SHORT = {phase: short for short, phase in _PHASE.items()}
_TIME_COLUMN = re.compile(r"^(fwd|wg|ig) (compute|exposed comm|total comm)$")
_QUANTITY = {"compute": "compute", "exposed comm": "exposed", "total comm": "total"}
RATES = ("algbw", "busbw")
_FINISHED = "workload finished at"
#: How SimAI prints a number that is not finite (glibc ``%f``, and its own ``NaN or Inf``).
_NOT_FINITE = frozenset({"nan", "-nan", "+nan", "inf", "-inf", "+inf", "nan or inf"})
_NS_PER_US = NS_PER_UNIT["us"]
_TOTAL_COMPUTE = "total compute"
_TOTAL_EXPOSED = "total exposed comm"
TOTAL_TIME = "total time"
#: The total row's labels and the summary's keys (lower-cased) → metric names.
_NAMES = {
    "total comp": _TOTAL_COMPUTE,
    "total exposed comm": _TOTAL_EXPOSED,
    "total time": TOTAL_TIME,
    "expose dp comm": "exposed DP comm",
    "expose dp_ep comm": "exposed DP_EP comm",
    "expose tp comm": "exposed TP comm",
    "expose_ep_comm": "exposed EP comm",
    "expose_pp_comm": "exposed PP comm",
    "bubble time": "pipeline bubble",
}

#: A column's meaning: (phase, quantity), quantity one of compute, exposed, total, algbw,
#: busbw; ("", "finished") for ``workload finished at``.
Column = tuple[str, str]
_METRIC = frozenset({"compute", "exposed"})  # the quantities that are a row's metrics


@dataclass(slots=True)
class Row:
    name: str
    values: dict[Column, float]


@dataclass(slots=True)
class Reader:
    """A line-driven reader of one results file; ``simai_results`` builds its profile."""

    source: str
    columns: dict[int, Column] | None = None
    labels: dict[int, str] = field(default_factory=dict)
    width: int = 0
    run_name: str = ""
    rows: list[Row] = field(default_factory=list)
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
        self.counted = budget(self.source, SIMAI_RESULTS.name)

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
        columns: dict[int, Column] = {}
        total_phase = ""
        for index, name in enumerate(cells[2:], 2):
            if match := _TIME_COLUMN.match(name):
                phase, quantity = _PHASE[match[1]], _QUANTITY[match[2]]
                columns[index], self.labels[index] = (phase, quantity), name
                total_phase = phase if quantity == "total" else total_phase
            elif name in RATES and total_phase:
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
        values: dict[Column, float] = {}
        for index, column in self.columns.items():
            value = self._value(cells[index], number, index, column)
            if value is not None:
                values[column] = value
        finished = values.pop(("", "finished"), None)
        if finished is not None:
            self.finished = max(finished, self.finished or 0.0)
        self.counted.metric(sum(1 for key, value in values.items() if key[1] in _METRIC and value))
        self.rows.append(Row(cells[0], values))

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

    def _value(self, text: str, number: int, index: int, column: Column) -> float | None:
        label = self.labels[index]
        if column[1] in RATES:
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
