"""The GPU's state as evidence (issue 12 point 10): sampling, summaries, and their use.

No GPU is available where these tests run, so the GPU is the one thing mocked: the recorded
``nvidia-smi`` output in ``tests/data/gpu_state/`` (an H100 SXM, healthy and running hot) is
printed by a stand-in ``nvidia-smi`` placed first on PATH, and the real runner samples it in
a real background process. Everything after the GPU (the runner, the parsing, the store on
SQLite and PostgreSQL, the comparison and its notes) is the real code.
"""

from __future__ import annotations

import json
import stat
import sys
import types
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy.orm import Session

from perfci.core.jsondoc import from_document, to_document
from perfci.core.model import (
    Device,
    Metric,
    MetricKind,
    Profile,
    RunComparison,
    RunContext,
    Verdict,
)
from perfci.core.settings import Settings
from perfci.integrations.machine import gpu_state
from perfci.integrations.machine.gpu_state import StateJudge, parse_smi_csv, reason_names, summarise
from perfci.integrations.machine.host_load import MIN_WALL_S
from perfci.integrations.runner import run_benchmark
from perfci.store import queries
from perfci.usecases.submit.repeats import parse_repeats
from perfci.usecases.submit.run import submit_run

DATA = Path(__file__).parent / "data" / "gpu_state"
UUID_0 = "GPU-5e0c6d0b-8a3f-2c71-94e2-1b7d3f09a6c4"
UUID_1 = "GPU-b2a94f17-03de-6e58-c1a0-7f4e92d85b31"
QUERY = f"--query-gpu={','.join(gpu_state.SMI_FIELDS)}"


