"""Real noise: false verdicts of history mode and same-runner A/B mode, and a +5 % operator.

Usage::

    .venv/bin/python benchmarks/ab_noise.py [--quick] [--history-runs 8] [--candidates 10]
        [--ab-comparisons 8] [--changed 4] [--pairs 5] [--repeats 3] [--change 0.05]
        [--adaptive]

A small real CPU benchmark — a two-layer MLP training step in numpy (forward, GELU, softmax
cross-entropy, backward, SGD; batch 128, 128 → 512 → 128, 30 steps, one BLAS thread), each
operator timed on its own, written as a perfci JSON profile per process — lives in a scratch
git repository: ``main`` holds it, branch ``unchanged`` is an empty commit on top (a docs-only
pull request), branch ``slower`` makes the GELU operator do ``--change`` more work (that share
of its rows again). Everything runs through the real ``perfci check`` (in-process), each
repeat a fresh process:

- **history mode**: ``--history-runs`` runs of ``main`` form the baseline; then ``--candidates``
  checks of ``unchanged`` and ``--changed`` checks of ``slower``, each against that baseline;
- **A/B mode**: ``--ab-comparisons`` checks ``--ab`` of ``unchanged`` and ``--changed`` of
  ``slower``, ``--pairs`` pairs each (merge-base in a git worktree, ABBA order).

A background CPU load generator (a busy loop in a separate process, time-bounded) runs during
a third of the runs and comparisons, and during another third it starts half-way through: on
a shared 2-core runner, load comes and goes. Adaptive repeats are off (``--max-repeats`` =
repeats) unless ``--adaptive``, so both modes spend a fixed number of processes.

``--bench gpt`` runs the shipped example instead (``examples/gpt/bench.py``, small settings,
under the torch profiler, CPU), its ``slower`` branch setting ``GELU_EXTRA = --change``: one
more ``aten::gelu`` call per layer over that share of the values, result unused. Each call has
a fixed cost under the profiler (about 35 µs on the VM this was written on), so the operator's
measured change is larger than ``--change``; the table prints it. The operator judged is
``aten::gelu``, 1.7 % of the step: under the 2 % gate share, so found but never failing the
check. ``--operator linear`` slows the example's largest forward operator instead:
``LINEAR_EXTRA = --change`` runs each block's first MLP projection again over that share of
its rows (a third of the block's ``aten::addmm`` work, so ``--change 0.18`` is about +5 % of
``aten::addmm``, which holds about a sixth of the step and gates). By default the numpy
MLP replaces the torch example because ``import torch`` alone takes 2–8 s per
process on the loaded 2-core machine this was written on, which would allow a handful of
comparisons in ten minutes; the numbers it produces are measured times all the same.

Prints a Markdown table: per mode and code version, the comparisons, their run verdicts, the
false verdicts (a ``regression`` or ``improvement`` of unchanged code; per comparison and per
metric) and, for the slower code, how often the GELU operator was found to regress.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import children  # noqa: E402 - after the path set-up above

from perfci.cli.main import main  # noqa: E402 - after the path set-up above

BENCH = """\
import json, os, pathlib, time
# One BLAS thread: on a shared 2-core runner, threads fighting over cores cost 20x (measured).
os.environ.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
import numpy as np
out = pathlib.Path(os.environ["PERFCI_OUTPUT_DIR"])
factors = json.loads(pathlib.Path("factors.json").read_text())
batch, dim, hidden, steps, warmup = (int(os.environ.get(k, d)) for k, d in (
    ("AB_BATCH", 128), ("AB_DIM", 128), ("AB_HIDDEN", 512), ("AB_STEPS", 30), ("AB_WARMUP", 2)))
