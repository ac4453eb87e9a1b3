"""A bisection's answer as text (the terminal) and Markdown (the tracking issue), and the
progress line of one probe.

The answer leads with the sentence a user acts on: "first bad commit X (+N %, interval …), its
parent Y unchanged", then the kernel-level diff between the two (the kernels the culprit's A/B
against its parent found changed, largest time added first), the commits skipped, and, when
the probes show it, that the range holds more than one change.
"""

from __future__ import annotations

from collections.abc import Callable

from perfci.core.bisection import BisectAnswer, MetricChange, Probe, ProbeRole, ProbeStatus
from perfci.report import formatting as fmt
from perfci.report.escape import md_escape, visible

__all__ = ["answer_lines", "answer_markdown", "diff_title", "kernel_diff", "probe_line"]

_Format = Callable[[str], str]

#: Kernels listed in the diff.
TOP_KERNELS = 5
_DIFF_KINDS = ("kernel", "memory", "comm", "op", "range", "layer")


def probe_line(probe: Probe, place: int | None, commits: int) -> str:
    """One probe, for stderr: where, against what, the reading, pairs and time."""
    where = (
        f"commit {place}/{commits} {probe.commit[:12]}"
        if place is not None
        else f"{probe.commit[:12]} against its parent {probe.against[:12]}"
    )
    role = {
        ProbeRole.RANGE: "range (BAD vs GOOD)",
        ProbeRole.RERUN: "rerun",
        ProbeRole.EARLIER: "the culprit's parent again (more than one change?)",
    }.get(probe.role, "")
    head = f"probe {role + ': ' if role else ''}{where}"
    if probe.status is ProbeStatus.UNBUILDABLE:
        return f"{head}: unbuildable, skipped ({visible(probe.message)})"
    reading = f"{probe.status.value} {_change(probe)}"
    how = (
        "reused (same commits, same environment)"
        if probe.reused
        else (f"{probe.pairs} pairs, {probe.seconds:.1f} s")
    )
    return f"{head}: {reading}; {how}"


def answer_lines(answer: BisectAnswer) -> list[str]:
    """The answer for the terminal, one line per item."""
    lines = [_headline(answer, code=lambda s: s[:12], text=visible)]
    diff = kernel_diff(answer)
    if diff:
        lines.append(f"{diff_title(diff)}:")
        lines += [
            f"  {fmt.pct(k.change)} {visible(k.key)} (95 % interval "
            f"{fmt.interval(k.ci_low, k.ci_high)}, {k.verdict})"
            for k in diff
        ]
    lines += [f"note: {line}" for line in _notes(answer, code=lambda s: s[:12], text=visible)]
    lines.append(_cost(answer))
    return lines


def answer_markdown(answer: BisectAnswer, *, command: str | None = None) -> str:
    """The answer for an issue or a job summary (every name from the run escaped)."""
    code = _code
    out = [f"### perfci bisect: {md_escape(visible(answer.benchmark), max_len=100)}", ""]
    out.append(_headline(answer, code=code, text=md_escape))
    diff = kernel_diff(answer)
    if diff:
        if not _decided(diff):
            out += ["", _UNDECIDED.capitalize() + ":"]
        out += ["", "| Kernel-level diff | Change | 95 % interval | Verdict |", "|:--|--:|:--|:--|"]
        out += [
            f"| {md_escape(visible(k.key), max_len=120)} | {fmt.pct(k.change)} | "
            f"{fmt.interval(k.ci_low, k.ci_high)} | {md_escape(k.verdict)} |"
            for k in diff
        ]
    notes = _notes(answer, code=code, text=md_escape)
    if notes:
        out += ["", *[f"- {line}" for line in notes]]
    out += ["", md_escape(_cost(answer))]
    if command:
        out += ["", "Reproduce:", "", "```bash", command.replace("`", "'"), "```"]
    return "\n".join(out) + "\n"


