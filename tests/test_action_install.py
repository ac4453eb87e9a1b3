"""The action's own install (github_action/action.yml, issue 36): which Python it builds perfci's
venv with, what the cache key holds, and that a cache hit installs nothing.

The steps' bash scripts run as the runner runs them (``bash -eo pipefail``, the step's ``env``,
a GITHUB_OUTPUT file). Interpreters are stand-ins (small scripts that log how they were called
and hand over to this venv's python): what is asserted is which commands the step runs, so that
no test here needs the package index. The real install on a cache miss, from the action's
checkout, is run by scripts/check-install (tests/test_check_install.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_action import ACTION, read_outputs

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def steps() -> dict[str, dict[str, Any]]:
    action = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    return {s["id"]: s for s in action["runs"]["steps"] if "id" in s}


def _run(
    step: dict[str, Any], tmp_path: Path, env: dict[str, str], path: str | None = None
) -> tuple[int, dict[str, str], str]:
    outputs = tmp_path / "github-output"
    outputs.write_text("", encoding="utf-8")
    script = tmp_path / "step.sh"
    script.write_text(step["run"], encoding="utf-8")  # env: carries the inputs, no ${{ }} here
    assert "${{" not in step["run"]
    full = {
        "PATH": path if path is not None else os.environ["PATH"],
        "HOME": str(tmp_path),
        "RUNNER_TEMP": str(tmp_path),
        "RUNNER_OS": "Linux",
        "GITHUB_OUTPUT": str(outputs),
        # Any index pip would ask is unreachable: a step that needs one fails.
        "PIP_NO_INDEX": "1",
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
        **env,
    }
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=tmp_path,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode, read_outputs(outputs), done.stdout + done.stderr


def _logging_python(path: Path, log: Path, *, version_ok: bool = True) -> Path:
    """A python that logs its arguments; ``-m venv DIR`` makes DIR/bin/python another such one,
    ``-m pip`` does nothing; anything else is this venv's python (``import perfci`` works)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    check = "" if version_ok else 'case "$*" in *version_info*) exit 1;; esac\n'
    path.write_text(
        "#!/usr/bin/env bash\n"
        f'echo "$0 $*" >> {log}\n'
        f"{check}"
        'if [ "$1 $2" = "-m venv" ]; then\n'
        '  mkdir -p "$3/bin"; cp "$0" "$3/bin/python"; exit 0\n'
        "fi\n"
        'if [ "$1 $2" = "-m pip" ]; then exit 0; fi\n'
        f'exec {sys.executable} "$@"\n',
        encoding="utf-8",
    )
    path.chmod(0o755)
    return path


def _install_env(tmp_path: Path, base: Path, cache_hit: str) -> dict[str, str]:
    return {
        "PERFCI_SPEC": "",
        "ACTION_PATH": str(ROOT / "github_action"),
        "INPUT_PYTHON": "",
        "VENV": str(tmp_path / "perfci-venv"),
        "BASE_PYTHON": str(base),
        "CACHE_HIT": cache_hit,
    }


def test_a_cache_hit_installs_nothing(steps: dict[str, Any], tmp_path: Path) -> None:
    """Air-gapped GPU runners: a restored venv is used as it is, no pip, no index."""
    log = tmp_path / "calls.log"
    base = _logging_python(tmp_path / "base" / "python3", log)
    _logging_python(tmp_path / "perfci-venv" / "bin" / "python", log)  # what the cache restored
    code, outputs, text = _run(steps["install"], tmp_path, _install_env(tmp_path, base, "true"))
    assert code == 0, text
    assert outputs["python"] == str(tmp_path / "perfci-venv" / "bin" / "python")
    calls = log.read_text(encoding="utf-8")
    assert "-m pip" not in calls and "-m venv" not in calls, calls
    assert "-c import perfci" in calls  # checked, not trusted


def test_a_cache_miss_makes_the_venv_and_installs_the_action_checkout(
    steps: dict[str, Any], tmp_path: Path
) -> None:
    log = tmp_path / "calls.log"
    base = _logging_python(tmp_path / "base" / "python3", log)
    code, outputs, text = _run(steps["install"], tmp_path, _install_env(tmp_path, base, ""))
    assert code == 0, text
    calls = log.read_text(encoding="utf-8").splitlines()
    venv = tmp_path / "perfci-venv"
    assert calls[0] == f"{base} -m venv {venv}"
    assert calls[1].startswith(f"{venv}/bin/python -m pip install")
    assert calls[1].endswith(f"{ROOT / 'github_action'}/..")
    assert outputs["python"] == f"{venv}/bin/python"