rng = np.random.default_rng(0)
x = rng.standard_normal((batch, dim)).astype(np.float32)
y = rng.integers(0, dim, batch)
w1 = (rng.standard_normal((dim, hidden)) / dim ** 0.5).astype(np.float32)
w2 = (rng.standard_normal((hidden, dim)) / hidden ** 0.5).astype(np.float32)
extra = int(round(factors.get("gelu", 1.0) * batch)) - batch
# wall: what the user waits for; cpu: this thread's CPU time, blind to time spent preempted.
clock = time.thread_time_ns if os.environ.get("AB_CLOCK") == "cpu" else time.perf_counter_ns
totals, samples = {}, []
def op(name, fn, *args):
    t0 = clock()
    result = fn(*args)
    totals[name] = totals.get(name, 0) + clock() - t0
    return result
def gelu(h):
    out = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))
    if extra > 0:  # the slower pull request: more work in this one operator
        0.5 * h[:extra] * (1 + np.tanh(0.7978845608 * (h[:extra] + 0.044715 * h[:extra] ** 3)))
    return out
def softmax_xent(z):
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(batch), y] -= 1
    return p / batch
for step in range(warmup + steps):
    if step == warmup:
        totals.clear()
    t0 = clock()
    h = op("matmul_in", np.matmul, x, w1)
    a = op("gelu", gelu, h)
    z = op("matmul_out", np.matmul, a, w2)
    g = op("softmax_xent", softmax_xent, z)
    gw2 = op("grad_w2", np.matmul, a.T, g)
    ga = op("grad_a", np.matmul, g, w2.T)
    gh = op("gelu_backward", lambda ga, h: ga * (1 + np.tanh(h)) * 0.5, ga, h)
    gw1 = op("grad_w1", np.matmul, x.T, gh)
    op("sgd", lambda: (w1.__isub__(1e-3 * gw1), w2.__isub__(1e-3 * gw2)))
    if step >= warmup:
        samples.append(clock() - t0)
metrics = [{"kind": "step", "name": "train_step", "samples_ns": samples}]
metrics += [{"kind": "op", "name": name, "device": "cpu", "calls": steps, "total_ns": total}
            for name, total in totals.items()]
doc = {"perfci_version": "0", "schema_version": 1, "profiles": [
    {"label": "mlp", "format": "perfci", "source": "mlp", "steps": steps, "metrics": metrics}]}
