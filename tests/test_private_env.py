"""The benchmark finds none of perfci's secrets (issue 31): not in its own environment, not in
its parent's (``/proc/$PPID/environ`` shows the environment perfci was *started* with, which
changing ``os.environ`` does not change), and what it writes to the job's workflow-command
files is undone. ``perfci check`` runs for real, as the program, in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from deadlines import scaled

from perfci.core import private_env
from perfci.core.settings import get_settings
from perfci.integrations import isolation

PERFCI = Path(sys.executable).parent / "perfci"

#: A benchmark that looks for secrets everywhere a process of the same user can, and tampers
#: with the workflow-command files named in BENCH_TARGETS, then leaves a valid profile.
SNOOP = r"""
import json, os, pathlib, sys
out = pathlib.Path(os.environ["PERFCI_OUTPUT_DIR"])
stop = int(os.environ["TEST_PID"])
seen = {"own": dict(os.environ), "ancestors": {}, "fd_links": []}
pid = os.getppid()
while pid > 1 and pid != stop:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            seen["ancestors"][pid] = handle.read().decode("utf-8", "replace")
    except OSError as exc:
        seen["ancestors"][pid] = f"unreadable: errno {exc.errno}"
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            seen["fd_links"].append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    except OSError:
        pass
    with open(f"/proc/{pid}/stat") as handle:
        pid = int(handle.read().rsplit(")", 1)[1].split()[1])
pathlib.Path(sys.argv[1] + "-" + os.environ["PERFCI_REPEAT"]).write_text(json.dumps(seen))
for target in filter(None, os.environ.get("BENCH_TARGETS", "").split(",")):
    with open(target, "a") as handle:
        handle.write("BASH_ENV=/tmp/evil.sh\nverdict=unchanged\n")
victim = os.environ.get("BENCH_LINK")
if victim:
    link = pathlib.Path(victim.split(",")[0])
    link.unlink(missing_ok=True)
    link.symlink_to(victim.split(",")[1])
doc = {"perfci_version": "0", "schema_version": 1, "profiles": [{
    "label": "p", "format": "perfci_json", "source": "bench", "steps": 1,
    "metrics": [{"kind": "step", "name": "step", "device": "cpu", "total_ns": 1e6}]}]}
(out / "profile.json").write_text(json.dumps(doc))
"""

SECRETS = {
    "GITHUB_TOKEN": "ghs_actionsS3cr3tToken31",
    "PERFCI_GITHUB_TOKEN": "ghp_perfciS3cr3tGithubToken31",
    "PERFCI_TOKEN": "pct_s3cr3t-upload-token31",
    "GH_TOKEN": "gho_cliS3cr3tToken31",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "oidc-s3cr3t31",
    "PERFCI_SLACK_WEBHOOK": "https://hooks.slack.test/s3cr3t31",
}


def _job_env(tmp_path: Path) -> tuple[dict[str, str], dict[str, Path]]:
    """A CI job's environment: the secrets, a store URL and the workflow-command files."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "PERFCI_", "ACTIONS_", "GH_"))
    }
    files = {name: tmp_path / "commands" / name.lower() for name in private_env.WORKFLOW_FILES}
    files["GITHUB_PATH"].parent.mkdir()
    for name, path in files.items():
        path.write_text(f"# {name} before the step\n", encoding="utf-8")
    env.update(SECRETS)
    env.update({name: str(path) for name, path in files.items()})
    env["PERFCI_DATABASE_URL"] = f"sqlite:///{tmp_path / 'perfci.db'}"
    env["TEST_PID"] = str(os.getpid())
    return env, files


