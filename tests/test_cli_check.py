"""``perfci check`` and ``perfci compare`` in-process, on SQLite and PostgreSQL.

The benchmark is a real command: a tiny Python script, declared in ``[tool.perfci.benchmarks]``,
that writes a perfci JSON profile (and a log file the glob must skip) into
``$PERFCI_OUTPUT_DIR``. In its environment ``SLOWDOWN`` makes its GEMM kernel slower and
``FAIL_REPEAT=N`` makes repeat N exit 3.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from github_fake import TOKEN, FakeGitHub, github_server
from sqlalchemy import func, select
from test_action import read_outputs

from perfci.cli.main import main
from perfci.store.engines import make_engine
from perfci.store.schema import Run
from perfci.store.schema_service import Comparison

__all__ = ["github_server"]  # the fixture, imported for pytest

SCRIPT = """\
import json, os, random
out = os.environ["PERFCI_OUTPUT_DIR"]
repeat = int(os.environ["PERFCI_REPEAT"])
run = os.environ.get("RUN_SEED", "0")
rng = random.Random(f"{run}-{repeat}")
slow = float(os.environ.get("SLOWDOWN", "1"))
if os.environ.get("FAIL_REPEAT") == str(repeat):
    print("CUDA error: out of memory")
    raise SystemExit(3)
noise = lambda: rng.lognormvariate(0, 0.01)
gemm, other = 6e6 * slow * noise(), 3e6 * noise()
metrics = [
    {"kind": "step", "name": "step", "samples_ns": [gemm + other + 1e6] * 3},
    {"kind": "kernel", "name": "ampere_sgemm_128x64_tn", "calls": 30, "total_ns": 3 * gemm},
    {"kind": "kernel", "name": "softmax_kernel", "calls": 30, "total_ns": 3 * other},
]
doc = {"perfci_version": "0", "schema_version": 1,
       "profiles": [{"label": "tiny", "format": "perfci", "source": "tiny", "steps": 3,
                     "metrics": metrics}]}
with open(os.path.join(out, "profile.json"), "w") as handle:
    json.dump(doc, handle)