(out / "profile.json").write_text(json.dumps(doc))
"""

LOAD = """\
import sys, time
time.sleep(float(sys.argv[1]))
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    pass
"""

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "ab",
    "GIT_AUTHOR_EMAIL": "ab@example.com",
    "GIT_COMMITTER_NAME": "ab",
    "GIT_COMMITTER_EMAIL": "ab@example.com",
}


@dataclass
class Tally:
    """The outcomes of one mode × code version."""

    comparisons: int = 0
    verdicts: Counter[str] = field(default_factory=Counter)
    false_metrics: int = 0
    metrics: int = 0
    found: int = 0
    failed_right: int = 0  # the check failed, and only on lines the change moves
    seconds: float = 0.0
    target: list[tuple[float, float, float]] = field(default_factory=list)  # change, low, high
    processes: int = 0  # the candidate's repeats (history) or pairs (A/B), summed


def git(repo: Path, *args: str, date: str | None = None) -> str:
    env = {**os.environ, **_GIT_ENV}
    if date:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


#: The example's command under ``--bench gpt``: small enough for many processes on 2 cores.
GPT_ARGS = ["--steps", "8", "--warmup", "2", "--batch", "16", "--seq", "128", "--layers", "2"]


def make_repo(
    root: Path,
    change: float,
    bench: str,
    gpt_args: list[str] | None = None,
    operator: str = "gelu",
) -> Path:
    """``main`` (benchmark, then a docs commit), ``unchanged`` and ``slower`` on top of it.

    ``gpt_args`` replaces :data:`GPT_ARGS` (``benchmarks/cuda_ab.py`` sizes the example for a
    GPU); ``operator`` is the example's operator the ``slower`` branch slows (gelu, linear)."""
    repo = root / bench
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / ".gitignore").write_text(".perfci/\n", encoding="utf-8")
    if bench == "gpt":
        source = (ROOT / "examples" / "gpt" / "bench.py").read_text(encoding="utf-8")
        (repo / "bench.py").write_text(source, encoding="utf-8")
        command = [sys.executable, "bench.py", *(GPT_ARGS if gpt_args is None else gpt_args)]
        table = f'command = {json.dumps(command)}\nprofiler = "torch"\n'
    else:
        (repo / "bench.py").write_text(BENCH, encoding="utf-8")
        (repo / "factors.json").write_text("{}\n", encoding="utf-8")
        table = (
            f'command = [{json.dumps(sys.executable)}, "bench.py"]\n'
            'profiler = "none"\nglobs = ["*.json"]\n'
        )
    (repo / "pyproject.toml").write_text(
        f'[tool.perfci]\nproject = "bench/ab-noise"\n\n[tool.perfci.benchmarks.{bench}]\n{table}',
        encoding="utf-8",
    )
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "benchmark", date="2026-01-01T12:00:00Z")
    git(repo, "commit", "-q", "--allow-empty", "-m", "docs", date="2026-01-02T12:00:00Z")
    git(repo, "checkout", "-q", "-b", "unchanged")
    git(repo, "commit", "-q", "--allow-empty", "-m", "docs only", date="2026-01-03T12:00:00Z")
    git(repo, "checkout", "-q", "-b", "slower", "main")
    if bench == "gpt":
        text = (repo / "bench.py").read_text(encoding="utf-8")
        knob = f"{operator.upper()}_EXTRA"
        slower = text.replace(f"{knob} = 0.0\n", f"{knob} = {change!r}\n")
        assert slower != text, f"examples/gpt/bench.py lost its {knob} line"
        (repo / "bench.py").write_text(slower, encoding="utf-8")
    else:
        (repo / "factors.json").write_text(
            json.dumps({"gelu": 1 + change}) + "\n", encoding="utf-8"
        )
    git(repo, "commit", "-q", "-am", f"slower {operator}", date="2026-01-03T12:00:00Z")
    return repo


@contextlib.contextmanager
def load(  # type: ignore[no-untyped-def]
    index: int, seconds: float, processes: int = 1, always: bool | None = None
):
    """Busy-loop load for runs with ``index % 3 == 1``, from half-way for ``index % 3 == 2``;
    ``processes`` loops at once (two take both cores of a 2-core runner). ``always`` True or
    False overrides the cycle: load through the whole run, or none."""
    if always is False or (always is None and index % 3 == 0):
        yield "none"
        return
    delay = 0.0 if always or index % 3 == 1 else seconds / 2
    loops = [
        children.start([sys.executable, "-c", LOAD, str(delay), str(seconds * 3)])
        for _ in range(processes)
    ]
    try:
        yield "all" if delay == 0 else "half"
    finally:
        for process in loops:
            children.stop(process)


def check(repo: Path, url: str, report: Path, *args: str) -> dict[str, object]:
    """One ``perfci check`` in-process, its output swallowed; the JSON report."""
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        code = main(["check", "--database-url", url, "--json-out", str(report), *args])
    if code not in (0, 1):
        raise SystemExit(f"perfci check exited {code}:\n{sink.getvalue()[-3000:]}")
    result: dict[str, object] = json.loads(report.read_text(encoding="utf-8"))
    return result


#: The changed operator's series name, per benchmark and slowed operator.
TARGET = {("mlp", "gelu"): "gelu", ("gpt", "gelu"): "aten::gelu", ("gpt", "linear"): "aten::addmm"}

#: Names (lower case, substrings) of the lines each slowed operator moves for real.
_OWN_LINES = {"gelu": ("gelu",), "linear": ("addmm", "linear")}

#: Operators the example's extra calls add calls to (a profile diff of the two branches): a
#: flat view of the input and a slice of it; for the linear layer also the weight's transpose
#: and the bias, broadcast and copied into the output before the product (CPU ``addmm``).
_PADDING_OPS = ("aten::slice", "aten::view", "aten::reshape", "aten::as_strided")
_PADDING_EXACT = {
    "gelu": (),
    "linear": ("aten::t", "aten::transpose", "aten::expand", "aten::copy_"),
}


