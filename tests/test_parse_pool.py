"""The upload parse workers' forkserver imports what the server's main script imports.

Every fresh worker runs the parent's main script again before its job (multiprocessing does,
for a script started by path). ``perfci serve``'s script imports the CLI: without it in the
forkserver, each upload paid for importing it again (90 ms a worker against 8-10 ms with it,
``benchmarks/RESULTS.md``, stop 45).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from perfci.server.parse_pool import main_script_modules


def test_the_main_scripts_names_say_which_modules_to_preload() -> None:
    main = ModuleType("__main__")
    main.__dict__.update(
        {
            "__builtins__": __builtins__,
            "__loader__": None,
            "json": json,
            "Path": Path,
            "main_script_modules": main_script_modules,
            "count": 3,
            "print": print,
        }
    )
    assert main_script_modules(main) == ["json", "pathlib", "perfci.server.parse_pool"]


def test_a_script_started_by_path_like_perfci_serve_preloads_the_cli(tmp_path: Path) -> None:
    """The console script ``perfci`` is ``from perfci.cli.main import main`` and a call."""
    script = tmp_path / "perfci"
    script.write_text(
        "import sys\n"
        "from perfci.cli.main import main\n"
        "from perfci.server.parse_pool import main_script_modules\n"
        "if __name__ == '__main__':\n"
        "    print(main_script_modules())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    found = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=True, env=env
    ).stdout
    assert "'perfci.cli.main'" in found and "'perfci.server.parse_pool'" in found
    assert "__main__" not in found and "builtins" not in found
