"""No module of perfci imports a module that imports it back, directly or through others.

grimp builds the graph as ``lint-imports`` sees it: imports inside functions and under
``TYPE_CHECKING`` count, since either can turn into a circular import when code moves. A cycle is
a strongly connected component of more than one module (Tarjan's algorithm), reported by name;
a throwaway package with a cycle shows that the check finds one.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from pathlib import Path

import pytest

grimp = pytest.importorskip("grimp", reason="grimp (with import-linter, the dev extra) is missing")


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
