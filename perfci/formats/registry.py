"""Format detection and dispatch: the one list of formats, each a detector and its reader.

Every format is a reader module that satisfies ``protocol.FormatParser`` (``NAME``,
``DESCRIPTION``, ``sniff(head)``, ``parse(path, options=...)``), grouped by family under
``formats/<family>/``, and a ``protocol.Detector`` in its family's ``_detectors`` module (the
name, description and sniff, which the reader re-exports). Adding a format is the reader
module, its detector, its line in ``PARSERS`` and its tests.

``PARSERS`` holds the detectors and the dotted paths of the readers: detection and
``perfci formats`` import no reader, and a reader (with numpy, for the Chrome trace and the
SQLite export) is imported when a file of its format is read (issue 33: importing every
reader was most of the time of ``perfci parse`` on a small file).

Detection tries formats in ``PARSERS`` order: the most specific first, so that a generic
sniff (CSV with a header) never shadows a precise one.
"""

from __future__ import annotations

import gzip
import importlib
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from perfci.core.errors import ParseError, PerfciError, UnknownFormatError
from perfci.formats._shape import describe
from perfci.formats.bench import _detectors as bench
from perfci.formats.mlperf import _detectors as mlperf
from perfci.formats.native import _detectors as native
from perfci.formats.ncu import _detectors as ncu
from perfci.formats.nsys import _detectors as nsys
from perfci.formats.nvprof import _detectors as nvprof
from perfci.formats.protocol import Detector, FormatParser, Head
from perfci.formats.pytorch import _detectors as pytorch
from perfci.formats.workload import _detectors as workload

if TYPE_CHECKING:
    from perfci.core.model import Profile

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
HISTORY_FORMATS = frozenset({bench.ACTION_BENCHMARK_HISTORY.name})


@dataclass(frozen=True, slots=True)
class FormatSpec:
    """One registered format: its detector, and the module that reads its files.

    ``reader`` is a dotted module path, imported by :meth:`load` (and so by :meth:`parse`)
    only: listing and sniffing formats never imports a reader.
    """

    detector: Detector
    reader: str

    @property
    def name(self) -> str:
        return self.detector.name

    @property
    def description(self) -> str:
        return self.detector.description

    @property
    def sniff(self) -> Callable[[Head], bool]:
        return self.detector.sniff

    def load(self) -> FormatParser:
        """The reader module (imported on first use; Python keeps it for the next)."""
        return cast(FormatParser, importlib.import_module(self.reader))

    def parse(self, path: Path, *, options: Mapping[str, str]) -> list[Profile]:
        """The profiles in ``path``, read by this format's reader."""
        return self.load().parse(path, options=options)


def _format(detector: Detector, family: str) -> FormatSpec:
    """The format of ``detector``, read by ``perfci.formats.<family>.<name>``."""
    return FormatSpec(detector, f"perfci.formats.{family}.{detector.name}")


# Detection order matters: binary and strongly-marked formats first, generic tables last.
PARSERS: tuple[FormatSpec, ...] = (
    _format(nsys.NSYS_SQLITE, "nsys"),
    # typed leading keys: before the sniffers that find a word anywhere in the head
    _format(bench.VLLM_BENCH, "bench"),
    _format(native.PERFCI_JSON, "native"),
    _format(pytorch.CHROME_TRACE, "pytorch"),
    # its "meta"/"devices" keys and nv/ summary tags: before the other JSON
    _format(bench.NVBENCH_JSON, "bench"),
    _format(bench.GOOGLE_BENCHMARK, "bench"),
    _format(bench.PYTEST_BENCHMARK, "bench"),
    _format(bench.OPTIMUM_BENCHMARK, "bench"),
    _format(bench.ACTION_BENCHMARK, "bench"),
    # window.BENCHMARK_DATA = {...}, or its JSON object
    _format(bench.ACTION_BENCHMARK_HISTORY, "bench"),
    _format(bench.TORCHBENCH, "bench"),
    # trainer_state.json's keys, or a flat object of numbers with <split>_runtime
    _format(bench.HF_TRAINER, "bench"),
    _format(mlperf.MLPERF_LOG, "mlperf"),
    _format(bench.BMF, "bench"),  # no marker key: after every other JSON format
    # a quoted "ID",…,"Kernel Name" header: before the text and CSV tables
    _format(ncu.NCU_CSV, "ncu"),
    _format(ncu.NCU_TEXT, "ncu"),  # ==PROF== lines, as ncu_csv's files have too: after it
    # a fixed "dev,name,batch_size," header: before the generic tables
    _format(bench.DYNAMO_CSV, "bench"),
    _format(mlperf.MLPERF_SUMMARY, "mlperf"),  # its title between "====" rules
    # "# Benchmark Results" and NVBench's columns: before the generic tables
    _format(bench.NVBENCH_MD, "bench"),
    _format(nsys.NSYS_STATS, "nsys"),
    _format(nsys.NSYS_STATS_CSV, "nsys"),
    _format(nvprof.NVPROF, "nvprof"),
    _format(pytorch.PYTORCH_TABLE, "pytorch"),
    _format(workload.MEGATRON_TRACE, "workload"),
    _format(workload.DEEPSPEED_COMMS, "workload"),
    # a Megatron-DeepSpeed log with comms_logger lines stays deepspeed_comms's
    _format(workload.MEGATRON_LOG, "workload"),
    # its '# nThread' header; after the training logs a pre-flight run may open
    _format(workload.NCCL_TESTS, "workload"),
    # a fixed SimAI header or summary line 1: before the generic tables
    _format(workload.SIMAI_RESULTS, "workload"),
    _format(workload.WORKLOAD_TABLE, "workload"),
)


def formats() -> dict[str, FormatSpec]:
    """All registered formats by name, in detection order."""
    return {spec.name: spec for spec in PARSERS}


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
