"""Reading a Megatron-LM training log line by line into runs (:mod:`.megatron_log`).

The records and their shapes are described in :mod:`.megatron_log`, which builds the
profiles from the runs read here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from perfci.formats.caps import Budget, budget

__all__ = [
    "BATCH",
    "ELAPSED",
    "MEMORY_FIELDS",
    "NAN",
    "NS_PER_MS",
    "ONE_LINE",
    "SKIPPED",
    "TIMER_ENTRY",
    "Interval",
    "Reader",
    "Run",
]

NS_PER_MS = 1e6
BYTES_PER_MB = 1024 * 1024  # report_memory: mega_bytes = 1024.0 * 1024.0
_NUMBER = r"[-+]?\d{1,30}(?:\.\d{0,30})?(?:[eE][-+]?\d{1,4})?"
_NUMBER_TEXT = re.compile(_NUMBER)

# " iteration      50/    5000 |" (Megatron-DeepSpeed: the same; some forks "==> iteration").
_ITERATION = re.compile(r"(?<![\w-])iteration\s+(?P<n>\d{1,15})\s*/\s*(?P<of>\d{1,15})\s*\|")
ELAPSED = re.compile(r"^elapsed time per iteration \((?P<unit>ms|s)\)$")
_TIMESTAMP = re.compile(r"\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\]\s+$")
_TIMER_HEADER = re.compile(
    r"(?P<kind>\(min, max\) time|(?<![\w)])max time|(?<!\w)times) across ranks \(ms\):\s*$"
)
# "    forward-backward ......: (1.00, 2.00)": the name and a space, padded with dots to 48.
TIMER_ENTRY = re.compile(
    rf"(?:^|\s)(?P<name>[^\s.]\S*?) \.*: (?:\((?P<min>{_NUMBER}), (?P<max>{_NUMBER})\)"
    rf"|(?P<value>{_NUMBER}))\s*$"
)
_TIMER_ALL_NAME = re.compile(r"(?:^|\s)(?P<name>[^\s:]\S*?):\s*$")
_TIMER_ALL_RANK = re.compile(rf"(?:^|\s)rank\s+(?P<rank>\d{{1,9}}): (?P<value>{_NUMBER})\s*$")
_TIMER_LINE = re.compile(r"(?:^|[\s:\]>])time \(ms\) \|(?P<fields>.*)$")  # old Megatron
_DEEPSPEED_TIMER = re.compile(r"\[Rank \d+\] time \(ms\)")  # DeepSpeed's engine timers
# "[Rank 0] (after 10 iterations) memory (MB) | allocated: …", found from its literal end (see
# ``_memory_line``).
_MEMORY_END = ") memory (MB) |"
_MEMORY_FIELDS = re.compile(r"\) memory \(MB\) \|(?P<fields>.*)$")
_RANK_BEFORE = re.compile(r"\[Rank (?P<rank>\d{1,9})\] \Z")
_ARGS_START = re.compile(r"-{24} arguments -{24}")
# "  log_interval ........ 10": two spaces, the name, dots to column 50, the value (no colon).
# The value runs to the line's last non-blank: ``\S(?:.*\S)?``, what the lazy ``\S.*?\s*$``
# took, without trying ``\s*$`` from every character of a long blank run (issue 31).
_ARG = re.compile(r"(?<![\w.])(?P<name>[a-z][a-z0-9_]*) \.{3,} (?P<value>\S(?:.*\S)?)\s*$")
_LOADED_START = "successfully loaded checkpoint from "
_LOADED = re.compile(r"successfully loaded checkpoint from .* at iteration (?P<n>\d{1,15})")

ONE_LINE = "time (ms)"  # the shape of old Megatron's one-line timers
SKIPPED = "number of skipped iterations"
NAN = "number of nan iterations"
BATCH = "global batch size"
#: Timers that time one event, not the iterations of an interval.
_ONE_OFF_TIMERS = frozenset(
    {
        "save-checkpoint",
        "save-checkpoint-non-persistent",
        "load-checkpoint",
        "model-and-optimizer-setup",
        "train/valid/test-data-iterators-setup",
        "evaluate",
    }
)
#: Arguments (of Megatron's ``arguments`` block) kept as metadata.
_ARGS = frozenset(
    {
        "log_interval",
        "train_iters",
        "world_size",
        "data_parallel_size",
        "tensor_model_parallel_size",
        "pipeline_model_parallel_size",
        "context_parallel_size",
        "expert_model_parallel_size",
        "micro_batch_size",
        "global_batch_size",
        "seq_length",
        "num_layers",
        "hidden_size",
        "timing_log_level",
        "timing_log_option",
    }
)
MEMORY_FIELDS = (
    ("max allocated", "peak allocated memory"),
    ("max reserved", "peak reserved memory"),
)


@dataclass(slots=True)
class Interval:
    """One iteration line: the interval since the previous one."""

    iteration: int
    line: int
    elapsed_ns: float
    fields: dict[str, float]
    raw: str  # the fields as printed: a repeated line is a duplicate, not a new run


@dataclass(slots=True)
class Run:
    """One training run of the log: its arguments, iteration lines, timers and memory."""

    args: dict[str, str] = field(default_factory=dict)
    loaded: int | None = None
    train_iters: int | None = None
    intervals: list[Interval] = field(default_factory=list)
    # timer name → (interval index, max ms, min ms or None) per interval it was printed in
    timers: dict[str, list[tuple[int, float, float | None]]] = field(default_factory=dict)
    timer_shapes: dict[str, str] = field(default_factory=dict)  # timer name → block kind
    other_timers: dict[str, float] = field(default_factory=dict)
    timed: int = -1  # the last interval a timer block was attached to
    memory: dict[int | None, dict[str, float]] = field(default_factory=dict)
    memory_reports: int = 0
    # What the caps have counted (see Reader): per memory field its ranks so far and the
    # first one, and the measures seen.
    memory_ranks: dict[str, tuple[int, int | None]] = field(default_factory=dict)
    measured: set[str] = field(default_factory=set)
    timestamps: tuple[str, str] | None = None  # the first and the last
    duplicates: int = 0
    unreadable: int = 0


@dataclass(slots=True)
class Block:
    """A timer block being read: its shape and ``name → (max ms, min ms or None)``."""

    kind: str
    entries: dict[str, tuple[float, float | None]] = field(default_factory=dict)
    current: str | None = None  # the ``times across ranks`` shape: the timer being read
    ranks: list[float] = field(default_factory=list)


class Reader:
    """Feeds the log line by line into runs."""

    def __init__(
        self, counted: Budget | None = None, measures: frozenset[str] = frozenset()
    ) -> None:
        self.runs: list[Run] = [Run()]
        self.block: Block | None = None
        self.warnings: list[str] = []
        # Metrics as they come, within a service upload's caps (issue 31): a run's step, each
        # of its ``measures`` (fields of the iteration lines), per-interval timers and memory
        # peaks; a further interval is a sample of the step and of each timer.
        self.counted = counted or budget("", "")
        self.measures = measures

    @property
    def run(self) -> Run:
        return self.runs[-1]

    def _new_run(self) -> Run:
        if self.run.intervals:
            self.runs.append(Run())
        return self.run

    def feed(self, number: int, text: str) -> None:
        if self.block is not None and self._block_line(text):
            return
        if "iteration" in text and (self._iteration(number, text) or self._loaded(text)):
            return
        if "across ranks (ms):" in text and (header := _TIMER_HEADER.search(text)):
            self.block = Block(kind=header["kind"])
        elif "memory (MB)" in text and (memory := _memory_line(text)):
            self._memory(*memory)
        elif " ...." in text and (arg := _ARG.search(text)):
            if arg["name"] in _ARGS:
                self.run.args[arg["name"]] = arg["value"]
        elif "time (ms) |" in text and (timers := _TIMER_LINE.search(text)):
            if not _DEEPSPEED_TIMER.search(text):
                self._one_line_timers(timers["fields"])
        elif "before the start of training step" in text or (
            "arguments" in text and _ARGS_START.search(text)
        ):
            self._new_run()

    def close(self) -> None:
        if self.block is not None:
            self._end_block()

    # --- the kinds of line ---

    def _iteration(self, number: int, text: str) -> bool:
        match = _ITERATION.search(text)
        if match is None:
            return False
        rest = text[match.end() :]
        fields = _fields(rest)
        elapsed = _elapsed_ns(fields)
        if elapsed is None:
            return False  # an iteration line of another tool (NeMo's "train_step_timing")
        run = self.run
        iteration = int(match["n"])
        previous = run.intervals[-1] if run.intervals else None
        if previous is not None and iteration <= previous.iteration:
            if iteration == previous.iteration and rest.strip() == previous.raw:
                run.duplicates += 1
                return True
            run = self._new_run()
            self.warnings.append(
                f"line {number}: the iteration numbers start again ({previous.iteration} → "
                f"{iteration}): a new run"
            )
        if elapsed <= 0.0:
            run.unreadable += 1
            return True
        run.train_iters = int(match["of"])
        if stamp := _TIMESTAMP.search(text, 0, match.start()):
            first = run.timestamps[0] if run.timestamps else stamp["ts"]
            run.timestamps = (first, stamp["ts"])
        values = _values(fields)
        if run.intervals:
            self.counted.sample()  # the step metric's samples_ns
        else:
            self.counted.metric()  # the step metric
        for key in self.measures & values.keys():
            if key not in run.measured and values[key] >= 0:
                run.measured.add(key)
                self.counted.metric()
        run.intervals.append(Interval(iteration, number, elapsed, values, raw=rest.strip()))
        return True

    def _loaded(self, text: str) -> bool:
        # Tried where the sentence first starts only: ``.*`` already reaches every later
        # "at iteration", so a later start cannot match where the first did not, and a line of
        # starts cost a quadratic time (issue 31).
        start = text.find(_LOADED_START)
        if start < 0 or not (match := _LOADED.match(text, start)):
            return False
        self.run.loaded = int(match["n"])
        return True

    def _memory(self, rank: int | None, fields: str) -> None:
        values = _values(_fields(fields))
        peaks = self.run.memory.setdefault(rank, {})
        for key, _ in MEMORY_FIELDS:
            if (value := values.get(key)) is not None and value >= 0:
                if key not in peaks:
                    self._count_peak(key, rank)
                peaks[key] = max(peaks.get(key, 0.0), value * BYTES_PER_MB)
        self.run.memory_reports += 1

    def _count_peak(self, key: str, rank: int | None) -> None:
        """A memory field's first rank is its ``measure``; from the second on, every rank
        (but ``None``, a log without ranks) is a ``counter`` too (see ``_memory_metrics``)."""
        seen, first = self.run.memory_ranks.get(key, (0, rank))
        self.run.memory_ranks[key] = (seen + 1, first)
        if seen == 0:
            self.counted.metric()
            return
        self.counted.metric((rank is not None) + (seen == 1 and first is not None))

    def _one_line_timers(self, text: str) -> None:
        block = Block(kind=ONE_LINE)
        for name, value in _values(_fields(text)).items():
            self._entry(block, name, (value, None))
        self.block = block
        self._end_block()

    def _block_line(self, text: str) -> bool:
        """Whether ``text`` continues the timer block; ends the block when it does not."""
        block = self.block
        assert block is not None
        if block.kind == "times":
            if rank := _TIMER_ALL_RANK.search(text):
                if (value := _number(rank["value"])) is not None:
                    block.ranks.append(value)
                return True
            if name := _TIMER_ALL_NAME.search(text):
                self._close_all_rank_timer(block)
                block.current = name["name"]
                return True
        elif entry := TIMER_ENTRY.search(text):
            high = _number(entry["value"] or entry["max"])
            low = None if entry["min"] is None else _number(entry["min"])
            if high is not None:
                self._entry(block, entry["name"], (high, low))
            return True
        self._end_block()
        return False

    def _close_all_rank_timer(self, block: Block) -> None:
        if block.current is not None and block.ranks:
            self._entry(block, block.current, (max(block.ranks), min(block.ranks)))
        block.current, block.ranks = None, []

    def _entry(self, block: Block, name: str, value: tuple[float, float | None]) -> None:
        """A timer of the block, counted as it comes: a new name is a metric when the block
        will be an interval's timers (bar a one-off event's, known at its end), a sample of
        its metric otherwise."""
        run = self.run
        if name not in block.entries:
            if name in run.timers:
                self.counted.sample()
            elif len(run.intervals) - 1 > run.timed:
                self.counted.metric()
        block.entries[name] = value

    def _end_block(self) -> None:
        """File the block: the interval's timers when it is the first block after an iteration
        line and times no one-off event, else one-off durations."""
        block, run = self.block, self.run
        assert block is not None
        self.block = None
        self._close_all_rank_timer(block)
        index = len(run.intervals) - 1
        per_interval = (
            index >= 0 and run.timed < index and not (_ONE_OFF_TIMERS & block.entries.keys())
        )
        for name, (max_ms, min_ms) in block.entries.items():
            if per_interval:
                run.timers.setdefault(name, []).append((index, max_ms, min_ms))
                run.timer_shapes[name] = block.kind
            else:
                run.other_timers[name] = max_ms
        if per_interval:
            run.timed = index


def _fields(text: str) -> dict[str, str]:
    """``key: value`` cells of a ``|``-separated record, as printed."""
    fields: dict[str, str] = {}
    for cell in text.split("|"):
        key, colon, value = cell.partition(":")
        if colon and (key := key.strip()):
            fields[key] = value.strip()
    return fields


def _values(fields: Mapping[str, str]) -> dict[str, float]:
    """The cells that start with a number (``496.3 (avg 496.1)`` → 496.3)."""
    values: dict[str, float] = {}
    for key, text in fields.items():
        if (match := _NUMBER_TEXT.match(text)) and (value := _number(match.group())) is not None:
            values[key] = value
    return values


def _number(text: str) -> float | None:
    """A printed number; ``None`` beyond what any counter, time or rate reaches (``1e999``)."""
    value = float(text)
    return value if abs(value) < 1e30 else None


def _elapsed_ns(fields: Mapping[str, str]) -> float | None:
    """The elapsed time per iteration in ns; ``None`` when the line has none, -1 when it is
    not a finite, positive number."""
    for key, text in fields.items():
        if unit := ELAPSED.match(key):
            match = _NUMBER_TEXT.fullmatch(text)
            value = (_number(match.group()) if match else None) or -1.0
            scale = NS_PER_MS if unit["unit"] == "ms" else NS_PER_MS * 1000
            return value * scale if value > 0.0 else -1.0
    return None


def _memory_line(text: str) -> tuple[int | None, str] | None:
    """The rank and the fields of Megatron's ``report_memory`` line, else ``None``.

    What ``(?:\\[Rank (\\d{1,9})\\] )?\\([^)]*\\) memory \\(MB\\) \\|(.*)$`` found with
    ``search``, in linear time: that pattern read on from every "(" to the next ")", and a line
    of "(" took a quadratic time (issue 31). The match starts at the first "(" after the ")"
    before the literal ``) memory (MB) |`` (or at ``[Rank N] `` just before that "("), at the
    first such literal that has one.
    """
    end = text.find(_MEMORY_END)
    while end >= 0:
        opening = text.find("(", text.rfind(")", 0, end) + 1, end)
        if opening >= 0 and (fields := _MEMORY_FIELDS.match(text, end)):
            rank = _RANK_BEFORE.search(text, max(0, opening - 17), opening)
            return (int(rank["rank"]) if rank else None), fields["fields"]
        end = text.find(_MEMORY_END, end + 1)
    return None
