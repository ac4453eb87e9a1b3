"""Shared Rich consoles: results to stdout, diagnostics and progress to stderr.

CI logs are not terminals, and Rich would lay tables out for 80 columns there, cutting kernel
names to a few characters; without a terminal (and without ``COLUMNS``) the tables get
``LOG_WIDTH`` columns instead, which CI log viewers show without wrapping. ``--help`` gets the
same width: Typer's help panels otherwise cut option names at 80 columns in a pipe
(``--fail-on-regres…``, issue 16).

Rich is imported when a console is first used (``_console.console.print(...)``), never when
the CLI is built: ``perfci --help`` and the commands that print little stay quick to start
(issue 33). The command modules import this module, not its consoles, at their top.
"""

# lazy: the imports inside functions load a command's work only when it runs, so that
# `perfci --help` and the short commands start fast (tests/test_cold_start.py).
from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    console: Console
    err_console: Console

LOG_WIDTH = 160


def _width(stream: object) -> int | None:
    isatty = getattr(stream, "isatty", None)
    if "COLUMNS" in os.environ or (callable(isatty) and isatty()):
        return None  # Rich's own detection
    return LOG_WIDTH


def plain_output(stream: object = None) -> bool:
    """Whether tables go out as plain text: stdout (or ``stream``) is not a terminal (a CI
    log, a pipe), where Rich's layout adds nothing but its import time (issue 33)."""
    isatty = getattr(sys.stdout if stream is None else stream, "isatty", None)
    return not (callable(isatty) and isatty())


def plain_help_width(stream: object = None) -> int | None:
    """The width of plain-text help when stdout (or ``stream``) is not a terminal, or ``None``
    on a terminal, where the help is Typer's Rich help.

    In a pipe the help is plain text: the same words, ``LOG_WIDTH`` wide (or ``COLUMNS``,
    ``TERMINAL_WIDTH`` when set) so that option names and command summaries are never cut,
    and nothing of Rich is imported to draw boxes that a log shows as noise.
    """
    if not plain_output(stream):
        return None
    for name in ("TERMINAL_WIDTH", "COLUMNS"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return max(int(value), 50)
    return LOG_WIDTH


def use_log_width_for_help() -> None:
    """Lay Typer's ``--help`` out for ``LOG_WIDTH`` columns when stdout is not a terminal.

    Typer reads its width from ``TERMINAL_WIDTH`` (left alone when set) into a module global that
    it looks up on each help call, so setting the global is enough.
    """
    if "TERMINAL_WIDTH" in os.environ or _width(sys.stdout) is None:
        return
    from typer import rich_utils

    rich_utils.MAX_WIDTH = LOG_WIDTH


def __getattr__(name: str) -> Console:
    """``console`` (results, stdout) and ``err_console`` (diagnostics, stderr), made on first
    use and kept."""
    if name not in ("console", "err_console"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rich.console import Console

    stderr = name == "err_console"
    made = Console(
        stderr=stderr, highlight=False, width=_width(sys.stderr if stderr else sys.stdout)
    )
    globals()[name] = made
    return made


class _ProgressLines(logging.Handler):
    """Each record as one plain line on stderr (names may hold "[", which is not markup)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            __getattr__("err_console").print(
                self.format(record), markup=False, highlight=False, soft_wrap=True
            )
        except Exception:  # noqa: BLE001 - logging's contract: a handler never raises
            self.handleError(record)


def show_progress(logger_name: str) -> None:
    """Print the INFO lines of ``logger_name`` on stderr (once, however often called).

    The history branch is read and pushed deep inside a check; its one-line progress
    ("history: read 12 runs from git:perfci-data") goes through logging so that the use case
    stays free of consoles, and the CLI shows it here.
    """
    logger = logging.getLogger(logger_name)
    if any(isinstance(h, _ProgressLines) for h in logger.handlers):
        return
    handler = _ProgressLines(level=logging.INFO)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
