"""The example under ``perfci check --ab`` on a GPU: torch profiler and nsys, quiet or loaded.

Usage (on a machine with CUDA, from the repository root)::

    python benchmarks/cuda_ab.py [--profiler torch|nsys] [--comparisons 1] [--pairs 5]
        [--load N] [--change 0.05] [--deadline SECONDS] [--reports FILE] [--small]

The scratch repository of ``benchmarks/ab_noise.py --bench gpt`` (``main``, an ``unchanged``
docs-only branch and a ``slower`` branch whose GELU runs again over ``--change`` of its input),
with the example sized for a GPU (:data:`GPU_ARGS`: the GELU is a bandwidth-bound kernel of
about 70 µs there, so ``--change 0.05`` is a few per cent of real work, not only one more
launch). Each comparison is a real ``perfci check --ab`` (merge-base in a git worktree,
alternating pairs, each repeat a fresh process), ``--comparisons`` of each branch, in the
order slower, unchanged, slower, … (a deadline cuts the last ones).

``--load N`` keeps N busy-loop processes running during every comparison (default: one per
CPU, a runner whose cores another job has taken: the example's CPU side launches every
kernel, so this slows it). ``--deadline`` stops before a comparison that would not finish in
time, judged from the slowest one so far.

Prints one line per comparison and a Markdown table: the run verdict, the step's change, and
the forward GELU kernel's (and under the torch profiler the ``aten::gelu`` operator's) change
with its 95 % interval and verdict; for unchanged code, every metric called a regression or an
improvement is a false verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from ab_noise import GPT_ARGS, check, git, make_repo  # noqa: E402 - after the path set-up above
from children import busy_loops  # noqa: E402

#: The example sized for one GPU: 4 layers of width 1024, 16 × 512 tokens a step.
GPU_ARGS = [
    "--steps", "10", "--warmup", "3", "--batch", "16", "--seq", "512",
    "--dim", "1024", "--heads", "16", "--layers", "4",
]  # fmt: skip


def _gelu_lines(metrics: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The forward GELU's kernel (and its operator, under torch.profiler), by role."""
    found: dict[str, dict[str, Any]] = {}
    for metric in metrics:
        series = metric["series"]
        name = series["name"]
        lower = name.lower()
        if series["kind"] == "op" and name == "aten::gelu":
            found["op"] = metric
        elif series["kind"] == "kernel" and "gelu" in lower and "backward" not in lower:
            found.setdefault("kernel", metric)
    return found


def _change(metric: dict[str, Any] | None) -> str:
    if metric is None or metric.get("change") is None:
        return "—"
    return (
        f"{metric['change']:+.1%} ({metric['ci_low']:+.1%} … {metric['ci_high']:+.1%}) "
        f"{metric['verdict']}"
    )


def summarise(branch: str, result: dict[str, Any], seconds: float) -> dict[str, Any]:
    metrics = result["metrics"]
    steps = [m for m in metrics if m["series"]["kind"] == "step"]
    gelu = _gelu_lines(metrics)
    decided = [m for m in metrics if m["verdict"] in ("regression", "improvement")]
    return {
        "branch": branch,
        "verdict": result["verdict"],
        "seconds": round(seconds),
        "pairs": max((m.get("n_candidate") or 0) for m in metrics) if metrics else 0,
        "metrics": len(metrics),
        "step": _change(steps[0] if steps else None),
        "gelu_kernel": _change(gelu.get("kernel")),
        "gelu_kernel_name": gelu["kernel"]["series"]["name"][:60] if "kernel" in gelu else "",
        "gelu_op": _change(gelu.get("op")),
        "decided": [
            f"{m['series']['kind']} {m['series']['name'][:50]} {m['verdict']}" for m in decided
        ],
    }


def table(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        f"profiler `{args.profiler}`, {args.load} busy loops, {args.pairs} pairs, "
        f"`--change {args.change}`",
        "",
        "| code | run verdict | step | forward GELU kernel | `aten::gelu` | "
        "metrics called regression or improvement | pairs | s |",
        "|---|---|---|---|---|---|---:|---:|",
    ]
    for row in rows:
        decided = "; ".join(row["decided"]) or "none"
        lines.append(
            f"| {row['branch']} | {row['verdict']} | {row['step']} | {row['gelu_kernel']} | "
            f"{row['gelu_op']} | {len(row['decided'])} ({decided}) | {row['pairs']} | "
            f"{row['seconds']} |"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiler", choices=("torch", "nsys"), default="torch")
    parser.add_argument("--comparisons", type=int, default=1, help="per branch")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--load", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--change", type=float, default=0.05)
    parser.add_argument("--deadline", type=float, default=None, help="seconds from the start")
    parser.add_argument("--reports", type=Path, default=None, help="append JSON reports here")
    parser.add_argument("--database", type=Path, default=None, help="keep the store here")
    parser.add_argument(
        "--small", action="store_true", help="the CPU-sized example (a smoke run without a GPU)"
    )
    return parser.parse_args(argv)


def main_cli(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    plan = ["slower", "unchanged"] * args.comparisons
    fixed = ["--ab", "--ab-pairs", str(args.pairs), "--max-repeats", str(args.pairs)]
    with tempfile.TemporaryDirectory(prefix="perfci-cuda-ab-") as scratch:
        work = Path(scratch)
        repo = make_repo(work, args.change, "gpt", gpt_args=GPT_ARGS if args.small else GPU_ARGS)
        url = f"sqlite:///{args.database or work / 'ab.db'}"
        cwd = Path.cwd()
        os.chdir(repo)
        try:
            for number, branch in enumerate(plan):
                slowest = max((r["seconds"] for r in rows), default=0)
                left = (
                    None if args.deadline is None else args.deadline - (time.monotonic() - started)
                )
                if left is not None and left < slowest * 1.1:
                    print(f"stopping: {left:.0f} s left, a comparison took {slowest} s")
                    break
                git(repo, "checkout", "-q", branch)
                begun = time.monotonic()
                with busy_loops(args.load):
                    result = check(
                        repo, url, work / "ab.json", "--base-branch", "main",
                        "--pr", str(300 + number), "--ci-run-id", f"{args.profiler}-{number}",
                        "--profiler", args.profiler, "--markdown-out", str(work / "ab.md"),
                        *fixed,
                    )  # fmt: skip
                row = summarise(branch, result, time.monotonic() - begun)
                rows.append(row)
                print(json.dumps(row, ensure_ascii=False), flush=True)
                if args.reports is not None:
                    with args.reports.open("a", encoding="utf-8") as handle:
                        handle.write(json.dumps({"row": row, "report": result}) + "\n")
                        comment = (work / "ab.md").read_text(encoding="utf-8")
                        handle.write(json.dumps({"comment": comment}) + "\n")
        finally:
            os.chdir(cwd)
    print(table(rows, args))
    print(f"\n{os.cpu_count()} CPUs; {time.monotonic() - started:.0f} s in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main_cli())
