"""The layer contracts (``[tool.importlinter]`` in pyproject.toml) hold, and breaking one fails.

``lint-imports`` runs on the checkout, and on a copy of the package with one import added in
the wrong direction: the contract it breaks is reported and the exit status is not 0.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from deadlines import scaled

pytest.importorskip("importlinter", reason="import-linter (the dev extra) is not installed")

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

pytestmark = pytest.mark.skipif(
    not (ROOT / "pyproject.toml").is_file() or not LINT_IMPORTS.is_file(),
    reason="needs a source checkout with lint-imports beside the interpreter",
)


def _lint_imports(root: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` in ``root``, importing ``perfci`` from there (not from the checkout)."""
    env = {**os.environ, "PYTHONPATH": str(root), "NO_COLOR": "1"}
    selected = [arg for contract in contracts for arg in ("--contract", contract)]
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", *selected],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(300),
        check=False,
    )


def _copy_with(tmp_path: Path, module: str, source: str) -> Path:
    """A copy of the package and its contracts, plus ``module`` (a dotted name) holding
    ``source``."""
    shutil.copytree(
        ROOT / "perfci", tmp_path / "perfci", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    path = tmp_path.joinpath(*module.split(".")).with_suffix(".py")
    path.write_text(source, encoding="utf-8")
    return tmp_path


def test_the_checkout_keeps_every_contract() -> None:
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_a_command_importing_the_store_breaks_the_thin_shell_contract(tmp_path: Path) -> None:
    root = _copy_with(tmp_path, "perfci.cli.sneaky_cmd", "import perfci.store.db  # noqa\n")
    result = _lint_imports(root, "thin-shells")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "perfci.cli.sneaky_cmd -> perfci.store.db" in result.stdout
    assert "BROKEN" in result.stdout


def test_analysis_importing_a_use_case_breaks_the_layers(tmp_path: Path) -> None:
    # Upward through an unlisted module counts too: analysis -> a helper -> usecases.
    root = _copy_with(tmp_path, "perfci.analysis.sneaky", "import perfci.sneaky_helper  # noqa\n")
    (root / "perfci" / "sneaky_helper.py").write_text(
        "import perfci.usecases.submit.compare  # noqa\n", encoding="utf-8"
    )
    result = _lint_imports(root, "layers")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "perfci.analysis is not allowed to import perfci.usecases" in result.stdout


def test_a_parser_reaching_for_the_database_breaks_the_pure_core(tmp_path: Path) -> None:
    root = _copy_with(tmp_path, "perfci.formats.sneaky", "import sqlalchemy  # noqa\n")
    result = _lint_imports(root, "pure-core")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "perfci.formats is not allowed to import sqlalchemy" in result.stdout


@pytest.mark.parametrize("library", ["sqlalchemy", "subprocess", "requests"])
def test_a_use_case_writing_sql_or_starting_a_process_breaks_its_contract(
    tmp_path: Path, library: str
) -> None:
    root = _copy_with(tmp_path, "perfci.usecases.sneaky", f"import {library}  # noqa\n")
    result = _lint_imports(root, "usecases-orchestrate")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"perfci.usecases is not allowed to import {library}" in result.stdout
