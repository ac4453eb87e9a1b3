"""A renamed kernel is compared, gated and attributed as one line (perfci.analysis.renames).

The GPU case is the example's real per-process values on an H200 (``data/h200_ab``, the
``unchanged`` comparison: an empty commit). No GPU runs here, so the pull request's side is
mocked the way a shape change shows on one: the up-projection's cuBLAS kernel runs under
the name cuBLAS picks for the new shape (another tile of the same kernel), 12 % slower, and
the step slower by that much. The CPU case runs the example for real: a wider value
projection makes ATen leave its flash attention for the math one.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest
from rich.console import Console

from perfci.analysis.compare import CompareOptions, compare_run
from perfci.analysis.paired import compare_paired
from perfci.core.model import MetricKind, SeriesKey, Verdict
from perfci.report.console import print_comparison
from perfci.report.markdown import render_comment
from tests.h200_ab import recorded

OLD = (
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_"
    "alignc4_execute_kernel__5x_cublas"
)
NEW = (
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize256x128x8_stage3_warpsize4x2x1_ffma_aligna4_"
    "alignc4_execute_kernel__5x_cublas"
)
SLOWER = 1.12


def _renamed_pr(rows: dict[SeriesKey, dict[str, list[float]]]) -> dict[SeriesKey, list[float]]:
    """The PR side with the tn GEMM renamed and 12 % slower, the step slower by as much."""
    pr: dict[SeriesKey, list[float]] = {}
    old = next(k for k in rows if k.name == OLD)
    extra = [v * (SLOWER - 1) for v in rows[old]["pr"]]
    for key, row in rows.items():
        if key == old:
            pr[SeriesKey(kind=key.kind, name=NEW, device=key.device)] = [
                v * SLOWER for v in row["pr"]
            ]
        elif key.kind is MetricKind.STEP:
            pr[key] = [v + e for v, e in zip(row["pr"], extra, strict=True)]
        else:
            pr[key] = list(row["pr"])
    return pr


def _comment_line() -> str:
    return f"- `{OLD}` replaced by `{NEW}` (same family, rule: cublas-tile): +12.0 %"


def test_ab_pairs_the_renamed_gemm_gates_it_and_explains_the_step_with_it() -> None:
    rows = recorded("unchanged")
    base = {k: list(v["base"]) for k, v in rows.items()}
    result = compare_paired(base, _renamed_pr(rows), benchmark="gpt")

    line = next(m for m in result.metrics if m.series and m.series.name == NEW)
    assert (line.replaces, line.family_rule) == (OLD, "cublas-tile")
    assert line.change == pytest.approx(SLOWER - 1, abs=0.002)
    assert line.gated and line.verdict is Verdict.REGRESSION
    assert not any(m.verdict in (Verdict.NEW, Verdict.MISSING) for m in result.metrics)
    assert all(m.series is None or m.series.name != OLD for m in result.metrics)
    assert result.verdict is Verdict.REGRESSION
    top = result.contributions[0]
    assert top.key == line.key and top.share > 0.8

    comment = render_comment(result)
    assert _comment_line() + ", ❌ regression" in comment
    explains = comment.split("### What explains the step-time change")[1]
    first_row = explains.split("\n")[4]  # the title, a blank line, the header, its rule
    assert first_row.startswith("| " + NEW[:60].replace("_", "\\_"))
    assert "(replaces" not in NEW and "_cublas) | kernel | +" in first_row

    console = Console(record=True, width=400, file=io.StringIO(), color_system=None)
    print_comparison(result, console)
    text = console.export_text()
    assert f"{OLD} replaced by {NEW} (same family, rule: cublas-tile): +12.0 %" in text


def test_without_a_family_the_same_change_is_missing_and_new_and_unexplained() -> None:
    """What the pairing is for: renamed to a name of no known family, the kernel reads as one
    missing and one new line, neither tested, and the step's change has no tested cause."""
    rows = recorded("unchanged")
    base = {k: list(v["base"]) for k, v in rows.items()}
    pr = {
        (SeriesKey(kind=k.kind, name="my_gemm", device=k.device) if k.name == NEW else k): v
        for k, v in _renamed_pr(rows).items()
    }
    result = compare_paired(base, pr, benchmark="gpt")
    verdicts = {m.series.name: m.verdict for m in result.metrics if m.series}
    assert (verdicts[OLD], verdicts["my_gemm"]) == (Verdict.MISSING, Verdict.NEW)
    assert not any(m.replaces for m in result.metrics)