def _touched(metric: dict[str, Any], operator: str = "gelu") -> bool:
    """Lines the slower operator may move for real: its forward and backward, what holds them,
    and (in the example) the views its extra call takes."""
    series = metric["series"]
    name = series["name"].lower()
    return (
        any(own in name for own in _OWN_LINES[operator])
        or series["kind"] in ("step", "range", "layer")
        or any(op in name for op in _PADDING_OPS)
        or name in _PADDING_EXACT[operator]
    )


def score(
    tally: Tally,
    result: dict[str, object],
    *,
    changed: bool,
    seconds: float,
    target: str,
    operator: str = "gelu",
) -> None:
    metrics = result["metrics"]
    assert isinstance(metrics, list)
    tally.comparisons += 1
    tally.seconds += seconds
    tally.verdicts[str(result["verdict"])] += 1
    tally.metrics += len(metrics)
    line = [m for m in metrics if m["series"]["name"] == target and m["series"]["kind"] == "op"]
    tally.processes += max(m["n_candidate"] for m in metrics)  # repeats, or A/B pairs
    if line and line[0]["change"] is not None:
        tally.target.append((line[0]["change"], line[0]["ci_low"], line[0]["ci_high"]))
    decided = ("regression", "improvement")
    if changed:
        tally.found += bool(line and line[0]["verdict"] == "regression")
        gating = [m for m in metrics if m["verdict"] == "regression" and m["gated"]]
        tally.failed_right += result["verdict"] == "regression" and all(
            _touched(m, operator) for m in gating
        )
        tally.false_metrics += sum(
            m["verdict"] in decided and not _touched(m, operator) for m in metrics
        )
    else:
        tally.false_metrics += sum(m["verdict"] in decided for m in metrics)


def history_mode(
    repo: Path, url: str, args: argparse.Namespace, work: Path, tallies: dict[str, Tally]
) -> None:
    fixed = ["--repeats", str(args.repeats)]
    if not args.adaptive:
        fixed += ["--max-repeats", str(args.repeats)]
    git(repo, "checkout", "-q", "main~1")
    sha = git(repo, "rev-parse", "HEAD")
    busy_base, busy_pr = _pattern(args.load_pattern)
    for run in range(args.history_runs):
        with load(run, args.run_seconds, args.load_processes, busy_base):
            check(
                repo,
                url,
                work / "base.json",
                "--branch",
                "main",
                "--commit",
                sha,
                "--ci-run-id",
                f"main-{run}",
                *fixed,
            )
        print(f"  history baseline run {run + 1}/{args.history_runs}", file=sys.stderr)
    plan = [("unchanged", i) for i in range(args.candidates)]
    plan += [("slower", i) for i in range(args.changed)]
    for number, (branch, i) in enumerate(plan):
        git(repo, "checkout", "-q", branch)
        started = time.monotonic()
        with load(number, args.run_seconds, args.load_processes, busy_pr):
            result = check(
                repo,
                url,
                work / "pr.json",
                "--base-branch",
                "main",
                "--pr",
                str(100 + number),
                "--ci-run-id",
                f"pr-{number}",
                *fixed,
            )
        score(
            tallies[f"history/{branch}"],
            result,
            changed=branch == "slower",
            seconds=time.monotonic() - started,
            target=TARGET[args.bench, args.operator],
            operator=args.operator,
        )
        outcome = _outcome(result, TARGET[args.bench, args.operator])
        print(f"  history {branch} {i + 1}: {outcome}", file=sys.stderr)


def _pattern(name: str) -> tuple[bool | None, bool | None]:
    """(baseline runs, pull-request runs): always loaded, never, or the cycle (``None``)."""
    return {"cycle": (None, None), "busy-baseline": (True, False), "busy-pr": (False, True)}[name]


