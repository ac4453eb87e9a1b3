"""Helper processes die with whatever started them (issue 36): a benchmark script's busy loops
when the script is killed, and every process of a command a test ran when its deadline passes.

Before, ``subprocess.run(timeout=300)`` killed ``benchmarks/fastest_step.py`` and nothing else:
its ``while True: pass`` child, whose ``finally`` never ran, kept a core busy for hours.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ab_repo import ended, running
from deadlines import TIME_SCALE_ENV, Deadline, scaled, time_scale
from processes import run

REPO = Path(__file__).resolve().parents[1]

#: A benchmark script: two busy loops from ``benchmarks/children.py``, their pids written out,
#: then a wait that only a kill ends.
WITH_BUSY_LOOPS = """\
import sys, time
sys.path.insert(0, sys.argv[2])
from children import busy_loops
with busy_loops(2) as loops:
    open(sys.argv[1], "w").write(" ".join(str(p.pid) for p in loops))
    time.sleep(3600)
"""

#: The same with plain ``Popen`` children (as ``fastest_step.py`` had), nothing arming them.
WITH_PLAIN_CHILDREN = """\
import subprocess, sys, time
loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
try:
    open(sys.argv[1], "w").write(" ".join(str(p.pid) for p in loops))
    time.sleep(3600)
finally:
    for p in loops:
        p.kill()
"""

needs_linux = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux's"
)


def _pids(path: Path, deadline: Deadline) -> list[int]:
    while not path.exists() or not path.read_text().strip():
        assert not deadline.expired(), f"the script never wrote its pids: {deadline.describe()}"
        time.sleep(0.05)
    return [int(pid) for pid in path.read_text().split()]


@needs_linux
def test_a_benchmark_script_killed_outright_takes_its_busy_loops_with_it(tmp_path: Path) -> None:
    pids_file = tmp_path / "pids"
    script = subprocess.Popen(
        [sys.executable, "-c", WITH_BUSY_LOOPS, str(pids_file), str(REPO / "benchmarks")]
    )
    try:
        loops = _pids(pids_file, Deadline(60))
        assert all(running(pid) for pid in loops)
    finally:
        script.send_signal(signal.SIGKILL)  # no finally, no atexit: only the kernel can help
        script.wait()
    try:
        assert all(ended(pid) for pid in loops), "a busy loop outlived its benchmark script"
    finally:
        for pid in loops:  # never leave a core busy, even when the test fails
            if running(pid):
                os.kill(pid, signal.SIGKILL)


@needs_linux
def test_a_command_past_its_deadline_is_killed_with_every_child(tmp_path: Path) -> None:
    """``processes.run`` kills the command's whole group on timeout: even children that nothing
    arms (a script written the old way) end with it."""
    pids_file = tmp_path / "pids"
    timeout_s = 1.0
    while True:  # until the script got as far as starting its children before the deadline
        with pytest.raises(subprocess.TimeoutExpired):
            run([sys.executable, "-c", WITH_PLAIN_CHILDREN, str(pids_file)], timeout_s=timeout_s)
        if pids_file.exists() and pids_file.read_text().strip():
            break
        timeout_s *= 2
        assert timeout_s < 600, "the script never started its children"
    loops = [int(pid) for pid in pids_file.read_text().split()]
    try:
        assert all(ended(pid) for pid in loops), "a child outlived its command's timeout"
    finally:
        for pid in loops:
            if running(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_command_that_ends_by_itself_gives_its_output() -> None:
    done = run(
        [sys.executable, "-c", "import sys; print(sys.stdin.read()[::-1])"],
        input="abc",
        timeout_s=60,
    )
    assert (done.returncode, done.stdout) == (0, "cba\n")


def test_the_time_scale_is_set_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TIME_SCALE_ENV, "4")
    assert time_scale() == 4.0
    assert scaled(15) == 60.0
    assert Deadline(10).seconds == 40.0
    monkeypatch.setenv(TIME_SCALE_ENV, "0.5")  # never shorter than a quiet machine's
    assert time_scale() == 1.0
    monkeypatch.setenv(TIME_SCALE_ENV, "fast")
    with pytest.raises(ValueError, match="PERFCI_TEST_TIME_SCALE='fast' is not a number"):
        time_scale()


def test_the_time_scale_follows_the_load_per_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TIME_SCALE_ENV, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (14.0, 9.0, 3.0))
    assert time_scale() == 7.0  # the runner: a load of 14 on 2 cores
    monkeypatch.setattr(os, "getloadavg", lambda: (0.3, 0.2, 0.1))
    assert time_scale() == 1.0


def test_a_deadline_stretches_when_the_load_arrives(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TIME_SCALE_ENV, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    deadline = Deadline(60)
    assert deadline.seconds == 60.0
    monkeypatch.setattr(os, "getloadavg", lambda: (12.0, 6.0, 2.0))
    assert deadline.seconds == 360.0
    monkeypatch.setattr(os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    assert deadline.seconds == 360.0  # the load came: the wait it slowed keeps its time
