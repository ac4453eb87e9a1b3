"""The repro bundle (issue 34): the weekly report's change points offer the exact ``perfci check
--ab`` and ``perfci bisect`` commands (golden file), a failed comparison on the base branch
offers the bisection, and the command in a comment reproduces its verdict in a fresh clone.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ab_repo import check_ab, clean_env, git, make_repo
from test_report import GOLDEN, _golden

from perfci.cli.main import main
from perfci.core.model import (
    BaselineInfo,
    MetricComparison,
    MetricKind,
    RunComparison,
    SeriesKey,
    Verdict,
)
from perfci.core.repro import Repro
from perfci.core.weekly import (
    BenchmarkTrend,
    ChangePointReport,
    Coverage,
    EnvironmentSeen,
    KernelContribution,
    WeeklyReport,
)
from perfci.report.markdown import render_comment
from perfci.report.weekly_markdown import render_markdown

__all__ = ["GOLDEN", "clean_env"]  # a fixture and a constant, imported for their names

ENVIRONMENT = {"gpu": "NVIDIA H100 80GB HBM3", "driver": "550.54", "cuda": "12.4"}


def _weekly() -> WeeklyReport:
    since = datetime(2024, 1, 22, tzinfo=UTC)
    change = ChangePointReport(
        index=20,
        run_id=120,
        commit="c0ffee00000000000000000000000000000000aa",
        previous_commit="bada55000000000000000000000000000000000b",
        time=datetime(2024, 1, 24, 9, tzinfo=UTC),
        before=10.0e6,
        after=11.2e6,
        change=0.12,
        p_value=1e-6,
        in_period=True,
        contributors=[
            KernelContribution("ampere_sgemm_128x64_tn", "kernel", "k", 5e6, 6.2e6, 1.2e6, 1.0)
        ],
        explained=1.0,
    )
    trend = BenchmarkTrend(
        benchmark="gpt2 'quoted' $(rm -rf /) ```x```",
        environment_id=1,
        environment=ENVIRONMENT,
        step=SeriesKey(MetricKind.STEP, "train_step"),
        runs_in_period=14,
        change_points=[change],
    )
    return WeeklyReport(
        project="acme/gpt2",
        branch="main",
        week="2024-W04",
        since=since,
        until=datetime(2024, 1, 29, tzinfo=UTC),
        history_since=datetime(2023, 12, 1, tzinfo=UTC),
        benchmarks=[trend],
        coverage=Coverage(runs=14, environments=[EnvironmentSeen(1, ENVIRONMENT, 14, ["gpt2"])]),
    )


def _blocks(markdown: str) -> list[list[str]]:
    """The lines of each fenced bash block."""
    found = re.findall(r"^(`{3,})bash\n(.*?)\n\1$", markdown, flags=re.S | re.M)
    return [body.split("\n") for _, body in found]


def test_weekly_change_points_offer_the_ab_and_bisect_commands() -> None:
    markdown = render_markdown(_weekly())
    _golden("weekly_repro.md", markdown)
    (block,) = _blocks(markdown)
    name = "gpt2 'quoted' $(rm -rf /) ```x```"
    assert block[0] == "git checkout c0ffee00000000000000000000000000000000aa"
    # Every word parses back as itself: the name can run nothing when pasted.
    assert shlex.split(block[1]) == [
        "perfci", "check", "--ab", "-b", name,
        "--baseline-branch", "bada55000000000000000000000000000000000b",
    ]  # fmt: skip
    assert shlex.split(block[2]) == [
        "perfci", "bisect", "bada55000000000000000000000000000000000b",
        "c0ffee00000000000000000000000000000000aa", "-b", name,
    ]  # fmt: skip
    assert "````bash" in markdown  # the name's backtick cannot close the block


def _main_regression(kind: MetricKind) -> RunComparison:
    series = SeriesKey(kind, "train_step" if kind is MetricKind.STEP else "flash_fwd")
    line = MetricComparison(
        key=series.key, verdict=Verdict.REGRESSION, change=0.1, gated=True, series=series
    )
    result = RunComparison(benchmark="gpt", verdict=Verdict.REGRESSION, metrics=[line])
    result.baseline = BaselineInfo("main", 10, "a" * 40, "b" * 40)
    return result


def test_a_failed_comparison_on_main_offers_the_bisect_command() -> None:
    result = _main_regression(MetricKind.KERNEL)
    repro = Repro(benchmark="gpt", commit="c" * 40, base="b" * 40, bisect=True, metric="flash_fwd")
    (block, _) = _blocks(render_comment(result, repro=repro))
    assert block[-1] == f"perfci bisect {'b' * 40} {'c' * 40} -b gpt --metric flash_fwd"
    pull_request = Repro(benchmark="gpt", commit="c" * 40, base="b" * 40)
    assert "perfci bisect" not in render_comment(result, repro=pull_request)


def test_the_comment_command_reproduces_the_verdict_in_a_clone(
    tmp_path: Path, clean_env: Path
) -> None:
    repo = make_repo(tmp_path, {"gemm": 3.0})
    comment = tmp_path / "comment.md"
    assert check_ab(repo, f"sqlite:///{tmp_path}/a.db", "--markdown-out", str(comment)) == 1
    text = comment.read_text(encoding="utf-8")
    assert "ampere\\_sgemm\\_128x64\\_tn" in text.split("Reproduce locally")[1]
    checkout, command = _blocks(text)[0][:2]
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    git(clone, *shlex.split(checkout)[1:])
    os.chdir(clone)
    words = shlex.split(command)
    assert words[:3] == ["perfci", "check", "--ab"]
    again = tmp_path / "again.md"
    code = main(
        [*words[1:], "--database-url", f"sqlite:///{tmp_path}/b.db", "--markdown-out", str(again)]
    )
    assert code == 1  # the same verdict: a gated regression
    first, second = (re.search(r"^## (.*)$", t, re.M) for t in (text, again.read_text("utf-8")))
    assert first is not None and second is not None and first[1] == second[1]
    assert "ampere\\_sgemm\\_128x64\\_tn" in again.read_text("utf-8").split("### Regressions")[1]


@pytest.mark.parametrize("kind", [MetricKind.STEP])
def test_a_step_regression_bisects_the_step(kind: MetricKind) -> None:
    result = _main_regression(kind)
    repro = Repro(benchmark="gpt", commit="c" * 40, base="b" * 40, bisect=True)
    (block,) = _blocks(render_comment(result, repro=repro))  # no kernel regressed: no traces
    assert block[-1].endswith("-b gpt")


def _outcome(branch: str, pr: int | None, kind: MetricKind) -> Any:
    from perfci.core.model import RunContext
    from perfci.core.settings import Settings

    result = _main_regression(kind)
    context = RunContext(
        project="acme/gpt", commit="c" * 40, branch=branch, pr_number=pr, environment=ENVIRONMENT
    )
    return SimpleNamespace(
        comparison=result,
        context=context,
        spec=SimpleNamespace(name="gpt"),
        settings=Settings(ab_pairs=7, delta=0.03),
    )


def test_the_bundle_of_a_check_names_its_commits_settings_and_environment() -> None:
    from perfci.usecases.check.repro import repro_of

    on_main = repro_of(_outcome("main", None, MetricKind.KERNEL), {"RUNNER_NAME": "gpu-3"})
    assert on_main is not None
    assert (on_main.commit, on_main.base) == ("c" * 40, "b" * 40)
    assert on_main.flags == ("--ab-pairs", "7", "--delta", "0.03", "--alpha", "0.05")
    assert on_main.environment == {**ENVIRONMENT, "runner": "gpu-3"}
    assert on_main.bisect and on_main.metric == "flash_fwd"
    step = repro_of(_outcome("main", None, MetricKind.STEP), {})
    assert step is not None and step.bisect and step.metric is None
    pull_request = repro_of(_outcome("feature", 12, MetricKind.KERNEL), {})
    assert pull_request is not None and not pull_request.bisect