@pytest.fixture(autouse=True)
def _no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep a real NVML (nvidia-ml-py on a GPU host) from replacing the recorded GPU."""
    monkeypatch.setitem(sys.modules, "pynvml", None)


def _gpus_of(state: dict[str, Any] | None) -> dict[str, Any] | None:
    """A repeat's state without the host's load, which the runner measures beside the GPU."""
    return None if state is None else {k: v for k, v in state.items() if k != "host"}


def _state(name: str) -> dict[str, Any]:
    state = summarise(parse_smi_csv((DATA / name).read_text()), source="nvidia-smi")
    assert state is not None
    return state


# --- parsing and summaries ---------------------------------------------------------------------


def test_healthy_h100_summary() -> None:
    state = _state("h100-steady.csv")
    assert state["source"] == "nvidia-smi" and state["interval_ms"] == 100
    [gpu] = state["gpus"]
    assert (gpu["index"], gpu["uuid"], gpu["samples"]) == (0, UUID_0, 40)
    assert gpu["sm_clock_median_mhz"] == 1980 and gpu["sm_clock_min_mhz"] == 345
    assert gpu["sm_clock_max_mhz"] == 1980 and gpu["sm_clock_limit_mhz"] == 1980
    assert gpu["mem_clock_median_mhz"] == 2619 and gpu["temperature_max_c"] == 62
    assert 380 < gpu["power_median_w"] < 690
    assert gpu["throttle_reasons"] == ["gpu_idle", "sw_power_cap"]
    assert gpu["throttle_fractions"] == {"gpu_idle": 0.075, "sw_power_cap": 0.1}
    assert gpu["throttled_fraction"] == 0.1  # idle is not a slowdown


def test_thermal_throttling_summary_and_a_line_cut_short() -> None:
    text = (DATA / "h100-thermal.csv").read_text()
    assert not text.endswith("\n")  # the recording ends mid-line
    [gpu] = _state("h100-thermal.csv")["gpus"]
    assert gpu["samples"] == 40  # the cut line is not a reading
    assert gpu["sm_clock_median_mhz"] == 1410 and gpu["sm_clock_min_mhz"] == 1185
    assert gpu["temperature_max_c"] == 90
    assert gpu["throttle_reasons"] == ["hw_slowdown", "sw_thermal_slowdown"]
    assert gpu["throttle_fractions"] == {"hw_slowdown": 0.125, "sw_thermal_slowdown": 0.8}
    assert gpu["throttled_fraction"] == 0.8


def test_two_cards_are_summarised_apart_and_unreported_power_is_skipped() -> None:
    first, second = _state("h100x2-steady.csv")["gpus"]
    assert (first["uuid"], second["uuid"]) == (UUID_0, UUID_1)
    assert first["samples"] == second["samples"] == 20
    assert second["sm_clock_min_mhz"] == 1755 and second["throttle_reasons"] == ["sw_power_cap"]
    assert second["power_median_w"] is not None


def test_the_median_clock_is_the_busy_clock() -> None:
    """A benchmark that leaves the GPU idle most of the time (data loading, a CPU phase)."""

    def sample(sm: float, reasons: int) -> gpu_state.GpuSample:
        return gpu_state.GpuSample(
            index=0,
            uuid=UUID_0,
            sm_mhz=sm,
            mem_mhz=2619,
            max_sm_mhz=1980,
            temperature_c=40,
            power_w=90,
            reasons=reasons,
        )

    samples = [sample(345, 0x1)] * 7 + [sample(1980, 0x0)] * 3
    state = summarise(samples, source="nvidia-smi")
    assert state is not None
    [gpu] = state["gpus"]
    assert (gpu["sm_clock_median_mhz"], gpu["sm_clock_min_mhz"]) == (1980, 345)
    assert not StateJudge(usual_clock_mhz=1980).judge(state).suspect


def test_reason_bits_and_unreadable_lines() -> None:
    assert reason_names(0x28) == ["hw_slowdown", "sw_thermal_slowdown"]
    assert reason_names(0x1C4) == [
        "sw_power_cap",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
        "display_clock_setting",
    ]
    assert parse_smi_csv("index, uuid\nNo devices were found\n\n") == []
    assert summarise([], source="nvidia-smi") is None


# --- judging -----------------------------------------------------------------------------------


def test_a_hot_repeat_is_suspect_against_a_healthy_history() -> None:
    steady, thermal = _state("h100-steady.csv"), _state("h100-thermal.csv")
    judge = StateJudge.from_history([[steady] * 5] * 4)
    assert judge.usual_clock_mhz == 1980 and judge.usual_reasons == frozenset()
    assert not judge.judge(steady).suspect
    verdict = judge.judge(thermal)
    assert verdict.suspect and verdict.reasons == ("sw_thermal_slowdown",)
    assert verdict.describe() == "1410 MHz against 1980 MHz (sw_thermal_slowdown)"
    assert not judge.judge(None).suspect


def test_a_power_cap_the_runner_always_has_is_not_suspect() -> None:
    capped = _state("h100-steady.csv")
    capped["gpus"][0]["throttle_fractions"]["sw_power_cap"] = 0.9
    judge = StateJudge.from_history([[capped] * 3] * 5)
    assert judge.usual_reasons == frozenset({"sw_power_cap"})
    assert not judge.judge(capped).suspect


# --- sampling in the runner ----------------------------------------------------------------------

WRITER = (
    "import json, os, pathlib, time\n"
    "time.sleep(0.2)\n"
    # Beside a stand-in nvidia-smi: wait until it has printed this repeat's recording, as a
    # real one does within its first 100 ms, however long a loaded machine takes to start it.
    "printed = os.environ.get('FAKE_NVIDIA_SMI_PRINTED')\n"
    "if printed:\n"
    "    runs = pathlib.Path(printed + '.runs')\n"
    "    with runs.open('a') as f: f.write('run\\n')\n"
    "    wanted = len(runs.read_text().splitlines())\n"
    "    deadline = time.monotonic() + 300\n"
    "    while time.monotonic() < deadline and (not os.path.exists(printed)\n"
    "            or len(pathlib.Path(printed).read_text().splitlines()) < wanted):\n"
    "        time.sleep(0.02)\n"
    "out = pathlib.Path(os.environ['PERFCI_OUTPUT_DIR'])\n"
    "doc = {'perfci_version': '0.1.0', 'schema_version': 1, 'profiles': [{\n"
    "    'label': 'p', 'format': 'perfci_json', 'source': 'bench', 'steps': 1,\n"
    "    'metrics': [{'kind': 'step', 'name': 'step', 'device': 'gpu', 'total_ns': 1e7}]}]}\n"
    "(out / 'profile.json').write_text(json.dumps(doc))\n"
)


def _fake_smi(folder: Path, recordings: list[Path]) -> dict[str, str]:
    """A stand-in ``nvidia-smi`` (the GPU is the only thing mocked): the sampling query prints
    the next recording (one per repeat, the last one repeated), then waits to be stopped as
    ``-lms`` would; anything else fails as on a host without a driver. Each print is noted in
    ``$FAKE_NVIDIA_SMI_PRINTED`` (not PERFCI_: the runner withholds those), which ``WRITER`` waits
    for."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    counter = folder / "calls"
    counter.write_text("0")
    printed = folder / "printed"
    cases = "".join(f"  {i}) cat '{path}' ;;\n" for i, path in enumerate(recordings))
    script = (
        "#!/bin/sh\n"
        f'if [ "$1" != "{QUERY}" ]; then echo "NVIDIA-SMI has failed" >&2; exit 9; fi\n'
        f"n=$(cat '{counter}'); echo $((n + 1)) > '{counter}'\n"
        f"case \"$n\" in\n{cases}  *) cat '{recordings[-1]}' ;;\nesac\n"
        f"echo printed >> '{printed}'\n"
        "exec sleep 30\n"
    )
    smi = bin_dir / "nvidia-smi"
    smi.write_text(script)
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_NVIDIA_SMI_PRINTED": str(printed)}


