"""The benchmark runner: real subprocesses, real files."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest
from ab_repo import ended, running

from perfci.cli.main import main
from perfci.core.errors import BenchmarkFailed, ConfigError
from perfci.integrations.benchmark_env import benchmark_environment
from perfci.integrations.runner import RunResult, run_benchmark

WRITER = (
    "import os, pathlib, json\n"
    "out = pathlib.Path(os.environ['PERFCI_OUTPUT_DIR'])\n"
    "rep = os.environ['PERFCI_REPEAT']\n"
    "(out / f'r{rep}.pt.trace.json').write_text(json.dumps({'repeat': rep}))\n"
    "(out / 'ignored.txt').write_text('not a profile')\n"
)


def test_each_repeat_is_a_fresh_process_with_its_own_dir(tmp_path: Path) -> None:
    seen = []
    result = run_benchmark(
        [sys.executable, "-c", WRITER],
        benchmark="b",
        repeats=3,
        work_dir=tmp_path,
        on_repeat=lambda i, r: seen.append(i),
    )
    assert seen == [0, 1, 2]
    files = result.files_per_repeat
    assert [[p.name for p in f] for f in files] == [
        ["r0.pt.trace.json"],
        ["r1.pt.trace.json"],
        ["r2.pt.trace.json"],
    ]
    assert json.loads(files[2][0].read_text()) == {"repeat": "2"}


def test_failing_repeat_stops_with_exit_code_and_tail(tmp_path: Path) -> None:
    script = "import os, sys\nprint('step failed: CUDA out of memory')\nsys.exit(7)"
    with pytest.raises(BenchmarkFailed) as info:
        run_benchmark([sys.executable, "-c", script], benchmark="b", repeats=3, work_dir=tmp_path)
    assert info.value.returncode == 7
    assert info.value.exit_code == 7
    assert "CUDA out of memory" in info.value.tail
    assert not (tmp_path / "repeat-1").exists()  # stopped at the first failure


def test_a_benchmark_that_dies_unflushed_still_shows_its_last_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Piped, Python buffers stdout: os._exit (or a crash) lost it, and "last output:" was empty
    # (issue 36). The runner sets PYTHONUNBUFFERED for the benchmark unless it is set.
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    script = "import os\nprint('loading the model')\nos._exit(3)"
    with pytest.raises(BenchmarkFailed) as info:
        run_benchmark([sys.executable, "-c", script], benchmark="b", repeats=2, work_dir=tmp_path)
    assert info.value.exit_code == 3 and info.value.tail == "loading the model"
    assert str(info.value).startswith("repeat 1 of the benchmark exited with code 3")
    with pytest.raises(BenchmarkFailed) as silent:
        run_benchmark(
            [sys.executable, "-c", "raise SystemExit(3)"],
            benchmark="b",
            repeats=1,
            work_dir=tmp_path / "silent",
        )
    assert "last output:\n(nothing: the benchmark printed no output)" in str(silent.value)


def test_repeat_without_profiles_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="wrote no profile file"):
        run_benchmark([sys.executable, "-c", "pass"], benchmark="b", repeats=1, work_dir=tmp_path)


def test_unknown_profiler_and_missing_command(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown profiler"):
        run_benchmark(["true"], benchmark="b", repeats=1, work_dir=tmp_path, profiler="vtune")
    with pytest.raises(ConfigError, match="no benchmark command"):
        run_benchmark([], benchmark="b", repeats=1, work_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"cannot start.*No such file"):
        run_benchmark(["/nonexistent/bench"], benchmark="b", repeats=1, work_dir=tmp_path)
    # A command that exists in a directory that does not: the directory is named.
    gone = tmp_path / "gone"
    with pytest.raises(ConfigError, match=r"its directory .*gone. does not exist"):
        run_benchmark(
            [sys.executable, "-c", "pass"], benchmark="b", repeats=1, work_dir=tmp_path, cwd=gone
        )


#: Stands in for Nsight Systems, which is not installed here (and records nothing useful
#: without a GPU): it checks the options perfci passes, runs the command and writes the
#: ``-o`` report as the SQLite export would be named.
FAKE_NSYS = """#!{python}
import subprocess, sys
args = sys.argv[1:]
assert args[0] == "profile" and "--export=sqlite" in args, args
out = args[args.index("-o") + 1]
command = args[args.index("-o") + 2:]
code = subprocess.call(command)
open(out + ".sqlite", "w").write("stand-in report")
sys.exit(code)
"""


def test_nsys_wraps_each_repeat_and_names_itself_to_the_benchmark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``PERFCI_PROFILER=nsys`` is how perfci.integrations.torch knows to leave torch.profiler
    off."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nsys").write_text(FAKE_NSYS.format(python=sys.executable))
    (bin_dir / "nsys").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    result, seen = _run_env_dumper(tmp_path, profiler="nsys")
    assert seen["PERFCI_PROFILER"] == "nsys"
    assert [p.name for p in result.files_per_repeat[0]] == ["report.sqlite"]


def test_cli_run_exits_with_the_benchmark_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "run",
            "--benchmark",
            "b",
            "-n",
            "1",
            "--work-dir",
            str(tmp_path),
            "--",
            sys.executable,
            "-c",
            "import sys; print('boom'); sys.exit(3)",
        ]
    )
    assert code == 3
    assert "boom" in capsys.readouterr().err
    code = main(
        [
            "run",
            "--benchmark",
            "b",
            "-n",
            "2",
            "--work-dir",
            str(tmp_path),
            "--",
            sys.executable,
            "-c",
            WRITER,
        ]
    )
    assert code == 0
    assert "r1.pt.trace.json" in capsys.readouterr().out


def test_cwd_sets_the_benchmark_working_directory(tmp_path: Path) -> None:
    where = tmp_path / "checkout"
    where.mkdir()
    script = (
        "import os, pathlib\n"
        "out = pathlib.Path(os.environ['PERFCI_OUTPUT_DIR'])\n"
        "(out / 'cwd.pt.trace.json').write_text(os.getcwd())\n"
    )
    result = run_benchmark(
        [sys.executable, "-c", script],
        benchmark="b",
        repeats=1,
        work_dir=tmp_path / "work",
        cwd=where,
    )
    assert Path(result.files_per_repeat[0][0].read_text()).resolve() == where.resolve()
    # Without cwd the benchmark runs where perfci runs (the default behaviour).
    result = run_benchmark(
        [sys.executable, "-c", script], benchmark="b", repeats=1, work_dir=tmp_path / "work2"
    )
    assert Path(result.files_per_repeat[0][0].read_text()).resolve() == Path.cwd().resolve()


# --- secrets withheld from the code under test (issue 13 point 9) ----------------------------

#: A benchmark that dumps the environment it was started with next to a valid perfci profile.
ENV_DUMPER = (
    "import json, os, pathlib, sys\n"
    "out = pathlib.Path(os.environ['PERFCI_OUTPUT_DIR'])\n"
    "pathlib.Path(sys.argv[1]).write_text(json.dumps(dict(os.environ)))\n"
    "doc = {'perfci_version': '0.1.0', 'schema_version': 1, 'profiles': [{\n"
    "    'label': 'p', 'format': 'perfci_json', 'source': 'bench', 'steps': 1,\n"
    "    'metrics': [{'kind': 'step', 'name': 'step', 'device': 'cpu', 'total_ns': 1e6}]}]}\n"
    "(out / 'profile.json').write_text(json.dumps(doc))\n"
)


def _run_env_dumper(
    tmp_path: Path, *, profiler: str, pass_env: list[str] | None = None
) -> tuple[RunResult, dict[str, str]]:
    """One repeat of :data:`ENV_DUMPER`; the run and the environment the benchmark saw."""
    dump = tmp_path / "env.json"
    result = run_benchmark(
        [sys.executable, "-c", ENV_DUMPER, str(dump)],
        benchmark="b",
        repeats=1,
        work_dir=tmp_path / "w",
        profiler=profiler,
        pass_env=pass_env,
    )
    return result, json.loads(dump.read_text())


SECRETS = {
    "PERFCI_DATABASE_URL": None,  # set per test: perfci itself needs it
    "PERFCI_TOKEN": "pct_s3cr3t-upload-token",
    "PERFCI_GITHUB_TOKEN": "ghp_perfciS3cr3tGithubToken",
    "PERFCI_SLACK_WEBHOOK": "https://hooks.slack.test/s3cr3t",
    "GITHUB_TOKEN": "ghs_actionsS3cr3tToken",
    "GH_TOKEN": "gho_cliS3cr3tToken",
    "ACTIONS_RUNTIME_TOKEN": "runtime-s3cr3t",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "oidc-s3cr3t",
    "ACTIONS_ID_TOKEN_REQUEST_URL": "https://oidc.test/s3cr3t",
    "ACTIONS_CACHE_URL": "https://cache.test/s3cr3t/",
    "ACTIONS_RESULTS_URL": "https://results.test/s3cr3t/",
}


def _secret_env(monkeypatch: pytest.MonkeyPatch, database: Path) -> dict[str, str]:
    """The process environment of a CI job holding every secret perfci knows of."""
    for name in [k for k in os.environ if k.startswith(("GITHUB_", "PERFCI_", "ACTIONS_"))]:
        monkeypatch.delenv(name)
    values = {**SECRETS, "PERFCI_DATABASE_URL": f"sqlite:///{database}"}
    for name, value in values.items():
        monkeypatch.setenv(name, str(value))
    return {k: str(v) for k, v in values.items()}


def test_benchmark_environment_withholds_secrets_and_passes_named_ones() -> None:
    base = {
        "PATH": "/bin",
        "HOME": "/home/ci",
        "CUDA_VISIBLE_DEVICES": "0",
        "PERFCI_TOKEN": "t",
        "PERFCI_REPEAT": "old",
        "GITHUB_TOKEN": "g",
        "GITHUB_SHA": "abc",
        "PERFCI_EXAMPLE_KNOB": "1",
        "GH_TOKEN": "h",
    }
    env, withheld = benchmark_environment(base, pass_env=["PERFCI_EXAMPLE_KNOB", "GH_TOKEN"])
    assert withheld == ["GITHUB_TOKEN", "PERFCI_TOKEN"]
    assert env == {
        "PATH": "/bin",
        "HOME": "/home/ci",
        "CUDA_VISIBLE_DEVICES": "0",
        "PERFCI_REPEAT": "old",
        "GITHUB_SHA": "abc",
        "PERFCI_EXAMPLE_KNOB": "1",
        "GH_TOKEN": "h",
    }


def test_run_benchmark_starts_the_benchmark_without_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = _secret_env(monkeypatch, tmp_path / "perfci.db")
    monkeypatch.setenv("PERFCI_EXAMPLE_KNOB", "1")
    result, seen = _run_env_dumper(
        tmp_path, profiler="none", pass_env=["PERFCI_EXAMPLE_KNOB", "GH_TOKEN"]
    )
    assert not (set(secrets) - {"GH_TOKEN"}) & set(seen)
    assert seen["GH_TOKEN"] == secrets["GH_TOKEN"]  # allow-listed
    assert seen["PERFCI_EXAMPLE_KNOB"] == "1"
    assert seen["PERFCI_REPEAT"] == "0" and seen["PERFCI_OUTPUT_DIR"].endswith("repeat-0")
    assert seen["PERFCI_PROFILER"] == "none"
    assert seen["PATH"] == os.environ["PATH"]  # everything else is inherited
    assert "PERFCI_TOKEN" in result.repeats[0].withheld
    assert "GH_TOKEN" not in result.repeats[0].withheld


def test_perfci_check_withholds_secrets_and_honours_the_pass_env_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole `perfci check` path: the benchmark sees no secret, perfci prints none."""
    secrets = _secret_env(monkeypatch, tmp_path / "perfci.db")
    monkeypatch.setenv("PERFCI_EXAMPLE_KNOB", "slow")
    monkeypatch.setenv("PERFCI_PASS_ENV", "PERFCI_EXAMPLE_KNOB")
    monkeypatch.chdir(tmp_path)
    dump = tmp_path / "env.json"
    code = main(
        [
            "check",
            "--benchmark",
            "b",
            "--repeats",
            "2",
            "--profiler",
            "none",
            "--glob",
            "*.json",
            "--no-comment",
            "--branch",
            "main",
            "--",
            sys.executable,
            "-c",
            ENV_DUMPER,
            str(dump),
        ]
    )
    assert code == 0
    seen = json.loads(dump.read_text())
    assert not set(secrets) & set(seen), sorted(set(secrets) & set(seen))
    assert "PERFCI_PASS_ENV" not in seen
    assert seen["PERFCI_EXAMPLE_KNOB"] == "slow"
    printed = capsys.readouterr()
    for value in secrets.values():
        if value != secrets["PERFCI_DATABASE_URL"]:  # a password-less SQLite URL is printed
            assert value not in printed.out + printed.err