with open(os.path.join(out, "log.txt"), "w") as handle:
    handle.write("not a profile")
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout without git that declares the benchmark ``tiny``; no CI variables."""
    for name in (
        "GITHUB_ACTIONS",
        "GITHUB_TOKEN",
        "GITHUB_OUTPUT",
        "GITHUB_STEP_SUMMARY",
        "GITHUB_EVENT_PATH",
        "GITHUB_REPOSITORY",
        "PERFCI_DATABASE_URL",
        "PERFCI_GITHUB_TOKEN",
        "PERFCI_PROJECT",
        "PERFCI_FAIL_ON_REGRESSION",
    ):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "bench.py").write_text(SCRIPT, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.perfci]\nproject = "acme/tiny"\n\n'
        "[tool.perfci.benchmarks.tiny]\n"
        f'command = [{json.dumps(sys.executable)}, "bench.py"]\n'
        "repeats = 3\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _runs(url: str) -> int:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return int(connection.execute(select(func.count()).select_from(Run)).scalar_one())
    finally:
        engine.dispose()


def _check(url: str, *args: str) -> int:
    return main(["check", "--database-url", url, "--profiler", "none", "--glob", "*.json", *args])


def _baseline(url: str, monkeypatch: pytest.MonkeyPatch, runs: int = 4) -> None:
    for run in range(runs):
        monkeypatch.setenv("RUN_SEED", str(run))
        assert (
            _check(
                url, "--branch", "main", "--commit", f"{run + 1:040x}", "--ci-run-id", f"main-{run}"
            )
            == 0
        )
    monkeypatch.delenv("RUN_SEED")


def test_declared_benchmark_is_run_stored_compared_and_reported(
    project: Path,
    migrated_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _baseline(migrated_url, monkeypatch)
    assert _runs(migrated_url) == 4
    output = project / "github-output.txt"
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))
    monkeypatch.setenv("SLOWDOWN", "1.2")
    capsys.readouterr()

    code = _check(
        migrated_url,
        "--branch",
        "feature",
        "--base-branch",
        "main",
        "--commit",
        "f" * 40,
        "--ci-run-id",
        "pr-1",
        "--pr",
        "7",
        "--markdown-out",
        "out/report.md",
        "--json-out",
        "out/report.json",
        "--github-output",
    )

    captured = capsys.readouterr()
    assert code == 1, captured.err
    assert "ampere_sgemm_128x64_tn" in captured.out and "Regression" in captured.out
    report = json.loads((project / "out" / "report.json").read_text(encoding="utf-8"))
    # Status lines go to stderr. Ids are not counted: on PostgreSQL a rolled-back adaptive
    # look still uses a sequence value.
    assert f"stored run {report['run_id']} of acme/tiny/tiny" in captured.err
    assert report["verdict"] == "regression"
    assert report["pr_number"] == 7 and report["baseline"]["runs"] == 4
    assert report["contributions"][0]["series"]["name"] == "ampere_sgemm_128x64_tn"
    # Three repeats, each one profile.json: the glob left log.txt out.
    assert {m["n_candidate"] for m in report["metrics"]} == {3}
    markdown = (project / "out" / "report.md").read_text(encoding="utf-8")
    assert markdown.startswith("<!-- perfci:benchmark=tiny -->")
    lines = output.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "verdict=regression"
    assert lines[1] == f"regressions={report['counts']['regression']}"
    assert lines[2] == "report=out/report.md"
    assert _runs(migrated_url) == 5

    # The same CI run again (a retried job) reports the verdict it got the first time.
    assert (
        _check(
            migrated_url,
            "--branch",
            "feature",
            "--base-branch",
            "main",
            "--commit",
            "f" * 40,
            "--ci-run-id",
            "pr-1",
            "--pr",
            "7",
        )
        == 1
    )
    assert _runs(migrated_url) == 5
    assert "already stored" in capsys.readouterr().err
    # --no-fail-on-regression reports the regression and passes.
    assert (
        _check(
            migrated_url,
            "--branch",
            "feature",
            "--commit",
            "e" * 40,
            "--ci-run-id",
            "pr-2",
            "--no-fail-on-regression",
        )
        == 0
    )


def test_compare_shows_a_stored_run_as_json_markdown_and_fresh(
    project: Path,
    migrated_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _baseline(migrated_url, monkeypatch, runs=3)
    monkeypatch.setenv("SLOWDOWN", "1.3")
    assert _check(migrated_url, "--branch", "pr", "--base-branch", "main", "--ci-run-id", "pr") == 1
    found = re.findall(r"stored run (\d+) of", capsys.readouterr().err)
    assert found
    run = found[-1]  # not counted: rolled-back adaptive looks use PostgreSQL ids

    assert main(["compare", "--run", run, "--json", "--database-url", migrated_url]) == 1
    shown = json.loads(capsys.readouterr().out)
    assert shown["run_id"] == int(run) and shown["verdict"] == "regression"
    assert main(["compare", "--run", run, "--markdown", "--database-url", migrated_url]) == 1
    assert capsys.readouterr().out.startswith("<!-- perfci:benchmark=tiny -->")
    assert main(["compare", "--run", run, "--database-url", migrated_url]) == 1
    assert "ampere_sgemm_128x64_tn" in capsys.readouterr().out

    def comparisons() -> int:
        engine = make_engine(migrated_url)
        with engine.connect() as connection:
            count = connection.execute(select(func.count()).select_from(Comparison)).scalar()
        engine.dispose()
        return int(count or 0)

    stored = comparisons()
    assert main(["compare", "--run", run, "--fresh", "--json", "--database-url", migrated_url]) == 1
    assert json.loads(capsys.readouterr().out)["verdict"] == "regression"
    assert comparisons() == stored + 1
    # A baseline branch with no history is a new comparison, and no gated regression.
    assert (
        main(
            [
                "compare",
                "--run",
                run,
                "--baseline-branch",
                "nowhere",
                "--json",
                "--database-url",
                migrated_url,
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["verdict"] == "no-baseline"
    # The first run on main had no baseline: nothing to fail on.
    assert main(["compare", "--run", "1", "--database-url", migrated_url]) == 0


def test_compare_of_an_unknown_run_is_a_usage_error(
    project: Path, migrated_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", "--run", "999", "--database-url", migrated_url]) == 2
    assert "no run with id 999" in capsys.readouterr().err
    assert (
        main(["compare", "--run", "1", "--json", "--markdown", "--database-url", migrated_url]) == 2
    )


def test_compare_in_an_empty_folder_says_so_and_creates_no_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PERFCI_DATABASE_URL", raising=False)
    assert main(["compare", "--run", "42"]) == 2
    err = capsys.readouterr().err
    assert "no perfci store at" in err and "perfci check" in err
    assert not (tmp_path / ".perfci").exists()


def test_failing_repeat_exits_with_its_code_and_stores_nothing(
    project: Path,
    migrated_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("FAIL_REPEAT", "1")  # the first repeat writes its profile, the second fails
    assert _check(migrated_url) == 3
    err = capsys.readouterr().err
    assert "repeat 2 of the benchmark" in err and "code 3" in err and "out of memory" in err
    assert _runs(migrated_url) == 0


def test_a_bad_profile_is_an_input_error_naming_the_file(
    project: Path, migrated_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    good = project / "good.json"
    good.write_text(
        json.dumps(
            {
                "perfci_version": "0",
                "profiles": [
                    {
                        "label": "p",
                        "format": "perfci",
                        "source": "p",
                        "metrics": [{"kind": "kernel", "name": "k", "total_ns": 1.0}],
                    }
                ],
            }
        ),
        encoding="utf-8",
    )
    bad = project / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "perfci_version": "0",
                "profiles": [
                    {
                        "label": "p",
                        "format": "perfci",
                        "source": "p",
                        "metrics": [{"kind": "warp-drive", "name": "k"}],
                    }
                ],
            }
        ),
        encoding="utf-8",
    )
    assert _check(migrated_url, "--profile", str(good), "--profile", str(bad)) == 2
    err = capsys.readouterr().err
    assert "bad.json" in err and "warp-drive" in err
    garbage = project / "notes.txt"
    garbage.write_text("hello\n", encoding="utf-8")
    assert _check(migrated_url, "--profile", str(good), "--profile", str(garbage)) == 2
    assert "notes.txt" in capsys.readouterr().err
    assert _runs(migrated_url) == 0


def test_benchmark_must_be_named_when_several_are_declared(
    project: Path, migrated_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pyproject = project / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text(encoding="utf-8")
        + '\n[tool.perfci.benchmarks.other]\ncommand = "true"\n',
        encoding="utf-8",
    )
    assert _check(migrated_url) == 2
    assert "several benchmarks are declared (other, tiny)" in capsys.readouterr().err
    assert main(["check", "--database-url", migrated_url, "--benchmark", "adhoc"]) == 2
    assert "has no command" in capsys.readouterr().err
    assert _runs(migrated_url) == 0


def test_github_output_without_github_actions_is_refused_before_running(
    project: Path, migrated_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _check(migrated_url, "--github-output") == 2
    assert "GITHUB_OUTPUT" in capsys.readouterr().err
    assert _runs(migrated_url) == 0


def test_in_github_actions_the_job_summary_is_written_without_a_token(
    project: Path,
    migrated_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    summary = project / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert _check(migrated_url, "--branch", "main", "--ci-run-id", "1") == 0
    assert "tiny" in summary.read_text(encoding="utf-8")
    assert "no GitHub token" in capsys.readouterr().err


# --- issue 32: the Action's policy is perfci check's ------------------------------------------


def _in_actions(
    project: Path, monkeypatch: pytest.MonkeyPatch, server: FakeGitHub, *, fork: str = ""
) -> tuple[Path, Path]:
    """GitHub Actions on pull request 7 of octo/tiny (from the fork ``fork``, or a deleted
    one), with a token: returns the step-output and job-summary files."""
    event = project / "event.json"
    head = {"full_name": fork} if fork else {"full_name": "octo/tiny"}
    if fork == "deleted":  # a fork deleted since: GitHub sends no head repository
        head = None
    pull = {"number": 7, "head": {"repo": head}}
    pull["base"] = {"ref": "main", "repo": {"full_name": "octo/tiny"}}
    event.write_text(json.dumps({"number": 7, "pull_request": pull}), encoding="utf-8")
    output, summary = project / "output.txt", project / "summary.md"
    for name, value in {
        "GITHUB_ACTIONS": "true",
        "GITHUB_REPOSITORY": "octo/tiny",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_API_URL": server.url,
        "GITHUB_OUTPUT": str(output),
        "GITHUB_STEP_SUMMARY": str(summary),
        "PERFCI_GITHUB_TOKEN": TOKEN,
    }.items():
        monkeypatch.setenv(name, value)
    return output, summary


def _pr_check(url: str, run: str, *args: str) -> int:
    return _check(
        url,
        "--branch",
        "feature",
        "--base-branch",
        "main",
        "--commit",
        f"{int(run):040x}",
        "--ci-run-id",
        f"pr-{run}",
        "--pr",
        "7",
        "--github-output",
        "--report-dir",
        "reports",
        *args,
    )


def test_check_decides_comment_cc_outputs_summary_and_exit_code_in_actions(
    project: Path,
    migrated_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    github_server: FakeGitHub,
) -> None:
    _baseline(migrated_url, monkeypatch)
    output, summary = _in_actions(project, monkeypatch, github_server)
    monkeypatch.setenv("SLOWDOWN", "1.2")
    capsys.readouterr()

    cc = ("--comment-on", "regression", "--cc", "@alice b@d", "--cc", "@octo/perf")
    assert _pr_check(migrated_url, "11", *cc) == 1  # fail-on-regression: the default
    err = capsys.readouterr().err
    outputs = read_outputs(output)
    [comment] = github_server.comments_on("octo/tiny", 7)
    assert comment["body"].rstrip().endswith("cc @alice @octo/perf")
    assert "'b@d' is not a @user or @org/team mention" in err
    assert [s["state"] for s in github_server.statuses] == ["failure"]
    report = project / "reports" / "tiny" / "report.json"
    assert outputs == {
        "verdict": "regression",
        "regressions": outputs["regressions"],
        "report": "reports/tiny/report.md",
        "json-report": "reports/tiny/report.json",
        "step-time-change": outputs["step-time-change"],
        "comment-url": comment["html_url"],
        "run-url": "",
    }
    assert int(outputs["regressions"]) >= 1 and float(outputs["step-time-change"]) > 5
    assert json.loads(report.read_text(encoding="utf-8"))["verdict"] == "regression"
    assert "Regression" in summary.read_text(encoding="utf-8")

    assert _pr_check(migrated_url, "12", *cc, "--no-fail-on-regression") == 0
    assert len(github_server.comments_on("octo/tiny", 7)) == 1  # edited in place

    # Nothing worth a comment for --comment-on regression: no API call, the summary says why.
    monkeypatch.delenv("SLOWDOWN")
    output.write_text("", encoding="utf-8")
    calls = len(github_server.requests)
    assert _pr_check(migrated_url, "13", *cc) == 0
    assert len(github_server.requests) == calls
    quiet = read_outputs(output)
    assert quiet["verdict"] != "regression" and quiet["comment-url"] == ""
    assert "--comment-on regression" in summary.read_text(encoding="utf-8")
    assert TOKEN not in capsys.readouterr().err
    assert not github_server.unknown


@pytest.mark.parametrize("fork", ["someone/tiny", "deleted"])
def test_a_fork_pull_request_posts_nothing_though_a_token_is_set(
    project: Path,
    migrated_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    github_server: FakeGitHub,
    fork: str,
) -> None:
    _baseline(migrated_url, monkeypatch, runs=3)
    output, summary = _in_actions(project, monkeypatch, github_server, fork=fork)
    monkeypatch.setenv("SLOWDOWN", "1.2")
    assert _pr_check(migrated_url, "21") == 1
    assert github_server.requests == []
    assert read_outputs(output)["comment-url"] == ""
    assert "pull request from a fork" in summary.read_text(encoding="utf-8")
    assert (project / "reports" / "tiny" / "report.md").is_file()  # the artifact to post later
    assert "fork" in capsys.readouterr().err


def test_comment_on_takes_one_of_three_words(project: Path, migrated_url: str) -> None:
    assert _check(migrated_url, "--comment-on", "sometimes") == 2
    assert _runs(migrated_url) == 0