def test_runner_samples_each_repeat_and_leaves_the_state_beside_its_profiles(
    tmp_path: Path,
) -> None:
    env = _fake_smi(tmp_path, [DATA / "h100-steady.csv", DATA / "h100-thermal.csv"])
    result = run_benchmark(
        [sys.executable, "-c", WRITER],
        benchmark="b",
        repeats=2,
        work_dir=tmp_path / "work",
        profiler="none",
        env=env,
        pass_env=(),
    )
    steady, thermal = (_gpus_of(r.gpu_state) for r in result.repeats)
    assert steady == _state("h100-steady.csv")
    assert thermal == _state("h100-thermal.csv")
    for repeat in result.repeats:
        # The state file is not a profile, even for `--profiler none`, which collects all.
        assert [p.name for p in repeat.files] == ["profile.json"]
        sidecar = repeat.output_dir / gpu_state.SIDECAR
        assert json.loads(sidecar.read_text()) == repeat.gpu_state


def test_only_the_cards_the_benchmark_can_use_are_reported(tmp_path: Path) -> None:
    env = _fake_smi(tmp_path, [DATA / "h100x2-steady.csv"])
    result = run_benchmark(
        [sys.executable, "-c", WRITER],
        benchmark="b",
        repeats=1,
        work_dir=tmp_path / "work",
        profiler="none",
        pass_env=(),
        env={**env, "CUDA_VISIBLE_DEVICES": "1"},
    )
    state = result.repeats[0].gpu_state
    assert state is not None and [g["uuid"] for g in state["gpus"]] == [UUID_1]
    by_uuid = run_benchmark(
        [sys.executable, "-c", WRITER],
        benchmark="b",
        repeats=1,
        work_dir=tmp_path / "work2",
        profiler="none",
        pass_env=(),
        env={**env, "CUDA_VISIBLE_DEVICES": UUID_0},
    )
    state = by_uuid.repeats[0].gpu_state
    assert state is not None and [g["uuid"] for g in state["gpus"]] == [UUID_0]


