"""Acceptance of the comparator: real profiles, a known slowdown, found and attributed end to end.

Two real sources: seed 001 (nvprof of llm.c GPT-2 on a V100) and a torch.profiler Chrome trace
made here on the CPU. Each baseline run is the parsed profile with independent log-normal noise
(CV 1 %) on every metric of every repeat, ingested as 10 runs on ``main`` through ``perfci
ingest`` (perfci JSON documents). Candidates go through ``perfci check --profile`` in-process:

- one kernel 10 % slower and the step time longer by exactly that kernel's added time per step:
  exit 1, that kernel and the step time are ``regression``, and the kernel is the top
  contributor to the step-time change;
- no change: exit 0 and no gated regression.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import seed

from perfci.cli.main import main
from perfci.core.jsondoc import to_document
from perfci.core.model import Metric, MetricKind, Profile, Verdict
from perfci.core.transfer import comparison_from_dict
from perfci.formats.registry import parse_file
from perfci.report.escape import md_escape

CV = 0.01
SLOWDOWN = 1.10
# The step must grow by at least this much (well beyond the 2 % margin) for its verdict to be
# certain: a CPU trace's operator can be a small share of the step, so it is slowed more.
MIN_STEP_GROWTH = 0.06
BASELINE_RUNS = 10
BASELINE_REPEATS = 3
CANDIDATE_REPEATS = 5
_SCALED = ("total_ns", "self_ns", "avg_ns", "min_ns", "max_ns", "std_ns", "median_ns")


@dataclass(frozen=True)
class Source:
    """A real parsed profile and the kernel (or CPU operator) to slow down in it."""

    name: str
    profile: Profile
    kernel: str
    kind: MetricKind


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No git, no config file, no CI: the flags alone say where each run comes from."""
    monkeypatch.chdir(tmp_path)
    for name in (
        "GITHUB_ACTIONS",
        "GITHUB_TOKEN",
        "GITHUB_OUTPUT",
        "GITHUB_STEP_SUMMARY",
        "GITHUB_EVENT_PATH",
        "PERFCI_DATABASE_URL",
        "PERFCI_GITHUB_TOKEN",
        "PERFCI_PROJECT",
    ):
        monkeypatch.delenv(name, raising=False)


def _nvprof_source() -> Source:
    [profile] = parse_file(seed("001_"))
    return Source("nvprof", profile, "volta_sgemm_128x64_tn", MetricKind.KERNEL)


@pytest.fixture(scope="module")
def torch_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Chrome trace of 4 training steps of a small MLP, profiled on the CPU."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256)
    )
    batch = torch.randn(64, 256)
    path = tmp_path_factory.mktemp("torch") / "mlp.pt.trace.json"

    def step() -> None:
        with record_function("forward"):
            loss = model(batch).sum()
        with record_function("backward"):
            loss.backward()

    for _ in range(3):  # allocator growth and first-call costs stay out of the trace
        step()
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=4, repeat=1),
        on_trace_ready=lambda prof: prof.export_chrome_trace(str(path)),
    ) as prof:
        for _ in range(6):
            step()
            prof.step()
    return path


def _torch_source(path: Path) -> Source:
    [profile] = parse_file(path, format="chrome_trace")
    # On the CPU the matrix multiplications are operators; aten::mm is the backward GEMM.
    return Source("torch", profile, "aten::mm", MetricKind.OP)


@pytest.fixture(params=["nvprof", "torch"])
def source(request: pytest.FixtureRequest) -> Source:
    if request.param == "nvprof":
        return _nvprof_source()
    return _torch_source(request.getfixturevalue("torch_trace"))


# --- making repeats -------------------------------------------------------------------------


def _slowed(source: Source) -> Metric:
    return next(
        m
        for m in source.profile.metrics
        if m.kind is source.kind and m.name == source.kernel and m.scope is None
    )


def _added_per_step(source: Source) -> float:
    """The kernel's extra time per step at its slowdown (what the step time grows by)."""
    kernel = _slowed(source)
    assert kernel.total_ns and source.profile.steps
    return kernel.total_ns * (_slowdown(source) - 1) / source.profile.steps


def _compared_delta(source: Source) -> float:
    """The slowed metric's change per step as history mode compares it: a host-side operator
    with per-step totals on its fastest step (in this small trace the steps differ several
    times over), anything else on its mean."""
    kernel = _slowed(source)
    if kernel.step_totals_ns:
        return min(kernel.step_totals_ns) * (_slowdown(source) - 1)
    return _added_per_step(source)


def _slowdown(source: Source) -> float:
    """``SLOWDOWN``, or more when the kernel is too small a share of the step to show."""
    kernel = _slowed(source)
    step = next(m for m in source.profile.metrics if m.kind is MetricKind.STEP and m.scope is None)
    step_ns = step.steady_mean_ns()
    assert kernel.total_ns and source.profile.steps and step_ns
    share = kernel.total_ns / source.profile.steps / step_ns
    return max(SLOWDOWN, 1 + MIN_STEP_GROWTH / share)


def _scaled(metric: Metric, factor: float, add_ns: float = 0.0) -> Metric:
    values = {
        name: getattr(metric, name) * factor
        for name in _SCALED
        if getattr(metric, name) is not None
    }
    if metric.samples_ns:
        values["samples_ns"] = [s * factor + add_ns for s in metric.samples_ns]
    if metric.step_totals_ns:  # a slower operator is slower in every step (history mode
        # compares host-side operators on their fastest step)
        values["step_totals_ns"] = [t * factor for t in metric.step_totals_ns]
    return dataclasses.replace(metric, **values)


