"""Format detection and dispatch: a plain table of the imported parser modules.

Every parser is a module that satisfies ``protocol.FormatParser`` (``NAME``, ``DESCRIPTION``,
``sniff(head)``, ``parse(path, options=...)``), grouped by family under ``formats/<family>/``.
Adding a format is one module, its line in ``PARSERS`` and its tests.

Detection tries formats in ``PARSERS`` order: the most specific first, so that a generic
sniff (CSV with a header) never shadows a precise one.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from perfci.core.errors import ParseError, PerfciError, UnknownFormatError
from perfci.core.model import Profile
from perfci.formats._shape import describe
from perfci.formats.bench import (
    action_benchmark,
    action_benchmark_history,
    bmf,
    dynamo_csv,
    google_benchmark,
    hf_trainer,
    nvbench_json,
    nvbench_md,
    optimum_benchmark,
    pytest_benchmark,
    torchbench,
    vllm_bench,
)
from perfci.formats.mlperf import mlperf_log, mlperf_summary
from perfci.formats.native import perfci_json
from perfci.formats.ncu import ncu_csv, ncu_text
from perfci.formats.nsys import nsys_sqlite, nsys_stats, nsys_stats_csv
from perfci.formats.nvprof import nvprof
from perfci.formats.protocol import FormatParser, Head
from perfci.formats.pytorch import chrome_trace, pytorch_table
from perfci.formats.workload import (
    deepspeed_comms,
    megatron_log,
    megatron_trace,
    nccl_tests,
    simai_results,
    workload_table,
)

__all__ = [
    "HEAD_BYTES",
    "HISTORY_FORMATS",
    "PARSERS",
    "FormatSpec",
    "Head",
    "detect",
    "formats",
    "get_format",
    "parse_file",
    "read_head",
]

HEAD_BYTES = 256 * 1024

_NSYS_EXPORT = (
    "export it with `nsys export --type sqlite FILE` (or print `nsys stats FILE`) and give "
    "perfci the result"
)
#: Profilers' own binary reports, which perfci reads only once exported: what to run instead.
_NATIVE_REPORTS = {
    ".nsys-rep": f"it looks like an Nsight Systems report: {_NSYS_EXPORT}",
    ".qdrep": f"it looks like an (older) Nsight Systems report: {_NSYS_EXPORT}",
    ".qdstrm": (
        "it looks like an unfinished Nsight Systems capture (.qdstrm): let nsys finish the "
        "report, then export it with `nsys export --type sqlite`"
    ),
    ".ncu-rep": (
        "it looks like an Nsight Compute report: print it with `ncu --import FILE --csv` "
        "(or `--page raw --csv`) and give perfci that output"
    ),
}

#: Formats whose file is a history (a profile per commit), not the repeats of one run: stored
#: by ``perfci import-history``, refused as a run.
HISTORY_FORMATS = frozenset({action_benchmark_history.NAME})

# Detection order matters: binary and strongly-marked formats first, generic tables last.
PARSERS: tuple[FormatParser, ...] = (
    nsys_sqlite,
    vllm_bench,  # typed leading keys: before the sniffers that find a word anywhere in the head
    perfci_json,
    chrome_trace,
    nvbench_json,  # its "meta"/"devices" keys and nv/ summary tags: before the other JSON
    google_benchmark,
    pytest_benchmark,
    optimum_benchmark,
    action_benchmark,
    action_benchmark_history,  # window.BENCHMARK_DATA = {...}, or its JSON object
    torchbench,
    hf_trainer,  # trainer_state.json's keys, or a flat object of numbers with <split>_runtime
    mlperf_log,
    bmf,  # no marker key: after every other JSON format
    ncu_csv,  # a quoted "ID",…,"Kernel Name" header: before the text and CSV tables
    ncu_text,  # ==PROF== lines, as ncu_csv's files have too: after it
    dynamo_csv,  # a fixed "dev,name,batch_size," header: before the generic tables
    mlperf_summary,  # its title between "====" rules
    nvbench_md,  # "# Benchmark Results" and NVBench's columns: before the generic tables
    nsys_stats,
    nsys_stats_csv,
    nvprof,
    pytorch_table,
    megatron_trace,
    deepspeed_comms,
    megatron_log,  # a Megatron-DeepSpeed log with comms_logger lines stays deepspeed_comms's
    nccl_tests,  # its '# nThread' header; after the training logs a pre-flight run may open
    simai_results,  # a fixed SimAI header or summary line 1: before the generic tables
    workload_table,
)


@dataclass(frozen=True, slots=True)
class FormatSpec:
    """One registered format as ``perfci formats``, detection and ``parse_file`` use it."""

    name: str
    description: str
    sniff: Callable[[Head], bool]
    parse: Callable[..., list[Profile]]


def _spec(parser: FormatParser) -> FormatSpec:
    return FormatSpec(
        name=parser.NAME, description=parser.DESCRIPTION, sniff=parser.sniff, parse=parser.parse
    )


def formats() -> dict[str, FormatSpec]:
    """All registered formats by name, in detection order."""
    specs = (_spec(parser) for parser in PARSERS)
    return {spec.name: spec for spec in specs}


def read_head(path: Path, size: int = HEAD_BYTES) -> Head:
    """The start of ``path`` (gunzipped when it is gzip) for sniffing."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(size)
    except OSError as exc:
        raise ParseError(f"cannot read file: {exc.strerror}", source=str(path)) from exc
    gzipped = raw[:2] == b"\x1f\x8b"
    if gzipped:
        try:
            with gzip.open(path, "rb") as handle:
                raw = handle.read(size)
        except (OSError, EOFError, zlib.error):
            pass  # a cut-short or damaged gzip: sniff what decompressed, the parser says the rest
    text = raw.decode("utf-8", errors="replace")
    return Head(raw=raw, text=text, gzipped=gzipped)