class _FakeNvml(types.ModuleType):  # NVML's method names, not PEP 8's
    """A stand-in for ``pynvml`` (nvidia-ml-py) reporting one hot H100: the GPU is the only
    thing mocked. Values are what NVML returns: MHz, degrees C, milliwatts, a reason mask."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self) -> None:
        super().__init__("pynvml")
        self.shut_down = False

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        self.shut_down = True

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> bytes:
        return UUID_0.encode()

    def nvmlDeviceGetClockInfo(self, handle: int, clock: int) -> int:
        return 1410 if clock == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetMaxClockInfo(self, handle: int, clock: int) -> int:
        return 1980

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        return 88

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return 412_500

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: int) -> int:
        return 0x20


def test_nvml_is_used_when_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    sampler = gpu_state.sample_while({"PATH": "/nonexistent"})  # no nvidia-smi needed
    state = sampler.stop()
    assert state is not None and state["source"] == "nvml"
    [gpu] = state["gpus"]
    assert gpu["uuid"] == UUID_0 and gpu["samples"] >= 1
    assert (gpu["sm_clock_median_mhz"], gpu["sm_clock_limit_mhz"]) == (1410, 1980)
    assert (gpu["temperature_max_c"], gpu["power_median_w"]) == (88, 412.5)
    assert gpu["throttle_reasons"] == ["sw_thermal_slowdown"]
    assert gpu["throttled_fraction"] == 1.0
    assert fake.shut_down


def test_a_broken_nvml_falls_back_without_error(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = _FakeNvml()
    broken.nvmlInit = lambda: (_ for _ in ()).throw(OSError("NVML Shared Library Not Found"))
    monkeypatch.setitem(sys.modules, "pynvml", broken)
    assert gpu_state.sample_while({"PATH": "/nonexistent"}).stop() is None


def test_no_gpu_means_no_gpu_state_and_no_error(tmp_path: Path) -> None:
    result = run_benchmark(
        [sys.executable, "-c", WRITER],
        benchmark="b",
        repeats=1,
        work_dir=tmp_path / "work",
        profiler="none",
        pass_env=(),
        env={"PATH": "/usr/bin:/bin"},
    )
    # Without a GPU the state holds the host's load alone (Linux: /proc/stat is read), and
    # only for a repeat long enough for its clock ticks: this one is not
    # (tests/test_host_load.py measures a 1.5 s repeat).
    state = result.repeats[0].gpu_state
    if result.repeats[0].seconds < MIN_WALL_S:  # what it takes on any but a crawling machine
        assert state is None
    else:
        assert state is not None and set(state) == {"host"}


def test_state_reaches_profile_metadata_the_store_and_perfci_json(
    tmp_path: Path, session: Session
) -> None:
    """Runner → profiles → store, and the perfci JSON document a remote upload sends."""
    env = _fake_smi(tmp_path, [DATA / "h100-steady.csv", DATA / "h100-thermal.csv"])
    result = run_benchmark(
        [sys.executable, "-c", WRITER],
        benchmark="b",
        repeats=2,
        work_dir=tmp_path / "work",
        profiler="none",
        env=env,
        pass_env=(),
    )
    repeats = [parse_repeats(files, repeat=1)[0] for files in result.files_per_repeat]
    gpu_state.attach(repeats, result.files_per_repeat)
    assert _gpus_of(repeats[1][0].metadata["gpu_state"]) == _state("h100-thermal.csv")
    sent = json.loads(json.dumps(to_document(repeats[1])))  # what upload_run sends
    assert from_document(sent)[0].metadata["gpu_state"] == repeats[1][0].metadata["gpu_state"]
    done = submit_run(
        session,
        context=_context("a" * 40, "main", "r1", T0),
        benchmark="b",
        repeats=repeats,
        settings=Settings(),
    )
    stored = queries.repeat_gpu_states(session, [done.ingest.run_id])
    assert stored == {
        done.ingest.run_id: {i: r[0].metadata["gpu_state"] for i, r in enumerate(repeats)}
    }
    assert _gpus_of(stored[done.ingest.run_id][1]) == _state("h100-thermal.csv")


# --- the comparison ------------------------------------------------------------------------------

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
ENV = {"gpu": "NVIDIA H100 80GB HBM3", "gpu_count": "1", "driver": "550.54.15", "gpu_uuid": UUID_0}


def _context(
    sha: str,
    branch: str,
    ci: str,
    when: datetime,
    *,
    merge_base: str | None = None,
    uuid: str = UUID_0,
) -> RunContext:
    return RunContext(
        project="acme/gpt",
        commit=sha,
        branch=branch,
        ci_provider="test",
        ci_run_id=ci,
        ci_run_attempt=1,
        commit_time=when.isoformat(),
        base_branch="main" if merge_base else None,
        merge_base=merge_base,
        environment={**ENV, "gpu_uuid": uuid},
    )


def _repeat(rng: np.random.Generator, state: dict[str, Any], slow: float = 1.0) -> list[Profile]:
    """One repeat of a GPU training step; a throttled GPU makes everything ``slow`` x slower."""
    noise = lambda: float(np.exp(rng.normal(0, 0.01)))  # noqa: E731
    gemm, softmax = 6e6 * slow * noise(), 3e6 * slow * noise()
    metrics = [
        Metric(MetricKind.STEP, "step", samples_ns=[gemm + softmax + 1e6] * 3),
        Metric(MetricKind.KERNEL, "sm90_xmma_gemm_bf16bf16_bf16f32", calls=30, total_ns=3 * gemm),
        Metric(MetricKind.KERNEL, "softmax_warp_forward", calls=30, total_ns=3 * softmax),
        Metric(MetricKind.API, "cudaLaunchKernel", device=Device.CPU, calls=90, total_ns=3e5),
    ]
    return [
        Profile(
            label="p",
            format="test",
            source="mem",
            metrics=metrics,
            steps=3,
            metadata={"gpu_state": state},
        )
    ]


def _submit_main(
    session: Session,
    rng: np.random.Generator,
    runs: list[list[dict[str, Any]]],
    *,
    slow_state: dict[str, Any],
    slow: float,
) -> list[int]:
    """Store one ``main`` run per list of repeat states, an hour apart; their run ids.

    A repeat whose state is ``slow_state`` runs ``slow`` times slower."""
    ids = []
    for i, states in enumerate(runs):
        repeats = [_repeat(rng, s, slow if s is slow_state else 1.0) for s in states]
        done = submit_run(
            session,
            context=_context(f"{i:040x}", "main", f"m{i}", T0 + timedelta(hours=i)),
            benchmark="gpt",
            repeats=repeats,
            settings=Settings(),
        )
        ids.append(done.ingest.run_id)
    return ids


def test_throttled_baseline_run_and_candidate_repeat_are_left_out_and_named(
    session: Session,
) -> None:
    rng = np.random.default_rng(5)
    steady, hot = _state("h100-steady.csv"), _state("h100-thermal.csv")
    # Run 3 had a hot card: 3 of its 5 repeats throttled, and 40 % slower.
    runs = [[hot, steady, hot, hot, steady] if i == 2 else [steady] * 5 for i in range(5)]
    main_ids = _submit_main(session, rng, runs, slow_state=hot, slow=1.4)
    pr_states = [steady, hot, steady, steady, steady]
    pr = _context(
        "f" * 40, "feature", "pr", T0 + timedelta(hours=6), merge_base=f"{4:040x}", uuid=UUID_1
    )
    result = submit_run(
        session,
        context=pr,
        benchmark="gpt",
        settings=Settings(),
        repeats=[_repeat(rng, s, 1.4 if s is hot else 1.0) for s in pr_states],
    ).comparison
    assert result.baseline is not None
    assert sorted(result.baseline.run_ids) == sorted(main_ids[:2] + main_ids[3:])
    assert (
        f"1 of 5 baseline runs left out: GPU throttled (sw_thermal_slowdown) in 3 of 5 "
        f"repeats (run {main_ids[2]})"
    ) in result.notes
    assert (
        "repeat 2 of this run ran at 1410 MHz against 1980 MHz (sw_thermal_slowdown); left out"
    ) in result.notes
    assert result.verdict is not Verdict.REGRESSION
    step = next(m for m in result.metrics if m.series is not None and m.series.kind == "step")
    assert step.verdict is not Verdict.REGRESSION
    # The card this run used, not the first card stored for this environment.
    assert result.environment["gpu_uuid"] == UUID_0


def test_a_run_throttled_in_every_repeat_keeps_its_repeats_and_says_so(session: Session) -> None:
    rng = np.random.default_rng(9)
    steady, hot = _state("h100-steady.csv"), _state("h100-thermal.csv")
    for i in range(3):
        submit_run(
            session,
            context=_context(f"{i:040x}", "main", f"m{i}", T0 + timedelta(hours=i)),
            benchmark="gpt",
            repeats=[_repeat(rng, steady) for _ in range(3)],
            settings=Settings(),
        )
    pr = _context("e" * 40, "feature", "pr", T0 + timedelta(hours=4), merge_base=f"{2:040x}")
    result = submit_run(
        session,
        context=pr,
        benchmark="gpt",
        settings=Settings(),
        repeats=[_repeat(rng, hot, 1.4) for _ in range(3)],
    ).comparison
    kept = [n for n in result.notes if n.endswith("kept: no repeat ran unthrottled")]
    assert len(kept) == 3 and kept[0].startswith("repeat 1 of this run ran at 1410 MHz")
    assert result.baseline is not None and result.baseline.runs == 3
    # A throttled GPU can be the code's doing (heavier kernels at the card's power cap): unlike
    # a busy host, it does not make the run inconclusive.
    assert result.verdict is Verdict.REGRESSION


def test_perfci_check_stores_each_repeats_gpu_state_with_its_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check path attaches the sampled state to each repeat's profile metadata."""
    from perfci.core.settings import Settings
    from perfci.store import db
    from perfci.store.schema import ProfileRow
    from perfci.usecases.check.run import CheckRequest, run_check

    env = _fake_smi(tmp_path, [DATA / "h100-steady.csv", DATA / "h100-thermal.csv"])
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    url = f"sqlite:///{tmp_path / 'perfci.db'}"
    request = CheckRequest(
        benchmark="b",
        command=[sys.executable, "-c", WRITER],
        repeats=2,
        profiler="none",
        context={"branch": "main", "commit": "a" * 40},
    )
    run_check(
        request, settings=Settings(database_url=url, project="p", max_repeats=2), cwd=tmp_path
    )
    store = db.open_store(Settings(database_url=url))
    try:
        with store.sessions() as session:
            rows = session.query(ProfileRow).order_by(ProfileRow.repeat).all()
            states = [_gpus_of(row.meta.get("gpu_state")) for row in rows]
    finally:
        store.close()
    assert states == [_state("h100-steady.csv"), _state("h100-thermal.csv")]


