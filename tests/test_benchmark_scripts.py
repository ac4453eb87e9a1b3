"""The scripts in benchmarks/ still run and print what RESULTS.md quotes, on tiny sizes.

They measure speed and detection quality; nothing here checks a timing (that is their job, run
by hand). What is checked is that each script runs against the current code and its table
holds the figures RESULTS.md quotes: a script that rots is a number nobody can re-measure.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from db_fixtures import POSTGRES_ENV
from processes import run

REPO = Path(__file__).resolve().parents[1]


#: Each runs a script end to end (some start the example, busy loops or a server): minutes on a
#: busy 2-core machine, so in .ci/run's full run (PERFCI_TEST_ALL=1), not the default command.
pytestmark = pytest.mark.slow


def _script(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The script in a process group of its own, killed whole (busy loops included) when its
    deadline passes: ``subprocess.run`` would kill the script alone (tests/processes.py)."""
    return run([sys.executable, str(REPO / "benchmarks" / script), *args], timeout_s=300, cwd=REPO)


def _run(script: str, *args: str) -> str:
    done = _script(script, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _table(markdown: str, first_column: str) -> list[dict[str, str]]:
    """The rows of the Markdown table whose header starts with ``first_column``, by column."""
    lines = iter(markdown.splitlines())
    for line in lines:
        if line.startswith(f"| {first_column} |"):
            columns = _cells(line)
            break
    else:
        raise AssertionError(f"no table headed {first_column!r} in:\n{markdown}")
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        if not re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", line):  # the separator, any alignment
            rows.append(dict(zip(columns, _cells(line), strict=True)))
    return rows


def _cells(line: str) -> list[str]:
    """The cells of a table row; ``\\|`` is a pipe inside a cell, as Markdown has it."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def _row(rows: list[dict[str, str]], first: str) -> dict[str, str]:
    (row,) = (r for r in rows if next(iter(r.values())) == first)
    return row


def _number(cell: str) -> float:
    return float(cell.strip("*").replace(",", "").split()[0])


def test_store_speed_compares_the_ingest_with_raw_copies_of_the_same_rows() -> None:
    postgres = os.environ.get(POSTGRES_ENV)
    stores = "postgres,sqlite" if postgres else "sqlite"
    out = _run(
        "store_speed.py",
        "--runs",
        "6",
        "--series",
        "40",
        "--repeats",
        "2",
        "--queries",
        "2",
        "--stores",
        stores,
        *(("--postgres-url", postgres) if postgres else ()),
    )
    rows = _table(out, "store")
    sqlite = _row(rows, "sqlite")
    assert _number(sqlite["samples"]) == 6 * 40 * 2
    values = re.search(r"\(([\d,]+) values\)", sqlite["baseline query ms (30 runs)"])
    assert values is not None and int(values.group(1).replace(",", "")) == 6 * 40 * 2
    if not postgres:
        pytest.skip(f"{POSTGRES_ENV} is not set: the raw COPY references need PostgreSQL")
    row = _row(rows, "postgres")
    assert _number(row["samples"]) == 6 * 40 * 2
    for reference in ("**ingest / raw COPY**", "ingest / bare COPY", "ingest / one stream"):
        assert 0 < _number(row[reference]) < 10, reference


def test_compare_speed_reports_its_budget() -> None:
    out = _run(
        "compare_speed.py",
        *("--metrics", "200", "--baseline", "5", "--repeats", "3", "--rounds", "1", "--floor"),
    )
    # One row per store: the full comparison, its store read, scipy on the same arrays, ratio,
    # and the floor's two parts (the arrays as stored, the result's lines) against scipy.
    rows = _table(out, "store")
    assert [row["comparison"] for row in rows] == ["200 × 5 runs × 3 repeats"], out
    assert re.fullmatch(r"[\d.]+× \((met|NOT met)\)", rows[0]["ratio"]), out
    assert re.fullmatch(r"[\d.]+ \+ [\d.]+", rows[0]["floor: arrays read + lines, s"]), out
    assert re.fullmatch(r"[\d.]+×", rows[0]["floor × scipy"]), out


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_upload_cpu_splits_an_upload_into_its_phases(store: str) -> None:
    if store == "postgres" and not os.environ.get(POSTGRES_ENV):
        pytest.skip(f"{POSTGRES_ENV} is not set: the scratch database is made on PostgreSQL")
    out = _run(
        "upload_cpu.py", "--store", store, "--metrics", "20", "--baseline", "4", "--uploads", "2"
    )
    whole = float(re.search(r"CPU per upload: ([\d.]+) ms", out)[1])  # type: ignore[index]
    phases = {row["phase"]: _number(row["CPU ms per upload"]) for row in _table(out, "phase")}
    assert list(phases) == [
        "ingest_run",
        "compare_stored_run",
        "run_samples_checked",
        "compare_run",
        "save_comparison",
        "comparison_to_json",
    ], out
    # Every phase ran, and the nested ones fit inside the comparison, which fits in the whole.
    assert all(ms > 0 for ms in phases.values()), out
    assert phases["run_samples_checked"] + phases["compare_run"] <= phases["compare_stored_run"]
    assert (
        phases["ingest_run"] + phases["compare_stored_run"] + phases["comparison_to_json"] <= whole
    ), out
    rate = re.search(r"Wall per upload: ([\d.]+) ms, .*: ([\d.]+) uploads/s in one stream", out)
    assert rate is not None and float(rate[1]) > 0 and float(rate[2]) > 0, out


def test_parse_worker_start_times_fresh_workers_both_ways() -> None:
    rows = _table(_run("parse_worker_start.py", "--workers", "2"), "forkserver preloads")
    assert [row["forkserver preloads"] for row in rows] == [
        "the main script's modules too",
        "the parsers",
    ]
    assert all(_number(row["fresh worker, median ms"]) > 0 for row in rows), rows


def test_same_verdicts_writes_the_same_numbers_twice(tmp_path: Path) -> None:
    """What a speed-up is checked with: deterministic, every case accounted for."""
    files = [tmp_path / "a.txt", tmp_path / "b.txt"]
    outs = [_run("same_verdicts.py", "--cases", "24", "--out", str(f)) for f in files]
    assert files[0].read_bytes() == files[1].read_bytes()
    lines = files[0].read_text().splitlines()
    assert len(lines) == 24 and "0x1." in files[0].read_text()  # floats bit for bit, as hex
    counts = {row["run verdict"]: int(row["cases"]) for row in _table(outs[0], "run verdict")}
    assert sum(counts.values()) == 24 and len(counts) >= 3, counts


def test_t3_ceiling_bounds_an_oracle_at_perfcis_level() -> None:
    out = _run("t3_ceiling.py", "--draws", "200000", "--worlds", "10")
    rows = _table(out, "per-kernel one-sided level")
    assert len(rows) == 4, out
    found = {
        (row["per-kernel one-sided level"].split(":")[0], row["world"]): _number(
            row["+5 % found (oracle)"].rstrip("%")
        )
        for row in rows
    }
    # Heavier tails cost the oracle power at the same level; a larger level buys it back.
    assert found["perfci's budget", "t₃ run levels"] < found["perfci's budget", "Gaussian"]
    assert (
        found["perfci's budget", "t₃ run levels"]
        < found["all of 2 % on the gated kernels", "t₃ run levels"]
    ), out


def test_detection_scores_every_detector() -> None:
    out = _run(
        "detection.py",
        "--comparisons",
        "10",
        "--metrics",
        "30",
        "--chunk",
        "10",
        "--scenarios",
        "lognormal-2%",
    )
    detectors = [row["Detector"] for row in _table(out, "Detector")]
    assert any(d.startswith("perfci compare_run() default") for d in detectors), out
    assert any(d.startswith("asv") for d in detectors), out


def test_parse_speed_measures_each_format(shared_dir: Path, tmp_path: Path) -> None:
    # Its inputs are grown from ../shared's largest Chrome trace and its nsys stats seed.
    out = _run(
        "parse_speed.py",
        "--size-mb",
        "1",
        "--out-dir",
        str(tmp_path),
        "--formats",
        "chrome_trace,nsys_stats,mlperf_log,ncu_csv",
    )
    rows = _table(out, "benchmark")
    for name in ("chrome_trace", "nsys_stats", "mlperf_log", "ncu_csv"):
        row = _row(rows, name)
        assert _number(row["seconds"]) > 0 and _number(row["metrics (events for json.load)"]) > 0


def test_cold_start_times_the_short_commands_against_typer() -> None:
    out = _run("cold_start.py", "--rounds", "1", "--warmup", "0")
    rows = _table(out, "Command")
    names = [row["Command"] for row in rows]
    assert names[:2] == ["`python -c pass`", "`import typer`"], out
    for name in ("`perfci --help`", "`perfci formats`"):
        row = _row(rows, name)
        assert _number(row["wall × import typer"]) > 0 and _number(row["CPU s, median"]) > 0
        assert row["wall within 2×"].strip("*") in ("yes", "no")
    parsed = [name for name in names if name.startswith("`perfci parse (")]
    assert len(parsed) == 2 and all("KB" in name for name in parsed), names


def test_report_speed_times_the_weekly_report() -> None:
    out = _run(
        "report_speed.py", "--days", "21", "--series", "10", "--benchmarks", "1", "--repeats", "2"
    )
    rows = _table(out, "Step")
    for step in ("build_weekly_report, whole year of history", "render HTML (plots inlined)"):
        assert _number(_row(rows, step)["Time (s)"]) >= 0


def test_report_speed_keeps_its_store_and_reuses_it(tmp_path: Path) -> None:
    args = ("--days", "14", "--series", "6", "--benchmarks", "1", "--repeats", "2")
    kept = ("--store-file", str(tmp_path / "year.db"), "--no-whole-read")
    first, again = (_script("report_speed.py", *args, *kept) for _ in range(2))
    assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
    samples = [re.search(r"([\d,]+) samples\)", out)[1] for out in (first.stdout, again.stdout)]  # type: ignore[index]
    assert samples[0] == samples[1] != "0" and "reusing" in again.stderr
    whole = _row(
        _table(again.stdout, "Step"), "… every series of every run read (`zoom_window=None`)"
    )
    assert whole["Time (s)"] == "nan"


def test_service_load_loses_and_duplicates_nothing() -> None:
    if not os.environ.get(POSTGRES_ENV):
        pytest.skip(f"{POSTGRES_ENV} is not set: the service's replicas share a PostgreSQL store")
    out = _run("service_load.py", "--clients", "2", "--uploads", "6", "--metrics", "10")
    rows = _table(out, "scenario")
    assert rows, out
    for row in rows:
        assert (row["uploads"], row["errors"], row["lost"], row["duplicated"]) == (
            "6",
            "0",
            "0",
            "0",
        ), row


def test_hostile_load_reports_its_targets() -> None:
    if not os.environ.get(POSTGRES_ENV):
        pytest.skip(f"{POSTGRES_ENV} is not set: the hostile load runs on PostgreSQL")
    out = _run(
        "hostile_load.py", "--clients", "3", "--uploads", "4", "--metrics", "10", "--loris", "2"
    )
    rows = {row["measure"]: row["value"] for row in _table(out, "measure")}
    assert rows["runs acknowledged"].startswith("12 of 12"), out
    assert rows["5xx answers"] == "0" and rows["runs lost / duplicated"] == "0 / 0", out
    answers = _table(out, "pathological upload")
    assert len(answers) == 3 and all(r["answer"].startswith("4") for r in answers), out


def test_check_overhead_times_a_whole_check() -> None:
    # No --fail-over: the exit status must not depend on how busy the machine is.
    out = _run("check_overhead.py", "--rounds", "1", "--baseline-runs", "3", "--no-compare-speed")
    budget = re.compile(r"\*\*overhead\*\* \(budget < 2 s: (met|NOT met)\)")
    (overhead,) = (row for row in _table(out, "Measure") if budget.fullmatch(row["Measure"]))
    assert _number(overhead["Seconds"]) > 0
    phases = {row["Phase"] for row in _table(out, "Phase")}
    assert {"imports", "parse", "submit"} <= phases, phases


def test_changepoints_scores_perfci_on_real_and_synthetic_series(shared_dir: Path) -> None:
    # The TCPD series it scores come from ../shared/changepoint-data.
    # The Otava comparison needs its own virtualenv (the script's docstring); without it the
    # script stops after perfci's rows, with a message saying so.
    done = _script("changepoints.py", "--synthetic", "10", "--null", "5")
    assert done.returncode == 0 or (
        done.returncode == 1 and ".otava-venv" in done.stderr and "is missing" in done.stderr
    ), done.stderr[-3000:]
    out = done.stdout
    rows = [row for row in _table(out, "Set") if row["Detector"] == "perfci"]
    assert {row["Set"] for row in rows} == {"TCPD (mean F1)", "synthetic"}, out
    assert all(0 <= _number(row["F1"]) <= 1 for row in rows)


def test_verdicts_scores_perfci_and_the_peers_per_scenario() -> None:
    out = _run(
        "verdicts.py", "--quick", "--scenario", "heavy tails", "--scenario", "+10 % on one kernel ("
    )
    assert out.count("#### ") == 2, out
    rows = _table(out, "detector")
    assert [row["detector"] for row in rows][:2] == ["perfci", "Conbench z-score (>5, 100 commits)"]
    for row in rows:
        assert re.fullmatch(r"\d+\.\d{3}", row["false regressions / comparison"]), row
        assert re.fullmatch(r"\d+\.\d%|—", row["runs failed"]), row


def test_sequential_looks_compares_spending_policies() -> None:
    out = _run("sequential_looks.py", "--checks", "10")
    policies = [row["policy"] for row in _table(out, "policy")]
    assert policies[0].startswith("one look") and policies[-1].endswith("alpha / 3"), out


def test_ab_factor_compares_plain_pairs_with_process_factors() -> None:
    rows = _table(_run("ab_factor.py", "--checks", "4"), "scenario")
    assert [row["way"] for row in rows[:2]] == ["plain paired", "process factors"]
    assert len(rows) == 10 and rows[0]["scenario"] == "unchanged"
    for row in rows:
        counts = row["unchanged operators called regression / improvement, per run"]
        assert re.fullmatch(r"\d+\.\d{3} / \d+\.\d{3}", counts), row
        assert re.fullmatch(r"\d+\.\d%", row["step a regression"]), row


def test_cpu_page_faults_times_the_example_both_ways() -> None:
    pytest.importorskip("torch")
    rows = _table(_run("cpu_page_faults.py", "--processes", "2", "--steps", "2"), "operator")
    assert [row["operator"] for row in rows][:2] == ["`aten::gelu`", "`aten::gelu_backward`"]
    for row in rows:
        for cell in list(row.values())[1:]:
            assert re.fullmatch(r"[\d,]+ \(±\d+\.\d%\)", cell), row


def test_fastest_step_times_the_example_both_ways_beside_each_load() -> None:
    pytest.importorskip("torch")
    rows = _table(_run("fastest_step.py", "--rounds", "2", "--steps", "2"), "busy loops")
    assert [(row["busy loops"], row["per step"]) for row in rows] == [
        (loops, way) for loops in ("0", "1", "2") for way in ("mean", "fastest")
    ]
    for row in rows:
        cells = list(row.values())[2:]
        assert "`aten::addmm`" in row
        for cell in cells[:-1]:
            level = "" if row["busy loops"] == "0" else r", [+-]\d+\.\d %"
            assert re.fullmatch(rf"±\d+\.\d %{level}", cell), row
        assert re.fullmatch(r"±\d+\.\d %", cells[-1]), row


def test_cuda_ab_runs_the_example_under_ab_on_the_cpu_too() -> None:
    """On a GPU it is run as documented; here its CPU-sized smoke run (no GPU on this machine)."""
    pytest.importorskip("torch")
    out = _run("cuda_ab.py", "--small", "--pairs", "2", "--load", "0")
    rows = _table(out, "code")
    assert [row["code"] for row in rows] == ["slower", "unchanged"]
    verdicts = {"regression", "improvement", "unchanged", "inconclusive"}
    for row in rows:
        assert row["run verdict"] in verdicts and row["pairs"] == "2", row
        assert re.match(r"[+-]\d+\.\d% \([+-]\d+\.\d% … [+-]\d+\.\d%\) \w+", row["step"]), row
        assert row["forward GELU kernel"] == "—"  # a CPU run has no kernels


def test_ab_gpu_factor_compares_both_ways_of_estimating_the_factor() -> None:
    rows = _table(_run("ab_gpu_factor.py", "--draws", "2"), "comparison")
    assert len(rows) == 12
    ways = {row["machine factor from"] for row in rows}
    assert ways == {"all time lines", "GPU-side lines"}
    for row in rows:
        assert re.fullmatch(r"\d+/2", row["checks failed"]), row
        assert re.fullmatch(r"\d+\.\d\d", row["other GPU-side lines decided, per check"]), row


def test_ab_gpu_factor_measures_history_mode_too() -> None:
    out = _run("ab_gpu_factor.py", "--draws", "2", "--history")
    assert out.startswith("History mode:"), out
    rows = _table(out, "comparison")
    assert len(rows) == 12
    assert all(re.fullmatch(r"\d+/2|—", row["GELU kernel found"]) for row in rows), rows


def test_noise_shapes_counts_false_verdicts_per_shape() -> None:
    out = _run("noise_shapes.py", "--comparisons", "1", "--shape", "tiny", "--shape", "loaded")
    rows = _table(out, "shape")
    assert [row["shape"] for row in rows] == [
        "tiny baseline (3 runs x 2)",
        "loaded candidate: +30 % in everything",
    ]
    for row in rows:
        assert re.fullmatch(r"\d+\.\d%", row["runs failed"]), row
        assert re.fullmatch(r"\d+\.\d{3}", row["false regressions / comparison"]), row


def test_ab_noise_slows_the_chosen_operator_of_the_example(tmp_path: Path) -> None:
    """``ab_noise.py --operator linear`` edits the example's ``LINEAR_EXTRA`` on ``slower`` only,
    and counts the lines that operator moves as touched, not as false verdicts."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import ab_noise
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    repo = ab_noise.make_repo(tmp_path, 0.18, "gpt", operator="linear")
    slower = ab_noise.git(repo, "show", "slower:bench.py")
    unchanged = ab_noise.git(repo, "show", "unchanged:bench.py")
    assert "LINEAR_EXTRA = 0.18\n" in slower and "GELU_EXTRA = 0.0\n" in slower
    assert "LINEAR_EXTRA = 0.0\n" in unchanged
    assert ab_noise.TARGET["gpt", "linear"] == "aten::addmm"

    def line(kind: str, name: str) -> dict[str, dict[str, str]]:
        return {"series": {"kind": kind, "name": name}}

    assert ab_noise._touched(line("op", "aten::addmm"), "linear")
    assert ab_noise._touched(line("op", "aten::t"), "linear")
    assert ab_noise._touched(line("op", "aten::copy_"), "linear")
    assert not ab_noise._touched(line("op", "aten::copy_"), "gelu")
    assert not ab_noise._touched(line("op", "aten::tanh"), "linear")
    assert not ab_noise._touched(line("op", "aten::gelu"), "linear")
    assert not ab_noise._touched(line("op", "aten::addmm"), "gelu")


def test_redos_times_every_case_and_a_csv_over_the_cap() -> None:
    out = _run(
        "redos.py", "--sizes", "4", "--timeout", "30", "--caps-rows", "3000", "--cap", "1000"
    )
    rows = _table(out, "case")
    assert len(rows) >= 18
    assert any("(reported)" in row["case"] for row in rows)
    assert all(row["4 KiB"].endswith("ms") for row in rows), rows  # no case ran into its deadline
    [caps] = _table(out, "input")
    assert caps["cap"] == "1,000"
    assert caps["outcome"] == "refused while reading"