def _repeat(source: Source, rng: np.random.Generator, *, slow: bool) -> Profile:
    """The source profile with noise on every metric; ``slow``: the known slowdown."""
    target = _slowed(source)
    added = _added_per_step(source) if slow else 0.0
    metrics = []
    for metric in source.profile.metrics:
        factor = float(np.exp(rng.normal(0.0, CV)))
        if slow and metric is target:
            factor *= _slowdown(source)
        add = added if metric.kind is MetricKind.STEP and metric.scope is None else 0.0
        metrics.append(_scaled(metric, factor, add))
    return dataclasses.replace(source.profile, metrics=metrics, warnings=[])


def _write_repeats(
    folder: Path, source: Source, rng: np.random.Generator, count: int, *, slow: bool = False
) -> list[str]:
    folder.mkdir(parents=True)
    files = []
    for index in range(count):
        path = folder / f"r{index}.perfci.json"
        path.write_text(
            json.dumps(to_document([_repeat(source, rng, slow=slow)])), encoding="utf-8"
        )
        files.append(str(path))
    return files


# --- the test -------------------------------------------------------------------------------


def _common(url: str, project: str) -> list[str]:
    return [
        "--benchmark",
        "train",
        "--project",
        project,
        "--database-url",
        url,
        "--env",
        "gpu=Tesla V100-SXM2-16GB",
    ]


def _ingest_baseline(
    tmp: Path, source: Source, url: str, project: str, rng: np.random.Generator
) -> None:
    for run in range(BASELINE_RUNS):
        files = _write_repeats(tmp / f"main-{run}", source, rng, BASELINE_REPEATS)
        code = main(
            [
                "ingest",
                *files,
                *_common(url, project),
                "--branch",
                "main",
                "--commit",
                f"{run + 1:040x}",
                "--ci-run-id",
                f"main-{run}",
            ]
        )
        assert code == 0


def _check_args(tmp: Path, name: str, files: list[str], url: str, project: str) -> list[str]:
    args = [
        "check",
        *(a for f in files for a in ("--profile", f)),
        *_common(url, project),
        "--branch",
        name,
        "--base-branch",
        "main",
        "--commit",
        "f" * 39 + name[-1],
        "--ci-run-id",
        name,
        "--markdown-out",
        str(tmp / f"{name}.md"),
        "--json-out",
        str(tmp / f"{name}.json"),
    ]
    return args


def test_known_slowdown_is_found_and_attributed(
    source: Source, migrated_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(20260101)
    project = f"e2e-{source.name}-{uuid.uuid4().hex[:8]}"
    _ingest_baseline(tmp_path, source, migrated_url, project, rng)
    capsys.readouterr()

    slow = _write_repeats(tmp_path / "pr-1", source, rng, CANDIDATE_REPEATS, slow=True)
    assert main(_check_args(tmp_path, "pr-1", slow, migrated_url, project)) == 1
    printed = capsys.readouterr().out
    assert source.kernel in printed
    assert md_escape(source.kernel) in (tmp_path / "pr-1.md").read_text(encoding="utf-8")
    result = comparison_from_dict(json.loads((tmp_path / "pr-1.json").read_text()))
    assert result.verdict is Verdict.REGRESSION
    assert result.baseline is not None and result.baseline.runs == BASELINE_RUNS
    by_name = {
        (m.series.kind, m.series.scope, m.series.name): m
        for m in result.metrics
        if m.series is not None
    }
    kernel = by_name[(source.kind, "", source.kernel)]
    assert kernel.verdict is Verdict.REGRESSION
    # Gated by its share of the step (2 %), before or, as a regression, after the change
    # (judge._gate_tested): the torch source is a real CPU trace made by this run, and on a
    # loaded machine its host gaps can shrink aten::mm's share to either side of the gate.
    share = kernel.share_of_step
    assert share is not None
    assert kernel.baseline_median and kernel.candidate_median
    grown = share * kernel.candidate_median / kernel.baseline_median
    assert kernel.gated is (share >= 0.02 or grown >= 0.02)
    assert kernel.change == pytest.approx(_slowdown(source) - 1, abs=0.02)
    step = next(m for m in result.steps if m.series and m.series.scope == "")
    assert step.verdict is Verdict.REGRESSION
    # The slowed line is the first contribution among the lines judged to have moved. A
    # contribution is ranked by its change in ns, judged or not: in the torch source, a real
    # CPU trace made by this run, a large operator's noise (aten::linear, on a loaded machine,
    # its fastest step several times aten::mm's) can add more ns than the slowdown does.
    moved = {m.series for m in result.metrics if m.verdict is Verdict.REGRESSION}
    top = next(c for c in result.contributions if c.series in moved)
    assert top.series is not None and top.series.name == source.kernel
    assert top.series.scope == ""
    assert top.delta_ns == pytest.approx(_compared_delta(source), rel=0.25)

    same = _write_repeats(tmp_path / "pr-2", source, rng, CANDIDATE_REPEATS)
    assert main(_check_args(tmp_path, "pr-2", same, migrated_url, project)) == 0
    unchanged = comparison_from_dict(json.loads((tmp_path / "pr-2.json").read_text()))
    assert unchanged.verdict is not Verdict.REGRESSION
    assert not unchanged.gated_regressions
    assert unchanged.baseline is not None and unchanged.baseline.runs == BASELINE_RUNS
