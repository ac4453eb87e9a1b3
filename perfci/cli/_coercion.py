"""Parameter values that need no conversion reach the command without pydantic (issue 33).

Typer coerces every parameter's value, defaults and unset options included, through a pydantic
``TypeAdapter`` (``typer._adapters``): importing pydantic for it is most of what
``perfci parse FILE`` spends before it reads the file. Most values need nothing of it: an unset
option, a default of the right type, a string for a ``str``, a path for a ``Path``. For those
:class:`LeanCoercion` gives the value Typer's adapter would give; anything else (a number typed
on the command line, a value out of its range, an enum, a path flag such as ``exists=True``)
goes to Typer's own coercion, built on first need, so its checks and messages are unchanged.
"""

# lazy: the imports inside functions load a command's work only when it runs, so that
# `perfci --help` and the short commands start fast (tests/test_cold_start.py).
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, get_args, get_origin

#: What a leaf value became; ``_NOT_MINE`` hands it to Typer's coercion.
_NOT_MINE = object()

#: ParameterInfo's path settings at their defaults: a plain ``Path`` is only ``Path(value)``,
#: the existence and access checks below aside.
_PLAIN_PATH = {
    "exists": False,
    "file_okay": True,
    "dir_okay": True,
    "writable": False,
    "resolve_path": False,
    "allow_dash": False,
    "path_type": None,
}


class LeanCoercion:
    """The coercion of one Typer parameter: the plain cases here, the rest Typer's."""

    def __init__(self, param: Any) -> None:
        self._param = param
        self._full: Any = None

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        descriptor = self._param.type_descriptor
        multi = param.multiple or param.nargs == -1
        if value is None:  # as Typer's RuntimeParam.coerce: nothing given
            return () if multi else None
        if descriptor.file_annotation is None and not (multi and isinstance(value, str)):
            done = _coerce(value, descriptor.annotation, descriptor.parameter_info)
            if done is not _NOT_MINE:
                return done
        return self._typer(value, param, ctx)

    def _typer(self, value: Any, param: Any, ctx: Any) -> Any:
        if self._full is None:
            from typer._coercion import build_runtime_param

            self._full = build_runtime_param(self._param.type_descriptor)
        return self._full.coerce(value, param=param, ctx=ctx)


def _coerce(value: Any, annotation: Any, info: Any) -> Any:
    if get_origin(annotation) is list:
        (item_type,) = get_args(annotation)
        items = value if isinstance(value, (list, tuple)) else [value]
        done = [_leaf(item, item_type, info) for item in items]
        return _NOT_MINE if any(d is _NOT_MINE for d in done) else done
    return _leaf(value, annotation, info)


def _leaf(value: Any, annotation: Any, info: Any) -> Any:
    if getattr(info, "parser", None) is not None or getattr(info, "click_type", None) is not None:
        return _NOT_MINE
    if annotation is str:
        return value if type(value) is str else _NOT_MINE
    if annotation is int or annotation is float:
        return _number(value, annotation, info)
    if annotation is Path:
        return _path(value, info)
    return _NOT_MINE


def _number(value: Any, annotation: type, info: Any) -> Any:
    """A number already of its type and within its range (a default); text goes to Typer."""
    if type(value) is not annotation or getattr(info, "clamp", False):
        return _NOT_MINE
    low, high = getattr(info, "min", None), getattr(info, "max", None)
    if (low is not None and value < low) or (high is not None and value > high):
        return _NOT_MINE  # Typer says what the range is
    return value


def _path(value: Any, info: Any) -> Any:
    """``Path(value)`` where Typer would return just that: plain path settings, and a path
    that does not exist or can be read (an unreadable one gets Typer's message)."""
    if any(getattr(info, key, default) != default for key, default in _PLAIN_PATH.items()):
        return _NOT_MINE
    if isinstance(value, Path):
        path = value
    elif type(value) is str and value:
        path = Path(value)
    else:
        return _NOT_MINE
    if getattr(info, "readable", True) and path.exists() and not os.access(path, os.R_OK):
        return _NOT_MINE
    return path


def lean_coercion(command: Any) -> None:
    """Give each Typer parameter of ``command`` a :class:`LeanCoercion`."""
    for param in command.params:
        if hasattr(param, "type_descriptor") and getattr(param, "_runtime_param", 0) is None:
            param._runtime_param = LeanCoercion(param)
