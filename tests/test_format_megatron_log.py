"""Megatron-LM training logs, written here in the shapes Megatron's own source prints (each helper
quotes its format strings); no public log is in ../shared/corpus.

Sources: NVIDIA/Megatron-LM ``megatron/training/training.py::training_log`` (commit 001b00c2),
the older ``megatron/training.py`` (003ad9f5), ``megatron/core/timers.py`` (00caa53a),
``megatron/global_vars.py`` (00ac56ab: the one-line timers), ``megatron/training/utils.py::
report_memory`` (00caa53a), ``megatron/training/arguments.py::_print_args``; and
microsoft/Megatron-DeepSpeed ``megatron/training.py::training_log`` (00caa0e9).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from perfci.cli.main import main
from perfci.core.errors import ConfigError, NoMeasurements, ParseError, UnknownFormatError
from perfci.core.model import Better, Device, Metric, MetricKind, Profile
from perfci.formats import registry
from perfci.usecases.submit.repeats import parse_repeats

K = MetricKind
MS = 1e6  # ns
MB = 1024 * 1024  # bytes: report_memory's mega_bytes = 1024.0 * 1024.0


def iteration_line(
    n: int,
    ms: float,
    *,
    of: int = 50,
    batch: int = 64,
    tflops: float | None = 100.0,
    skipped: int = 0,
    nan: int = 0,
    stamp: str | None = "2025-11-28 18:48:17.123456",
    loss: float = 5.5,
) -> str:
    """training.py (001b00c2)::training_log::

    log_string = f" [{datetime.now().strftime('%Y-%m-%d %H:%M:%S.%f')}]"
    log_string += ' iteration {:8d}/{:8d} |'.format(iteration, args.train_iters)
    log_string += ' consumed samples: {:12d} |'.format(args.consumed_train_samples)
    log_string += ' elapsed time per iteration (ms): {:.1f} |'.format(...)
    log_string += f' throughput per GPU (TFLOP/s/GPU): {throughput:.1f} |'   # --log-throughput
    log_string += f' learning rate: {learning_rate:.6E} |'
    log_string += f' global batch size: {batch_size:5d} |'
    log_string += ' {}: {:.6E} |'.format(key, avg)                          # lm loss
    log_string += f' loss scale: {loss_scale:.1f} |'
    log_string += f' grad norm: {grad_norm:.3f} |'
    log_string += ' number of skipped iterations: {:3d} |'.format(...)
    log_string += ' number of nan iterations: {:3d} |'.format(...)
    """
    line = f" [{stamp}]" if stamp is not None else ""
    line += f" iteration {n:8d}/{of:8d} |"
    line += f" consumed samples: {n * batch:12d} |"
    line += f" elapsed time per iteration (ms): {ms:.1f} |"
    if tflops is not None:
        line += f" throughput per GPU (TFLOP/s/GPU): {tflops:.1f} |"
    line += f" learning rate: {1.5e-4:.6E} |"
    line += f" global batch size: {batch:5d} |"
    line += f" lm loss: {loss:.6E} |"
    line += f" loss scale: {1.0:.1f} |"
    line += f" grad norm: {1.234:.3f} |"
    line += f" number of skipped iterations: {skipped:3d} |"
    line += f" number of nan iterations: {nan:3d} |"
    return line


def legacy_iteration_line(n: int, ms: float, *, of: int = 50) -> str:
    """megatron/training.py (003ad9f5): no timestamp, no throughput, ``learning rate: {:.3E}``."""
    return (
        f" iteration {n:8d}/{of:8d} | consumed samples: {n * 32:12d} |"
        f" elapsed time per iteration (ms): {ms:.1f} | learning rate: {1e-4:.3E} |"
        f" global batch size: {32:5d} | lm loss: {7.25:.6E} | loss scale: {65536.0:.1f} |"
        f" number of skipped iterations: {0:3d} | number of nan iterations: {0:3d} |"
    )


def deepspeed_iteration_line(n: int, ms: float, *, unit: str = "ms") -> str:
    """microsoft/Megatron-DeepSpeed training.py (00caa0e9): consumed tokens, actual seqlen,
    ``samples per second: {:.3f}``, ``tokens per gpu per second (tgs): {:.3f}``,
    ``TFLOPs: {:.2f}`` (BigScience's copy prints ``elapsed time per iteration (s)``)."""
    elapsed = f"{ms:.1f}" if unit == "ms" else f"{ms / 1000:.2f}"
    return (
        f" iteration {n:8d}/{317892:8d} | consumed samples: {n * 96:12d} |"
        f" consumed tokens: {n * 96 * 4096:12d} |"
        f" elapsed time per iteration ({unit}): {elapsed} | learning rate: {3e-4:.3E} |"
        f" global batch size: {96:5d} | lm loss: {11.17:.6E} | loss scale: {1.0:.1f} |"
        f" actual seqlen: {4096:5d} | number of skipped iterations: {0:3d} |"
        f" number of nan iterations: {0:3d} | samples per second: {96000 / ms:.3f} |"
        f" tokens per gpu per second (tgs): {96000 / ms * 4096 / 8:.3f} | TFLOPs: {38.61:.2f} |"
    )


def timers_minmax(entries: dict[str, tuple[float, float]], *, logger: bool = True) -> list[str]:
    """timers.py (00caa53a)::_get_global_min_max_time_string, through ``logger.info``::

    output_string = '(min, max) time across ranks (ms):'
    output_string += '\\n    {}: ({:.2f}, {:.2f})'.format((name + ' ').ljust(48, '.'), ...)
    """
    header = "(min, max) time across ranks (ms):"
    lines = [f"INFO:megatron.core.timers:{header}" if logger else header]
    for name, (low, high) in entries.items():
        lines.append("    {}: ({:.2f}, {:.2f})".format((name + " ").ljust(48, "."), low, high))
    return lines


def timers_max(entries: dict[str, float]) -> list[str]:
    """``--timing-log-option max``: ``'\\n    {}: {:.2f}'.format(...ljust(48, '.'), max)``."""
    lines = ["max time across ranks (ms):"]
    for name, high in entries.items():
        lines.append("    {}: {:.2f}".format((name + " ").ljust(48, "."), high))
    return lines


def timers_all(entries: dict[str, list[float]]) -> list[str]:
    """``--timing-log-option all``: ``'\\n  {}:'.format(name)`` then, per rank,
    ``'\\n     rank {:2d}: {:.2f}'.format(rank, time)``."""
    lines = ["times across ranks (ms):"]
    for name, per_rank in entries.items():
        lines.append(f"  {name}:")
        lines += [f"     rank {rank:2d}: {value:.2f}" for rank, value in enumerate(per_rank)]
    return lines


def memory_line(rank: int, after: int, max_allocated: float, max_reserved: float) -> str:
    """utils.py (00caa53a)::report_memory::

    string = name + ' memory (MB)'
    string += f" | allocated: {torch.cuda.memory_allocated() / mega_bytes:.2f}"   # and max ...
    print("[Rank {}] {}".format(torch.distributed.get_rank(), string), flush=True)
    """
    return (
        f"[Rank {rank}] (after {after} iterations) memory (MB) | allocated: {1550.4:.2f}"
        f" | max allocated: {max_allocated:.2f} | reserved: {max_reserved - 100:.2f}"
        f" | max reserved: {max_reserved:.2f}"
    )


def arguments(**values: object) -> list[str]:
    """arguments.py::_print_args: the banner, ``'  {} {} {}'.format(arg, '.' * (48 -
    len(arg)), value)`` sorted, and the closing banner."""
    lines = ["------------------------ arguments ------------------------"]
    for name in sorted(values):
        lines.append("  {} {} {}".format(name, "." * (48 - len(name)), values[name]))
    lines.append("-------------------- end of arguments ---------------------")
    return lines


SETUP = [
    "using world size: 8, data-parallel size: 2, context-parallel size: 1, hierarchical "
    "context-parallel sizes: None, tensor-model-parallel size: 2, pipeline-model-parallel size: 2",
    *arguments(
        log_interval=10,
        train_iters=50,
        global_batch_size=64,
        micro_batch_size=2,
        tensor_model_parallel_size=2,
        pipeline_model_parallel_size=2,
        world_size=8,
        data_path="['/data/my-gpt_text_document']",
    ),
    "> building GPT model ...",
    *timers_minmax(
        {"model-and-optimizer-setup": (1020.90, 1022.97), "load-checkpoint": (4542.1, 4542.1)}
    ),
    "[before the start of training step] datetime: 2026-03-28 14:13:05.589428 ",
]


def write(tmp_path: Path, lines: list[str], *, name: str = "train.log", end: str = "\n") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + end)
    return path


