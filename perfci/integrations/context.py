"""Where a run comes from: source control, CI and the hardware/software fingerprint.

Detected from GitHub Actions' variables (and its event payload at ``GITHUB_EVENT_PATH``) when
present, else from plain ``git`` in the working directory; every field can be overridden by a
flag. The environment fingerprint (GPU model and count, driver, CUDA, framework versions, CPU,
OS) decides which runs may be compared: runs on different hardware are never mixed.

Nothing here imports torch: reading its version from the installed distribution's metadata
costs microseconds where ``import torch`` costs a second of ``perfci check``'s budget.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from perfci.core.errors import ConfigError
from perfci.core.model import RunContext
from perfci.integrations import git

#: Frameworks and libraries whose version is part of the fingerprint when installed.
FRAMEWORKS = ("torch", "jax", "tensorflow", "triton", "transformer-engine", "megatron-core")
_NVIDIA_SMI_TIMEOUT_S = 10
_REMOTE = re.compile(r"(?:[:/])(?P<repo>[^/:]+/[^/]+?)(?:\.git)?/?$")


def detect_run_context(
    project: str | None,
    overrides: Mapping[str, object] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> RunContext:
    """The run context of the current checkout and CI job, with ``overrides`` applied.

    Parameters
    ----------
    project
        Project name; defaults to the repository name (``owner/name``), else the directory name.
    overrides
        Values from flags, keyed by :class:`~perfci.core.model.RunContext` field name; ``None``
        values are ignored. ``environment`` (a mapping) is merged into the detected fingerprint.
    env
        The process environment (``os.environ`` when ``None``); tests pass their own.
    cwd
        The checkout to ask ``git`` about (the working directory when ``None``).
    """
    env = os.environ if env is None else env
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    found = _from_github(env) if env.get("GITHUB_ACTIONS") == "true" else {}
    local = _from_git(cwd)
    for key, value in local.items():
        found.setdefault(key, value)
    extra_env = overrides.pop("environment", {})
    if not isinstance(extra_env, Mapping):
        raise ConfigError("environment overrides must be KEY=VALUE pairs")
    if "commit" in overrides and overrides["commit"] != found.get("commit"):
        # The local HEAD's time says nothing about another commit; ask git about that one.
        found["commit_time"] = _git(cwd, "log", "-1", "--format=%cI", str(overrides["commit"]))
    found.update(overrides)
    found["environment"] = {
        **environment_fingerprint(env=env),
        **{str(k): str(v) for k, v in extra_env.items()},
    }
    found["project"] = project or found.get("repository") or (cwd or Path.cwd()).resolve().name
    return _build(found)


def _build(values: Mapping[str, Any]) -> RunContext:
    fields = set(RunContext.__dataclass_fields__)
    unknown = set(values) - fields
    if unknown:
        raise ConfigError(f"unknown run context field(s): {', '.join(sorted(unknown))}")
    context = RunContext(**values)
    if context.pr_number is not None:
        context.pr_number = _to_int(context.pr_number, "pull request number")
    if context.ci_run_attempt is not None:
        context.ci_run_attempt = _to_int(context.ci_run_attempt, "CI run attempt")
    return context


def _to_int(value: object, what: str) -> int:
    try:
        return int(str(value))
    except ValueError:
        raise ConfigError(f"{what} must be an integer, got {value!r}") from None


def _from_github(env: Mapping[str, str]) -> dict[str, Any]:
    """Fields from GitHub Actions' default variables and the event payload."""
    repository = env.get("GITHUB_REPOSITORY")
    run_id = env.get("GITHUB_RUN_ID")
    server = env.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    found: dict[str, Any] = {
        "repository": repository,
        "commit": env.get("GITHUB_SHA"),
        "branch": env.get("GITHUB_HEAD_REF") or env.get("GITHUB_REF_NAME"),
        "base_branch": env.get("GITHUB_BASE_REF") or None,
        "ci_provider": "github-actions",
        "ci_run_id": run_id,
        "ci_run_attempt": env.get("GITHUB_RUN_ATTEMPT"),
        "ci_url": f"{server}/{repository}/actions/runs/{run_id}" if repository and run_id else None,
    }
    found.update(_from_event(env.get("GITHUB_EVENT_PATH")))
    return {k: v for k, v in found.items() if v not in (None, "")}


def read_event(path: str | None) -> dict[str, Any]:
    """The GitHub Actions event payload at ``path`` (``$GITHUB_EVENT_PATH``); ``{}`` when
    there is none or it cannot be read (a local run, a workflow without a payload)."""
    if not path:
        return {}
    try:
        event = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return event if isinstance(event, dict) else {}