def get_format(name: str) -> FormatSpec:
    """The parser registered as ``name``; the error lists the valid names."""
    registered = formats()
    if name not in registered:
        valid = ", ".join(registered)
        raise UnknownFormatError(f"unknown format {name!r}; known formats: {valid}")
    return registered[name]


def detect(path: Path) -> FormatSpec:
    """The first format whose ``sniff`` accepts the start of ``path``."""
    head = read_head(path)
    for spec in formats().values():
        try:
            if spec.sniff(head):
                return spec
        except Exception:  # noqa: BLE001 - a sniffer that chokes just means "not mine"
            continue
    hint = _NATIVE_REPORTS.get(path.suffix.lower())
    raise UnknownFormatError(
        f"{path}: {describe(head.text)}: not a format perfci reads; "
        + (hint if hint else "see `perfci formats` (or force one with --format NAME)")
    )


def parse_file(
    path: Path, *, format: str | None = None, options: Mapping[str, str] | None = None
) -> list[Profile]:
    """Parse ``path`` with the named format, or the detected one.

    Anything other than a ``PerfciError`` escaping a parser is a bug in that parser; it
    is still reported as a ``ParseError`` naming the file so that users never see a
    traceback for a bad input.
    """
    path = Path(path)
    if not path.is_file():
        raise ParseError("no such file", source=str(path))
    spec = get_format(format) if format else detect(path)
    try:
        return spec.parse(path, options=dict(options or {}))
    except ParseError as exc:
        if exc.source:
            raise
        # A reader's helper that does not know the file (a cap counted deep in a table).
        raise type(exc)(
            exc.message, source=str(path), line=exc.line, format=exc.format or spec.name
        ) from exc
    except PerfciError:
        raise
    except (
        ValueError,
        KeyError,
        IndexError,
        TypeError,
        OSError,
        EOFError,
        UnicodeDecodeError,
        RecursionError,
        ArithmeticError,  # a number whose sums or means overflow (issue 31)
    ) as exc:
        raise ParseError(f"unreadable input: {exc}", source=str(path), format=spec.name) from exc