@pytest.mark.slow  # end to end through `perfci`: 15-30 s on a busy 2-core VM
def test_the_benchmark_finds_no_secret_in_its_parent_and_cannot_touch_the_job_files(
    tmp_path: Path,
) -> None:
    env, files = _job_env(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched\n", encoding="utf-8")
    env["BENCH_TARGETS"] = ",".join(str(files[n]) for n in ("GITHUB_ENV", "GITHUB_OUTPUT"))
    env["BENCH_TARGETS"] += "," + str(files["GITHUB_STEP_SUMMARY"])
    env["BENCH_LINK"] = f"{files['GITHUB_PATH']},{victim}"
    dump = tmp_path / "seen"
    done = subprocess.run(
        [
            str(PERFCI),
            "check",
            "-b",
            "snoop",
            "--repeats",
            "2",
            "--profiler",
            "none",
            "--glob",
            "*.json",
            "--no-comment",
            "--github-output",
            "--branch",
            "main",
            "--",
            sys.executable,
            "-c",
            SNOOP,
            str(dump),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(300),
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for repeat in (0, 1):
        text = (tmp_path / f"seen-{repeat}").read_text(encoding="utf-8")
        seen = json.loads(text)
        for name, value in SECRETS.items():
            assert value not in text, f"{name} reached the benchmark"
        assert not set(seen["own"]) & {*SECRETS, *private_env.WORKFLOW_FILES}
        assert seen["ancestors"], "the benchmark's parent, perfci, was not looked at"
        for environ in seen["ancestors"].values():
            # Readable (the same user, or root) or not (not dumpable): never the secrets,
            # nor where the job's files are.
            names = {entry.partition("=")[0] for entry in environ.split("\0")}
            assert not names & {*private_env.WORKFLOW_FILES, "PERFCI_DATABASE_URL"}, environ
        assert not [link for link in seen["fd_links"] if "perfci-private" in link]
    # perfci itself had everything it was given: the store URL and GITHUB_OUTPUT.
    assert (tmp_path / "perfci.db").is_file()
    output = files["GITHUB_OUTPUT"].read_text(encoding="utf-8")
    assert (
        output.startswith("# GITHUB_OUTPUT before the step\n") and "verdict=no-baseline" in output
    )
    # What the benchmark wrote to the job's files is gone; the link was replaced, not followed.
    assert "BASH_ENV" not in output and "verdict=unchanged" not in output
    for name in ("GITHUB_ENV", "GITHUB_STEP_SUMMARY", "GITHUB_PATH", "GITHUB_STATE"):
        assert files[name].read_text(encoding="utf-8") == f"# {name} before the step\n", name
    assert not files["GITHUB_PATH"].is_symlink()
    assert victim.read_text(encoding="utf-8") == "untouched\n"
    for value in SECRETS.values():
        assert value not in done.stdout + done.stderr


def test_a_secrets_file_is_read_into_memory_and_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GitHub Action's hand-over: NAME=VALUE entries ended by NUL bytes."""
    monkeypatch.setattr(private_env, "_held", {})
    for name in ("PERFCI_GITHUB_TOKEN", "GITHUB_TOKEN", "PERFCI_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    handed = tmp_path / "perfci-secrets.x"
    handed.write_bytes(
        b"PERFCI_GITHUB_TOKEN=ghp_handed=over\0PERFCI_DATABASE_URL=sqlite:///h.db\0junk\0"
    )
    monkeypatch.setenv(private_env.SECRETS_FILE, str(handed))
    isolation.receive()
    assert not handed.exists()
    assert private_env.SECRETS_FILE not in os.environ
    assert "PERFCI_GITHUB_TOKEN" not in os.environ  # in memory only
    assert private_env.held() == {
        "PERFCI_GITHUB_TOKEN": "ghp_handed=over",
        "PERFCI_DATABASE_URL": "sqlite:///h.db",
    }
    settings = get_settings(start=tmp_path)
    assert settings.github_token is not None
    assert settings.github_token.get_secret_value() == "ghp_handed=over"
    assert settings.database_url == "sqlite:///h.db"
    assert private_env.get("PERFCI_DATABASE_URL") == "sqlite:///h.db"


def test_what_is_private() -> None:
    private = [
        "PERFCI_TOKEN",
        "PERFCI_DATABASE_URL",
        "PERFCI_SOMETHING_NEW",
        "GITHUB_TOKEN",
        "GITHUB_ENV",
        "GITHUB_OUTPUT",
        "GITHUB_STEP_SUMMARY",
        "ACTIONS_RUNTIME_TOKEN",
    ]
    public = ["PERFCI_OUTPUT_DIR", "PERFCI_REPEAT", "GITHUB_SHA", "GITHUB_REPOSITORY", "PATH"]
    assert all(private_env.is_private(n) for n in private)
    assert not any(private_env.is_private(n) for n in public)