def one(path: Path, **options: str) -> Profile:
    assert registry.detect(path).name == "megatron_log"
    [profile] = registry.parse_file(path, options=options)
    assert profile.format == "megatron_log"
    return profile


def metric(profile: Profile, kind: MetricKind, name: str, scope: str | None = None) -> Metric:
    found = profile.find(kind, name, scope=scope)
    assert found is not None, f"no {kind} {name!r}: {[m.key for m in profile.metrics]}"
    return found


# The current form: iteration 1 printed alone (is_first_iteration), then every 10 iterations.
CURRENT = [
    *SETUP,
    iteration_line(1, 9000.0, tflops=11.1),
    # training_log's order: the line, report_theoretical_memory and report_memory, the timers.
    "Theoretical memory footprints: weight and optimizer=9884.48 MB",
    memory_line(0, 1, 20561.49, 28404.0),
    memory_line(2, 1, 18907.75, 26000.0),
    # Megatron divides every timer by --log-interval, iteration 1's alone too: 8000 ms → 800.00.
    *timers_minmax({"forward-backward": (790.0, 800.0), "optimizer": (45.0, 50.0)}),
    iteration_line(10, 1800.0, tflops=55.5),
    *timers_minmax({"forward-backward": (1400.0, 1500.0), "optimizer": (90.0, 100.0)}),
    iteration_line(20, 1000.0),
    *timers_minmax({"forward-backward": (780.0, 800.0), "optimizer": (45.0, 50.0)}),
    iteration_line(30, 1010.0, tflops=99.0),
    *timers_minmax({"forward-backward": (790.0, 810.0), "optimizer": (46.0, 51.0)}),
    iteration_line(40, 990.0, tflops=101.0),
    *timers_minmax({"forward-backward": (770.0, 790.0), "optimizer": (44.0, 49.0)}),
    *timers_minmax({"save-checkpoint": (24895.07, 24895.13)}),
    "[after training is done] datetime: 2026-03-28 14:20:00.000000 ",
]


