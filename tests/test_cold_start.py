"""Cold start of the ``perfci`` command: what building the CLI and a check may not import, and
the scipy.special / own-code replacements of scipy.stats that made it so, against scipy.stats.

The import checks run in fresh interpreters (``sys.modules`` of this process is polluted by
other tests). They guard behaviour, not timings: benchmarks/check_overhead.py measures those.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from deadlines import scaled
from scipy import stats as sst

from perfci.analysis import stats

#: Needed by no part of building the CLI, `--version` or `--help`; each costs 0.1–1 s of CPU.
HEAVY_FOR_CLI = (
    "scipy",
    "numpy",
    "matplotlib",
    "alembic",
    "sqlalchemy",
    "jinja2",
    "torch",
    "pydantic_settings",
    "requests",
    "perfci.store",
    "perfci.usecases.weekly.report",
)
#: Needed by no part of `perfci check` (without --markdown-out or posting).
HEAVY_FOR_CHECK = (
    "scipy.stats",
    "matplotlib",
    "jinja2",
    "torch",
    "perfci.usecases.weekly.report",
    "perfci.report.plots",
)


def _loaded(code: str, names: tuple[str, ...], cwd: Path | None = None) -> list[str]:
    """The ``names`` present in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    probe = (
        f"{code}\nimport json, sys\n"
        f"print(json.dumps([n for n in {list(names)!r} if n in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        timeout=scaled(300),
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_the_cli_loads_no_heavy_dependency() -> None:
    assert _loaded("import perfci.cli.main", HEAVY_FOR_CLI) == []


@pytest.mark.parametrize(
    "argv", [["--version"], ["--help"], ["check", "--help"], ["report", "--help"], ["db", "--help"]]
)
def test_version_and_help_load_no_heavy_dependency(argv: list[str]) -> None:
    code = (
        "import contextlib, io\nfrom perfci.cli.main import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()):\n    main({argv!r})"
    )
    assert _loaded(code, HEAVY_FOR_CLI) == []


# --- issue 33: the short commands import what they use, and no more --------------------------

#: Never needed to list formats, detect one or print help: the formats' readers (numpy among
#: their imports), the use cases' heavy halves, and what only other commands use.
HEAVY_FOR_SHORT_COMMANDS = (
    *HEAVY_FOR_CLI,
    "pydantic",  # Typer coerces a parameter's value through pydantic: none to coerce here
    "perfci.core.model",
    "perfci.formats.pytorch.chrome_trace",
    "perfci.formats.nsys.nsys_sqlite",
    "perfci.formats.nvprof.nvprof",
    "perfci.formats.bench.vllm_bench",
    "perfci.formats.workload.workload_table",
    "perfci.cli.check_cmd",  # a command's module is imported when it runs or help lists it
    "perfci.cli.report_cmd",
    "perfci.usecases.check",
)

#: An nvprof summary, as ``nvprof ./matrixMul`` prints it.
NVPROF_SUMMARY = """\
==4242== NVPROF is profiling process 4242, command: ./matrixMul
==4242== Profiling application: ./matrixMul
==4242== Profiling result:
            Type  Time(%)      Time     Calls       Avg       Min       Max  Name
 GPU activities:  100.00%  1.0000ms         1  1.0000ms  1.0000ms  1.0000ms  k(float*)
"""


def _readers(loaded: list[str]) -> list[str]:
    """The format readers among ``loaded`` (module names)."""
    from perfci.formats import registry

    return sorted({spec.reader for spec in registry.PARSERS} & set(loaded))


def _run_cli(argv: list[str]) -> str:
    return (
        "import contextlib, io\nfrom perfci.cli.main import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()):\n    assert main({argv!r}) == 0"
    )


def _all_loaded(code: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", [["formats"], ["--version"]])
def test_listing_the_formats_imports_no_reader_nor_rich(argv: list[str]) -> None:
    loaded = _all_loaded(_run_cli(argv))
    assert [name for name in HEAVY_FOR_SHORT_COMMANDS if name in loaded] == []
    assert _readers(loaded) == []
    # Detection is there (formats), but no Rich: nothing is drawn but two columns of text.
    assert not [name for name in loaded if name == "rich" or name.startswith("rich.")]
    assert "typer.rich_utils" not in loaded


def _rich(loaded: list[str]) -> list[str]:
    return [name for name in loaded if name == "rich" or name.startswith(("rich.", "typer.rich"))]


def test_help_imports_the_command_modules_but_no_reader_nor_use_case() -> None:
    loaded = _all_loaded(_run_cli(["--help"]))
    assert _rich(loaded) == []  # in a pipe the help is plain text: no Rich to draw boxes
    heavy = [name for name in HEAVY_FOR_SHORT_COMMANDS if name in loaded]
    assert heavy == ["perfci.cli.check_cmd", "perfci.cli.report_cmd"]  # listed: their help line
    assert _readers(loaded) == []
    assert "perfci.formats.registry" not in loaded


def test_help_on_a_terminal_is_typers_rich_help() -> None:
    code = (
        "import contextlib, io\nfrom perfci.cli.main import main\n"
        "class Terminal(io.StringIO):\n    def isatty(self): return True\n"
        "with contextlib.redirect_stdout(Terminal()):\n    assert main(['--help']) == 0"
    )
    assert "typer.rich_utils" in _all_loaded(code)


def test_help_in_a_pipe_lists_every_command_and_option_whole() -> None:
    """``perfci --help`` into a pipe (a CI log), in a fresh process as a user runs it."""
    from perfci.cli.main import COMMANDS

    out = _help_in_a_pipe(["--help"])
    assert "╭" not in out and "…" not in out and "..." not in out.split("Commands:")[1]
    assert "Catch GPU performance regressions in CI" in out
    for name in COMMANDS:
        assert re.search(rf"^  {re.escape(name)} +\S", out, flags=re.M), name
    out = _help_in_a_pipe(["parse", "--help"])
    assert re.search(r"--top <int range> +Rows shown per metric kind", out), out


def _help_in_a_pipe(argv: list[str]) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TERMINAL_WIDTH")}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from perfci.cli.main import main\nraise SystemExit(main({argv!r}))",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_parsing_a_small_file_imports_its_reader_only(tmp_path: Path) -> None:
    path = tmp_path / "nvprof.txt"
    path.write_text(NVPROF_SUMMARY, encoding="utf-8")
    loaded = _all_loaded(_run_cli(["parse", str(path)]))
    assert _readers(loaded) == ["perfci.formats.nvprof.nvprof"]
    assert [name for name in HEAVY_FOR_CLI if name in loaded] == []  # numpy among them
    assert "perfci.cli.check_cmd" not in loaded
    # Its values need no conversion (a path, the default --top): Typer's pydantic coercion is
    # not imported, and the table goes into the pipe as plain text, without Rich.
    assert "pydantic" not in loaded and _rich(loaded) == []


def test_values_that_need_converting_still_get_typers_checks_and_messages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from perfci.cli.main import main

    path = tmp_path / "nvprof.txt"
    path.write_text(NVPROF_SUMMARY, encoding="utf-8")
    assert main(["parse", str(path), "--top", "0"]) == 2
    assert "greater than or equal to 1" in capsys.readouterr().err
    assert main(["parse", str(path), "--top", "x"]) == 2
    assert "valid integer" in capsys.readouterr().err
    assert main(["parse", str(path), "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[2].split() == ["name", "device", "calls", "total", "avg", "bytes"]
    assert out.splitlines()[3].split()[:3] == ["k(float*)", "gpu", "1"]


def _trace(path: Path, events: int) -> Path:
    event = {"ph": "X", "cat": "kernel", "pid": 0, "tid": 7, "ts": 1.0, "dur": 2.0}
    rows = [{**event, "name": f"k{i % 50}", "ts": float(i)} for i in range(events)]
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": rows}), encoding="utf-8")
    return path


def test_a_small_chrome_trace_is_read_without_numpy_or_msgspec(tmp_path: Path) -> None:
    """A short trace reads whole with ``json`` and reduces in plain Python (issue 33)."""
    loaded = _all_loaded(_run_cli(["parse", str(_trace(tmp_path / "trace.json", 100))]))
    assert _readers(loaded) == ["perfci.formats.pytorch.chrome_trace"]
    assert [name for name in ("numpy", "msgspec", "scipy") if name in loaded] == []


def test_a_large_chrome_trace_brings_the_streaming_reader_and_numpy(tmp_path: Path) -> None:
    from perfci.formats.pytorch import _chrome_events

    path = _trace(tmp_path / "trace.json", 25_000)
    assert path.stat().st_size > _chrome_events.NUMPY_FROM_BYTES
    loaded = _all_loaded(_run_cli(["parse", str(path)]))
    assert "msgspec" in loaded and "numpy" in loaded and "scipy" not in loaded


def _profile(path: Path, gemm_ns: float, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    metrics = [
        {
            "kind": "kernel",
            "name": f"kernel_{i}",
            "calls": 10,
            "total_ns": float(gemm_ns * (1 + i) * rng.lognormal(0, 0.01)),
        }
        for i in range(25)
    ]
    doc = {
        "perfci_version": "0",
        "schema_version": 1,
        "profiles": [
            {"label": "tiny", "format": "perfci", "source": "tiny", "steps": 1, "metrics": metrics}
        ],
    }
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_check_runs_without_scipy_stats(tmp_path: Path) -> None:
    """A full check (baseline runs, a candidate, the comparison printed) in one process."""
    url = f"sqlite:///{tmp_path / 'perfci.db'}"
    common = ["--benchmark", "tiny", "--project", "acme/tiny", "--database-url", url]
    calls = []
    for run in range(4):
        files = [
            str(_profile(tmp_path / f"main-{run}-{r}.json", 1e6, 10 * run + r)) for r in range(3)
        ]
        calls.append(
            [
                "ingest",
                *files,
                *common,
                "--branch",
                "main",
                "--commit",
                f"{run + 1:040x}",
                "--ci-run-id",
                f"main-{run}",
            ]
        )
    candidate = [
        a
        for r in range(3)
        for a in ("--profile", str(_profile(tmp_path / f"pr-{r}.json", 1.3e6, 99 + r)))
    ]
    calls.append(
        [
            "check",
            *candidate,
            *common,
            "--branch",
            "pr",
            "--base-branch",
            "main",
            "--ci-run-id",
            "pr-1",
            "--no-comment",
            "--no-fail-on-regression",
            "--json-out",
            str(tmp_path / "report.json"),
        ]
    )
    code = (
        "import contextlib, io\nfrom perfci.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert [main(argv) for argv in {calls!r}] == [0] * {len(calls)}"
    )
    assert _loaded(code, HEAVY_FOR_CHECK, cwd=tmp_path) == []
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert "regression" in json.dumps(report)  # the comparison really ran: +30 % everywhere


def test_alert_statuses_of_the_cli_are_the_use_cases() -> None:
    from perfci.cli import alerts_cmd
    from perfci.usecases.browse.alerts import STATUSES

    assert alerts_cmd.STATUSES == STATUSES


# --- the replacements of scipy.stats: bit-identical, with scipy.stats as the oracle -----------


def test_t_distribution_matches_scipy_stats_exactly() -> None:
    dofs = np.array([0, -1, np.nan, 0.5, 1, 2, 3.7, 8, 28, 33, 1e6, np.inf])
    xs = np.array([0, 1e-9, 0.3, 1, 2.5, 5, 40, 1e3, np.inf, -np.inf, np.nan, -2])
    x, dof = np.meshgrid(xs, dofs)
    assert np.array_equal(stats._t_sf(x, dof), sst.t.sf(x, dof), equal_nan=True)
    for q in (0.0, 0.5, 0.8, 0.9, 0.95, 0.975, 0.995, 0.9995, 1.0, 1.5, np.nan):
        assert np.array_equal(stats._t_ppf(q, dofs), sst.t.ppf(q, dofs), equal_nan=True)


@pytest.mark.parametrize("q", [0.5, 0.8, 0.9, 0.95, 0.975, 0.995, 0.9995, 1 - 1e-12])
def test_normal_quantile_matches_scipy_stats_exactly(q: float) -> None:
    assert stats.norm_ppf(q) == sst.norm.ppf(q)


def _scipy_mwu(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    method = "exact" if min(x.shape[-1], y.shape[-1]) <= 20 else "asymptotic"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(sst.mannwhitneyu(x, y, axis=-1, method=method).pvalue)


@pytest.mark.parametrize("ties", [False, True])
def test_mann_whitney_matches_scipy_exactly_over_random_shapes(ties: bool) -> None:
    """Exact (min group ≤ 20) and asymptotic (> 20) branches, with and without ties."""
    rng = np.random.default_rng(2024 + ties)
    shapes = [
        (1, 1),
        (1, 2),
        (2, 1),
        (3, 3),
        (5, 30),
        (30, 5),
        (10, 10),
        (20, 20),
        (20, 45),
        (21, 21),
        (25, 40),
        (7, 1),
        (1, 60),
    ]
    shapes += [(int(rng.integers(1, 24)), int(rng.integers(1, 50))) for _ in range(60)]
    for n1, n2 in shapes:
        rows = int(rng.integers(1, 8))
        if ties:
            x = rng.integers(0, 5, (rows, n1)).astype(float)
            y = rng.integers(0, 5, (rows, n2)).astype(float)
        else:
            x = rng.normal(rng.normal(), 1, (rows, n1))
            y = rng.normal(0, 1, (rows, n2))
        both = np.concatenate([x, y], axis=-1)
        keep = both.min(axis=-1) != both.max(axis=-1)  # constant rows never reach the test
        if not keep.any():
            continue
        ours = stats.mann_whitney_u_p(x[keep], y[keep])
        assert np.array_equal(ours, _scipy_mwu(x[keep], y[keep])), (n1, n2)


def test_mann_whitney_extremes_and_one_dimensional_input() -> None:
    base = np.arange(30.0)[None, :]
    assert np.array_equal(stats.mann_whitney_u_p(base + 100, base), _scipy_mwu(base + 100, base))
    x, y = np.array([3.0, 1, 2, 2]), np.array([2.0, 5, 7])
    assert stats.mann_whitney_u_p(x, y) == _scipy_mwu(x, y)
    with pytest.raises(ValueError, match="NaN"):
        stats.mann_whitney_u_p(np.array([[1.0, np.nan]]), np.array([[1.0, 2.0]]))


def test_guarded_t_and_mann_whitney_p_values_equal_the_scipy_stats_ones() -> None:
    """The two callers, recomputed the way they were before scipy.stats was dropped."""
    rng = np.random.default_rng(5)
    base = rng.normal(0, 0.02, (200, 30))
    cand = rng.normal(0.01, 0.02, (200, 5))
    cand[:3] = base[:3, :5]  # ties across the groups
    base[3], cand[3] = 1.0, 1.0  # a constant row: p = 1
    rank_p = stats._mann_whitney_p(base, cand)
    oracle = np.ones(len(base))
    oracle[4:] = _scipy_mwu(cand[4:], base[4:])
    oracle[:3] = _scipy_mwu(cand[:3], base[:3])
    assert np.array_equal(rank_p, oracle)
    result = stats.student_t(base, cand, confidence=0.95)
    n, m = base.shape[-1], cand.shape[-1]
    diff = cand.mean(-1) - base.mean(-1)
    sd = np.sqrt((stats._sum_squares(base) + stats._sum_squares(cand)) / (n + m - 2))
    se = sd * np.sqrt(1 / n + 1 / m)
    with np.errstate(all="ignore"):
        p = 2.0 * sst.t.sf(np.abs(diff / se), float(n + m - 2))
        half = sst.t.ppf(0.975, float(n + m - 2)) * se
    p = np.where(se == 0, np.where(diff == 0, 1.0, 0.0), p)
    assert np.array_equal(result.p_value, p)
    assert np.array_equal(result.ci_high, diff + np.where(se == 0, 0.0, half))


def test_an_up_to_date_store_opens_without_alembic(tmp_path: Path) -> None:
    from perfci.store import migrate

    url = f"sqlite:///{tmp_path / 'perfci.db'}"
    migrate.upgrade(url)
    code = (
        "from perfci.core.settings import Settings\nfrom perfci.store.db import open_store\n"
        f"open_store(Settings(database_url={url!r})).close()"
    )
    assert _loaded(code, ("alembic",)) == []
