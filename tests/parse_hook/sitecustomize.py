"""Test-only: parses that spin or allocate on demand, for ``tests/test_server_hostile.py``.

Put on the ``PYTHONPATH`` of a server under test (and so of its parse workers) only; Python
imports ``sitecustomize`` at start-up. A profile file whose first line is one of these makes
its parse:

- ``#perfci-test: spin``: run one regular expression that backtracks for hours, holding the GIL
  all along (what the hostile Megatron, MLPerf and nsys lines of issue 31 did for 21-79 s);
- ``#perfci-test: spin masked``: the same with ``SIGPROF`` blocked, as C code that never lets a
  signal through would (only the kernel's ``RLIMIT_CPU`` stops it);
- ``#perfci-test: allocate``: allocate 1 GiB.

Real parsers are fixed when they backtrack; these stay slow, so the tests of the worker pool
do not depend on any parser staying broken.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import perfci.formats.registry as registry

_parse_file = registry.parse_file


def parse_file(
    path: Path, *, format: str | None = None, options: Mapping[str, str] | None = None
) -> Any:
    with Path(path).open("rb") as handle:
        head = handle.read(64)
    if head.startswith(b"#perfci-test: spin"):
        if b"masked" in head:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPROF})
        re.match(r"(a|aa)+$", "a" * 64 + "b")
    elif head.startswith(b"#perfci-test: allocate"):
        bytearray(1 << 30)  # untouched pages: address space, hardly any memory
    return _parse_file(path, format=format, options=options)


registry.parse_file = parse_file  # type: ignore[assignment]
