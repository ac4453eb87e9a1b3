"""Layer workload tables and AICB workload files.

Dialects, detected from content (``dialect`` option to force one):

========== ====================================================== ====================
dialect    what                                                   default ``time_unit``
========== ====================================================== ====================
tsv        header-row TSV (``name forward_compute_time ...``)     ``ms``
astrasim   ASTRA-sim 1.0 text workload                            ``cycles``
simai      the same layout written by AICB for SimAI              ``ns``
aiob       AICB AIOB compute file (``train_iter:10`` + blocks)    ``us``
aicb_csv   AICB physical / post-run communication CSV             (``_elapsed_time`` ms)
========== ====================================================== ====================

``time_unit`` (``ns``, ``us``, ``ms``, ``s`` or ``cycles``) says what the compute-time numbers
mean; it is an option because the same layout is written by tools with different units.

* ``tsv`` = ms. The layout is the ``Work_Item`` dump of a NeuSight-based workload generator (the
  same eleven columns in the same order, fx node names, ``*_grad`` rows that carry only the
  all-reduce); its compute times are NeuSight per-operator latency predictions, marked ``# ms``
  where the generator assigns them. The values are consistent with that: the sizes say
  GPT-2-large at TP=2 in bf16 (``addmm_grad`` 4,919,040 B = (1280·1920 + 1920) × 2 B), the MLP
  ``addmm_2`` / attention ``addmm`` time ratio 13.16 / 9.98 = 1.32 matches their 4/3 FLOP
  ratio, and 9.98 ms for a 1280 x 1920 GEMM is a realistic training micro-batch, where 9.98 µs
  would leave room for only a few hundred tokens. (Ratios alone cannot fix a unit; the
  generator's annotation is what decides it.) ``4.79e-09`` on a ``getitem`` means "free".
* ``astrasim`` = cycles (ASTRA-sim 1.0 README: "compute times are denoted in cycles"). No
  clock rate is given, so cycles are stored 1:1 as ns and ``metadata["time_unit"]`` says so;
  pass ``time_unit`` when the real unit is known (Chakra's converter reads them as µs).
* ``simai`` = ns (AICB writes AIOB µs × 1000; SimAI divides by its tick rate).
* ``aiob`` = µs (AICB's ``time_gpu_*`` fields).

What becomes which metric is described in ``_layer_metrics`` (layer tables) and ``_aicb``
(CSV and AIOB files).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from itertools import chain, islice
from pathlib import Path
from typing import Any

from perfci.core.errors import ConfigError, ParseError
from perfci.core.model import Profile
from perfci.formats._textio import gc_paused, iter_lines
from perfci.formats.workload import _aicb, _layer_readers
from perfci.formats.workload._detectors import SNIFF_LINES, WORKLOAD_TABLE, family
from perfci.formats.workload._layer_metrics import LayerTable, TableError

NAME = WORKLOAD_TABLE.name
DESCRIPTION = WORKLOAD_TABLE.description
sniff = WORKLOAD_TABLE.sniff

DEFAULT_TIME_UNIT = {
    "tsv": "ms",
    "astrasim": "cycles",
    "simai": "ns",
    "aiob": "us",
    "aicb_csv": "ms",
}
DIALECTS = tuple(DEFAULT_TIME_UNIT)
TIME_UNITS = ("ns", "us", "ms", "s", "cycles")
_LABEL = "workload"
_CYCLES_NOTE = (
    "compute times are ASTRA-sim cycles stored 1:1 as ns (no clock rate in the "
    "file); pass time_unit=us|ns|... when the producing tool's unit is known"
)


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """The one profile of a workload file, read line by line."""
    dialect, unit = _options(options)
    with gc_paused(settle=True):
        lines = iter_lines(path, format=NAME)
        head = list(islice(lines, SNIFF_LINES))
        if head:
            head[0] = head[0].removeprefix("\ufeff")
        kind = _family_of(dialect) if dialect else family("\n".join(head))
        if kind is None:
            raise ParseError(
                "not a workload table: expected a parallelism line (DATA, "
                "HYBRID_..., MICRO), a 'name\\t..._compute_time' header, a "
                "'comm_type,comm_group,...' header or 'train_iter:<N>'",
                source=str(path),
                line=1,
                format=NAME,
            )
        try:
            profile = _READERS[kind](chain(head, lines), dialect, unit)
        except TableError as exc:
            raise ParseError(str(exc), source=str(path), line=exc.line, format=NAME) from exc
    profile.source = str(path)
    if not profile.metrics:
        profile.warnings.append("no row had a compute time, a communication or a timing")
    return [profile]


def _options(options: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The ``dialect`` and ``time_unit`` options, validated."""
    dialect = options.get("dialect") or None
    unit = options.get("time_unit") or None
    if dialect is not None and dialect not in DIALECTS:
        raise ConfigError(
            f"workload_table: unknown dialect {dialect!r}; valid: {', '.join(DIALECTS)}"
        )
    if unit is not None:
        unit = "us" if unit in ("µs", "μs") else unit
        if unit not in TIME_UNITS:
            raise ConfigError(
                f"workload_table: unknown time_unit {unit!r}; valid: {', '.join(TIME_UNITS)}"
            )
    return dialect, unit