def ab_mode(
    repo: Path, url: str, args: argparse.Namespace, work: Path, tallies: dict[str, Tally]
) -> None:
    fixed = ["--ab", "--ab-pairs", str(args.pairs), "--base-branch", "main"]
    if not args.adaptive:
        fixed += ["--max-repeats", str(args.pairs)]
    plan = [("unchanged", i) for i in range(args.ab_comparisons)]
    plan += [("slower", i) for i in range(args.changed)]
    for number, (branch, i) in enumerate(plan):
        git(repo, "checkout", "-q", branch)
        started = time.monotonic()
        with load(number, args.run_seconds * args.pairs * 2 / args.repeats, args.load_processes):
            result = check(
                repo,
                url,
                work / "ab.json",
                "--pr",
                str(200 + number),
                "--ci-run-id",
                f"ab-{number}",
                *fixed,
            )
        score(
            tallies[f"A/B/{branch}"],
            result,
            changed=branch == "slower",
            seconds=time.monotonic() - started,
            target=TARGET[args.bench, args.operator],
            operator=args.operator,
        )
        outcome = _outcome(result, TARGET[args.bench, args.operator])
        print(f"  A/B {branch} {i + 1}: {outcome}", file=sys.stderr)


def _outcome(result: dict[str, Any], target: str = "") -> str:
    """The run verdict, the slowed operator's line and the lines called changed, for the
    progress log."""
    line = next(
        (
            m
            for m in result["metrics"]
            if m["series"]["name"] == target and m["series"]["kind"] == "op" and m["change"]
        ),
        None,
    )
    own = (
        f" [{target} {line['change']:+.1%} ({line['ci_low']:+.1%} … {line['ci_high']:+.1%}), "
        f"q {line['q_value'] if line['q_value'] is not None else float('nan'):.3g}, "
        f"{line['verdict']}]"
        if line is not None
        else ""
    )
    moved = [
        f"{m['series']['name']} {m['change']:+.1%}{' (gated)' if m['gated'] else ''}"
        for m in result["metrics"]
        if m["verdict"] in ("regression", "improvement") and m["change"] is not None
    ]
    return f"{result['verdict']}{own}" + (f": {'; '.join(moved[:8])}" if moved else "")