def test_history_mode_pairs_the_renamed_gemm_too() -> None:
    """Ten baseline runs (the base processes of both recorded comparisons), this run the PR
    side of ``unchanged`` with the GEMM renamed."""
    rows, other = recorded("unchanged"), recorded("slower")
    keys = [k for k in rows if k in other]
    baseline = {k: [[v] for v in [*rows[k]["base"], *other[k]["base"]]] for k in keys}
    candidate = {k: v for k, v in _renamed_pr(rows).items() if k in other or k.name == NEW}
    result = compare_run(baseline, candidate, benchmark="gpt")

    line = next(m for m in result.metrics if m.replaces)
    assert (line.series and line.series.name, line.replaces) == (NEW, OLD)
    assert (
        line.family == "cublas:sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_ffma_execute_kernel__5x_cublas"
    )
    assert line.gated and line.verdict is Verdict.REGRESSION
    assert result.contributions[0].key == line.key
    assert _comment_line() in render_comment(result)


def test_a_renamed_name_is_escaped_in_the_comment() -> None:
    """Kernel names come from the pull request: its renamed kernel's name cannot break out of
    its code span (a backtick, a pipe) nor inject a tag or a mention."""
    rows = recorded("unchanged")
    old = "void my_gemm<float, 128>(float const*)"
    hostile = "void my_gemm<float, 256>(float const*, `|<b>@team)"

    def renamed(key: SeriesKey, to: str) -> SeriesKey:
        return (
            SeriesKey(kind=key.kind, name=to, device=key.device) if key.name in (OLD, NEW) else key
        )

    base = {renamed(k, old): list(v["base"]) for k, v in rows.items()}
    pr = {renamed(k, hostile): v for k, v in _renamed_pr(rows).items()}
    comment = render_comment(compare_paired(base, pr, benchmark="gpt"))
    code = "``void my_gemm<float, 256>(float const*, `\\|<b>@team)``"
    assert f"- `{old}` replaced by {code} (same family, rule: cuda-template-config)" in comment
    assert "<b>" not in comment.replace(code, "")
    assert "@team" not in comment.replace(code, "")


# --- a real CPU profile of the example ------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "gpt"
#: examples/gpt/make_profiles.sh's sizes, so that the shipped profiles are the baseline.
BENCH_ARGS = ("--steps", "4", "--layers", "2", "--seq", "384", "--dim", "64", "--batch", "4")
FLASH = "aten::_scaled_dot_product_flash_attention_for_cpu"
MATH = "aten::_scaled_dot_product_attention_math"