def _busy_history(
    session: Session, *, slow: float, pr_states: str, pr_slow: dict[str, float]
) -> tuple[list[int], RunComparison]:
    """Five ``main`` runs, the second busy in 3 of 5 repeats (those ``slow`` x slower), then a
    pull request whose repeats are ``pr_states`` (``q`` quiet, ``b`` busy), each as slow as
    ``pr_slow`` says for its state; the main run ids and the comparison."""
    rng = np.random.default_rng(11)
    quiet, busy = (
        {"host": {"others_cpu_share": 0.02, "cpus": 2}},
        {"host": {"others_cpu_share": 0.55, "cpus": 2}},
    )
    runs = [[busy, busy, quiet, busy, quiet] if i == 1 else [quiet] * 5 for i in range(5)]
    main_ids = _submit_main(session, rng, runs, slow_state=busy, slow=slow)
    pr = _context("d" * 40, "feature", "pr", T0 + timedelta(hours=6), merge_base=f"{4:040x}")
    states = {"q": quiet, "b": busy}
    result = submit_run(
        session,
        context=pr,
        benchmark="gpt",
        settings=Settings(),
        repeats=[_repeat(rng, states[c], pr_slow[c]) for c in pr_states],
    ).comparison
    return main_ids, result


def test_busy_host_baseline_run_and_candidate_repeat_are_left_out_and_named(
    session: Session,
) -> None:
    """The host's load is judged like the GPU's state: a CPU-bound runner shared with a job."""
    main_ids, result = _busy_history(
        session, slow=1.3, pr_states="qqb", pr_slow={"q": 1.0, "b": 1.3}
    )
    assert result.baseline is not None
    assert sorted(result.baseline.run_ids) == sorted([main_ids[0], *main_ids[2:]])
    assert (
        "1 of 5 baseline runs left out: a busy host (other processes took 55% of the host's "
        f"CPU, usually 2%) in 3 of 5 repeats (run {main_ids[1]})"
    ) in result.notes
    assert (
        "repeat 3 of this run ran on a busy host: other processes took 55% of the host's CPU, "
        "usually 2%; left out"
    ) in result.notes
    assert result.verdict is not Verdict.REGRESSION


