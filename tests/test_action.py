"""The GitHub Action (github_action/action.yml): its inputs and outputs are consistent, and its
steps' bash scripts, run as the Actions runner would run them (``bash -eo pipefail``, expressions
substituted, GITHUB_* variables, a per-step GITHUB_OUTPUT), post to a real loopback fake GitHub
API.

What is simulated: the runner itself. The "Install perfci" step and the ``uses:`` steps
(actions/cache) are skipped (perfci is already in .venv; PATH starts with .venv/bin so ``perfci``
and ``python3`` resolve there), and the check step mostly reads the shipped example profiles
(``profiles:``) so no benchmark has to run. The history-branch test gives every job a fresh
clone of a bare ``origin`` repository as its workspace, as a GitHub-hosted runner would.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from deadlines import scaled
from github_fake import TOKEN, FakeGitHub, github_server

__all__ = ["github_server"]  # the fixture, imported for pytest

ROOT = Path(__file__).resolve().parents[1]
ACTION = ROOT / "github_action" / "action.yml"
PROFILES = ROOT / "examples" / "gpt" / "profiles"
VENV_BIN = Path(sys.executable).parent
REPO = "octo/gpt"
BENCHMARK = "gpt-tiny"
HEAD_SHA = "c0ffee" + "1" * 34
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "dev",
    "GIT_AUTHOR_EMAIL": "dev@example.com",
    "GIT_COMMITTER_NAME": "dev",
    "GIT_COMMITTER_EMAIL": "dev@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}
EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
PATH_EXPR = re.compile(r"^[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)*$")
# `perfci check --github-output` writes every one of them.
CHECK_OUTPUTS = {
    "verdict",
    "regressions",
    "report",
    "json-report",
    "step-time-change",
    "comment-url",
    "run-url",
}
SHA_PIN = re.compile(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}")


@pytest.fixture(scope="module")
def action() -> dict[str, Any]:
    return yaml.safe_load(ACTION.read_text(encoding="utf-8"))


def _expressions(node: Any) -> list[str]:
    """Every ``${{ ... }}`` expression anywhere in the document."""
    if isinstance(node, dict):
        return [e for value in node.values() for e in _expressions(value)]
    if isinstance(node, list):
        return [e for value in node for e in _expressions(value)]
    return EXPR.findall(node) if isinstance(node, str) else []


# --- static checks ---------------------------------------------------------------------------


def test_every_referenced_input_exists(action: dict[str, Any]) -> None:
    inputs = set(action["inputs"])
    referenced = {e.split(".", 1)[1] for e in _expressions(action) if e.startswith("inputs.")}
    assert referenced, "the action should use its inputs"
    assert referenced <= inputs, f"undeclared inputs: {sorted(referenced - inputs)}"
    unused = inputs - referenced
    assert not unused, f"declared but never used: {sorted(unused)}"


def test_the_documented_inputs_and_outputs_are_there(action: dict[str, Any]) -> None:
    assert set(action["inputs"]) == {
        "benchmark",
        "command",
        "profiles",
        "repeats",
        "profiler",
        "glob",
        "env",
        "delta",
        "alpha",
        "baseline-runs",
        "ab",
        "ab-pairs",
        "pass-env",
        "args",
        "database-url",
        "server-url",
        "token",
        "history",
        "github-token",
        "fail-on-regression",
        "comment",
        "comment-on",
        "cc",
        "baseline-branch",
        "working-directory",
        "perfci-spec",
        "python",
    }
    assert set(action["outputs"]) == {
        "verdict",
        "regression-count",
        "report-path",
        "json-report",
        "step-time-change",
        "comment-url",
        "run-url",
    }
    assert action["inputs"]["history"]["default"] == "git:perfci-data"
    assert action["runs"]["using"] == "composite"


def test_every_output_reads_an_existing_step(action: dict[str, Any]) -> None:
    ids = {step.get("id") for step in action["runs"]["steps"]}
    for name, output in action["outputs"].items():
        match = re.fullmatch(r"\$\{\{\s*steps\.([\w-]+)\.outputs\.([\w-]+)\s*\}\}", output["value"])
        assert match, f"output {name} should be one step output"
        assert match[1] in ids, f"output {name} reads unknown step {match[1]!r}"
        if match[1] == "check":
            assert match[2] in CHECK_OUTPUTS


def test_every_step_is_bash_and_every_expression_is_one_the_simulator_knows(
    action: dict[str, Any],
) -> None:
    for step in action["runs"]["steps"]:
        if "uses" in step:  # another action: pinned by commit SHA, never a movable tag
            assert SHA_PIN.fullmatch(step["uses"]), step["uses"]
            continue
        assert step.get("shell") == "bash" and "run" in step, step.get("name")
    for expression in _expressions(action):
        assert PATH_EXPR.match(expression), f"unsupported expression: {expression}"
        assert expression.split(".")[0] in {"inputs", "github", "steps"}, expression


def test_check_flags_exist_in_perfci_check(action: dict[str, Any]) -> None:
    script = _step(action, "check")["run"]
    flags = set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", script))
    help_text = subprocess.run(
        [str(VENV_BIN / "perfci"), "check", "--help"],
        text=True,
        capture_output=True,
        env={**os.environ, "COLUMNS": "200"},
        check=True,
    ).stdout
    missing = {flag for flag in flags if flag not in help_text}
    assert not missing, f"perfci check has no {sorted(missing)}"


# --- the runner simulation -------------------------------------------------------------------


def evaluate(text: str, context: Mapping[str, Mapping[str, Any]]) -> str:
    """Substitute ``${{ a.b.c }}`` property paths as GitHub does: a missing value is ``''``."""

    def one(match: re.Match[str]) -> str:
        expression = match[1]
        if not PATH_EXPR.match(expression):
            raise AssertionError(f"the simulator cannot evaluate ${{{{ {expression} }}}}")
        value: Any = context
        for part in expression.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if isinstance(value, bool):
            return str(value).lower()
        return "" if value is None else str(value)

    return EXPR.sub(one, text)


def read_outputs(path: Path) -> dict[str, str]:
    """A GITHUB_OUTPUT file: ``name=value`` lines and ``name<<DELIM`` … ``DELIM`` blocks."""
    outputs: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    index = 0
    while index < len(lines):
        line = lines[index]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            end = lines.index(delimiter, index + 1)
            outputs[name] = "\n".join(lines[index + 1 : end])
            index = end + 1
            continue
        if line:
            name, _, value = line.partition("=")
            outputs[name] = value
        index += 1
    return outputs


@dataclass
class ActionRun:
    returncode: int
    outputs: dict[str, str]
    step_outputs: dict[str, dict[str, str]]
    log: str


@dataclass
class Runner:
    """A workspace with a fake runner's directories and GITHUB_* variables."""

    root: Path
    server: FakeGitHub
    database: Path | None = None
    #: ``pull_request`` (PR 7) or ``push`` (to main, of commit ``sha``).
    event: str = "pull_request"
    sha: str = "f" * 40
    run_id: str = "4242"
    #: Variables the workflow sets for the step (``env:`` of the job), e.g. a secret.
    extra_env: dict[str, str] = field(default_factory=dict)

    def base_env(self, run_attempt: int) -> dict[str, str]:
        keep = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("GITHUB_", "PERFCI_", "RUNNER_", "INPUT_", "GIT_"))
        }
        event = self.root / "event.json"
        if self.event == "push":
            payload: dict[str, Any] = {"ref": "refs/heads/main", "after": self.sha}
            refs = {"GITHUB_REF": "refs/heads/main", "GITHUB_REF_NAME": "main"}
        else:
            payload = _pull_request_event()
            refs = {
                "GITHUB_REF": "refs/pull/7/merge",
                "GITHUB_REF_NAME": "7/merge",
                "GITHUB_HEAD_REF": "feature/slow-attention",
                "GITHUB_BASE_REF": "main",
            }
        event.write_text(json.dumps(payload), encoding="utf-8")
        return {
            **keep,
            **refs,
            **GIT_IDENTITY,
            **self.extra_env,
            "HOME": str(self.root),
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_REPOSITORY": REPO,
            "GITHUB_EVENT_NAME": self.event,
            "GITHUB_EVENT_PATH": str(event),
            "GITHUB_SHA": self.sha,
            "GITHUB_RUN_ID": self.run_id,
            "GITHUB_RUN_ATTEMPT": str(run_attempt),
            "GITHUB_SERVER_URL": "https://github.test",
            "GITHUB_API_URL": self.server.url,
            "GITHUB_WORKSPACE": str(self.workspace),
            "GITHUB_ACTION_PATH": str(ACTION.parent),
            "RUNNER_TEMP": str(self.temp),
            "GITHUB_STEP_SUMMARY": str(self.summary),
        }

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def temp(self) -> Path:
        return self.root / "runner-temp"

    @property
    def summary(self) -> Path:
        return self.root / "step-summary.md"

    def run(
        self, action: dict[str, Any], inputs: Mapping[str, str], *, run_attempt: int = 1
    ) -> ActionRun:
        self.workspace.mkdir(exist_ok=True)
        self.temp.mkdir(exist_ok=True)
        env = self.base_env(run_attempt)
        github = {
            "token": TOKEN,
            "action_path": str(ACTION.parent),
            "repository": REPO,
            "workspace": str(self.workspace),
            "event_name": self.event,
        }
        context: dict[str, Any] = {"github": github, "steps": {}}
        context["inputs"] = _inputs(action, inputs, context)
        log, returncode = [], 0
        for number, step in enumerate(action["runs"]["steps"]):
            if step.get("id") == "install" or "uses" in step:
                continue  # .venv already holds perfci; PATH has .venv/bin (module docstring)
            returncode, outputs, text = self._step(step, number, env, context)
            context["steps"][step.get("id") or f"step{number}"] = {"outputs": outputs}
            log.append(text)
            if returncode != 0:
                break  # the runner stops at a failing step
        outputs = {
            name: evaluate(spec["value"], context) for name, spec in action["outputs"].items()
        }
        return ActionRun(
            returncode,
            outputs,
            {k: v["outputs"] for k, v in context["steps"].items()},
            "\n".join(log),
        )

    def _step(
        self, step: dict[str, Any], number: int, env: dict[str, str], context: dict[str, Any]
    ) -> tuple[int, dict[str, str], str]:
        output_file = self.temp / f"output-{number}"
        output_file.write_text("", encoding="utf-8")
        script = self.temp / f"step-{number}.sh"
        script.write_text(evaluate(step["run"], context), encoding="utf-8")
        step_env = {
            **env,
            "GITHUB_OUTPUT": str(output_file),
            **{k: evaluate(str(v), context) for k, v in step.get("env", {}).items()},
        }
        cwd = self.workspace / evaluate(step.get("working-directory", "."), context)
        # The runner's own command line for `shell: bash`.
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=cwd,
            env=step_env,
            capture_output=True,
            text=True,
            timeout=scaled(180),
            check=False,
        )
        return done.returncode, read_outputs(output_file), done.stdout + done.stderr


