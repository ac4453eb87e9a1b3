"""Renderers of a comparison: the PR comment (golden files, escaping, size), the terminal and
JSON. Regenerate the golden files with ``PERFCI_UPDATE_GOLDEN=1`` and review the diff."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from perfci.analysis.compare import compare_run
from perfci.core.model import (
    BaselineInfo,
    Device,
    MetricComparison,
    MetricKind,
    RunComparison,
    SeriesKey,
    Verdict,
)
from perfci.core.repro import Repro
from perfci.report.console import print_comparison
from perfci.report.escape import md_code, md_escape, md_link, shorten
from perfci.report.json_report import comparison_to_dict
from perfci.report.markdown import (
    MAX_COMMENT_CHARS,
    comment_marker,
    render_comment,
    render_summary,
)

GOLDEN = Path(__file__).parent / "golden"

LONG = "void cutlass::Kernel<" + "T" * 960 + ">(Params)"  # 1,000+ characters
STEP = SeriesKey(MetricKind.STEP, "train_step")
GEMM = SeriesKey(MetricKind.KERNEL, "ampere_sgemm_128x64_tn")
SCRIPT = SeriesKey(MetricKind.KERNEL, "<script>alert(1)</script>")
PIPE = SeriesKey(MetricKind.KERNEL, "reduce_kernel<512, |sum|>")
TICKS = SeriesKey(MetricKind.KERNEL, "`tick` ``double`` kernel")
STARS = SeriesKey(MetricKind.KERNEL, "*_bold_* __init__")
LINK = SeriesKey(MetricKind.KERNEL, "[link](http://evil.example) @octocat")
NEWLINE = SeriesKey(MetricKind.RANGE, "line1\nline2")
LONG_KEY = SeriesKey(MetricKind.KERNEL, LONG)
HOSTILE = [SCRIPT, PIPE, TICKS, STARS, LINK, NEWLINE, LONG_KEY]
FILLER = [SeriesKey(MetricKind.KERNEL, f"elementwise_kernel_{i}") for i in range(16)]
# ns per step: the gemm is half of the step, the hostile kernels a few percent each.
LEVELS = {
    STEP: 10e6,
    GEMM: 5e6,
    SCRIPT: 4e5,
    PIPE: 3e5,
    TICKS: 2e5,
    STARS: 2e5,
    LINK: 1e5,
    NEWLINE: 6e6,
    LONG_KEY: 8e5,
    **{key: 5e4 for key in FILLER},
}


def _comparison(
    slow: dict[SeriesKey, float],
    *,
    seed: int,
    renamed: dict[SeriesKey, SeriesKey] | None = None,
) -> RunComparison:
    rng = np.random.default_rng(seed)
    baseline = {
        key: (level * np.exp(rng.normal(0, 0.01, (20, 3)))).tolist()
        for key, level in LEVELS.items()
    }
    candidate = {
        (renamed or {}).get(key, key): (
            level * (1 + slow.get(key, 0.0)) * np.exp(rng.normal(0, 0.01, 6))
        ).tolist()
        for key, level in LEVELS.items()
    }
    result = compare_run(baseline, candidate, benchmark="gpt-small|<b>")
    result.baseline = BaselineInfo("main", 20, "1111111aaaaaaa", "2222222bbbbbbb", [1, 2])
    result.environment = {
        "gpu": "NVIDIA A100-SXM4-80GB",
        "driver": "550.54.15",
        "cuda": "12.4",
        "torch": "2.3.0 | <i>cu124</i>",
    }
    result.commit = "3333333cccccccccc"
    result.branch = "feature/faster-gemm"
    result.ci_url = "https://github.com/octo/gpt/actions/runs/42"
    return result


@pytest.fixture(scope="module")
def regression() -> RunComparison:
    # The gemm (+10 %) and the hostile kernels move; the step follows the gemm.
    return _comparison({GEMM: 0.10, STEP: 0.06, SCRIPT: 0.15, LONG_KEY: 0.20, PIPE: -0.12}, seed=7)


@pytest.fixture(scope="module")
def renamed() -> RunComparison:
    # The pull request changes the gemm's shape: cuBLAS runs it under another tile's name.
    return _comparison(
        {GEMM: 0.10, STEP: 0.06},
        seed=7,
        renamed={GEMM: SeriesKey(MetricKind.KERNEL, "ampere_sgemm_64x64_tn")},
    )


@pytest.fixture(scope="module")
def unchanged() -> RunComparison:
    return _comparison({}, seed=11)


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("PERFCI_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} is missing: run with PERFCI_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(encoding="utf-8"), (
        f"{name} differs from its golden file; if the change is intended, regenerate with "
        "PERFCI_UPDATE_GOLDEN=1 and review the diff"
    )


def _tables(markdown: str) -> list[list[str]]:
    """Consecutive lines starting with ``|``, one list per table."""
    tables, current = [], []
    for line in markdown.split("\n"):
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return [*tables, current] if current else tables


def _cells(row: str) -> int:
    """Unescaped pipes in a row: one more than its cells."""
    return len(re.findall(r"(?<!\\)\|", row))


#: The repro bundle of the regression's comment (issue 34): hostile names reach its commands.
REPRO = Repro(
    benchmark="gpt-small|<b>",
    commit="3333333cccccccccc",
    base="2222222bbbbbbb",
    flags=("--ab-pairs", "5", "--delta", "0.02", "--alpha", "0.05"),
    environment={
        "gpu": "NVIDIA A100-SXM4-80GB",
        "driver": "550.54.15",
        "cuda": "12.4",
        "torch": "2.3.0 | <i>cu124</i>",
        "runner": "gpu-runner-3",
    },
    profiles=".perfci/runs/gpt-small|<b>",
)


def test_regression_comment_matches_its_golden_file(regression: RunComparison) -> None:
    assert regression.verdict is Verdict.REGRESSION
    _golden("comment_regression.md", render_comment(regression, repro=REPRO))


def test_renamed_kernel_comment_matches_its_golden_file(renamed: RunComparison) -> None:
    """A renamed kernel is one line, listed with the rule that paired it (issue 33)."""
    comment = render_comment(renamed)
    assert (
        "- `ampere_sgemm_128x64_tn` replaced by `ampere_sgemm_64x64_tn` (same family, rule: "
        "cublas-tile): +11.0 %, ❌ regression" in comment
    )
    _golden("comment_renamed.md", comment)


def test_unchanged_comment_matches_its_golden_file(unchanged: RunComparison) -> None:
    assert unchanged.verdict is Verdict.UNCHANGED
    _golden("comment_unchanged.md", render_comment(unchanged))


def test_summary_matches_its_golden_file(regression: RunComparison) -> None:
    _golden("summary_regression.md", render_summary(regression, repro=REPRO))


def test_comment_puts_marker_then_verdict_first(regression: RunComparison) -> None:
    lines = render_comment(regression).split("\n")
    assert lines[0] == comment_marker("gpt-small|<b>")
    assert lines[0] == "<!-- perfci:benchmark=gpt-small%7C%3Cb%3E -->"
    assert lines[1].startswith("## ❌ Regression: gpt-small\\|&lt;b&gt;")
    custom = render_comment(regression, marker="<!-- custom -->", run_url="https://ci.example/9")
    assert custom.startswith("<!-- custom -->\n") and "[CI run](https://ci.example/9)" in custom


@pytest.mark.parametrize(
    "verdict, words",
    [
        (Verdict.REGRESSION, "❌ Regression"),
        (Verdict.UNCHANGED, "✅ No regression"),
        (Verdict.IMPROVEMENT, "🟢 Improvement"),
        (Verdict.INCONCLUSIVE, "⚠️ Inconclusive"),
        (Verdict.NO_BASELINE, "ℹ️ No baseline yet"),
    ],
)
def test_each_run_verdict_has_its_headline(
    regression: RunComparison, verdict: Verdict, words: str
) -> None:
    result = dataclasses.replace(regression, verdict=verdict)
    assert render_comment(result).split("\n")[1].startswith(f"## {words}: ")


def test_hostile_names_break_no_table_and_inject_no_html(regression: RunComparison) -> None:
    comment = render_comment(regression)
    tables = _tables(comment)
    assert len(tables) >= 4
    for table in tables:
        assert {_cells(row) for row in table} == {_cells(table[0])}, table
    assert "<script" not in comment.lower() and "<i>" not in comment and "<b>" not in comment
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in comment
    assert "\\[link\\](http\\://evil.example)" in comment  # text, not a link
    assert "@\u2060octocat" in comment  # no mention
    assert "line1 line2" in comment and not any(
        line.startswith("line2") for line in comment.split("\n")
    )
    assert "\\`tick\\` \\`\\`double\\`\\` kernel" in comment
    assert "\\*\\_bold\\_\\* \\_\\_init\\_\\_" in comment


def test_long_names_are_shortened_in_tables_and_whole_in_the_details(
    regression: RunComparison,
) -> None:
    comment = render_comment(regression)
    head, details = comment.split("<details><summary>All", 1)
    assert LONG not in head and md_escape(LONG, max_len=120) in head
    assert max(len(line) for line in head.split("\n")) < 400
    assert md_escape(LONG) in details


def test_a_comment_with_10000_metrics_stays_under_the_limit_and_keeps_its_verdict() -> None:
    metrics = [
        MetricComparison(
            key=f"kernel:gpu:k{i}",
            verdict=Verdict.UNCHANGED if i % 50 else Verdict.REGRESSION,
            baseline_median=1e5 + i,
            candidate_median=1.1e5 + i,
            change=0.1,
            ci_low=0.05,
            ci_high=0.15,
            p_value=0.01,
            q_value=0.02,
            n_baseline=20,
            n_candidate=5,
            gated=i % 50 == 0,
            share_of_step=0.01,
            series=SeriesKey(MetricKind.KERNEL, f"kernel_<{i}>|" + "x" * 60, Device.GPU),
        )
        for i in range(10_000)
    ]
    result = RunComparison(benchmark="huge", verdict=Verdict.REGRESSION, metrics=metrics)
    comment = render_comment(result)
    assert len(comment.encode("utf-16-le")) // 2 < MAX_COMMENT_CHARS
    assert comment.startswith(comment_marker("huge") + "\n## ❌ Regression: huge")
    assert "10000 metrics: 200 regressions, 9800 unchanged" in comment
    hidden = int(re.search(r"… (\d+) more metrics left out", comment)[1])
    shown = len(_tables(comment.split("<details>", 1)[1])[0]) - 2
    assert shown + hidden == 10_000 and shown > 100
    assert comment.rstrip().endswith("</details>")


def test_a_huge_environment_is_cut_after_the_verdict(regression: RunComparison) -> None:
    environment = {f"key{i}": "v" * 1000 for i in range(1000)}
    result = dataclasses.replace(regression, environment=environment, notes=["n" * 70_000])
    comment = render_comment(result)
    assert "n" * 1001 not in comment  # one note never takes more than 1,000 characters
    assert len(comment) < MAX_COMMENT_CHARS and "## ❌ Regression" in comment
    assert comment.endswith("cut to fit GitHub's comment size limit)\n")


def test_no_baseline_says_what_happens_next() -> None:
    result = compare_run({}, {STEP: [1e6, 1.01e6, 0.99e6]}, benchmark="fresh")
    comment = render_comment(result)
    assert "## ℹ️ No baseline yet: fresh" in comment and "No comparable baseline yet" in comment


def test_escape_helpers() -> None:
    assert md_escape("<script>alert('x')</script>") == (
        "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;"
    )
    assert md_escape("a|b\nc") == "a\\|b c"
    assert md_escape("# title") == "\\# title" and md_escape("1. item") == "1\\. item"
    assert md_escape("x" * 50, max_len=10) == "xxxxxx…xxx"
    assert len(shorten("y" * 1000, 120)) == 120
    assert md_code("a`b|c") == "``a`b\\|c``" and md_code("`x`") == "`` `x` ``"
    assert md_escape("see https://x.test or www.y.test") == "see https\\://x.test or www\\.y.test"
    assert md_link("run", "javascript:alert(1)") == "run"
    assert md_link("run", "https://x.test/a b)") == "[run](https://x.test/a%20b%29)"


def test_console_shows_the_verdict_and_the_top_contributor(regression: RunComparison) -> None:
    hostile = dataclasses.replace(regression, benchmark="[bold red]gpt[/]")
    console = Console(record=True, width=140, file=io.StringIO(), color_system=None)
    print_comparison(hostile, console)
    text = console.export_text()
    assert "❌ Regression: [bold red]gpt[/]" in text
    top = regression.contributions[0].series
    assert top is not None and top.name == GEMM.name
    assert "What explains the step-time change" in text and GEMM.name in text
    assert "<script>alert(1)</script>" in text  # printed as text, not dropped as markup
    assert "regressions" in text and "unchanged" in text and "Baseline: 20 runs of main" in text


def test_json_report_is_json_with_every_metric_field(regression: RunComparison) -> None:
    broken = dataclasses.replace(regression.metrics[0], change=float("nan"))
    result = dataclasses.replace(regression, metrics=[broken, *regression.metrics[1:]])
    data = json.loads(json.dumps(comparison_to_dict(result), allow_nan=False))
    assert data["schema_version"] == 1 and data["verdict"] == "regression"
    fields = [f.name for f in dataclasses.fields(MetricComparison)]
    assert all(list(m) == fields for m in data["metrics"])
    assert data["metrics"][0]["change"] is None
    assert data["counts"]["regression"] == len(result.regressions)
    assert data["contributions"][0]["series"]["name"] == GEMM.name
    assert data["baseline"]["runs"] == 20 and data["environment"]["cuda"] == "12.4"
    assert data["shared_factor"] is None or data["shared_factor"]["key"]
    # every field of the model, under its own name, and the step the verdict was about
    assert set(data) == {f.name for f in dataclasses.fields(RunComparison)} | {
        "schema_version",
        "counts",
    }
    assert result.primary_step is not None and data["primary_step"] == result.primary_step


def test_an_inconclusive_step_suggests_how_many_repeats_would_settle_it(
    regression: RunComparison,
) -> None:
    step = next(m for m in regression.metrics if m.series == STEP)
    vague = dataclasses.replace(step, verdict=Verdict.INCONCLUSIVE, repeats_needed=12)
    result = dataclasses.replace(
        regression,
        verdict=Verdict.INCONCLUSIVE,
        metrics=[vague if m is step else m for m in regression.metrics],
    )
    comment = render_comment(result)
    assert "## ⚠️ Inconclusive" in comment and "Re-run with about 12 repeats" in comment


def _with_open_step(result: RunComparison, repeats_needed: int, n: int) -> RunComparison:
    step = next(m for m in result.metrics if m.series == STEP)
    vague = dataclasses.replace(
        step, verdict=Verdict.INCONCLUSIVE, repeats_needed=repeats_needed, n_candidate=n
    )
    return dataclasses.replace(
        result,
        verdict=Verdict.INCONCLUSIVE,
        metrics=[vague if m is step else m for m in result.metrics],
    )


def _terminal(result: RunComparison) -> str:
    console = Console(record=True, width=140, file=io.StringIO(), color_system=None)
    print_comparison(result, console)
    return console.export_text()


def test_the_rerun_hint_is_in_the_terminal_and_never_one_repeat_more(
    regression: RunComparison,
) -> None:
    useful = _with_open_step(regression, repeats_needed=12, n=5)
    assert "Re-run with about 12 repeats to settle" in _terminal(useful)
    # 16 after 15 (a busy host's lines ask adaptive repeats for one more): no hint (issue 36).
    busy = _with_open_step(regression, repeats_needed=16, n=15)
    assert "Re-run" not in render_comment(busy) and "Re-run" not in _terminal(busy)


def test_an_ab_comparison_counts_pairs_not_a_baseline_of_one_run(
    regression: RunComparison,
) -> None:
    assert regression.baseline is not None
    base = dataclasses.replace(regression.baseline, runs=1, pairs=5)
    ab = dataclasses.replace(_with_open_step(regression, 9, 5), baseline=base)
    comment, terminal = render_comment(ab), _terminal(ab)
    assert "**Baseline:** A/B: 5 pairs against main" in comment
    assert "Baseline: A/B: 5 pairs against main" in terminal
    assert "1 run" not in comment and "1 run" not in terminal
    assert "Re-run with about 9 pairs" in comment and "Re-run with about 9 pairs" in terminal


def test_an_all_but_open_interval_prints_as_infinity_not_a_hundred_digits(
    regression: RunComparison,
) -> None:
    """A wild baseline (a few runs, ±50 % apart, heavy tails) can leave a metric's 95 %
    interval wider than a float holds: compare_run then reports ``ci_high`` as inf (found by
    feeding it drawn shapes); a merely huge bound had printed as 300 digits."""
    step = next(m for m in regression.metrics if m.series == STEP)
    gemm = next(m for m in regression.metrics if m.series == GEMM)
    wild = {
        id(step): dataclasses.replace(step, ci_high=float("inf")),
        id(gemm): dataclasses.replace(gemm, ci_high=1e300),
    }
    result = dataclasses.replace(
        regression, metrics=[wild.get(id(m), m) for m in regression.metrics]
    )
    comment = render_comment(result)
    console = Console(record=True, width=200, file=io.StringIO(), color_system=None)
    print_comparison(result, console)
    for text in (comment, console.export_text()):
        assert "+∞ %" in text
        assert "inf %" not in text
        assert re.search(r"\d{12}", text.replace(",", "")) is None, "a number of 12+ digits"
    assert "+1.0e+302 %" in comment
