"""The root group's subcommands, each imported and built when it is looked up.

Typer builds every command of an app before it runs one: it imports the module that defines
it and resolves the annotations of its function into parameters. For ``perfci formats`` that
was most of its time (issue 33). Here the root group's ``commands`` is a mapping whose keys
are the subcommands' names, known without importing anything, and whose values are built on
first use from the module that defines them (its ``register(app)``): running a command builds
that one; ``perfci --help``, which lists them all, builds them all.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any

import typer


class LazyCommands(MutableMapping[str, Any]):
    """Subcommands by name, each built from its module on first lookup (and kept).

    Parameters
    ----------
    modules
        Subcommand name → the module whose ``register(app)`` adds it, in listing order.
    prepare
        Called on the Typer app a module registered into, before it is built (to set the
        command classes, as the root's are).
    finish
        Called on each click command once it is built (to adjust how its help reads).
    """

    def __init__(
        self,
        modules: Mapping[str, str],
        prepare: Callable[[typer.Typer], None],
        finish: Callable[[Any], None] | None = None,
    ):
        self._modules = dict(modules)
        self._prepare = prepare
        self._finish = finish
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            holder = typer.Typer()
            importlib.import_module(self._modules[name]).register(holder)  # KeyError: unknown
            self._prepare(holder)
            built = typer.main.get_group(holder).commands[name]
            if self._finish is not None:
                self._finish(built)
            self._built[name] = built
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._modules.setdefault(name, "")
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._modules[name]
        self._built.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __contains__(self, name: object) -> bool:
        return name in self._modules