def test_a_broken_restored_venv_is_made_again(steps: dict[str, Any], tmp_path: Path) -> None:
    """A hit whose python no longer runs (its interpreter moved) is rebuilt, not used."""
    log = tmp_path / "calls.log"
    base = _logging_python(tmp_path / "base" / "python3", log)
    broken = tmp_path / "perfci-venv" / "bin" / "python"
    broken.parent.mkdir(parents=True)
    broken.write_text("#!/bin/sh\nexit 127\n", encoding="utf-8")
    broken.chmod(0o755)
    code, _, text = _run(steps["install"], tmp_path, _install_env(tmp_path, base, "true"))
    assert code == 0, text
    assert f"{base} -m venv" in log.read_text(encoding="utf-8")


def _python_on_path(tmp_path: Path, *, version_ok: bool) -> str:
    folder = tmp_path / "bin"
    _logging_python(folder / "python3", tmp_path / "calls.log", version_ok=version_ok)
    for tool in ("bash", "cat", "sha256sum", "cut", "find", "sort", "xargs", "uname", "mkdir"):
        found = shutil.which(tool)
        if found and not (folder / tool).exists():
            (folder / tool).symlink_to(found)
    return str(folder)


def test_the_runners_python3_is_used_when_it_is_310_or_newer(
    steps: dict[str, Any], tmp_path: Path
) -> None:
    path = _python_on_path(tmp_path, version_ok=True)
    code, outputs, text = _run(steps["python"], tmp_path, {"INPUT_PYTHON": ""}, path=path)
    assert code == 0, text
    assert outputs == {"setup": "false", "base": "python3"}


def test_an_old_python3_or_none_calls_setup_python(steps: dict[str, Any], tmp_path: Path) -> None:
    path = _python_on_path(tmp_path, version_ok=False)  # 3.9, or Debian's without venv
    code, outputs, text = _run(steps["python"], tmp_path, {"INPUT_PYTHON": ""}, path=path)
    assert code == 0, text
    assert outputs == {"setup": "true"}
    (tmp_path / "bin" / "python3").unlink()  # no python3 at all
    code, outputs, text = _run(steps["python"], tmp_path, {"INPUT_PYTHON": ""}, path=path)
    assert code == 0, text
    assert outputs == {"setup": "true"}


def test_setup_python_leaves_the_benchmarks_python_alone() -> None:
    action = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    step = next(s for s in action["runs"]["steps"] if s.get("id") == "setup-python")
    assert step["uses"].startswith("actions/setup-python@")
    assert step["if"] == "steps.python.outputs.setup == 'true'"
    assert step["with"]["update-environment"] is False  # PATH keeps the runner's python


def _source_tree(root: Path) -> Path:
    (root / "github_action").mkdir(parents=True)
    (root / "perfci").mkdir()
    (root / "migrations").mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'perfci'\n", encoding="utf-8")
    (root / "perfci" / "__init__.py").write_text("", encoding="utf-8")
    (root / "migrations" / "env.py").write_text("", encoding="utf-8")
    return root / "github_action"


def test_the_cache_key_follows_perfcis_source_and_the_interpreter(
    steps: dict[str, Any], tmp_path: Path
) -> None:
    action_path = _source_tree(tmp_path / "action")
    env = {"PERFCI_SPEC": "", "ACTION_PATH": str(action_path), "INPUT_PYTHON": ""}

    def key(**more: str) -> str:
        code, outputs, text = _run(steps["prepare"], tmp_path, {**env, **more})
        assert code == 0, text
        assert outputs["venv"] == f"{tmp_path}/perfci-venv"
        return outputs["cache-key"]

    first = key(BASE_PYTHON=sys.executable)
    version = "py{}.{}.{}".format(*sys.version_info[:3])
    assert first.startswith(f"perfci-venv-Linux-{os.uname().machine}-{version}-")
    assert key(BASE_PYTHON=sys.executable) == first  # stable
    pycache = action_path.parent / "perfci" / "__pycache__"
    pycache.mkdir()
    (pycache / "x.cpython-311.pyc").write_bytes(b"\0")
    assert key(BASE_PYTHON=sys.executable) == first  # bytecode is not source
    (action_path.parent / "perfci" / "__init__.py").write_text("X = 1\n", encoding="utf-8")
    changed = key(BASE_PYTHON=sys.executable)
    assert changed != first  # a new perfci: a new venv
    # Another interpreter of the same version (a venv links to its interpreter's path), here
    # the one actions/setup-python gave: another venv.
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "py")], check=True
    )
    other = tmp_path / "py" / "bin" / "python"
    assert key(SETUP_PYTHON=str(other), BASE_PYTHON="python3") != changed
