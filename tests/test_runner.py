"""The benchmark runner: real subprocesses, real files."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from perfci.cli.main import main
from perfci.errors import ConfigError
from perfci.runner import BenchmarkFailed, run_benchmark

WRITER = (
    "import os, pathlib, json\n"
    "out = pathlib.Path(os.environ['PERFCI_OUTPUT_DIR'])\n"
    "rep = os.environ['PERFCI_REPEAT']\n"
    "(out / f'r{rep}.pt.trace.json').write_text(json.dumps({'repeat': rep}))\n"
    "(out / 'ignored.txt').write_text('not a profile')\n"
)


def test_each_repeat_is_a_fresh_process_with_its_own_dir(tmp_path: Path) -> None:
    seen = []
    result = run_benchmark([sys.executable, "-c", WRITER], benchmark="b", repeats=3,
                           work_dir=tmp_path, on_repeat=lambda i, r: seen.append(i))
    assert seen == [0, 1, 2]
    files = result.files_per_repeat
    assert [[p.name for p in f] for f in files] == [["r0.pt.trace.json"], ["r1.pt.trace.json"],
                                                     ["r2.pt.trace.json"]]
    assert json.loads(files[2][0].read_text()) == {"repeat": "2"}


def test_failing_repeat_stops_with_exit_code_and_tail(tmp_path: Path) -> None:
    script = "import os, sys\nprint('step failed: CUDA out of memory')\nsys.exit(7)"
    with pytest.raises(BenchmarkFailed) as info:
        run_benchmark([sys.executable, "-c", script], benchmark="b", repeats=3,
                      work_dir=tmp_path)
    assert info.value.returncode == 7
    assert info.value.exit_code == 7
    assert "CUDA out of memory" in info.value.tail
    assert not (tmp_path / "repeat-1").exists()  # stopped at the first failure


def test_repeat_without_profiles_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="wrote no profile file"):
        run_benchmark([sys.executable, "-c", "pass"], benchmark="b", repeats=1,
                      work_dir=tmp_path)


def test_unknown_profiler_and_missing_command(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown profiler"):
        run_benchmark(["true"], benchmark="b", repeats=1, work_dir=tmp_path, profiler="vtune")
    with pytest.raises(ConfigError, match="no benchmark command"):
        run_benchmark([], benchmark="b", repeats=1, work_dir=tmp_path)
    with pytest.raises(ConfigError, match="cannot start"):
        run_benchmark(["/nonexistent/bench"], benchmark="b", repeats=1, work_dir=tmp_path)


def test_cli_run_exits_with_the_benchmark_code(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--benchmark", "b", "-n", "1", "--work-dir", str(tmp_path), "--",
                 sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"])
    assert code == 3
    assert "boom" in capsys.readouterr().err
    code = main(["run", "--benchmark", "b", "-n", "2", "--work-dir", str(tmp_path), "--",
                 sys.executable, "-c", WRITER])
    assert code == 0
    assert "r1.pt.trace.json" in capsys.readouterr().out


def test_cwd_sets_the_benchmark_working_directory(tmp_path: Path) -> None:
    where = tmp_path / "checkout"
    where.mkdir()
    script = ("import os, pathlib\n"
              "out = pathlib.Path(os.environ['PERFCI_OUTPUT_DIR'])\n"
              "(out / 'cwd.pt.trace.json').write_text(os.getcwd())\n")
    result = run_benchmark([sys.executable, "-c", script], benchmark="b", repeats=1,
                           work_dir=tmp_path / "work", cwd=where)
    assert Path(result.files_per_repeat[0][0].read_text()).resolve() == where.resolve()
    # Without cwd the benchmark runs where perfci runs (the default behaviour).
    result = run_benchmark([sys.executable, "-c", script], benchmark="b", repeats=1,
                           work_dir=tmp_path / "work2")
    assert Path(result.files_per_repeat[0][0].read_text()).resolve() == Path.cwd().resolve()