def test_each_logged_interval_is_an_iteration_sample_and_the_first_two_are_warmup(
    tmp_path: Path,
) -> None:
    profile = one(write(tmp_path, CURRENT))
    assert profile.label == "megatron"
    step = metric(profile, K.STEP, "iteration")
    assert step.device is Device.GPU
    assert step.samples_ns == [9000 * MS, 1800 * MS, 1000 * MS, 1010 * MS, 990 * MS]
    assert step.calls == 5
    # Iteration 1 alone, then 1..10 (accumulators not reset after iteration 1): both warm-up.
    assert step.warmup == 2
    assert step.steady_samples() == [1000 * MS, 1010 * MS, 990 * MS]
    assert profile.steps == 40  # iterations 1..40
    meta = profile.metadata
    assert (meta["first_iteration"], meta["last_iteration"], meta["train_iters"]) == (1, 40, 50)
    assert (meta["log_interval"], meta["log_interval_from"]) == (10, "arguments")
    assert meta["start_iteration"] == 0
    assert meta["global_batch_size"] == 64
    assert meta["arguments"]["tensor_model_parallel_size"] == 2
    assert meta["arguments"]["world_size"] == 8
    assert "data_path" not in meta["arguments"]  # only the sizes and intervals are kept
    assert meta["first_timestamp"] == "2025-11-28 18:48:17.123456"
    assert profile.warnings == []


def test_the_iteration_total_is_the_time_of_every_iteration_not_a_sum_of_averages(
    tmp_path: Path,
) -> None:
    """Issue 33: each line's elapsed time is an average over the iterations since the last
    line; the total summed the averages (1/10 of the run's time at --log-interval 10)."""
    legacy = [
        legacy_iteration_line(n, ms) for n, ms in ((10, 700), (20, 510), (30, 500), (40, 490))
    ]
    step = metric(one(write(tmp_path, legacy)), K.STEP, "iteration")
    assert step.total_ns == pytest.approx((700 + 510 + 500 + 490) * 10 * MS)
    assert step.avg_ns == pytest.approx(step.total_ns / 40)  # per iteration, over all 40
    assert step.attrs["iterations"] == 40

    # Iteration 1 alone (divided by 1), then 1..10 (divided by 10), then every 10.
    current = metric(one(write(tmp_path, CURRENT, name="current.log")), K.STEP, "iteration")
    assert current.total_ns == pytest.approx((9000 + 1800 * 10 + (1000 + 1010 + 990) * 10) * MS)
    assert current.samples_ns == [9000 * MS, 1800 * MS, 1000 * MS, 1010 * MS, 990 * MS]

    # A resumed run: its first interval is the 5 iterations since the checkpoint's.
    resumed = [
        "  successfully loaded checkpoint from /ckpt at iteration 1005",
        *(legacy_iteration_line(n, 500.0, of=2000) for n in (1010, 1020, 1030)),
    ]
    profile = one(write(tmp_path, resumed, name="resumed.log"))
    assert metric(profile, K.STEP, "iteration").total_ns == pytest.approx(25 * 500 * MS)
    assert profile.steps == 25


def test_throughput_is_a_measure_in_flops_higher_is_better(tmp_path: Path) -> None:
    profile = one(write(tmp_path, CURRENT))
    throughput = metric(profile, K.MEASURE, "throughput per GPU")
    assert (throughput.unit, throughput.better) == ("flop/s", Better.HIGHER)
    assert throughput.samples == [11.1e12, 55.5e12, 100e12, 99e12, 101e12]
    assert throughput.warmup == 2
    assert throughput.value == pytest.approx(100e12)
    # Loss, learning rate, grad norm: not performance, their last values only.
    names = {m.name for m in profile.metrics}
    assert not names & {"lm loss", "learning rate", "grad norm", "loss scale"}
    assert profile.metadata["last_values"] == {
        "consumed samples": 40 * 64,
        "learning rate": 1.5e-4,
        "lm loss": 5.5,
        "loss scale": 1.0,
        "grad norm": 1.234,
    }