def test_a_run_on_a_busy_host_in_every_repeat_is_inconclusive_not_a_regression(
    session: Session,
) -> None:
    """A docs-only pull request whose every repeat shared the host with a neighbour's job: 30 %
    slower in everything, and no quiet repeat to tell the load from the code. Nothing fails;
    the lines that moved say how many repeats (one on a quiet host) would settle them."""
    _main_ids, result = _busy_history(session, slow=1.3, pr_states="bbb", pr_slow={"b": 1.3})
    assert result.verdict is Verdict.INCONCLUSIVE
    moved = [m for m in result.metrics if m.change is not None and m.change > 0.2]
    assert moved and all(m.verdict is Verdict.INCONCLUSIVE for m in moved)
    assert all(m.repeats_needed == m.n_candidate + 1 for m in moved)
    assert not [m for m in result.metrics if m.verdict is Verdict.REGRESSION]
    [note] = [n for n in result.notes if n.startswith("Every repeat of this run ran on a busy")]
    assert "other processes took 55% of the host's CPU, usually 2%" in note
    assert "perfci check --ab" in note
    kept = [n for n in result.notes if n.endswith("kept: no repeat ran on a quiet host")]
    assert len(kept) == 3


def test_a_busy_host_that_left_the_step_alone_costs_no_data(session: Session) -> None:
    """The same busy repeats as above, but the benchmark did not slow down (a neighbour on
    other cores, a GPU-bound step): nothing is left out, and a real +30 % is still caught."""
    main_ids, result = _busy_history(
        session, slow=1.0, pr_states="qbb", pr_slow={"q": 1.3, "b": 1.3}
    )
    assert result.baseline is not None
    assert sorted(result.baseline.run_ids) == sorted(main_ids)
    assert not [n for n in result.notes if "busy host" in n]
    step = next(m for m in result.metrics if m.key == result.primary_step)
    assert step.n_candidate == 3
    assert result.verdict is Verdict.REGRESSION