def _from_event(path: str | None) -> dict[str, Any]:
    """PR number, head commit and base branch from the event payload of a pull_request run.

    For ``pull_request`` events ``GITHUB_SHA`` is a synthetic merge commit; the PR's head
    commit is what the user pushed and what history should be keyed by.
    """
    pull = read_event(path).get("pull_request")
    if not isinstance(pull, dict):
        return {}
    head, base = pull.get("head") or {}, pull.get("base") or {}
    return {
        k: v
        for k, v in {
            "pr_number": pull.get("number"),
            "commit": head.get("sha"),
            "branch": head.get("ref"),
            "base_branch": base.get("ref"),
            "merge_base": base.get("sha"),
        }.items()
        if v
    }


def _git(cwd: Path | None, *args: str) -> str | None:
    """git's non-empty output, else ``None`` (the context has no use for an empty answer)."""
    return git.output(cwd, *args) or None


def _from_git(cwd: Path | None) -> dict[str, Any]:
    """Commit, branch, commit time and ``owner/name`` from the local checkout."""
    found: dict[str, Any] = {}
    commit = _git(cwd, "rev-parse", "HEAD")
    if commit is None:
        return found
    found["commit"] = commit
    branch = _git(cwd, "rev-parse", "--abbrev-ref", "HEAD")
    if branch and branch != "HEAD":
        found["branch"] = branch
    found["commit_time"] = _git(cwd, "log", "-1", "--format=%cI", "HEAD")
    remote = _git(cwd, "config", "--get", "remote.origin.url")
    match = _REMOTE.search(remote) if remote else None
    if match:
        found["repository"] = match.group("repo")
    return {k: v for k, v in found.items() if v}


def merge_base(cwd: Path | None, base_branch: str, commit: str = "HEAD") -> str | None:
    """The merge base of ``commit`` with ``base_branch`` (local or ``origin/``), if git knows."""
    for ref in (f"origin/{base_branch}", base_branch):
        found = _git(cwd, "merge-base", commit, ref)
        if found:
            return found
    return None


def environment_fingerprint(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The hardware/software fingerprint of this machine: GPU, driver, CUDA, frameworks, CPU, OS.

    Only what changes performance goes in: a new driver or torch version is a new environment.
    """
    fingerprint = {
        "os": f"{platform.system()} {platform.release()}",
        "cpu": cpu_model(),
        "cpu_count": str(os.cpu_count() or 0),
    }
    fingerprint.update(gpu_info(env))
    for name in FRAMEWORKS:
        try:
            fingerprint[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return fingerprint


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_info(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """GPU model, count, driver, CUDA version and UUIDs from ``nvidia-smi``; empty without one.

    ``CUDA_VISIBLE_DEVICES`` (indices or UUIDs) limits the GPUs the way the benchmark itself
    will see them. ``gpu_uuid`` lists the cards' UUIDs (comma-separated), which identify the
    card but are not matched (:data:`IDENTITY_KEYS`).
    """
    env = os.environ if env is None else env
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    if smi is None:
        return {}
    try:
        query = subprocess.run(
            [smi, "--query-gpu=name,driver_version,uuid", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=_NVIDIA_SMI_TIMEOUT_S,
            check=False,
        )
        header = subprocess.run(
            [smi], capture_output=True, text=True, timeout=_NVIDIA_SMI_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    rows = [
        [c.strip() for c in line.split(",")] for line in query.stdout.splitlines() if line.strip()
    ]
    if query.returncode != 0 or not rows:
        return {}
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible:
        rows = [
            row for part in visible.split(",") if (row := _visible_row(rows, part.strip()))
        ] or rows
    info = {"gpu": rows[0][0], "gpu_count": str(len(rows))}
    if len(rows[0]) > 1:
        info["driver"] = rows[0][1]
    uuids = [row[2] for row in rows if len(row) > 2 and row[2]]
    if uuids:
        info["gpu_uuid"] = ",".join(uuids)
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", header.stdout)
    if cuda:
        info["cuda"] = cuda.group(1)
    return info


def _visible_row(rows: list[list[str]], part: str) -> list[str] | None:
    """The ``nvidia-smi`` row a ``CUDA_VISIBLE_DEVICES`` entry (index or UUID) names."""
    if part.isdigit():
        return rows[int(part)] if int(part) < len(rows) else None
    return next((row for row in rows if len(row) > 2 and row[2] == part), None)