def test_timers_are_ranges_of_their_max_across_ranks_per_interval(tmp_path: Path) -> None:
    profile = one(write(tmp_path, CURRENT))
    forward = metric(profile, K.RANGE, "forward-backward")
    # Iteration 1's lone line is scaled back to that iteration's time (800.00 × 10).
    assert forward.samples_ns == [8000 * MS, 1500 * MS, 800 * MS, 810 * MS, 790 * MS]
    mins = forward.attrs["min_across_ranks_ns"]
    assert mins == [7900 * MS, 1400 * MS, 780 * MS, 790 * MS, 770 * MS]
    assert forward.warmup == 2
    # The intervals' totals (value × 10), iteration 1's line left out: line 10 holds it again.
    assert forward.total_ns == pytest.approx((1500 + 800 + 810 + 790) * 10 * MS)
    assert forward.attrs["across_ranks"] == "max"
    optimizer = metric(profile, K.RANGE, "optimizer")
    assert optimizer.samples_ns == [500 * MS, 100 * MS, 50 * MS, 51 * MS, 49 * MS]
    # Setup, checkpoint load and save are one-off durations: metadata, not per-iteration ranges.
    assert profile.metadata["other_timers_ms"] == {
        "model-and-optimizer-setup": 1022.97,
        "load-checkpoint": 4542.1,
        "save-checkpoint": 24895.13,
    }
    ranges = {m.name for m in profile.by_kind(K.RANGE)}
    assert ranges == {"forward-backward", "optimizer"}


def test_memory_reports_give_the_peak_over_ranks_in_bytes(tmp_path: Path) -> None:
    profile = one(write(tmp_path, CURRENT))
    allocated = metric(profile, K.MEASURE, "peak allocated memory")
    assert allocated.value == 20561.49 * MB
    assert (allocated.unit, allocated.better) == ("bytes", Better.LOWER)
    assert (allocated.attrs["rank"], allocated.attrs["ranks"]) == (0, 2)
    assert metric(profile, K.MEASURE, "peak reserved memory").value == 28404.0 * MB
    # Several ranks: each one's own as a counter.
    rank2 = metric(profile, K.COUNTER, "peak allocated memory", scope="rank 2")
    assert rank2.value == 18907.75 * MB
    assert metric(profile, K.COUNTER, "peak reserved memory", scope="rank 2").value == 26000 * MB
    assert profile.metadata["memory_reports"] == 2


def test_a_single_rank_memory_report_and_a_later_one_keep_the_largest(tmp_path: Path) -> None:
    lines = [
        *(legacy_iteration_line(n, 500.0) for n in (10, 20, 30)),
        memory_line(0, 30, 1000.0, 2000.0),
        memory_line(0, 40, 1500.0, 1800.0),
    ]
    profile = one(write(tmp_path, lines))
    assert metric(profile, K.MEASURE, "peak allocated memory").value == 1500.0 * MB
    assert metric(profile, K.MEASURE, "peak reserved memory").value == 2000.0 * MB
    assert profile.by_kind(K.COUNTER) == []


def test_older_logs_on_the_grid_leave_only_the_first_interval_out(tmp_path: Path) -> None:
    lines = [legacy_iteration_line(n, ms) for n, ms in ((10, 700), (20, 510), (30, 500), (40, 490))]
    profile = one(write(tmp_path, lines))
    step = metric(profile, K.STEP, "iteration")
    assert step.samples_ns == [700 * MS, 510 * MS, 500 * MS, 490 * MS]
    assert step.warmup == 1
    assert profile.steps == 40
    assert (profile.metadata["log_interval"], profile.metadata["log_interval_from"]) == (
        10,
        "line spacing",
    )
    assert "first_timestamp" not in profile.metadata
    assert profile.by_kind(K.MEASURE) == []  # no --log-throughput, no memory report


def test_a_slow_second_interval_is_warmup_too(tmp_path: Path) -> None:
    lines = [legacy_iteration_line(n, ms) for n, ms in ((10, 900), (20, 800), (30, 500), (40, 500))]
    assert metric(one(write(tmp_path, lines)), K.STEP, "iteration").warmup == 2


def test_two_intervals_keep_both_unless_the_first_is_slow(tmp_path: Path) -> None:
    even = one(write(tmp_path, [legacy_iteration_line(10, 500), legacy_iteration_line(20, 510)]))
    assert metric(even, K.STEP, "iteration").warmup == 0
    assert "only 2 logged interval(s): none is left out as warm-up" in even.warnings
    slow = one(write(tmp_path, [legacy_iteration_line(10, 900), legacy_iteration_line(20, 500)]))
    assert metric(slow, K.STEP, "iteration").warmup == 1


