"""Shared Rich consoles: results to stdout, diagnostics and progress to stderr."""

from __future__ import annotations

from rich.console import Console

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)