def test_perfci_check_pass_env_flag_lets_one_variable_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = _secret_env(monkeypatch, tmp_path / "perfci.db")
    monkeypatch.setenv("PERFCI_EXAMPLE_KNOB", "slow")
    monkeypatch.chdir(tmp_path)
    dump = tmp_path / "env.json"
    code = main(
        [
            "check",
            "--benchmark",
            "b",
            "--repeats",
            "2",
            "--profiler",
            "none",
            "--glob",
            "*.json",
            "--no-comment",
            "--branch",
            "main",
            "--pass-env",
            "PERFCI_EXAMPLE_KNOB",
            "--",
            sys.executable,
            "-c",
            ENV_DUMPER,
            str(dump),
        ]
    )
    assert code == 0
    seen = json.loads(dump.read_text())
    assert seen["PERFCI_EXAMPLE_KNOB"] == "slow"
    assert not set(secrets) & set(seen)


#: A benchmark that starts a helper (a server, a data loader) and exits without stopping it.
LEAVES_A_PROCESS = (
    "import os, pathlib, subprocess, sys\n"
    "helper = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'],\n"
    "                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "pathlib.Path(sys.argv[1]).write_text(str(helper.pid))\n"
    "pathlib.Path(os.environ['PERFCI_OUTPUT_DIR'], 'p.json').write_text('{}')\n"
)