def kernel_diff(answer: BisectAnswer) -> list[MetricChange]:
    """The culprit's changed kernels (and other GPU-work lines) against its parent, largest
    time added first.

    When none is decided (the A/B's correction for its many lines leaves a loaded runner's
    kernels inconclusive, while the culprit was confirmed on the bisected metric's own
    interval), the lines whose own interval leaves out zero in the culprit's direction, marked
    as the inconclusive lines they are (:func:`diff_title` says so).
    """
    if answer.confirmation is None:
        return []
    lines = [m for m in answer.confirmation.metrics if m.kind in _DIFF_KINDS]
    changed = [m for m in lines if m.verdict in _DECIDED]
    if not changed:
        sign = answer.confirmation.change or 0.0
        changed = [m for m in lines if _leaves_out_zero(m, sign)]
    return sorted(changed, key=lambda m: -abs(m.delta_ns))[:TOP_KERNELS]


def diff_title(diff: list[MetricChange]) -> str:
    """What the diff lists: decided lines, or (none decided) lines that moved by their own
    interval alone."""
    if _decided(diff):
        return "kernel-level diff (culprit against its parent)"
    return f"kernel-level diff (culprit against its parent; {_UNDECIDED})"


_DECIDED = ("regression", "improvement")


def _decided(diff: list[MetricChange]) -> bool:
    return any(m.verdict in _DECIDED for m in diff)


_UNDECIDED = (
    "none decided after the correction for the comparison's many lines: the lines whose own "
    "interval leaves out zero"
)


def _leaves_out_zero(metric: MetricChange, sign: float) -> bool:
    low, high = metric.ci_low, metric.ci_high
    if low is None or high is None or sign == 0:
        return False
    return low > 0 if sign > 0 else high < 0


def _headline(answer: BisectAnswer, *, code: _Format, text: _Format) -> str:
    if answer.culprit is None or answer.confirmation is None:
        return f"no culprit named: {text(answer.stopped or 'the search did not finish')}"
    subject = answer.subjects.get(answer.culprit, "")
    found = answer.confirmation
    first = "first bad commit" if not answer.candidates else "last of the candidate commits"
    line = (
        f"{first} {code(answer.culprit)}{_subject(subject, text)} ({_change(found)}), "
        f"its parent {code(answer.parent or '')} {_parent_reading(answer)}"
    )
    state = "confirmed by a rerun" if answer.confirmed else "NOT confirmed by the rerun"
    rerun = answer.rerun
    again = f" ({_change(rerun)})" if rerun is not None else ""
    return f"{line}; {state}{again}"


def _parent_reading(answer: BisectAnswer) -> str:
    if answer.parent == answer.good:
        return "(GOOD itself)"
    probe = answer.parent_probe
    if probe is None:
        return "(not measured against GOOD)"
    return f"{probe.status.value} against GOOD ({_change(probe)})"


def _notes(answer: BisectAnswer, *, code: _Format, text: _Format) -> list[str]:
    notes = []
    if answer.more_than_one:
        notes.append(text(answer.more_than_one))
    if answer.candidates:
        listed = ", ".join(code(c) for c in answer.candidates)
        notes.append(f"skipped commits hide the exact culprit; it is one of {listed}")
    for probe in answer.skipped:
        why = probe.message or f"{probe.status.value} {_change(probe)}"
        notes.append(f"skipped {code(probe.commit)}: {probe.status.value} ({text(why)})")
    if answer.culprit is not None and answer.stopped:
        notes.append(text(answer.stopped))
    return notes


def _cost(answer: BisectAnswer) -> str:
    run = [p for p in answer.probes if not p.reused]
    searched = sum(1 for p in run if not p.role.repeats_a_reading)
    reruns = sum(1 for p in run if p.role is ProbeRole.RERUN)
    earlier = sum(1 for p in run if p.role is ProbeRole.EARLIER)
    again = (
        f", {earlier} second reading of its parent against GOOD ({_change(answer.earlier)})"
        if earlier and answer.earlier is not None
        else ""
    )
    reused = len(answer.probes) - len(run)
    return (
        f"{answer.commits} commits; {searched} probes to find it, {reruns} confirming rerun"
        f"{'s' if reruns != 1 else ''}{again}, {reused} reused; state in {answer.state_file}"
    )


def _change(probe: Probe) -> str:
    if probe.change is None:
        return "no value"
    return f"{fmt.pct(probe.change)}, interval {fmt.interval(probe.ci_low, probe.ci_high)}"


def _subject(subject: str, text: _Format) -> str:
    return f' "{text(visible(subject)[:80])}"' if subject else ""


def _code(sha: str) -> str:
    return f"`{md_escape(sha[:12])}`"