def _family_of(dialect: str) -> str:
    return "layers" if dialect in ("astrasim", "simai") else dialect


def _unit_metadata(dialect: str, unit: str | None) -> tuple[str, dict[str, Any]]:
    """The unit to use, and the metadata that records it and where it came from."""
    chosen = unit or DEFAULT_TIME_UNIT[dialect]
    meta: dict[str, Any] = {
        "dialect": dialect,
        "time_unit": chosen,
        "time_unit_source": "option" if unit else "dialect default",
    }
    if chosen == "cycles":
        meta["time_unit_note"] = _CYCLES_NOTE
    return chosen, meta


def _read_layers(lines: Iterable[str], dialect: str | None, unit: str | None) -> Profile:
    # Both dialects' default units are 1 ns per number, so the metrics need no dialect.
    table = _layer_readers.read_astrasim(lines, unit=unit or "cycles")
    if dialect is None:
        dialect = "simai" if table.simai else "astrasim"
    _, meta = _unit_metadata(dialect, unit)
    return _layer_profile(table, meta)


def _read_tsv(lines: Iterable[str], dialect: str | None, unit: str | None) -> Profile:
    chosen, meta = _unit_metadata("tsv", unit)
    table = _layer_readers.read_tsv(lines, unit=chosen)
    return _layer_profile(table, meta)


def _layer_profile(table: LayerTable, meta: dict[str, Any]) -> Profile:
    """The profile of a table of layers, its metadata after ``meta`` (the dialect, the unit)."""
    return Profile(
        label=_LABEL,
        format=NAME,
        source="",
        metrics=table.metrics,
        metadata={**meta, **table.metadata, "layers": table.rows},
    )


def _read_comm_csv(lines: Iterable[str], dialect: str | None, unit: str | None) -> Profile:
    result = _aicb.read_comm_csv(lines)
    meta = {"dialect": "aicb_csv", "time_unit": "ms (converted to ns)"}
    return Profile(
        label=_LABEL,
        format=NAME,
        source="",
        metrics=result.metrics,
        steps=result.steps,
        metadata={**meta, **result.metadata},
    )


def _read_aiob(lines: Iterable[str], dialect: str | None, unit: str | None) -> Profile:
    chosen, meta = _unit_metadata("aiob", unit)
    if chosen == "cycles":
        raise ConfigError("workload_table: time_unit=cycles does not apply to AIOB files")
    metrics, iterations = _aicb.read_aiob(lines, unit=chosen)
    return Profile(
        label=_LABEL,
        format=NAME,
        source="",
        metrics=metrics,
        steps=iterations or None,
        metadata={**meta, "train_iter": iterations},
    )


_READERS: dict[str, Callable[[Iterable[str], str | None, str | None], Profile]] = {
    "layers": _read_layers,
    "tsv": _read_tsv,
    "aicb_csv": _read_comm_csv,
    "aiob": _read_aiob,
}