def test_no_process_of_the_benchmark_outlives_its_repeat(tmp_path: Path) -> None:
    """Issue 31: each repeat leads a process group of its own, ended when the repeat ends: a
    process the pull request's code left running could read later steps' secrets."""
    pid_file = tmp_path / "helper.pid"
    run_benchmark(
        [sys.executable, "-c", LEAVES_A_PROCESS, str(pid_file)],
        benchmark="b",
        repeats=1,
        work_dir=tmp_path / "w",
        profiler="none",
    )
    helper = int(pid_file.read_text())
    try:
        assert ended(helper), "the benchmark's helper outlived its repeat"
    finally:
        if running(helper):
            os.kill(helper, signal.SIGKILL)


def test_a_link_the_benchmark_leaves_out_of_its_folder_is_never_opened(tmp_path: Path) -> None:
    """Issue 31: perfci read the file a link pointed to and quoted its first bytes."""
    secret = tmp_path / "id_rsa"
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY----- TOP-S3CR3T\n")
    script = (
        "import os, pathlib, sys\n"
        "out = pathlib.Path(os.environ['PERFCI_OUTPUT_DIR'])\n"
        "(out / 'r.pt.trace.json').symlink_to(sys.argv[1])\n"
    )
    with pytest.raises(ConfigError, match="wrote no profile file") as caught:
        run_benchmark(
            [sys.executable, "-c", script, str(secret)],
            benchmark="b",
            repeats=1,
            work_dir=tmp_path / "w",
        )
    assert "TOP-S3CR3T" not in str(caught.value) and "BEGIN" not in str(caught.value)
