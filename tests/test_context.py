"""Run context detection: GitHub Actions variables and event payload, plain git, fingerprint."""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path

import pytest

from perfci.core.errors import ConfigError
from perfci.core.fingerprint import fingerprint_hash
from perfci.integrations.context import detect_run_context, environment_fingerprint


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        text=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@x",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@x",
            "PATH": "/usr/bin:/bin",
        },
    )
    return done.stdout.strip()


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    _git(tmp_path, "init", "-q", "-b", "feature/x")
    _git(tmp_path, "remote", "add", "origin", "git@github.com:acme/trainer.git")
    (tmp_path / "f").write_text("1")
    _git(tmp_path, "add", "f")
    _git(tmp_path, "commit", "-q", "-m", "one")
    return tmp_path


def test_plain_git_gives_commit_branch_and_repository(repo: Path) -> None:
    context = detect_run_context(None, env={"PATH": "/usr/bin:/bin"}, cwd=repo)
    assert context.commit == _git(repo, "rev-parse", "HEAD")
    assert context.branch == "feature/x"
    assert context.repository == "acme/trainer"
    assert context.project == "acme/trainer"
    assert context.commit_time and context.commit_time.startswith("20")
    assert context.ci_provider is None and context.pr_number is None


def test_github_pull_request_uses_the_head_commit_and_base(repo: Path, tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text(
        json.dumps(
            {
                "pull_request": {
                    "number": 42,
                    "head": {"sha": "a" * 40, "ref": "fix-attn"},
                    "base": {"sha": "b" * 40, "ref": "main"},
                }
            }
        )
    )
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_REPOSITORY": "acme/trainer",
        "GITHUB_SHA": "c" * 40,
        "GITHUB_REF_NAME": "42/merge",
        "GITHUB_HEAD_REF": "fix-attn",
        "GITHUB_BASE_REF": "main",
        "GITHUB_RUN_ID": "991",
        "GITHUB_RUN_ATTEMPT": "2",
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_EVENT_PATH": str(event),
        "PATH": "/usr/bin:/bin",
    }
    context = detect_run_context("trainer", env=env, cwd=repo)
    assert context.project == "trainer"
    assert context.commit == "a" * 40  # not the synthetic merge commit
    assert (context.branch, context.base_branch, context.pr_number) == ("fix-attn", "main", 42)
    assert (context.ci_run_id, context.ci_run_attempt) == ("991", 2)
    assert context.ci_url == "https://github.com/acme/trainer/actions/runs/991"
    assert context.merge_base == "b" * 40


def test_flags_override_detection_and_env_pairs_extend_the_fingerprint(repo: Path) -> None:
    context = detect_run_context(
        None,
        {
            "commit": "d" * 40,
            "branch": None,
            "pr_number": "7",
            "environment": {"gpu": "H100", "note": "x"},
        },
        env={"PATH": "/usr/bin:/bin"},
        cwd=repo,
    )
    assert context.commit == "d" * 40
    assert context.commit_time is None  # HEAD's time must not be stamped on another commit
    assert context.branch == "feature/x"  # None means "not given"
    assert context.pr_number == 7
    assert context.environment["gpu"] == "H100" and context.environment["note"] == "x"
    with pytest.raises(ConfigError, match="pull request number"):
        detect_run_context(None, {"pr_number": "seven"}, env={"PATH": "/usr/bin:/bin"}, cwd=repo)


UUID_0 = "GPU-5e0c6d0b-8a3f-2c71-94e2-1b7d3f09a6c4"
UUID_1 = "GPU-b2a94f17-03de-6e58-c1a0-7f4e92d85b31"


def _fake_smi(folder: Path, rows: list[str]) -> dict[str, str]:
    """A stand-in ``nvidia-smi`` first on PATH: it prints what the real one prints on the host
    described by ``rows`` (no GPU on this machine; this mocks only the GPU)."""
    smi = folder / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--query-gpu=name,driver_version,uuid" ]; then\n'
        + "".join(f'  echo "{row}"\n' for row in rows)
        + "else\n"
        '  echo "| NVIDIA-SMI 550.54.15    Driver Version: 550.54.15    '
        'CUDA Version: 12.4     |"\n'
        "fi\n"
    )
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{folder}:/usr/bin:/bin"}


def test_gpu_fingerprint_from_nvidia_smi(tmp_path: Path) -> None:
    env = _fake_smi(
        tmp_path,
        [
            f"NVIDIA H100 80GB HBM3, 550.54.15, {UUID_0}",
            f"NVIDIA H100 80GB HBM3, 550.54.15, {UUID_1}",
        ],
    )
    fingerprint = environment_fingerprint(env=env)
    assert fingerprint["gpu"] == "NVIDIA H100 80GB HBM3"
    assert (fingerprint["gpu_count"], fingerprint["driver"], fingerprint["cuda"]) == (
        "2",
        "550.54.15",
        "12.4",
    )
    assert fingerprint["gpu_uuid"] == f"{UUID_0},{UUID_1}"
    one = environment_fingerprint(env={**env, "CUDA_VISIBLE_DEVICES": "1"})
    assert one["gpu_count"] == "1" and one["gpu_uuid"] == UUID_1
    assert fingerprint_hash(fingerprint) != fingerprint_hash(one)
    by_uuid = environment_fingerprint(env={**env, "CUDA_VISIBLE_DEVICES": UUID_1})
    assert by_uuid["gpu_uuid"] == UUID_1 and by_uuid["gpu_count"] == "1"


def test_cards_of_one_model_are_told_apart_but_match_one_environment(tmp_path: Path) -> None:
    """A runner pool: two hosts with one H100 each. Each run carries its card's UUID, yet
    both runs land in one environment and so are compared with each other."""
    first = environment_fingerprint(
        env=_fake_smi(tmp_path, [f"NVIDIA H100 80GB HBM3, 550.54.15, {UUID_0}"])
    )
    other = tmp_path / "other"
    other.mkdir()
    second = environment_fingerprint(
        env=_fake_smi(other, [f"NVIDIA H100 80GB HBM3, 550.54.15, {UUID_1}"])
    )
    assert (first["gpu_uuid"], second["gpu_uuid"]) == (UUID_0, UUID_1)
    assert fingerprint_hash(first) == fingerprint_hash(second)
    # Everything else in the fingerprint still separates environments.
    assert fingerprint_hash(first) != fingerprint_hash({**first, "driver": "535.129.03"})


def test_cpu_only_fingerprint_is_stable_and_order_independent() -> None:
    fingerprint = environment_fingerprint(env={"PATH": "/nonexistent"})
    assert "gpu" not in fingerprint and fingerprint["os"] and fingerprint["cpu"]
    assert fingerprint_hash(fingerprint) == fingerprint_hash(dict(reversed(fingerprint.items())))
    assert len(fingerprint_hash(fingerprint)) == 16
