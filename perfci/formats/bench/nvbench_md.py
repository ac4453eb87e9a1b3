"""NVBench's markdown output: what a benchmark prints on the console (or ``--md FILE``), and
what ``nvbench_json_summary`` renders from a JSON file.

The layout (``nvbench/markdown_printer.cu``)::

    # Devices                                  (console: the devices, then the log)
    ## [0] `Quadro GV100`
    * SM Version: 700 (PTX Version: 700)
    # Log
    Run:  [3/18] copy_sweep_grid_shape [Device=0 BlockSize=2^8 NumBlocks=2^6]
    # Benchmark Results
    ## copy_sweep_grid_shape
    ### [0] Quadro GV100
    | BlockSize | NumBlocks | Samples | CPU Time | Noise | GPU Time | Noise | Elem/s  | ...
    |-----------|-----------|---------|----------|-------|----------|-------|---------| ...
    | 2^8 = 256 |  2^6 = 64 |    672x | 2.172 ms | 0.75% | 2.167 ms | 0.70% | 30.975G | ...

A row is one state, read into the same metrics as ``nvbench_json`` (``_nvbench``). Its axis
columns come first: the ``Run:`` lines of the log name a benchmark's axes; without a log, the
columns before the first ``Samples`` (or time) column that do not hold sizes
(``64.000 MiB``: the benchmark's own memory columns). A power-of-two cell ``2^8 = 256`` is the
axis value ``2^8``, as in NVBench's state names. The measures are read by their titles:
``Samples`` (the first: cold; a later one, or ``Batch``: batch), ``CPU Time``, ``GPU Time``,
``Noise`` (of the time column before it), ``Elem/s`` (``30.975G``: SI prefixes),
``GlobalMem BW`` (``247.804 GB/s`` decimal, ``476.387 GiB/s`` binary in older versions),
``BWUtil`` / ``BWPeak``, ``Batch GPU``; any other column goes to ``attrs["columns"]``.
``No data -- check log.`` (every state skipped) gives nothing. A row that cannot be read is a
``ParseError`` naming its line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from perfci.core.compat import compile_linear
from perfci.core.errors import ParseError
from perfci.core.model import Profile
from perfci.core.units import NS_PER_UNIT
from perfci.formats._text_lines import open_text
from perfci.formats.bench._detectors import NVBENCH_MD
from perfci.formats.bench._nvbench import Results, State
from perfci.formats.caps import Budget, budget

if TYPE_CHECKING:
    pass

NAME = NVBENCH_MD.name
DESCRIPTION = NVBENCH_MD.description
sniff = NVBENCH_MD.sniff

_RESULTS = "# Benchmark Results"
_DEVICE_HEADING = compile_linear(r"## \[(\d++)\] `([^`]*+)`")  # under "# Devices"
_TABLE_DEVICE = compile_linear(r"### \[(\d++)\] (.++)")  # above a table
_SI = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BYTES = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "PB": 1e15}
_BYTES |= {"KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}
_MEASURES = frozenset(
    {"Samples", "CPU Time", "GPU Time", "Noise", "Elem/s", "GlobalMem BW", "BWUtil", "BWPeak"}
    | {"Batch GPU", "Batch"}
)


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """One profile per device of the markdown output ``path``."""
    reader = _Reader(str(path))
    with open_text(path, format=NAME) as handle:
        for lineno, line in enumerate(handle, 1):
            reader.feed(lineno, line.rstrip("\r\n"))
    profiles = reader.results.profiles()
    if not profiles:
        raise ParseError(
            "no NVBench results table: expected '# Benchmark Results' and a table with "
            "'Samples', 'GPU Time' and 'Noise' columns",
            source=str(path),
            format=NAME,
        )
    return profiles


@dataclass(slots=True)
class _Table:
    bench: str
    device: int | None
    titles: list[str]
    axes: int  # how many leading columns are axes
    divided: bool = False  # the |---| line was seen


@dataclass(slots=True)
class _Reader:
    source: str
    results: Results = field(init=False)
    section: str = ""
    bench: str = ""
    device: int | None = None
    logged_axes: dict[str, list[str]] = field(default_factory=dict)
    table: _Table | None = None
    budget: Budget = field(init=False)

    def __post_init__(self) -> None:
        self.results = Results(source=self.source, format=NAME)
        self.budget = budget(self.source, NAME)

    def feed(self, lineno: int, line: str) -> None:
        stripped = line.strip()
        if self.table is not None:
            if stripped.startswith("|"):
                self._table_line(lineno, stripped)
                return
            self.table = None
        if stripped.startswith("# "):
            self.section = stripped
        elif self.section == "# Devices" and (found := _DEVICE_HEADING.fullmatch(stripped)):
            self.device = int(found[1])
            self.results.devices[self.device] = {"id": self.device, "name": found[2]}
        elif self.section == "# Devices" and stripped.startswith("* ") and ": " in stripped:
            key, _, value = stripped[2:].partition(": ")  # "* SM Version: 700 (PTX ...)"
            self.results.devices.get(self.device, {})[key] = value
        elif stripped.startswith("Run:") and (run := _logged_run(stripped)):
            bench, values = run
            names = [part.partition("=")[0] for part in values.split(" ") if "=" in part]
            self.logged_axes[bench] = [name for name in names if name != "Device"]
        elif self.section == _RESULTS:
            self._results_line(stripped)

    def _results_line(self, stripped: str) -> None:
        if stripped.startswith("### "):
            found = _TABLE_DEVICE.fullmatch(stripped)
            if found:
                self.device = int(found[1])
                self.results.devices.setdefault(
                    self.device, {"id": self.device, "name": found[2].strip()}
                )
        elif stripped.startswith("## "):
            self.bench, self.device = stripped[3:].strip(), None
        elif stripped.startswith("|"):
            titles = _cells(stripped)
            self.table = _Table(self.bench, self.device, titles, self._axis_count(titles))

    def _axis_count(self, titles: list[str]) -> int:
        logged = self.logged_axes.get(self.bench)
        if logged is not None:
            return sum(1 for title in titles[: len(logged)] if title in logged)
        return next((i for i, t in enumerate(titles) if t in _MEASURES), len(titles))

    def _table_line(self, lineno: int, stripped: str) -> None:
        table = self.table
        assert table is not None
        if not table.divided:
            table.divided = set(stripped) <= {"|", "-", ":", " "}
            if not table.divided:
                raise ParseError(
                    "expected the |---| line under a table's titles",
                    source=self.source,
                    line=lineno,
                    format=NAME,
                )
            return
        cells = _cells(stripped)
        if len(cells) != len(table.titles):
            raise ParseError(
                f"expected {len(table.titles)} cells like the titles, got {len(cells)}",
                source=self.source,
                line=lineno,
                format=NAME,
            )
        try:
            state = _state(table, cells)
        except ValueError as exc:
            raise ParseError(
                f"cannot read this NVBench row: {exc}", source=self.source, line=lineno, format=NAME
            ) from exc
        self.results.add(state, self.budget)


def _logged_run(line: str) -> tuple[str, str] | None:
    """``Run:  [3/18] NAME [Device=0 A=x]`` (older: without ``[3/18]``) → ``(NAME, "Device=0
    A=x")``; read with ``str`` methods, linear on any line."""
    rest = line[4:].lstrip()
    if rest.startswith("["):
        close = rest.find("] ")
        if close < 0:
            return None
        rest = rest[close + 2 :]
    at = rest.rfind(" [")
    if at <= 0 or not rest.endswith("]"):
        return None
    return rest[:at], rest[at + 2 : -1]


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _state(table: _Table, cells: list[str]) -> State:
    axes: list[tuple[str, str]] = []
    state = State(bench=table.bench, axes=axes, device=table.device)
    count = table.axes
    for title, cell in zip(table.titles[:count], cells[:count], strict=True):
        if _is_size(cell):  # without a log: the benchmark's own memory column (InSize ...)
            state.other[title] = cell
            continue
        axes.append((title, cell.partition(" = ")[0] if cell.startswith("2^") else cell))
    samples_seen = False
    last_time = ""
    for title, cell in zip(table.titles[count:], cells[count:], strict=True):
        if title == "Samples" or title == "Batch":
            if samples_seen or title == "Batch":
                state.batch_samples = _count(cell)
            else:
                state.samples, samples_seen = _count(cell), True
        elif title in ("CPU Time", "GPU Time", "Batch GPU"):
            value = _ns(cell)
            if title == "CPU Time":
                state.cpu_ns = value
            elif title == "GPU Time":
                state.gpu_ns = value
            else:
                state.batch_ns = value
            last_time = title
        elif title == "Noise":
            if last_time == "CPU Time":
                state.cpu_noise_pct = _percent(cell)
            else:
                state.noise_pct = _percent(cell)
        elif title == "Elem/s":
            state.items_per_s = _si(cell)
        elif title == "GlobalMem BW":
            state.bandwidth = _byte_rate(cell)
        elif title in ("BWUtil", "BWPeak"):
            state.utilization_pct = _percent(cell)
        elif cell:
            state.other[title] = cell
    return state


def _is_size(cell: str) -> bool:
    number, _, unit = cell.partition(" ")
    return unit in _BYTES and number.replace(".", "", 1).isdigit()


def _count(cell: str) -> int:
    if not cell.endswith("x") or not cell[:-1].isdigit():
        raise ValueError(f"expected a sample count such as 672x, got {cell!r}")
    return int(cell[:-1])


def _ns(cell: str) -> float:
    number, _, unit = cell.partition(" ")
    if unit not in NS_PER_UNIT:
        raise ValueError(f"expected a time such as 2.167 ms, got {cell!r}")
    return float(number) * NS_PER_UNIT[unit]


def _percent(cell: str) -> float:
    if not cell.endswith("%"):
        raise ValueError(f"expected a percentage such as 0.70%, got {cell!r}")
    return float(cell[:-1])


def _si(cell: str) -> float:
    prefix = cell[-1:] if cell[-1:] in _SI else ""
    try:
        return float(cell[: len(cell) - len(prefix)]) * _SI[prefix]
    except ValueError:
        raise ValueError(f"expected a rate such as 30.975G, got {cell!r}") from None


def _byte_rate(cell: str) -> float:
    number, _, unit = cell.partition(" ")
    factor = _BYTES.get(unit.removesuffix("/s")) if unit.endswith("/s") else None
    if factor is None:
        raise ValueError(f"expected a bandwidth such as 247.804 GB/s, got {cell!r}")
    return float(number) * factor