@pytest.mark.torch
@pytest.mark.slow
def test_a_wider_value_projection_on_the_cpu_pairs_the_attention_backends(
    tmp_path: Path,
) -> None:
    """The shipped profiles of the example (4 runs × 3 repeats) against two fresh repeats with
    ``--value-dim 128``: the attention's value projection twice as wide, so ATen runs its
    math attention instead of the flash one. The two are one line, tested and attributed."""
    pytest.importorskip("torch")
    from perfci.core.model import Profile
    from perfci.formats.registry import parse_file
    from perfci.integrations.runner import run_benchmark

    def per_step(profile: Profile) -> dict[SeriesKey, float]:
        steps = profile.steps or 1
        return {
            SeriesKey.of(m): m.total_ns / steps
            for m in profile.metrics
            if m.total_ns is not None and m.unit == "ns"
        }

    baseline: dict[SeriesKey, list[list[float]]] = {}
    runs = sorted(p for p in (EXAMPLE / "profiles").glob("main-*") if p.is_dir())
    for j, run in enumerate(runs):
        for path in sorted(run.glob("*.pt.trace.json.gz")):
            for key, value in per_step(parse_file(path)[0]).items():
                series = baseline.setdefault(key, [[] for _ in runs])
                series[j].append(value)
    candidate: dict[SeriesKey, list[float]] = {}
    for repeat in range(2):
        result = run_benchmark(
            [sys.executable, str(EXAMPLE / "bench.py"), *BENCH_ARGS, "--value-dim", "128"],
            benchmark="gpt",
            repeats=1,
            work_dir=tmp_path / f"r{repeat}",
            profiler="torch",
            env={**os.environ, "PERFCI_EXAMPLE_SLOW_ATTENTION": "0", "OMP_NUM_THREADS": "1"},
        )
        [path] = [p for p in result.repeats[0].files if ".pt.trace.json" in p.name]
        for key, value in per_step(parse_file(path)[0]).items():
            candidate.setdefault(key, []).append(value)
    assert any(k.name == MATH for k in candidate) and not any(k.name == FLASH for k in candidate)

    # Every contributor listed: the candidate is measured now, beside whatever else the host
    # runs, and a busy host moves many operators (a loaded .ci/run once pushed the pair out
    # of the default top 10). What is checked is that the pair is one attributed line.
    options = CompareOptions(top_contributors=len(candidate))
    compared = compare_run(baseline, candidate, benchmark="gpt", options=options)
    [line] = [m for m in compared.metrics if m.replaces]
    assert (line.series and line.series.name, line.replaces) == (MATH, FLASH)
    assert line.family_rule == "aten-backend" and line.change is not None
    assert line.verdict not in (Verdict.NEW, Verdict.MISSING)
    assert not any(m.series and m.series.name == FLASH for m in compared.metrics)
    explained = {c.key: c.delta_ns for c in compared.contributions}
    assert line.key in explained  # the step's change is attributed to the pair
    assert explained[line.key] == pytest.approx(
        (line.candidate_median or 0) - (line.baseline_median or 0)
    )
    assert f"`{FLASH}` replaced by `{MATH}` (same family, rule: aten-backend)" in render_comment(
        compared
    )


def test_the_run_page_lists_the_renamed_kernel() -> None:
    """The dashboard's run page (its template, autoescaped) says the same sentence."""
    import datetime
    import types

    from perfci.server.pages import make_templates, run_page_context

    rows = recorded("unchanged")
    base = {k: list(v["base"]) for k, v in rows.items()}
    result = compare_paired(base, _renamed_pr(rows), benchmark="gpt")
    run = types.SimpleNamespace(
        id=1,
        project="p",
        benchmark="gpt",
        commit=None,
        branch=None,
        base_branch=None,
        pr_number=None,
        ci_url=None,
        ci_provider=None,
        ci_run_id=None,
        repeats=5,
        created_at=datetime.datetime(2026, 11, 28, tzinfo=datetime.UTC),
        environment={},
    )
    page = (
        make_templates()
        .env.get_template("run.html")
        .render(token=None, **run_page_context(run, result))
    )
    assert (
        f"<li><code>{OLD}</code> replaced by <code>{NEW}</code> (same family, rule: "
        "cublas-tile): +12.0 %" in page
    )
    assert f"{NEW} (replaces {OLD})" in page  # the attribution's and the table's rows


def test_the_pair_survives_the_comparisons_json() -> None:
    """What the store keeps and ``perfci compare`` shows again: the comparison's JSON."""
    from perfci.core.transfer import comparison_from_dict
    from perfci.report.json_report import comparison_to_dict

    rows = recorded("unchanged")
    base = {k: list(v["base"]) for k, v in rows.items()}
    result = compare_paired(base, _renamed_pr(rows), benchmark="gpt")
    again = comparison_from_dict(comparison_to_dict(result))
    [line] = [m for m in again.metrics if m.replaces]
    assert (line.replaces, line.family_rule) == (OLD, "cublas-tile")
    assert line.family == next(m.family for m in result.metrics if m.replaces)
    assert _comment_line() in render_comment(again)
