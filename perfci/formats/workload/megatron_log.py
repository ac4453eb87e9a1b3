"""Megatron-LM's training log: the stdout of ``pretrain_gpt.py`` & co. that every Megatron CI
job prints, read for its iteration time, throughput, timers and memory.

What Megatron prints (NVIDIA/Megatron-LM ``megatron/training/training.py::training_log``, before
it ``megatron/training.py``; microsoft/Megatron-DeepSpeed's copy adds fields), from the last rank,
one line every ``--log-interval`` iterations (current versions also after the first iteration)::

     [2025-11-28 18:48:17.123456] iteration       50/    5000 | consumed samples:  51200 |
     elapsed time per iteration (ms): 61674.3 | throughput per GPU (TFLOP/s/GPU): 68.2 |
     learning rate: 1.000000E-04 | global batch size:  1024 | lm loss: 6.258318E+00 |
     loss scale: 1.0 | grad norm: 1.520 | number of skipped iterations:   0 |
     number of nan iterations:   0 |

(one line; older versions print no timestamp, or one without microseconds). After the first
logged iterations (and around checkpoint saves), ``report_memory`` (``megatron/training/
utils.py``; MB = 1024² bytes), one line per model-parallel rank of data-parallel rank 0::

    [Rank 0] (after 10 iterations) memory (MB) | allocated: 1550.40 | max allocated: 20561.49 |
    reserved: 28404.00 | max reserved: 28404.00

and, with ``--timing-log-level`` ≥ 1, ``Timers.log`` (``megatron/core/timers.py``) in one of
``--timing-log-option``'s shapes (``minmax`` by default; current versions log it through
``logging``, whose prefix ``INFO:megatron.core.timers:`` goes before the header)::

    (min, max) time across ranks (ms):            max time across ranks (ms):
        forward-backward ...............: (1.0, 2.0)     forward-backward ........: 2.00
    times across ranks (ms):
      forward-backward:
         rank  0: 1.00

or, in old Megatron (``megatron/global_vars.py``), one line of rank 0's times:
``time (ms) | forward-compute: 1.23 | backward-compute: 4.56``.

What becomes which metric (times in ns):

* ``iteration`` (``step``, gpu): one sample per logged line, its ``elapsed time per iteration
  (ms)`` (``(s)`` in BigScience's Megatron-DeepSpeed): the ``interval-time`` timer over the
  iterations since the previous line, divided by their number, skipped ones included. Megatron's
  timers synchronise the device at both ends (``torch.cuda.synchronize``): this is the GPU's time
  as the host sees it, marked ``gpu`` like ``megatron_trace``'s iteration. Warm-up: the first
  interval of a run (its first iteration compiles, grows the allocator, waits for a checkpoint)
  when there are at least 3; when the first line is off the ``--log-interval`` grid (the first
  iteration printed on its own) the next interval too when there are at least 4, as it averages
  that iteration in again (current Megatron keeps its accumulators) or starts right after it;
  then any further leading interval ``_steps.detect_warmup`` finds slow. ``--option warmup=N``
  sets the count instead. ``total_ns`` is what the logged iterations took: each sample times
  the iterations it averages (those since the previous line; after a lone first-iteration
  line, those since the start), and ``avg_ns`` that total per iteration
  (``attrs["iterations"]``, ``profile.steps``).
* ``throughput per GPU`` (``TFLOP/s/GPU``, in ``flop/s``), ``energy per iteration per GPU``
  (``J``), and Megatron-DeepSpeed's ``samples per second``, ``tokens per second per GPU``
  (``tgs``) and ``TFLOPs``: ``measure`` metrics with one sample per line (the same warm-up),
  their steady mean as ``value``; rates are higher-is-better. Loss, learning rate, grad norm and
  loss scale are not performance: the last line's values go to ``metadata["last_values"]``.
* each timer printed after an iteration line: a ``range`` (gpu, as above) with one sample per
  interval, its maximum across ranks (the minimums in ``attrs``). Megatron divides a timer's
  interval total by ``--log-interval``, also for the lone first-iteration line: that one is
  scaled back to the iteration's time. ``total_ns`` sums the intervals' totals (sample × log
  interval), the first-iteration line left out (the next line holds it again in current
  Megatron). Timers printed elsewhere (setup, checkpoint save and load, anything before the first
  iteration line) time one event, not iterations: their max in ms goes to
  ``metadata["other_timers_ms"]``.
* ``peak allocated memory`` / ``peak reserved memory`` (``measure``, bytes, lower is better): the
  largest ``max allocated`` / ``max reserved`` of every ``report_memory`` line, over ranks; with
  several ranks, each rank's own as a ``counter`` scoped ``rank N``.
* ``profile.steps``: the iterations the logged intervals cover (the last logged iteration minus
  the run's start: ``successfully loaded checkpoint … at iteration N``, else the first line's).

Metadata: ``train_iters``, the first and last logged iteration, ``log_interval`` (from the
``arguments`` block Megatron prints first, else the spacing of the lines), the global batch size
(a warning when it changes: ``--rampup-batch-size`` mixes iteration times of different sizes),
skipped and NaN iteration counts (a warning when not 0), parallel sizes and intervals from the
arguments (``metadata["arguments"]``), the first and last timestamp.

Several runs in one log (a restart appended to the same file: a new ``arguments`` block or
``[before the start of training step]`` after iteration lines, or iteration numbers going back)
give one profile per run, labelled ``megatron #N``: each run has its own warm-up and may have
another configuration, so their intervals cannot be one series with leading warm-up only. A log
of one run gives one profile labelled ``megatron``.

Noise is skipped line by line (records are found anywhere in a line): rank prefixes of
torchrun/srun (``[default7]:``, `` 7: ``), logger prefixes, warnings, NCCL output, tqdm,
validation results. A last line cut short is left out with a warning.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfci.core.errors import ConfigError, NoMeasurements, ParseError
from perfci.core.model import Device, Profile
from perfci.formats._steps import detect_warmup, step_metric
from perfci.formats._text_lines import open_text
from perfci.formats.caps import budget
from perfci.formats.workload._detectors import MEGATRON_LOG
from perfci.formats.workload._megatron_metrics import (
    MEASURES,
    Schedule,
    averaged_over,
    int_value,
    line_schedule,
    measures,
    memory_metrics,
    timer_metric,
)
from perfci.formats.workload._megatron_reader import (
    BATCH,
    ELAPSED,
    NAN,
    SKIPPED,
    TIMER_ENTRY,
    Reader,
    Run,
)

NAME = MEGATRON_LOG.name
DESCRIPTION = MEGATRON_LOG.description
sniff = MEGATRON_LOG.sniff

LABEL = "megatron"


#: Fields kept neither as metrics nor as last values.
_NOT_VALUES = frozenset({SKIPPED, NAN, BATCH, "power per GPU (W/GPU)"})


# --- parsing --------------------------------------------------------------------------------


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """One profile per training run of the log at ``path`` (plain or gzip)."""
    source = str(path)
    warmup = _warmup_option(options)
    reader = Reader(budget(source, NAME), measures=frozenset(MEASURES))
    with open_text(path, format=NAME) as handle:
        for number, line in enumerate(handle, 1):
            if not line.endswith("\n") and _cut_short(line):
                reader.warnings.append(
                    f"line {number}, the file's last line, was cut short: left out"
                )
                break
            reader.feed(number, line.rstrip("\r\n"))
    reader.close()
    runs = [run for run in reader.runs if run.intervals]
    if not runs:
        unreadable = sum(run.unreadable for run in reader.runs)
        if unreadable:
            raise ParseError(
                f"{unreadable} iteration line(s) but none with a positive elapsed time per "
                "iteration (ms)",
                source=source,
                format=NAME,
            )
        raise NoMeasurements(
            "no Megatron-LM iteration line found: expected ' iteration N/ M | "
            "consumed samples: … | elapsed time per iteration (ms): T | …' (training_log). "
            "Megatron prints it on the last rank only, once --log-interval iterations have "
            "run: is this that rank's output, and did training get that far?",
            source=source,
            format=NAME,
        )
    empty = len([run for run in reader.runs if not run.intervals and run.args])
    if empty:
        reader.warnings.append(
            f"{empty} run(s) of the log printed their arguments but no iteration line: left out"
        )
    profiles = [_profile(run, source=source, warmup=warmup) for run in runs]
    for index, profile in enumerate(profiles, start=1):
        profile.warnings[:0] = reader.warnings
        if len(profiles) > 1:
            profile.label = f"{LABEL} #{index}"
            profile.metadata["run"] = index
    return profiles


def _warmup_option(options: Mapping[str, str]) -> int | None:
    text = options.get("warmup")
    if text is None or text == "":
        return None
    if not (text.isascii() and text.isdigit()):
        raise ConfigError(
            f"{NAME}: warmup must be a whole number of logged intervals, not {text!r}"
        )
    return int(text)


def _cut_short(line: str) -> bool:
    """Whether the file's last line, which has no line end, is a record cut short (an
    iteration line is complete with its closing ``|``)."""
    if line.rstrip().endswith("|"):
        return False
    return any(mark in line for mark in ("iteration", "memory (MB)", "(ms)", " ....")) or bool(
        TIMER_ENTRY.search(line)
    )


def _warmup(samples: list[float], schedule: Schedule, forced: int | None) -> int:
    if forced is not None:
        return min(forced, len(samples))
    count = len(samples)
    structural = 0
    if count >= 3:
        structural = 2 if schedule.off_grid_first and count >= 4 else 1
    return structural + detect_warmup(samples[structural:])


def _profile(run: Run, *, source: str, warmup: int | None) -> Profile:
    schedule = line_schedule(run)
    samples = [interval.elapsed_ns for interval in run.intervals]
    warm = _warmup(samples, schedule, warmup)
    step = step_metric("iteration", samples, device=Device.GPU, warmup=warm)
    iterations = run.intervals[-1].iteration - schedule.start
    # Each sample is an average over its interval's iterations: the total is what those
    # intervals took, not the sum of their averages (issue 33: 10x short at --log-interval 10).
    step.total_ns = math.fsum(
        sample * count for sample, count in zip(samples, averaged_over(run, schedule), strict=True)
    )
    step.avg_ns = step.total_ns / iterations if iterations > 0 else step.avg_ns
    step.attrs = {
        "definition": "Megatron's elapsed time per iteration, one sample per logged interval",
        "log_interval": schedule.log_interval,
        "iterations": iterations,
    }
    profile = Profile(
        label=LABEL,
        format=NAME,
        source=source,
        metrics=[step],
        steps=iterations,
        metadata=_metadata(run, schedule),
    )
    profile.metrics += measures(run, warm)
    profile.metrics += [
        timer_metric(name, entries, shape=run.timer_shapes[name], warm=warm, schedule=schedule)
        for name, entries in run.timers.items()
    ]
    profile.metrics += memory_metrics(run)
    profile.warnings += _run_warnings(run, profile.metadata, warm)
    return profile


# --- metadata and warnings ------------------------------------------------------------------


def _metadata(run: Run, schedule: Schedule) -> dict[str, Any]:
    first, last = run.intervals[0], run.intervals[-1]
    batches = [int(v) for i in run.intervals if (v := i.fields.get(BATCH)) is not None]
    meta: dict[str, Any] = {
        "train_iters": run.train_iters,
        "first_iteration": first.iteration,
        "last_iteration": last.iteration,
        "start_iteration": schedule.start,
        "logged_intervals": len(run.intervals),
        "log_interval": schedule.log_interval,
        "log_interval_from": "arguments" if schedule.from_arguments else "line spacing",
        "first_line": first.line,
        "time_unit": "ms (converted to ns)",
    }
    if batches:
        meta["global_batch_size"] = batches[-1]
        if len(set(batches)) > 1:
            meta["global_batch_sizes"] = sorted(set(batches))
    meta["skipped_iterations"] = _count(run, SKIPPED, schedule)
    meta["nan_iterations"] = _count(run, NAN, schedule)
    meta["last_values"] = {
        key: value
        for key, value in last.fields.items()
        if key not in MEASURES and key not in _NOT_VALUES and not ELAPSED.match(key)
    }
    if run.args:
        meta["arguments"] = {
            name: text if (number := int_value(text)) is None else number
            for name, text in sorted(run.args.items())
        }
    if run.other_timers:
        meta["other_timers_ms"] = dict(run.other_timers)
    if run.memory_reports:
        meta["memory_reports"] = run.memory_reports
    if run.loaded is not None:
        meta["loaded_iteration"] = run.loaded
    if run.timestamps:
        meta["first_timestamp"], meta["last_timestamp"] = run.timestamps
    return meta


def _count(run: Run, key: str, schedule: Schedule) -> int | None:
    """Skipped or NaN iterations over the run: each line counts its interval. Current Megatron
    counts the first-iteration line's again in the next line, the versions that first printed
    that line do not: the fewest iterations both readings allow."""
    counts = [int(v) for i in run.intervals if (v := i.fields.get(key)) is not None]
    if not counts:
        return None
    if schedule.off_grid_first and len(counts) > 1:
        return sum(counts[1:]) + max(0, counts[0] - counts[1])
    return sum(counts)


def _run_warnings(run: Run, meta: Mapping[str, Any], warm: int) -> list[str]:
    warnings = []
    if skipped := meta.get("skipped_iterations"):
        warnings.append(
            f"Megatron reports {skipped} skipped iteration(s) (loss-scale overflow or "
            "--iterations-to-skip): their time counts in the elapsed time per iteration"
        )
    if nans := meta.get("nan_iterations"):
        warnings.append(f"Megatron reports {nans} iteration(s) with a NaN or infinite loss")
    if "global_batch_sizes" in meta:
        sizes = ", ".join(str(size) for size in meta["global_batch_sizes"])
        warnings.append(
            f"the global batch size changed during the run ({sizes}; --rampup-batch-size?): "
            "iteration times of different batch sizes are mixed"
        )
    if len(run.intervals) < 3 and warm == 0:
        warnings.append(
            f"only {len(run.intervals)} logged interval(s): none is left out as warm-up"
        )
    if run.duplicates:
        warnings.append(f"{run.duplicates} repeated iteration line(s) read once")
    if run.unreadable:
        warnings.append(
            f"{run.unreadable} iteration line(s) without a positive elapsed time: left out"
        )
    return warnings