def _inputs(
    action: dict[str, Any], given: Mapping[str, str], context: dict[str, Any]
) -> dict[str, str]:
    values = {}
    for name, spec in action["inputs"].items():
        if name in given:
            values[name] = given[name]
        elif spec.get("required"):
            raise AssertionError(f"required input {name} not given")
        else:
            values[name] = evaluate(str(spec.get("default", "")), context)
    return values


def _pull_request_event() -> dict[str, Any]:
    return {
        "action": "synchronize",
        "number": 7,
        "pull_request": {
            "number": 7,
            "head": {"sha": HEAD_SHA, "ref": "feature/slow-attention", "repo": {"full_name": REPO}},
            "base": {"sha": "b" * 40, "ref": "main", "repo": {"full_name": REPO}},
        },
    }


def _step(action: dict[str, Any], step_id: str) -> dict[str, Any]:
    return next(s for s in action["runs"]["steps"] if s.get("id") == step_id)


def _ingest_baselines(database: Path, cwd: Path) -> None:
    """Four runs on main, through the real CLI (a directory without git: flags say it all)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "PERFCI_"))}
    env["PERFCI_DATABASE_URL"] = f"sqlite:///{database}"
    for run in range(1, 5):
        files = sorted(str(p) for p in (PROFILES / f"main-{run}").glob("*.pt.trace.json.gz"))
        done = subprocess.run(
            [
                str(VENV_BIN / "perfci"),
                "ingest",
                *files,
                "--benchmark",
                BENCHMARK,
                "--project",
                REPO,
                "--branch",
                "main",
                "--commit",
                f"{run:040x}",
                "--ci-run-id",
                f"main-{run}",
            ],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=scaled(120),
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_the_action_posts_one_comment_and_a_status_on_a_pull_request(
    action: dict[str, Any], github_server: FakeGitHub, tmp_path: Path
) -> None:
    if not any(PROFILES.glob("*/*.pt.trace.json.gz")):
        pytest.fail(f"the shipped profiles are missing from {PROFILES}")
    runner = Runner(tmp_path, github_server, tmp_path / "perfci.db")
    runner.workspace.mkdir()
    _ingest_baselines(runner.database, runner.workspace)
    inputs = {
        "benchmark": BENCHMARK,
        "repeats": "3",
        "profiles": str(PROFILES / "slow-attention" / "*.pt.trace.json.gz"),
        "database-url": f"sqlite:///{runner.database}",
    }

    first = runner.run(action, inputs)
    assert first.returncode == 1, first.log  # a gated regression fails the step
    assert first.outputs["verdict"] == "regression", first.log
    assert int(first.outputs["regression-count"]) >= 1
    report = Path(first.outputs["report-path"])
    assert report.is_file() and report.is_relative_to(runner.temp)
    assert "perfci:benchmark=gpt-tiny" in report.read_text(encoding="utf-8")
    assert "Regression" in runner.summary.read_text(encoding="utf-8")
    assert "::error" in first.log
    comments = github_server.comments_on(REPO, 7)
    assert len(comments) == 1
    statuses = [(s["sha"], s["context"], s["state"]) for s in github_server.statuses]
    assert statuses == [(HEAD_SHA, f"perfci/{BENCHMARK}", "failure")]
    assert first.outputs["comment-url"] == comments[0]["html_url"]
    assert first.outputs["step-time-change"].startswith("+"), first.outputs
    assert float(first.outputs["step-time-change"]) > 2
    saved = json.loads(Path(first.outputs["json-report"]).read_text(encoding="utf-8"))
    assert saved["verdict"] == "regression" and saved["baseline"]["runs"] == 4
    assert first.outputs["run-url"] == ""  # only a perfci server has run pages

    # A re-run (attempt 2) that does not fail the job: the comment is edited, not duplicated.
    second = runner.run(action, {**inputs, "fail-on-regression": "false"}, run_attempt=2)
    assert second.returncode == 0, second.log
    assert second.outputs["verdict"] == "regression"
    assert len(github_server.comments_on(REPO, 7)) == 1
    assert github_server.requests_to("PATCH", r"/issues/comments/\d+$") or (
        # an identical body is not sent again
        github_server.comments_on(REPO, 7)[0]["body"] == comments[0]["body"]
    )
    assert len(github_server.statuses) == 2
    assert all(s["state"] != "pending" for s in github_server.statuses)

    # `cc` on a regression: the mentions go into the (edited) comment; a bad name is left out.
    third = runner.run(
        action,
        {
            **inputs,
            "fail-on-regression": "false",
            "comment-on": "regression",
            "cc": "@alice @octo/perf b@d",
        },
        run_attempt=3,
    )
    assert third.returncode == 0, third.log
    body = github_server.comments_on(REPO, 7)[0]["body"]
    assert body.rstrip().endswith("cc @alice @octo/perf"), body[-200:]
    assert "'b@d' is not a @user" in third.log
    assert third.outputs["comment-url"] == comments[0]["html_url"]
    assert len(github_server.comments_on(REPO, 7)) == 1

    # Nothing to say for `comment-on: regression`: no comment, no status, no API call at all.
    calls = len(github_server.requests)
    quiet = runner.run(
        action,
        {
            **inputs,
            "comment-on": "regression",
            "profiles": str(PROFILES / "main-2" / "*.pt.trace.json.gz"),
        },
        run_attempt=4,
    )
    assert quiet.returncode == 0, quiet.log
    assert quiet.outputs["verdict"] != "regression"
    assert quiet.outputs["comment-url"] == ""
    assert len(github_server.requests) == calls
    assert not github_server.unknown
    assert TOKEN not in first.log + second.log + third.log + quiet.log


def _git(cwd: Path, *args: str, when: int | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_IDENTITY, HOME=str(cwd))
    if when is not None:  # distinct commit times: baselines are ordered by them
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = f"2026-11-0{when} 10:00:00 +0000"
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(60),
        check=False,
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def _fresh_runner(
    root: Path, origin: Path, server: FakeGitHub, *, when: int, **options: Any
) -> Runner:
    """A new runner whose workspace is a fresh clone of ``origin`` with one new commit."""
    root.mkdir()
    _git(root, "clone", "--quiet", str(origin), "workspace")
    runner = Runner(root, server, **options)
    _git(runner.workspace, "commit", "--quiet", "--allow-empty", "-m", f"change {when}", when=when)
    runner.sha = _git(runner.workspace, "rev-parse", "HEAD")
    return runner


@pytest.mark.slow
def test_by_default_the_history_lives_on_a_branch_and_the_pr_gets_a_real_baseline(
    action: dict[str, Any], github_server: FakeGitHub, tmp_path: Path
) -> None:
    origin = tmp_path / "origin.git"
    _git(tmp_path, "init", "--quiet", "--bare", "--initial-branch=main", str(origin))
    seed = _fresh_runner(tmp_path / "seed", origin, github_server, when=1)
    _git(seed.workspace, "push", "--quiet", "origin", "HEAD:main")
    for job in range(1, 5):  # pushes to main: each on a new, empty runner
        runner = _fresh_runner(
            tmp_path / f"main-{job}",
            origin,
            github_server,
            when=1 + job,
            event="push",
            run_id=str(100 + job),
        )
        _git(runner.workspace, "push", "--quiet", "origin", "HEAD:main")
        done = runner.run(
            action,
            {
                "benchmark": BENCHMARK,
                "repeats": "3",
                "profiles": str(PROFILES / f"main-{job}" / "*.pt.trace.json.gz"),
            },
        )
        assert done.returncode == 0, done.log
        assert "warning: history" not in done.log, done.log
        report = json.loads(Path(done.outputs["json-report"]).read_text(encoding="utf-8"))
        assert report["baseline"]["runs"] == job - 1, done.log
        assert done.outputs["comment-url"] == ""  # a push: nothing to comment on
    runs = _git(origin, "ls-tree", "-r", "--name-only", "perfci-data", "runs/").splitlines()
    assert len(runs) == 4
    tip = _git(origin, "rev-parse", "perfci-data")

    pr = _fresh_runner(tmp_path / "pr", origin, github_server, when=8)
    done = pr.run(
        action,
        {
            "benchmark": BENCHMARK,
            "repeats": "3",
            "profiles": str(PROFILES / "slow-attention" / "*.pt.trace.json.gz"),
        },
    )
    assert done.returncode == 1, done.log
    assert done.outputs["verdict"] == "regression"
    report = json.loads(Path(done.outputs["json-report"]).read_text(encoding="utf-8"))
    assert report["baseline"]["runs"] == 4
    comments = github_server.comments_on(REPO, 7)
    assert len(comments) == 1
    assert "4 runs of main" in comments[0]["body"], comments[0]["body"]
    assert done.outputs["comment-url"] == comments[0]["html_url"]
    assert _git(origin, "rev-parse", "perfci-data") == tip  # a pull request never writes it
    assert not github_server.unknown


@pytest.mark.slow
def test_the_default_torch_profiler_works_with_the_runners_own_python(
    action: dict[str, Any], github_server: FakeGitHub, tmp_path: Path
) -> None:
    plain = Path("/usr/bin/python3")
    if not plain.is_file():
        pytest.skip("needs a system /usr/bin/python3 beside the test virtualenv")
    bare = subprocess.run(
        [str(plain), "-c", "import perfci"],
        cwd=tmp_path,
        check=False,
        capture_output=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    if bare.returncode == 0:
        pytest.skip("/usr/bin/python3 already has perfci: it would prove nothing")
    runner = Runner(
        tmp_path,
        github_server,
        tmp_path / "perfci.db",
        extra_env={"HF_TOKEN": "hf-secret", "WANDB_API_KEY": "wandb-secret", "GITHUB_TOKEN": TOKEN},
    )
    runner.workspace.mkdir()
    trace = sorted((PROFILES / "main-1").glob("*.pt.trace.json.gz"))[0]
    # A benchmark in the style of examples/gpt/bench.py: it imports perfci.integrations.torch (torch
    # itself # is imported lazily there, so this works without torch) and leaves a trace per repeat.
    (runner.workspace / "bench.py").write_text(
        "import os, shutil, sys\n"
        "import perfci.integrations.torch\n"
        "shutil.copy(sys.argv[1], os.path.join(os.environ['PERFCI_OUTPUT_DIR'],\n"
        "            'r.pt.trace.json.gz'))\n"
        "open('imported-from.txt', 'w').write(perfci.integrations.torch.__file__)\n"
        "open('environment.txt', 'w').write(' '.join(sorted(os.environ)))\n",
        encoding="utf-8",
    )
    done = runner.run(
        action,
        {
            "benchmark": BENCHMARK,
            "repeats": "2",
            "comment": "false",
            "pass-env": "HF_TOKEN",
            "command": f"{plain} bench.py {trace}",
            "database-url": f"sqlite:///{runner.database}",
        },
    )
    assert done.returncode == 0, done.log
    assert done.outputs["verdict"] == "no-baseline", done.log
    imported = (runner.workspace / "imported-from.txt").read_text(encoding="utf-8")
    assert imported.startswith(str(runner.temp / "perfci-pythonpath" / "perfci")), imported
    # The secrets of the job stay out of the benchmark, but for the ones it lets through.
    seen = set((runner.workspace / "environment.txt").read_text(encoding="utf-8").split())
    assert "HF_TOKEN" in seen
    assert not seen & {
        "GITHUB_TOKEN",
        "PERFCI_GITHUB_TOKEN",
        "PERFCI_DATABASE_URL",
        "PERFCI_PASS_ENV",
    }, seen
    assert "WANDB_API_KEY" in seen  # what the workflow itself sets is the workflow's business
    assert {"PERFCI_OUTPUT_DIR", "PERFCI_REPEAT"} <= seen


#: A benchmark that looks for the job's tokens where a process of the same user can: the
#: environment block of every process above it, and the runner's temporary folder.
SNOOP = r"""
import json, os, pathlib, shutil, sys
stop = int(os.environ["TEST_PID"])
seen = {"own": sorted(os.environ), "ancestors": [], "temp": []}
pid = os.getppid()
while pid > 1 and pid != stop:
    with open(f"/proc/{pid}/environ", "rb") as handle:
        seen["ancestors"].append(handle.read().decode("utf-8", "replace"))
    with open(f"/proc/{pid}/stat") as handle:
        pid = int(handle.read().rsplit(")", 1)[1].split()[1])