def test_the_warmup_option_sets_the_count(tmp_path: Path) -> None:
    path = write(tmp_path, CURRENT)
    assert metric(one(path, warmup="3"), K.STEP, "iteration").warmup == 3
    assert metric(one(path, warmup="0"), K.STEP, "iteration").warmup == 0
    with pytest.raises(ConfigError, match="warmup must be a whole number"):
        registry.parse_file(path, options={"warmup": "two"})


def test_a_checkpoint_timer_right_after_an_iteration_line_is_one_off(tmp_path: Path) -> None:
    # --timing-log-level 0 (the default): no interval timers, only save_checkpoint_and_time's.
    lines = [legacy_iteration_line(n, 500.0) for n in (10, 20, 30)]
    lines.insert(2, timers_minmax({"save-checkpoint": (2000.0, 2100.0)})[0])
    lines.insert(3, timers_minmax({"save-checkpoint": (2000.0, 2100.0)})[1])
    profile = one(write(tmp_path, lines))
    assert profile.by_kind(K.RANGE) == []
    assert profile.metadata["other_timers_ms"] == {"save-checkpoint": 2100.0}


def test_the_line_that_ends_a_timer_block_is_read_for_itself(tmp_path: Path) -> None:
    # report_memory prints on rank 0, Timers.log on the last rank: their lines interleave.
    lines = [
        legacy_iteration_line(10, 500.0),
        *timers_max({"forward-backward": 400.0}),
        memory_line(0, 10, 1000.0, 2000.0),
        *(legacy_iteration_line(n, 500.0) for n in (20, 30)),
    ]
    profile = one(write(tmp_path, lines))
    assert [m.name for m in profile.by_kind(K.RANGE)] == ["forward-backward"]
    assert metric(profile, K.MEASURE, "peak reserved memory").value == 2000.0 * MB


def test_max_and_all_timer_shapes(tmp_path: Path) -> None:
    lines = [
        legacy_iteration_line(10, 500.0),
        *timers_max({"forward-backward": 400.0}),
        legacy_iteration_line(20, 500.0),
        *timers_all({"forward-backward": [390.0, 410.0, 405.0]}),
        legacy_iteration_line(30, 500.0),
        *timers_all({"forward-backward": [380.0, 401.0], "optimizer": [20.0, 22.0]}),
    ]
    profile = one(write(tmp_path, lines))
    forward = metric(profile, K.RANGE, "forward-backward")
    assert forward.samples_ns == [400 * MS, 410 * MS, 401 * MS]
    assert forward.attrs["min_across_ranks_ns"] == [390 * MS, 380 * MS]  # the max shape has none
    assert metric(profile, K.RANGE, "optimizer").samples_ns == [22 * MS]


def test_the_one_line_timers_of_old_megatron_and_not_deepspeeds(tmp_path: Path) -> None:
    """global_vars.py (00ac56ab)::Timers.log: ``string = 'time (ms)'`` and, per timer,
    ``string += ' | {}: {:.2f}'.format(name, elapsed_time)``, printed on rank 0."""
    deepspeed = (
        "[2024-04-04 09:09:53,313] [INFO] [logging.py:96:log_dist] [Rank 0] time (ms) | "
        "fwd_microstep: 6567.68 | bwd_microstep: 17950.36 | step_microstep: 1139.27"
    )
    lines = []
    for n in (10, 20, 30):
        lines += [
            legacy_iteration_line(n, 500.0),
            deepspeed,
            f"time (ms) | forward-compute: {120.0 + n:.2f} | backward-compute: {240.5:.2f}",
        ]
    profile = one(write(tmp_path, lines))
    forward = metric(profile, K.RANGE, "forward-compute")
    assert forward.samples_ns == [130 * MS, 140 * MS, 150 * MS]
    assert forward.attrs["across_ranks"] == "rank 0 only"
    assert "min_across_ranks_ns" not in forward.attrs
    assert metric(profile, K.RANGE, "backward-compute").samples_ns == [240.5 * MS] * 3
    assert profile.find(K.RANGE, "fwd_microstep") is None


def test_megatron_deepspeed_lines_and_their_rates(tmp_path: Path) -> None:
    lines = [deepspeed_iteration_line(n, ms) for n, ms in ((1, 25849.1), (2, 5000.0), (3, 4000.0))]
    profile = one(write(tmp_path, lines))
    step = metric(profile, K.STEP, "iteration")
    assert step.samples_ns == [25849.1 * MS, 5000 * MS, 4000 * MS]
    samples = metric(profile, K.MEASURE, "samples per second")
    assert (samples.unit, samples.better) == ("samples/s", Better.HIGHER)
    assert samples.samples == [pytest.approx(96000 / ms, abs=1e-3) for ms in (25849.1, 5000, 4000)]
    tgs = metric(profile, K.MEASURE, "tokens per second per GPU")
    assert tgs.unit == "tokens/s"
    assert tgs.samples is not None and tgs.samples[2] == pytest.approx(12288.0)
    assert metric(profile, K.MEASURE, "TFLOPs").samples == [38.61e12] * 3
    assert profile.metadata["last_values"]["actual seqlen"] == 4096


