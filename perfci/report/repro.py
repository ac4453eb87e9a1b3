"""The repro bundle as Markdown, and the exact ``perfci`` command lines it and the weekly report
offer (``perfci check --ab`` between two commits, ``perfci bisect`` over a range).

Commands are shell lines: every word from a run (a benchmark or kernel name, a branch) is
shell-quoted (:func:`shlex.quote`) after its invisible characters are made visible, and the
block is fenced with one backtick more than the longest run inside, so a name can neither end
the block nor run a second command when pasted.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from perfci.core.model import MetricKind, RunComparison, Verdict
from perfci.core.repro import FINGERPRINT_LABELS, Repro
from perfci.report.escape import md_escape, shorten, visible

__all__ = ["ab_command", "bisect_command", "code_block", "render_repro", "trace_command"]

#: Regressed lines given a command to open their trace.
MAX_TRACES = 5
_TRACE_KINDS = {
    MetricKind.KERNEL,
    MetricKind.MEMORY,
    MetricKind.COMM,
    MetricKind.OP,
}


def shell_word(text: str) -> str:
    return shlex.quote(visible(text))


def ab_command(benchmark: str, *, commit: str, base: str, flags: Sequence[str] = ()) -> list[str]:
    """The lines that rerun a comparison as a same-runner A/B: check out the candidate, then
    ``perfci check --ab`` against the base commit (``--baseline-branch`` takes a commit: the
    merge-base of the candidate with it is the base itself)."""
    words = ["perfci", "check", "--ab", "-b", benchmark, "--baseline-branch", base, *flags]
    return [f"git checkout {shell_word(commit)}", " ".join(shell_word(w) for w in words)]


def bisect_command(benchmark: str, *, good: str, bad: str, metric: str | None = None) -> str:
    """``perfci bisect GOOD BAD -b BENCH`` (``--metric`` when it follows a kernel)."""
    words = ["perfci", "bisect", good, bad, "-b", benchmark]
    if metric:
        words += ["--metric", metric]
    return " ".join(shell_word(w) for w in words)


def trace_command(profiles: str, name: str) -> str:
    """Where one kernel is in a side's profiles: ``perfci parse`` of the folder, filtered."""
    return f"perfci parse {shell_word(profiles)} --top 100000 | grep -F -- {shell_word(name)}"


def code_block(lines: Sequence[str], language: str = "bash") -> str:
    """A fenced block whose fence no line can close."""
    text = "\n".join(lines)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def render_repro(repro: Repro, result: RunComparison | None = None) -> str:
    """The collapsed "Reproduce locally" section of a comment."""
    lines = ab_command(repro.benchmark, commit=repro.commit, base=repro.base, flags=repro.flags)
    if repro.bisect:
        lines += [
            "# the change landed on this branch: find the commit that made it",
            bisect_command(repro.benchmark, good=repro.base, bad=repro.commit, metric=repro.metric),
        ]
    out = [
        "<details><summary>Reproduce locally</summary>",
        "",
        code_block(lines),
        "",
        _environment(repro.environment),
        "",
        _profiles(repro),
    ]
    traces = _traces(repro, result)
    if traces:
        out += ["", "Open the regressed kernels' profiles (base side, then this side):", ""]
        out += traces
    out += ["", "</details>"]
    return "\n".join(out)


def _environment(environment: dict[str, str]) -> str:
    shown = [(label, environment[key]) for key, label in FINGERPRINT_LABELS if key in environment]
    if not shown:
        return "Environment: not recorded."
    parts = [f"{label} {_span(value, max_len=120)}" for label, value in shown]
    return "Environment: " + ", ".join(parts) + "."


def _profiles(repro: Repro) -> str:
    names = " and ".join(_span(a) for a in repro.artifacts)
    folder = repro.profiles.rstrip("/")
    return (
        f"Profiles of both sides: the Action run's artifacts {names}; on a local run "
        f"{_span(f'{folder}/{repro.base_glob}')} (base) and "
        f"{_span(f'{folder}/{repro.candidate_glob}')} (this side)."
    )


def _span(text: object, *, max_len: int | None = None) -> str:
    """An inline code span in running text (not a table: a pipe stays a pipe), its fence one
    backtick longer than any run inside."""
    raw = visible(text)
    if max_len is not None:
        raw = shorten(raw, max_len)
    longest = max((len(run) for run in re.findall(r"`+", raw)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if raw.startswith("`") or raw.endswith("`") or not raw.strip() else ""
    return f"{fence}{pad}{raw}{pad}{fence}"


def _traces(repro: Repro, result: RunComparison | None) -> list[str]:
    if result is None:
        return []
    regressed = [
        m
        for m in result.metrics
        if m.verdict is Verdict.REGRESSION
        and m.series is not None
        and m.series.kind in _TRACE_KINDS
    ][:MAX_TRACES]
    folder = repro.profiles.rstrip("/")
    out = []
    for metric in regressed:
        assert metric.series is not None
        name = metric.series.name
        out += [
            f"- {md_escape(visible(name), max_len=120)}:",
            "",
            code_block(
                [
                    trace_command(f"{folder}/{repro.base_glob}", name),
                    trace_command(f"{folder}/{repro.candidate_glob}", name),
                ]
            ),
        ]
    return out
