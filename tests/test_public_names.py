"""The public names users and the documentation rely on stay where they are.

A refactor may move anything private; these names are the ones README, docs/ and the examples
tell people to import or run, so moving one is a breaking change and must fail here first.
"""

from __future__ import annotations

import importlib
import inspect
from importlib.metadata import PackageNotFoundError, entry_points, version
from pathlib import Path

import pytest
import tomllib

import perfci

ROOT = Path(__file__).resolve().parents[1]

#: module → names the documentation tells users to import from it.
DOCUMENTED = {
    "perfci.analysis.compare": ("compare", "compare_run", "judge_estimates", "CompareOptions"),
    "perfci.analysis.paired": ("compare_paired",),
    "perfci.formats.registry": ("parse_file", "formats"),
}


def test_the_package_all_is_sorted_and_importable() -> None:
    assert perfci.__all__ == sorted(perfci.__all__)
    for name in perfci.__all__:
        assert getattr(perfci, name) is not None, name


def test_the_version_is_the_projects() -> None:
    pyproject = ROOT / "pyproject.toml"
    if not pyproject.is_file():
        pytest.skip("perfci is imported from an installed copy, not from a source checkout")
    declared = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]
    assert perfci.__version__ == declared


@pytest.mark.parametrize("module", sorted(DOCUMENTED))
def test_documented_entry_points_are_public_callables(module: str) -> None:
    imported = importlib.import_module(module)
    exported = getattr(imported, "__all__", None)
    for name in DOCUMENTED[module]:
        assert callable(getattr(imported, name)), f"{module}.{name}"
        if exported is not None:
            assert name in exported, f"{module}.{name} is missing from its __all__"


def test_profile_steps_is_a_context_manager_for_torch_users() -> None:
    # perfci.integrations.torch imports torch only when used: the name must exist without torch.
    from perfci.integrations.torch import profile_steps

    assert inspect.isclass(profile_steps) or callable(profile_steps)
    assert hasattr(profile_steps, "__enter__") and hasattr(profile_steps, "__exit__")


def test_the_perfci_console_script_runs_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        version("perfci")
    except PackageNotFoundError:
        pytest.skip("perfci is not installed (no console-script metadata)")
    (script,) = entry_points(group="console_scripts", name="perfci")
    assert script.value == "perfci.cli.main:main"
    main = script.load()
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"perfci {perfci.__version__}"


def test_the_upload_limits_are_the_settings_defaults() -> None:
    # perfci.core.limits is what `perfci serve --help` prints without loading the settings.
    from perfci.core import limits
    from perfci.core.settings import Settings

    settings = Settings()
    for name in (
        "max_body_bytes",
        "max_metrics",
        "max_samples",
        "max_inflated_bytes",
        "max_inflation_ratio",
    ):
        assert getattr(limits, name.upper()) == getattr(settings, name), name