def test_the_tgs_key_without_its_space(tmp_path: Path) -> None:
    # argonne-lcf's Megatron-DeepSpeed prints "tokens per gpu per second(tgs): 633.832".
    lines = [
        deepspeed_iteration_line(n, 500.0).replace("second (tgs)", "second(tgs)") for n in (1, 2)
    ]
    tgs = metric(one(write(tmp_path, lines)), K.MEASURE, "tokens per second per GPU")
    assert tgs.samples == [pytest.approx(96000 / 500 * 4096 / 8)] * 2


def test_elapsed_time_in_seconds(tmp_path: Path) -> None:
    lines = [deepspeed_iteration_line(n, 11180.0, unit="s") for n in (10, 20)]
    step = metric(one(write(tmp_path, lines)), K.STEP, "iteration")
    assert step.samples_ns == [11.18e9, 11.18e9]


def test_skipped_nan_and_batch_size_changes_warn(tmp_path: Path) -> None:
    lines = [
        iteration_line(10, 600.0, skipped=3, batch=32, stamp="2024-10-24 21:02:23"),
        iteration_line(20, 500.0, skipped=1, nan=1, batch=32, stamp="2024-10-24 21:02:28"),
        iteration_line(30, 500.0, batch=64, stamp="2024-10-24 21:02:33"),
    ]
    profile = one(write(tmp_path, lines))
    meta = profile.metadata
    assert (meta["first_timestamp"], meta["last_timestamp"]) == (
        "2024-10-24 21:02:23",
        "2024-10-24 21:02:33",
    )
    assert (meta["skipped_iterations"], meta["nan_iterations"]) == (4, 1)
    assert (meta["global_batch_size"], meta["global_batch_sizes"]) == (64, [32, 64])
    joined = "\n".join(profile.warnings)
    assert "Megatron reports 4 skipped iteration(s)" in joined
    assert "1 iteration(s) with a NaN or infinite loss" in joined
    assert "the global batch size changed during the run (32, 64" in joined


def test_a_skip_on_the_first_iteration_line_is_counted_once(tmp_path: Path) -> None:
    lines = [iteration_line(1, 900.0, skipped=1)]
    lines += [iteration_line(n, 500.0, skipped=1 if n == 10 else 0) for n in (10, 20, 30)]
    # Since 2025 line 10 counts iteration 1 again: one skipped iteration, not two.
    assert one(write(tmp_path, lines)).metadata["skipped_iterations"] == 1


def test_rank_prefixes_crlf_and_noise_do_not_matter(tmp_path: Path) -> None:
    plain = [iteration_line(n, 500.0 + n) for n in (10, 20, 30)]
    noisy = [
        "W0328 14:13:05.123000 1234 torch/distributed/run.py:793] Setting OMP_NUM_THREADS",
        "[default0]:lrdn1664:2815228:2816901 [0] NCCL INFO Connected all trees",
        f"[default7]:{plain[0]}",
        "[default7]:" + timers_minmax({"forward-backward": (300.0, 400.0)})[0],
        "[default7]:" + timers_minmax({"forward-backward": (300.0, 400.0)})[1],
        "  3%|▎         | 1/30 [00:01<00:30,  1.0s/it]\r  7%|▋         | 2/30 [00:02<00:28]",
        f"7: {plain[1]}",
        "-" * 80,
        " validation loss at iteration 20 | lm loss value: 5.000000E+00 | lm loss PPL: "
        "1.484132E+02 | ",
        "/usr/lib/python3/site-packages/torch/distributed/c10d_logger.py:79: FutureWarning: x",
        f"[lrdn3321:3]: {plain[2]}",
    ]
    path = tmp_path / "noisy.log"
    path.write_bytes(("\r\n".join(noisy) + "\r\n").encode())
    profile = one(path)
    step = metric(profile, K.STEP, "iteration")
    assert step.samples_ns == [510 * MS, 520 * MS, 530 * MS]
    assert metric(profile, K.RANGE, "forward-backward").samples_ns == [400 * MS]
    assert profile.warnings == []


def test_a_gzip_log(tmp_path: Path) -> None:
    path = tmp_path / "train.log.gz"
    path.write_bytes(gzip.compress(("\n".join(CURRENT) + "\n").encode()))
    assert metric(one(path), K.STEP, "iteration").calls == 5


