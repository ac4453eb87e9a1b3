"""Shared Rich consoles: results to stdout, diagnostics and progress to stderr.

CI logs are not terminals, and Rich would lay tables out for 80 columns there, cutting kernel
names to a few characters; without a terminal (and without ``COLUMNS``) the tables get
``LOG_WIDTH`` columns instead, which CI log viewers show without wrapping.
"""

from __future__ import annotations

import os
import sys

from rich.console import Console

LOG_WIDTH = 160


def _width(stream: object) -> int | None:
    isatty = getattr(stream, "isatty", None)
    if "COLUMNS" in os.environ or (callable(isatty) and isatty()):
        return None  # Rich's own detection
    return LOG_WIDTH


console = Console(highlight=False, width=_width(sys.stdout))
err_console = Console(stderr=True, highlight=False, width=_width(sys.stderr))
