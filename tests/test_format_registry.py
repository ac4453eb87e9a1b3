"""The format registry: every format module under ``perfci/formats/`` is registered, each
reader satisfies ``FormatParser`` with its detector's name, description and sniff, and
``perfci formats`` keeps its detection order."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest
import tomllib

import perfci.formats
from perfci.cli.main import main
from perfci.formats import registry
from perfci.formats.protocol import FormatParser

#: The detection order ``perfci formats`` has always printed: most specific sniff first.
DETECTION_ORDER = (
    "nsys_sqlite",
    "vllm_bench",
    "perfci_json",
    "chrome_trace",
    "nvbench_json",
    # JSON benchmark harnesses: marked by their keys; BMF, which has none, last of them.
    "google_benchmark",
    "pytest_benchmark",
    "optimum_benchmark",
    "action_benchmark",
    "action_benchmark_history",
    "torchbench",
    "hf_trainer",
    "mlperf_log",
    "bmf",
    "ncu_csv",
    "ncu_text",
    "dynamo_csv",
    "mlperf_summary",
    "nvbench_md",
    "nsys_stats",
    "nsys_stats_csv",
    "nvprof",
    "pytorch_table",
    "megatron_trace",
    "deepspeed_comms",
    "megatron_log",
    "nccl_tests",
    "simai_results",
    "workload_table",
)

#: Top-level modules of ``perfci/formats/`` that are machinery, not formats.
NOT_FORMATS = frozenset(
    {"perfci.formats.registry", "perfci.formats.protocol", "perfci.formats.caps"}
)


def _all_modules() -> list[ModuleType]:
    """Every module in the ``perfci.formats`` package tree, imported."""
    found = pkgutil.walk_packages(perfci.formats.__path__, prefix="perfci.formats.")
    return [importlib.import_module(info.name) for info in found if not info.ispkg]


def _is_public(module: ModuleType) -> bool:
    return not any(part.startswith("_") for part in module.__name__.split("."))


def test_every_public_format_module_is_registered() -> None:
    public = {m.__name__ for m in _all_modules() if _is_public(m)} - NOT_FORMATS
    registered = {spec.reader for spec in registry.PARSERS}
    assert public == registered


def test_no_private_module_is_a_parser_by_shape() -> None:
    # A module with the protocol's shape but a private name would never be detected.
    shaped = {
        m.__name__
        for m in _all_modules()
        if all(hasattr(m, name) for name in ("NAME", "DESCRIPTION", "sniff", "parse"))
    }
    assert shaped == {spec.reader for spec in registry.PARSERS}


def test_formats_live_in_family_subpackages_and_are_named_after_themselves() -> None:
    for spec in registry.PARSERS:
        family = spec.reader.split(".")
        assert len(family) == 4, f"{spec.reader} is not in a family subpackage of formats/"
        assert family[-1] == spec.name == spec.load().NAME
        # Its detector lives beside it, in its family's light module.
        assert spec.sniff.__module__ == ".".join([*family[:3], "_detectors"])


@pytest.mark.parametrize("spec", registry.PARSERS, ids=[spec.name for spec in registry.PARSERS])
def test_every_reader_satisfies_the_protocol_with_its_detector(spec: registry.FormatSpec) -> None:
    """What mypy checked when the registry listed the modules: now that it lists their paths
    (imported on first use), this checks each reader against ``FormatParser``."""
    reader = spec.load()
    assert (reader.NAME, reader.DESCRIPTION, reader.sniff) == (
        spec.detector.name,
        spec.detector.description,
        spec.detector.sniff,
    )
    parameters = inspect.signature(reader.parse).parameters
    assert list(parameters) == ["path", "options"]
    assert parameters["options"].kind is inspect.Parameter.KEYWORD_ONLY


def test_registry_order_names_and_descriptions() -> None:
    specs = registry.formats()
    assert tuple(specs) == DETECTION_ORDER
    for name, spec in specs.items():
        assert spec.name == name
        assert spec.description and "\n" not in spec.description
        parser: FormatParser = importlib.import_module(spec.reader)  # type: ignore[assignment]
        assert spec.sniff == parser.sniff and spec.load() is parser


def test_perfci_formats_lists_them_in_detection_order(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["formats"]) == 0
    # Names start their row; a description too long for the terminal wraps onto indented lines.
    lines = capsys.readouterr().out.splitlines()[1:]
    rows = [line.split()[0] for line in lines if line[:1].strip()]
    assert tuple(rows) == DETECTION_ORDER


def test_every_format_family_is_shipped_in_the_wheel() -> None:
    # setuptools lists packages explicitly: a family missing there imports in a checkout and
    # fails with ModuleNotFoundError once installed.
    pyproject = Path(perfci.formats.__file__).parents[2] / "pyproject.toml"
    if not pyproject.is_file():
        pytest.skip("perfci is imported from an installed copy, not from a source checkout")
    declared = set(
        tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]
    )
    found = pkgutil.walk_packages(perfci.formats.__path__, prefix="perfci.formats.")
    packages = {"perfci.formats"} | {info.name for info in found if info.ispkg}
    assert packages <= declared
