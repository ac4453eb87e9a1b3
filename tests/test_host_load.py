"""The host's other work during a repeat: /proc/stat arithmetic, a real busy host, the judge."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfci.integrations.machine.gpu_state import StateJudge
from perfci.integrations.machine.host_load import (
    BUSY_EXCESS,
    MIN_WALL_S,
    busy_jiffies,
    others_share,
)
from perfci.integrations.machine.judge import MIN_STEP_MOVE, step_moved, step_tolerance
from perfci.integrations.runner import run_benchmark

# /proc/stat of this project's 2-core VM: user nice system idle iowait irq softirq steal guest
PROC_STAT = """\
cpu  69610 0 8091 73170 860 0 237 420 0 0
cpu0 27421 0 2647 45552 149 0 89 232 0 0
cpu1 42188 0 5443 27618 711 0 148 187 0 0
intr 566446 0 0 0
ctxt 953778
"""


def test_busy_and_total_ticks_come_from_the_all_cpus_line() -> None:
    busy, total = busy_jiffies(PROC_STAT) or (0, 0)
    assert total == 69610 + 8091 + 73170 + 860 + 237 + 420
    assert busy == total - 73170 - 860  # idle and iowait are not busy


@pytest.mark.parametrize("text", ["", "cpu0 1 2 3 4\n", "cpu  1 2 x 4\n", "cpu  1 2\n"])
def test_unreadable_proc_stat_gives_nothing(text: str) -> None:
    assert busy_jiffies(text) is None


def test_others_share_is_the_machine_busy_time_less_the_benchmarks_own() -> None:
    # 2 cores for 10 s; the machine was busy 1,500 ticks (15 s); the benchmark used 10 s.
    assert others_share(1500, 10.0, 10.0, 2, 100.0) == pytest.approx(0.25)
    assert others_share(900, 10.0, 10.0, 2, 100.0) == 0.0  # tick rounding: never below 0
    assert others_share(9000, 0.0, 10.0, 2, 100.0) == 1.0
    assert others_share(100, 0.0, 0.0, 2, 100.0) is None


def test_a_repeat_too_short_for_the_clock_ticks_gives_no_share() -> None:
    """50 ms on 2 cores is 10 ticks: a neighbour's 2 ticks would read as a 20 % busy host."""
    assert others_share(2, 0.0, 0.05, 2, 100.0) is None
    assert others_share(2, 0.0, MIN_WALL_S - 0.01, 2, 100.0) is None
    assert others_share(20, 0.0, MIN_WALL_S, 2, 100.0) == pytest.approx(0.1)


BUSY_LOOP = "import time\nend = time.time() + 30\nwhile time.time() < end: pass\n"
WRITER = (
    "import json, os, pathlib, time\n"
    "time.sleep(1.5)\n"
    "out = pathlib.Path(os.environ['PERFCI_OUTPUT_DIR'])\n"
    "(out / 'profile.json').write_text(json.dumps({'perfci_version': '0.1.0', "
    "'schema_version': 1, 'profiles': [{'label': 'p', 'format': 'perfci_json', "
    "'source': 'bench', 'steps': 1, 'metrics': [{'kind': 'step', 'name': 'step', "
    "'device': 'cpu', 'total_ns': 1e7}]}]}))\n"
)


@pytest.mark.skipif(not Path("/proc/stat").is_file(), reason="needs Linux's /proc/stat")
def test_a_busy_loop_beside_the_repeat_is_measured_as_other_work(tmp_path: Path) -> None:
    """A real busy process beside a sleeping benchmark: at least most of one core's worth."""
    loops = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(2)]
    try:
        result = run_benchmark(
            [sys.executable, "-c", WRITER],
            benchmark="b",
            repeats=1,
            work_dir=tmp_path / "work",
            profiler="none",
            pass_env=(),
            env={"PATH": "/usr/bin:/bin"},
        )
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    state = result.repeats[0].gpu_state
    assert state is not None
    cpus = os.cpu_count() or 1
    assert state["host"]["cpus"] == cpus
    # Two loops hold min(2, cpus) cores; the scheduler gives them at least half of that.
    assert state["host"]["others_cpu_share"] >= 0.5 * min(2, cpus) / cpus


def _host(share: float) -> dict[str, object]:
    return {"host": {"others_cpu_share": share, "cpus": 2}}


def test_a_repeat_is_suspect_when_other_work_took_much_more_than_usual() -> None:
    quiet = [[_host(0.01), _host(0.03), _host(0.02)] for _ in range(4)]
    judge = StateJudge.from_history(quiet)
    assert judge.usual_others_share == pytest.approx(0.02)
    busy = judge.judge(_host(0.52))
    assert busy.suspect and not busy.gpu_suspect
    assert busy.host_words() == "other processes took 52% of the host's CPU, usually 2%"
    calm = judge.judge(_host(0.02 + BUSY_EXCESS - 0.01))
    assert not calm.suspect and calm.host_words() is None
    # A runner that always shares its cores: that much is its usual state.
    shared = StateJudge.from_history([[_host(0.45), _host(0.40)] for _ in range(3)])
    assert not shared.judge(_host(0.55)).suspect
    assert shared.judge(_host(0.75)).suspect


def test_without_readings_in_the_baseline_a_quiet_host_is_usual() -> None:
    judge = StateJudge.from_history([[None, {}], []])
    assert judge.usual_others_share == 0.0
    assert judge.judge(_host(0.30)).suspect
    assert not judge.judge({"host": {"others_cpu_share": "lots"}}).suspect


def test_the_step_must_move_with_the_load() -> None:
    """How far a step may move before a busy host is blamed: three times its spread, 5 % at
    least; without numbers the state alone decides."""
    steady = [[100.0, 101.0, 99.0], [200.0, 200.0, 202.0]]
    assert step_tolerance(steady) == MIN_STEP_MOVE
    wobbly = [[100.0, 110.0, 90.0], [100.0, 112.0, 91.0]]
    assert step_tolerance(wobbly) == pytest.approx(3 * 1.4826 * math.log(1.1), rel=0.1)
    assert step_moved(130.0, [100.0, 101.0], MIN_STEP_MOVE)
    assert not step_moved(103.0, [100.0, 101.0], MIN_STEP_MOVE)
    assert step_moved(None, [100.0], MIN_STEP_MOVE) and step_moved(100.0, [], MIN_STEP_MOVE)