def test_a_restart_gives_a_profile_per_run(tmp_path: Path) -> None:
    first = [iteration_line(n, 500.0) for n in (10, 20, 30)]
    second = [
        *arguments(log_interval=10, train_iters=50),
        "  successfully loaded checkpoint from /ckpt [ t 1/2, p 1/2 ] at iteration 30",
        "[before the start of training step] datetime: 2026-03-28 15:00:00.000000 ",
        iteration_line(31, 4000.0),
        iteration_line(40, 700.0),
        iteration_line(40, 700.0),  # a repeated line (tee'd twice): read once
        iteration_line(50, 600.0),
        iteration_line(60, 610.0),
    ]
    path = write(tmp_path, [*SETUP, *first, *second])
    assert registry.detect(path).name == "megatron_log"
    one_, two = registry.parse_file(path)
    assert (one_.label, two.label) == ("megatron #1", "megatron #2")
    assert (one_.metadata["run"], two.metadata["run"]) == (1, 2)
    assert metric(one_, K.STEP, "iteration").samples_ns == [500 * MS] * 3
    second_step = metric(two, K.STEP, "iteration")
    assert second_step.samples_ns == [4000 * MS, 700 * MS, 600 * MS, 610 * MS]
    assert second_step.warmup == 2  # its own first iteration (31) and the interval after it
    assert (two.metadata["loaded_iteration"], two.metadata["start_iteration"]) == (30, 30)
    assert two.steps == 30  # iterations 31..60
    assert "1 repeated iteration line(s) read once" in two.warnings
    assert "other_timers_ms" in one_.metadata and "other_timers_ms" not in two.metadata


def test_iteration_numbers_going_back_start_a_new_run(tmp_path: Path) -> None:
    lines = [legacy_iteration_line(n, 500.0) for n in (10, 20, 10, 20)]
    profiles = registry.parse_file(write(tmp_path, lines))
    assert [p.label for p in profiles] == ["megatron #1", "megatron #2"]
    assert "line 3: the iteration numbers start again (20 → 10): a new run" in profiles[1].warnings


def test_a_resumed_run_counts_its_steps_from_the_checkpoint(tmp_path: Path) -> None:
    lines = [
        "  successfully loaded checkpoint from /ckpt at iteration 1005",
        *(legacy_iteration_line(n, 500.0, of=2000) for n in (1010, 1020, 1030)),
    ]
    profile = one(write(tmp_path, lines))
    assert profile.steps == 25
    assert profile.metadata["start_iteration"] == 1005


def test_a_last_line_cut_short_is_left_out_with_a_warning(tmp_path: Path) -> None:
    lines = [*(iteration_line(n, 500.0) for n in (10, 20, 30)), iteration_line(40, 480.0)[:120]]
    profile = one(write(tmp_path, lines, end=""))
    assert metric(profile, K.STEP, "iteration").calls == 3
    assert "line 4, the file's last line, was cut short: left out" in profile.warnings


def test_an_unreadable_elapsed_time_is_left_out(tmp_path: Path) -> None:
    lines = [iteration_line(n, 500.0) for n in (10, 20, 30)]
    lines.insert(1, iteration_line(15, 1.0).replace("(ms): 1.0", "(ms): nan"))
    profile = one(write(tmp_path, lines))
    assert metric(profile, K.STEP, "iteration").calls == 3
    assert "1 iteration line(s) without a positive elapsed time: left out" in profile.warnings
    with pytest.raises(ParseError, match=r"1 iteration line\(s\) but none with a positive elapsed"):
        registry.parse_file(write(tmp_path, lines[1:2], name="nan.log"))


