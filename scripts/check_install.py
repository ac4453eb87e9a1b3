"""Run every documented install line as written, each in a clean virtual environment, then
``perfci --help`` (and an import of what the extra adds) with what it installed.

The lines are read from the documents, never kept in a second list:

* README.md: every line of a ```bash block that follows the marker ``<!-- check-install -->``,
  run in a copy of this checkout (the README says "in a clone of this repository"), with the
  clean venv's ``bin`` first on PATH, as an activated venv has it;
* github_action/README.md: the ``run:`` script of every workflow step named ``Install perfci``,
  run as the runner would (``bash -eo pipefail``) in a workspace where the step before it
  checked perfci out into ``perfci-src`` (a copy of this checkout), with ``RUNNER_TEMP`` set;
* github_action/action.yml: its ``Install perfci`` step on a cache miss (a new venv from the
  interpreter, perfci installed from the action's own checkout).

``--python`` picks the interpreter every venv is made with (default ``python3``): run it once per
supported Python (3.10 and 3.11; ``tests/test_check_install.py`` does). Needs the package index
(or pip's cache) for perfci's dependencies. Exit 0 when every line worked, 1 otherwise.

Usage: scripts/check-install [--python PYTHON] [--only readme|workflows|action] [--list]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
ACTION_README = ROOT / "github_action" / "README.md"
ACTION = ROOT / "github_action" / "action.yml"
MARKER = "<!-- check-install -->"
#: Real profiles ``perfci parse`` reads with what each line installed (every format is tried).
SMOKE_PROFILES = (
    "examples/gpt/profiles/main-1/r0.pt.trace.json.gz",
    "tests/data/bench/google_benchmark_repetitions.json",
)
#: What each extra adds, imported to show it was installed.
EXTRA_IMPORTS = {"postgres": "psycopg", "server": "fastapi, uvicorn, multipart, psycopg"}


@dataclass(frozen=True)
class InstallLine:
    """One documented install: where it is written and the shell text to run."""

    source: str  # "README.md", "github_action/README.md: perf-weekly", ...
    kind: str  # readme | workflows | action
    script: str


def readme_lines(text: str) -> list[InstallLine]:
    """The lines of each ```bash block right after the marker (comments and blanks left out)."""
    found = []
    for block in re.findall(rf"{re.escape(MARKER)}\s*\n```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            command = line.split("  #", 1)[0].strip()
            if command and not command.startswith("#"):
                found.append(InstallLine("README.md", "readme", command))
    return found


def workflow_lines(text: str) -> list[InstallLine]:
    """Every ``Install perfci`` step's script in the YAML workflows of the action's README."""
    found = []
    for block in re.findall(r"```yaml\n(.*?)```", text, flags=re.S):
        document = yaml.safe_load(block)
        if not isinstance(document, dict):
            continue
        for job in (document.get("jobs") or {}).values():
            for step in job.get("steps", []):
                if step.get("name") == "Install perfci" and "run" in step:
                    source = f"github_action/README.md: {document.get('name')}"
                    found.append(InstallLine(source, "workflows", step["run"]))
    return found


def action_line(action: dict[str, object]) -> InstallLine:
    steps = action["runs"]["steps"]  # type: ignore[index]
    step = next(s for s in steps if s.get("id") == "install")
    return InstallLine("github_action/action.yml", "action", step["run"])


def all_lines() -> list[InstallLine]:
    lines = readme_lines(README.read_text(encoding="utf-8"))
    lines += workflow_lines(ACTION_README.read_text(encoding="utf-8"))
    lines.append(action_line(yaml.safe_load(ACTION.read_text(encoding="utf-8"))))
    return lines


def copy_checkout(target: Path) -> None:
    """The checkout's files as a clone has them: tracked and new, not ignored (no .venv)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def _bash(script: str, *, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def check(line: InstallLine, python: str, work: Path) -> tuple[bool, str]:
    """Run one line in ``work`` (empty); whether it worked, and what it printed when not."""
    checkout = work / "perfci-src"
    checkout.mkdir()
    copy_checkout(checkout)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    # The workflows' `python3` is the interpreter under test, as setup-python would make it.
    shims = work / "bin"
    shims.mkdir()
    (shims / "python3").symlink_to(shutil.which(python) or python)
    env["PATH"] = f"{shims}{os.pathsep}{env.get('PATH', '')}"
    if line.kind == "readme":
        venv = work / "venv"
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(venv)
        done = _bash(line.script, cwd=checkout, env=env)
    elif line.kind == "workflows":
        env["RUNNER_TEMP"] = str(work / "runner-temp")
        (work / "runner-temp").mkdir()
        done = _bash(line.script, cwd=work, env=env)
        venv = work / "runner-temp" / "perfci"
    else:
        venv = work / "action-venv"
        outputs = work / "outputs"
        outputs.touch()
        env.update(
            ACTION_PATH=str(checkout / "github_action"),
            VENV=str(venv),
            BASE_PYTHON=python,
            PERFCI_SPEC="",
            INPUT_PYTHON="",
            CACHE_HIT="",
            GITHUB_OUTPUT=str(outputs),
        )
        done = _bash(line.script, cwd=work, env=env)
    if done.returncode != 0:
        return False, done.stdout + done.stderr
    shown = subprocess.run(
        [str(venv / "bin" / "perfci"), "--help"], capture_output=True, text=True, check=False
    )
    if shown.returncode != 0 or "check" not in shown.stdout:
        return False, f"perfci --help failed:\n{shown.stdout}{shown.stderr}"
    # Every parser's patterns compile on this Python, and a real profile reads.
    for profile in SMOKE_PROFILES:
        parsed = subprocess.run(
            [str(venv / "bin" / "perfci"), "parse", str(checkout / profile)],
            capture_output=True,
            text=True,
            check=False,
        )
        if parsed.returncode != 0:
            return False, f"perfci parse {profile} failed:\n{parsed.stdout}{parsed.stderr}"
    for extra in re.findall(r"\[(\w+)\]", line.script):
        modules = EXTRA_IMPORTS[extra]
        imported = subprocess.run(
            [str(venv / "bin" / "python"), "-c", f"import {modules}"],
            capture_output=True,
            text=True,
            check=False,
        )
        if imported.returncode != 0:
            return False, f"[{extra}] did not install {modules}:\n{imported.stderr}"
    return True, ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default="python3", help="interpreter for the clean venvs")
    parser.add_argument("--only", choices=("readme", "workflows", "action"))
    parser.add_argument("--list", action="store_true", help="print the lines, run nothing")
    args = parser.parse_args(argv)
    lines = [line for line in all_lines() if args.only in (None, line.kind)]
    if args.list:
        for line in lines:
            print(f"{line.source}: {line.script.strip()}")
        return 0
    version = subprocess.run(
        [args.python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    failed = 0
    for line in lines:
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="perfci-check-install-") as work:
            ok, output = check(line, args.python, Path(work))
        took = time.monotonic() - started
        # The line that installs: the last of a workflow step's script, a whole README line.
        first = "its install step, on a cache miss" if line.kind == "action" else ""
        first = first or line.script.strip().splitlines()[-1].strip()
        print(
            f"{'ok  ' if ok else 'FAIL'} Python {version} {took:5.0f} s  {line.source}: {first}",
            flush=True,
        )
        if not ok:
            failed += 1
            print(output[-4000:], file=sys.stderr)
    print(f"{len(lines) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
