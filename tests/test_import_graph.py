"""No module of perfci imports a module that imports it back, directly or through others.

grimp builds the graph as ``lint-imports`` sees it: imports inside functions and under
``TYPE_CHECKING`` count, since either can turn into a circular import when code moves. A cycle is
a strongly connected component of more than one module (Tarjan's algorithm), reported by name;
a throwaway package with a cycle shows that the check finds one.

An import inside a function is one that only some commands need (``perfci --help`` and the
short commands start without the rest, tests/test_cold_start.py): each says why in a one-line
``# lazy:`` comment, so that it is neither moved up by mistake nor left there without a reason.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Set
from pathlib import Path

import pytest


def import_cycles(imports: Mapping[str, Set[str]]) -> list[list[str]]:
    """The cycles of ``imports`` (module -> the modules it imports): each strongly connected
    component of more than one module, sorted, found with Tarjan's algorithm."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(imports.get(module, ())):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(imports):
        if module not in index:
            visit(module)
    return sorted(cycles)


def package_cycles(package: str) -> list[list[str]]:
    """The import cycles among the modules of ``package`` (importable from ``sys.path``)."""
    grimp = pytest.importorskip("grimp", reason="grimp (import-linter's, the dev extra) is missing")
    graph = grimp.build_graph(package, cache_dir=None)
    return import_cycles({m: graph.find_modules_directly_imported_by(m) for m in graph.modules})


def test_perfci_has_no_import_cycle() -> None:
    cycles = package_cycles("perfci")
    assert cycles == [], "modules importing each other back:\n" + "\n".join(
        " <-> ".join(cycle) for cycle in cycles
    )


def test_a_cycle_through_a_function_and_type_checking_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "loopy"
    package.mkdir()
    sources = {
        "__init__.py": "",
        "a.py": "import loopy.b\n",
        "b.py": "def f() -> None:\n    import loopy.c\n",
        "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import loopy.a\n",
        "d.py": "import loopy.a\n",  # imports the cycle, is not part of it
        "e.py": "import loopy.f\n",
        "f.py": "import loopy.e\n",
    }
    for name, source in sources.items():
        (package / name).write_text(source, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert package_cycles("loopy") == [["loopy.a", "loopy.b", "loopy.c"], ["loopy.e", "loopy.f"]]


# --- imports inside functions say why they are there ----------------------------------------

ROOT = Path(__file__).resolve().parents[1]
LAZY = "# lazy:"


def unexplained_imports(source: str) -> list[int]:
    """The lines of the imports inside functions of ``source`` that carry no ``# lazy:`` comment:
    on their line, on the line above them (or above the run of imports they close), or, for a
    whole module, at the top before its first import."""
    lines = source.splitlines()
    tree = ast.parse(source)
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    first = min(
        (n.lineno for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)),
        default=len(lines) + 1,
    )
    if any(line.startswith(LAZY) for line in lines[: first - 1]):
        return []
    import_lines = {i for n in imports for i in range(n.lineno, (n.end_lineno or n.lineno) + 1)}
    in_functions = [
        n
        for f in ast.walk(tree)
        if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
        for n in ast.walk(f)
        if isinstance(n, ast.Import | ast.ImportFrom)
    ]
    missing = set()
    for node in in_functions:
        above = node.lineno - 1
        while above in import_lines:
            above -= 1
        if LAZY not in lines[node.lineno - 1] and not lines[above - 1].lstrip().startswith(LAZY):
            missing.add(node.lineno)
    return sorted(missing)


def test_every_import_inside_a_function_says_why() -> None:
    missing = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "perfci").rglob("*.py"))
        for line in unexplained_imports(path.read_text(encoding="utf-8"))
    ]
    assert missing == [], (
        "an import inside a function needs a one-line `# lazy: why` above it (or move it to the "
        "module's imports):\n" + "\n".join(missing)
    )


def test_an_import_inside_a_function_without_a_reason_is_reported() -> None:
    source = (
        '"""A module."""\n'
        "import os\n"
        "\n"
        "def explained() -> None:\n"
        "    # lazy: json only here\n"
        "    import json\n"
        "    import csv\n"
        "\n"
        "def inline() -> None:\n"
        "    import re  # lazy: re only here\n"
        "\n"
        "def unexplained() -> None:\n"
        "    x = 1\n"
        "    import shutil\n"
        "    from typing import (\n"
        "        Any,\n"
        "    )\n"
    )
    assert unexplained_imports(source) == [14, 15]
    assert unexplained_imports("# lazy: all of them, for the CLI\n" + source) == []