def test_a_log_without_iteration_lines_is_a_parse_error_naming_what_was_expected(
    tmp_path: Path,
) -> None:
    # Rank 0's output of a multi-GPU job: Megatron prints the iteration line on the last rank.
    path = write(tmp_path, [*SETUP, memory_line(0, 10, 1000.0, 2000.0)])
    assert registry.detect(path).name == "megatron_log"
    with pytest.raises(ParseError) as caught:
        registry.parse_file(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: no Megatron-LM iteration line found")
    assert "elapsed time per iteration (ms)" in message
    assert "last rank" in message
    assert caught.value.format == "megatron_log"


def _job_folder(tmp_path: Path, *, last_rank: bool = True) -> Path:
    """A multi-GPU job's logs, one per rank: rank 0 prints the set-up, the last rank trains."""
    folder = tmp_path / "logs"
    folder.mkdir(parents=True)
    write(folder, [*SETUP, memory_line(0, 10, 1000.0, 2000.0)], name="rank0.log")
    if last_rank:
        write(folder, CURRENT, name="rank7.log")
    return folder


def test_a_quiet_ranks_log_in_a_folder_is_skipped_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _job_folder(tmp_path)
    assert main(["parse", str(folder), "--json"]) == 0
    captured = capsys.readouterr()
    [profile] = json.loads(captured.out)["profiles"]
    assert Path(profile["source"]).name == "rank7.log"
    assert "hold no measurement yet" in captured.err and "rank0.log" in captured.err
    skipped: list[Path] = []
    [[repeat]] = parse_repeats([folder], skipped=skipped)  # what `perfci ingest` stores
    assert Path(repeat.source).name == "rank7.log"
    assert [p.name for p in skipped] == ["rank0.log"]


def test_a_quiet_ranks_log_named_on_its_own_is_refused_with_the_reason(tmp_path: Path) -> None:
    folder = _job_folder(tmp_path)
    with pytest.raises(NoMeasurements, match="last rank only"):
        parse_repeats([folder / "rank0.log", folder / "rank7.log"])
    with pytest.raises(NoMeasurements, match=r"rank0\.log: no Megatron-LM iteration line"):
        parse_repeats([_job_folder(tmp_path / "quiet", last_rank=False)])


def test_a_benchmarks_globs_finding_a_quiet_rank_leave_it_out_with_a_warning(
    tmp_path: Path,
) -> None:
    """``perfci run``/``check`` hand each repeat's globbed files over as found, not named."""
    folder = _job_folder(tmp_path)
    [[profile]] = parse_repeats([folder / "rank0.log", folder / "rank7.log"], repeat=1, found=True)
    assert Path(profile.source).name == "rank7.log"
    assert any(
        w.startswith(f"left out {folder / 'rank0.log'}: no Megatron") for w in profile.warnings
    )


def test_the_iteration_line_is_found_after_a_long_preamble(tmp_path: Path) -> None:
    # NCCL_DEBUG=INFO on many ranks easily writes more than the 256 KiB detection reads.
    noise = [
        f"node{i}:123:456 [0] NCCL INFO Channel 00/32 : 0[0] -> 1[1] via P2P" for i in range(6000)
    ]
    assert len("\n".join(noise)) > registry.HEAD_BYTES
    body = [*noise, *(iteration_line(n, 500.0) for n in (10, 20, 30))]
    with pytest.raises(UnknownFormatError):  # no banner in the head: nothing to go by
        registry.detect(write(tmp_path, body, name="bare.log"))
    # Megatron prints its world size and arguments before anything else.
    profile = one(write(tmp_path, [*SETUP[:1], *body], name="megatron.log"))
    assert metric(profile, K.STEP, "iteration").calls == 3


def test_one_banner_is_enough_to_detect(tmp_path: Path) -> None:
    assert registry.detect(write(tmp_path, SETUP[:1], name="a.log")).name == "megatron_log"
    assert registry.detect(write(tmp_path, SETUP[1:4], name="b.log")).name == "megatron_log"


def test_lines_that_only_look_alike_are_not_megatron_logs(tmp_path: Path) -> None:
    nemo = " Epoch 0: iteration 10/100 | train_step_timing (s): 1.20 | reduced_train_loss: 5.1 |"
    validation = " validation loss at iteration 100 | lm loss value: 5.000000E+00 | "
    for name, text in (("nemo.log", nemo), ("validation.log", validation)):
        with pytest.raises(UnknownFormatError):
            registry.detect(write(tmp_path, [text], name=name))
    with pytest.raises(ParseError, match="no Megatron-LM iteration line"):
        registry.parse_file(write(tmp_path, [nemo], name="forced.log"), format="megatron_log")


# --- other formats' files keep their parser --------------------------------------------------

ITERATIONS = [iteration_line(n, 500.0) for n in (10, 20, 30)]


def test_a_megatron_trace_with_an_iteration_line_stays_megatron_trace(tmp_path: Path) -> None:
    trace = "rank:0:forward_step(stage_id=0,batch_id=0,mg_state=steady,duration=5.0,timestamp=10.0)"
    path = write(tmp_path, [trace, *ITERATIONS])
    assert registry.detect(path).name == "megatron_trace"


def test_a_megatron_deepspeed_log_with_comm_lines_stays_deepspeed_comms(tmp_path: Path) -> None:
    comm = (
        "[2022-06-26 01:39:55,722] [INFO] [logging.py:69:log_dist] [Rank 0] comm op: "
        "all_reduce | time (ms): 9.46 | msg size: 678.86 MB | algbw (Gbps): 1204.52 "
        " | busbw (Gbps): 1129.23"
    )
    path = write(tmp_path, [*SETUP, deepspeed_iteration_line(1, 500.0), comm])
    assert registry.detect(path).name == "deepspeed_comms"


def test_an_mlperf_log_of_megatron_stays_mlperf_log(tmp_path: Path) -> None:
    event = {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "init_start"}
    path = write(tmp_path, [*SETUP, f":::MLLOG {json.dumps(event)}", *ITERATIONS])
    assert registry.detect(path).name == "mlperf_log"


def test_a_profiler_table_in_a_training_log_stays_pytorch_table(tmp_path: Path) -> None:
    table = [
        "-" * 40 + "  " + "-" * 12 + "  " + "-" * 12,
        " " * 36 + "Name    Self CPU %  # of Calls",
        "-" * 40 + "  " + "-" * 12 + "  " + "-" * 12,
        " " * 30 + "aten::addmm        50.00%           4",
        "-" * 40 + "  " + "-" * 12 + "  " + "-" * 12,
        "Self CPU time total: 1.000ms",
    ]
    path = write(tmp_path, [*ITERATIONS, *table])
    assert registry.detect(path).name == "pytorch_table"