def table(tallies: dict[str, Tally]) -> str:
    """The results; the slower operator's change is as measured (``--change`` is the knob)."""
    lines = [
        "| mode | code | comparisons | regression | improvement | unchanged | "
        "inconclusive | false verdicts / comparison | false metrics / comparison | "
        "slower operator found | check failed on the change's lines | "
        "its change, median (95 % interval) | "
        "repeats or pairs / comparison | s / comparison |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, t in tallies.items():
        if not t.comparisons:  # a mode left out with --modes
            continue
        mode, _, code = name.rpartition("/")
        n = max(t.comparisons, 1)
        false_runs = (
            "—"
            if code == "slower"
            else (f"{(t.verdicts['regression'] + t.verdicts['improvement']) / n:.2f}")
        )
        found = f"{t.found}/{t.comparisons}" if code == "slower" else "—"
        right = f"{t.failed_right}/{t.comparisons}" if code == "slower" else "—"
        lines.append(
            f"| {mode} | {code} | {t.comparisons} | {t.verdicts['regression']} | "
            f"{t.verdicts['improvement']} | {t.verdicts['unchanged']} | "
            f"{t.verdicts['inconclusive']} | {false_runs} | {t.false_metrics / n:.2f} | "
            f"{found} | {right} | {_median_change(t)} | {t.processes / n:.1f} | "
            f"{t.seconds / n:.0f} |"
        )
    return "\n".join(lines)


def _median_change(tally: Tally) -> str:
    if not tally.target:
        return "—"
    change, low, high = (statistics.median(v[i] for v in tally.target) for i in range(3))
    return f"{change:+.1%} ({low:+.1%} … {high:+.1%})"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (< 1 min)")
    parser.add_argument(
        "--bench",
        choices=("mlp", "gpt"),
        default="mlp",
        help="mlp: the numpy MLP (default); gpt: examples/gpt/bench.py under the torch "
        "profiler, its GELU made --change slower",
    )
    parser.add_argument(
        "--operator",
        choices=("gelu", "linear"),
        default="gelu",
        help="the operator the slower branch slows, under --bench gpt: gelu (aten::gelu, under "
        "the gate share) or linear (the MLP's first projection: aten::addmm, gated)",
    )
    parser.add_argument(
        "--modes",
        default="history,ab",
        help="which modes to measure, comma-separated: history, ab (default both)",
    )
    parser.add_argument(
        "--load-processes",
        type=int,
        default=1,
        help="busy loops the load generator starts at once (default 1; 2 take both cores of "
        "a 2-core runner)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="copy the stores (history.db, ab.db) into this folder at the end",
    )
    parser.add_argument(
        "--load-pattern",
        choices=("cycle", "busy-baseline", "busy-pr"),
        default="cycle",
        help="history mode: the load cycle on every run (default), busy loops beside every "
        "baseline run and none beside the pull requests (busy-baseline), or the reverse",
    )
    parser.add_argument("--history-runs", type=int, default=8)
    parser.add_argument("--candidates", type=int, default=10)
    parser.add_argument("--ab-comparisons", type=int, default=8)
    parser.add_argument("--changed", type=int, default=4)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--change", type=float, default=0.05)
    parser.add_argument(
        "--adaptive",
        action="store_true",
        help="adaptive repeats on (default off: a fixed number of processes)",
    )
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="time operators by wall clock (default) or by the thread's CPU "
        "time, which does not count time spent preempted by the load",
    )
    args = parser.parse_args(argv)
    if args.operator != "gelu" and args.bench != "gpt":
        parser.error("--operator linear needs --bench gpt (the numpy MLP slows its GELU)")
    os.environ["AB_CLOCK"] = args.clock
    if args.quick:
        args.history_runs, args.candidates, args.ab_comparisons = 3, 1, 1
        args.changed, args.pairs, args.repeats = 1, 2, 2
        os.environ.update(AB_BATCH="64", AB_HIDDEN="256", AB_STEPS="5", AB_WARMUP="1")
    # The load's span per run (bounded, killed after): a torch process takes 5-10 s here.
    args.run_seconds = (10.0 if args.bench == "gpt" else 2.0) * args.repeats
    return args


def run(args: argparse.Namespace) -> dict[str, Tally]:
    tallies = {
        name: Tally()
        for name in ("history/unchanged", "history/slower", "A/B/unchanged", "A/B/slower")
    }
    with tempfile.TemporaryDirectory(prefix="perfci-ab-noise-") as scratch:
        work = Path(scratch)
        repo = make_repo(work, args.change, args.bench, operator=args.operator)
        cwd = Path.cwd()
        os.chdir(repo)
        try:
            modes = {m.strip() for m in args.modes.split(",")}
            if "history" in modes:
                history_mode(repo, f"sqlite:///{work / 'history.db'}", args, work, tallies)
            if "ab" in modes:
                ab_mode(repo, f"sqlite:///{work / 'ab.db'}", args, work, tallies)
        finally:
            os.chdir(cwd)
            if args.keep is not None:  # the stores, to read a surprising verdict again
                args.keep.mkdir(parents=True, exist_ok=True)
                for db in work.glob("*.db"):
                    shutil.copy2(db, args.keep / db.name)
    return tallies


def main_cli(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    tallies = run(args)
    print(table(tallies))
    print(
        f"\n{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end; "
        f"{time.monotonic() - started:.0f} s in all; adaptive repeats "
        f"{'on' if args.adaptive else 'off'}; {args.clock} clock; command: "
        f"benchmarks/ab_noise.py {' '.join(argv if argv is not None else sys.argv[1:])}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main_cli())