temp = pathlib.Path(os.environ["RUNNER_TEMP"])
seen["temp"] = [p.name for p in temp.iterdir()]
seen["temp_content"] = [p.read_text("utf-8", "replace") for p in temp.glob("perfci-secrets*")]
pathlib.Path("seen-" + os.environ["PERFCI_REPEAT"] + ".json").write_text(json.dumps(seen))
shutil.copy(sys.argv[1], os.path.join(os.environ["PERFCI_OUTPUT_DIR"], "r.pt.trace.json.gz"))
"""


@pytest.mark.slow
def test_no_process_above_the_benchmark_holds_a_token(
    action: dict[str, Any], github_server: FakeGitHub, tmp_path: Path
) -> None:
    """Issue 31: the check step had the tokens in its environment, which the benchmark read
    from /proc. The Action hands them to perfci in a file perfci deletes before it starts the
    benchmark; perfci holds them in memory only (perfci.core.private_env)."""
    runner = Runner(
        tmp_path, github_server, tmp_path / "perfci.db", extra_env={"TEST_PID": str(os.getpid())}
    )
    runner.workspace.mkdir()
    trace = sorted((PROFILES / "main-1").glob("*.pt.trace.json.gz"))[0]
    (runner.workspace / "bench.py").write_text(SNOOP, encoding="utf-8")
    database = f"sqlite:///{runner.database}?secret=db-s3cr3t"
    done = runner.run(
        action,
        {
            "benchmark": BENCHMARK,
            "repeats": "2",
            "command": f"{sys.executable} bench.py {trace}",
            "database-url": database,
        },
    )
    assert done.returncode == 0, done.log
    assert done.outputs["verdict"] == "no-baseline", done.log
    # perfci got the token all the same: the comment is there.
    assert len(github_server.comments_on(REPO, 7)) == 1, done.log
    assert done.outputs["comment-url"] == github_server.comments_on(REPO, 7)[0]["html_url"]
    for repeat in (0, 1):
        text = (runner.workspace / f"seen-{repeat}.json").read_text(encoding="utf-8")
        seen = json.loads(text)
        assert len(seen["ancestors"]) >= 2, seen["ancestors"]  # perfci, the step (and bash -c)
        assert TOKEN not in text and "db-s3cr3t" not in text
        assert not {"GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "PERFCI_DATABASE_URL"} & set(
            seen["own"]
        )
        assert not [name for name in seen["temp"] if name.startswith("perfci-secrets")]
    assert not list(runner.temp.glob("perfci-secrets*"))
    assert TOKEN not in done.log


def test_the_simulator_evaluates_expressions_and_outputs(tmp_path: Path) -> None:
    context = {"inputs": {"a-b": "x"}, "github": {"token": "t"}, "steps": {}}
    assert (
        evaluate("${{ inputs.a-b }}/${{github.token}}/${{ steps.s.outputs.o }}", context) == "x/t/"
    )
    with pytest.raises(AssertionError):
        evaluate("${{ inputs.a == 'b' }}", context)
    out = tmp_path / "out"
    out.write_text(
        "verdict=regression\nbody<<EOF\nline 1\nline=2\nEOF\nregressions=3\n", encoding="utf-8"
    )
    assert read_outputs(out) == {
        "verdict": "regression",
        "body": "line 1\nline=2",
        "regressions": "3",
    }


def test_bash_is_available_for_the_simulation() -> None:
    assert shutil.which("bash"), "the action's steps are bash scripts"


def test_readme_workflows_parse_pin_actions_by_sha_and_declare_permissions() -> None:
    readme = (ACTION.parent / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", readme, flags=re.S)
    assert len(blocks) >= 5
    workflows = 0
    for block in blocks:
        document = yaml.safe_load(block)
        for uses in re.findall(r"^\s*(?:- )?uses:\s*(\S+)", block, flags=re.M):
            name, _, ref = uses.partition("@")
            if name.startswith("OWNER/perfci"):
                continue  # the placeholder for this action's own release
            assert re.fullmatch(r"[0-9a-f]{40}", ref), f"{uses} is not pinned by SHA"
        if isinstance(document, dict) and "jobs" in document:
            workflows += 1
            assert "permissions" in document, document.get("name")
            assert "write-all" not in block
    # history branch, PostgreSQL pull requests and baselines, server, fork comments, weekly
    assert workflows == 6


def test_the_weekly_workflow_reads_the_history_branch_with_options_perfci_report_takes() -> None:
    from typer.main import get_command

    from perfci.cli.main import app

    readme = (ACTION.parent / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", readme, flags=re.S)
    (weekly,) = [yaml.safe_load(b) for b in blocks if "name: perf-weekly" in b]
    steps = weekly["jobs"]["weekly"]["steps"]
    assert any(str(s.get("uses", "")).startswith("actions/checkout@") for s in steps)
    (script,) = [s["run"] for s in steps if '/bin/perfci" report' in s.get("run", "")]
    args = shlex.split(script.replace("\\\n", " "))
    args = args[args.index("report") + 1 :]
    assert args[args.index("--history") + 1] == "git:perfci-data"
    report = get_command(app).commands["report"]  # type: ignore[attr-defined]
    known = {option for param in report.params for option in param.opts}
    assert {a for a in args if a.startswith("--")} <= known


def test_every_step_script_is_valid_bash(action: dict[str, Any], tmp_path: Path) -> None:
    context = {
        "inputs": {name: "x" for name in action["inputs"]},
        "github": {"token": "t", "action_path": "/a"},
        "steps": {},
    }
    for number, step in enumerate(action["runs"]["steps"]):
        if "run" not in step:
            continue  # a `uses:` step
        script = tmp_path / f"step-{number}.sh"
        script.write_text(evaluate(step["run"], context), encoding="utf-8")
        done = subprocess.run(
            ["bash", "-n", str(script)], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, f"{step.get('name')}: {done.stderr}"


def test_the_run_step_is_one_perfci_check_command(action: dict[str, Any]) -> None:
    """Issue 32: the policy (comment-on, cc, outputs, fork rule, exit code) is perfci's; the
    step maps inputs to flags and runs one command, whose exit code is the step's."""
    steps = action["runs"]["steps"]
    script = _step(action, "check")["run"]
    assert steps[-1] is _step(action, "check")
    assert script.count('"${perfci[@]}"') == 1
    assert script.rstrip().endswith('"${perfci[@]}" "${args[@]}"')
    assert "GITHUB_OUTPUT" not in script and "GITHUB_STEP_SUMMARY" not in script
    assert not (ACTION.parent / "outputs.py").exists()
    for step in steps:
        assert "publish" not in step.get("run", ""), step.get("name")


def test_the_step_outputs_come_from_the_comparison() -> None:
    from perfci.core.model import RunComparison, Verdict
    from perfci.usecases.check.outputs import github_outputs

    result = RunComparison(BENCHMARK, Verdict.IMPROVEMENT, [], run_id=12)
    outputs = github_outputs(
        result,
        report=Path("r/report.md"),
        json_report=Path("r/report.json"),
        comment_url=None,
        server_url="https://perfci.example.com/",
    )
    assert outputs == {
        "verdict": "improvement",
        "regressions": "0",
        "report": "r/report.md",
        "json-report": "r/report.json",
        "step-time-change": "",  # no step line, no baseline
        "comment-url": "",
        "run-url": "https://perfci.example.com/runs/12",
    }
    assert github_outputs(result, report=None)["run-url"] == ""  # only a server has run pages
