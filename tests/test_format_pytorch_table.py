"""PyTorch profiler key_averages().table(): seed 000, the corpus, cut and noisy files, and tables
that torch itself prints in the test (CPU profiler, memory, shapes, FLOPs, stacks)."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import seed

from perfci.core.errors import ParseError
from perfci.core.model import Device, Metric, MetricKind, Profile
from perfci.formats import registry
from perfci.formats.pytorch._table_rows import kind_of

K = MetricKind
CPU, GPU = Device.CPU, Device.GPU
FOLDER = "pytorch_table"


def _get(profile: Profile, kind: MetricKind, name: str, device: Device = CPU) -> Metric:
    metric = profile.find(kind, name, device=device)
    assert metric is not None, f"no {kind.value}:{device.value} metric {name!r}"
    return metric


def _counter(profile: Profile, scope: str, column: str, device: Device = CPU) -> Metric:
    metric = profile.find(K.COUNTER, column, device=device, scope=scope)
    assert metric is not None, f"no counter:{device.value} {scope!r} ▸ {column!r}"
    assert metric.is_time is False and metric.total_ns is None
    return metric


def _times(metric: Metric) -> tuple[Any, ...]:
    return metric.calls, metric.self_ns, metric.total_ns, metric.avg_ns


def _one(path: Path) -> Profile:
    [profile] = registry.parse_file(path)
    return profile


# --- seed 000: fairseq MoE step, CPU and CUDA columns, no footer ------------------------------


@pytest.fixture(scope="module")
def seed000() -> Profile:
    path = seed("000")
    assert registry.detect(path).name == "pytorch_table"
    return _one(path)


def test_seed000_shape(seed000: Profile) -> None:
    assert seed000.label == "key_averages"
    assert seed000.metadata["rows"] == 84
    assert seed000.metadata["device"] == "CUDA"
    assert seed000.metadata["legacy"] is False
    assert seed000.steps == 1
    assert seed000.warnings == []
    kinds = Counter((m.kind, m.device) for m in seed000.metrics)
    assert kinds == {
        (K.RANGE, CPU): 33,
        (K.OP, CPU): 30,
        (K.RANGE, GPU): 26,
        (K.OP, GPU): 22,
        (K.API, CPU): 15,
        (K.COMM, CPU): 5,
        (K.COMM, GPU): 1,
        (K.STEP, CPU): 1,
        (K.STEP, GPU): 1,
    }
    # every one of the 83 non-step rows gives a metric, none twice on one device
    rows = {(m.attrs["row"], m.device) for m in seed000.metrics if m.kind is not K.STEP}
    assert len({row for row, _ in rows}) == 83


def test_seed000_ops(seed000: Profile) -> None:
    mm = _get(seed000, K.OP, "MmBackward")
    assert _times(mm) == (23, 540_000.0, 3_541_000.0, 153_957.0)
    mm_gpu = _get(seed000, K.OP, "MmBackward", GPU)
    assert _times(mm_gpu) == (23, 0.0, 18_183_000.0, 790_565.0)
    copy = _get(seed000, K.OP, "torch::autograd::CopyBackwards", GPU)
    assert copy.total_ns == 2_196_000.0


def test_seed000_ranges(seed000: Profile) -> None:
    forward = _get(seed000, K.RANGE, "forward")
    assert _times(forward) == (1, 3_761_000_000.0, 3_796_000_000.0, 3_796_000_000.0)
    assert _get(seed000, K.RANGE, "forward", GPU).total_ns == 41_988_000.0
    layer0 = _get(seed000, K.RANGE, "LAYER_0")
    assert _times(layer0) == (1, 159_000.0, 3_120_000.0, 3_120_000.0)
    assert _get(seed000, K.RANGE, "LAYER_0", GPU).total_ns == 4_576_000.0
    assert _get(seed000, K.RANGE, "Optimizer.step#Adam.step").self_ns == 403_000.0


def test_seed000_api_has_no_device_metric(seed000: Profile) -> None:
    launch = _get(seed000, K.API, "cudaLaunchKernel")
    assert _times(launch) == (1154, 3_771_000_000.0, 3_771_000_000.0, 3_268_000.0)
    assert seed000.find(K.API, "cudaLaunchKernel", device=GPU) is None
    assert _get(seed000, K.API, "cudaDeviceGetAttribute").avg_ns == 71.0  # 0.071us


def test_seed000_comm(seed000: Profile) -> None:
    gather = _get(seed000, K.COMM, "nccl:_all_gather_base")  # "CPU total %" reads 0
    assert _times(gather) == (2, 0.0, 3_758_000_000.0, 1_879_000_000.0)
    assert _get(seed000, K.COMM, "nccl:all_to_all").total_ns == 739_000.0
    params = _get(seed000, K.COMM, "record_param_comms", GPU)
    assert _times(params) == (28, 0.0, 474_000.0, 16_929.0)


def test_seed000_steps(seed000: Profile) -> None:
    step = _get(seed000, K.STEP, "train_step")
    assert step.samples_ns == [3_916_000_000.0]
    assert step.calls == 1
    assert _get(seed000, K.STEP, "train_step", GPU).samples_ns == [46_271_000.0]
    # the step row is a step, not also a range
    assert seed000.find(K.RANGE, "train_step-0") is None


# --- corpus -----------------------------------------------------------------------------------


def _corpus(corpus_dir: Path, name: str) -> list[Profile]:
    path = corpus_dir / FOLDER / name
    assert registry.detect(path).name == "pytorch_table"
    return registry.parse_file(path)


def test_legacy_bottleneck_report(corpus_dir: Path) -> None:
    """torch 1.3/1.4 ``torch.utils.bottleneck``: left-aligned, 'Number of Calls', two reports."""
    first, second = _corpus(corpus_dir, "YHRen_NGFP__reports_nfp_perf.md")
    assert (first.label, second.label) == ("key_averages", "key_averages (2)")
    assert first.metadata["legacy"] is True
    assert first.metadata["rows"] == second.metadata["rows"] == 15
    assert first.metadata["self_cpu_time_total_ns"] == 39_803_000.0
    assert first.metadata["cuda_time_total_ns"] == 9_958_000.0
    assert "not comparable" in first.metadata["note"]
    to = _get(first, K.OP, "to")  # unprefixed legacy names are operators
    assert (to.calls, to.self_ns, to.total_ns) == (1, 3_029_000.0, 3_029_000.0)
    assert to.attrs["input_shapes"] == "[]"
    assert _get(first, K.OP, "to", GPU).total_ns == 544_000.0
    # the 13 separate "to" rows stay 13 metrics per device, numbered in table order
    names = [
        m.name
        for m in first.metrics
        if m.device is CPU and m.attrs.get("table_name", m.name) == "to"
    ]
    assert names == ["to", *(f"to ({n})" for n in range(2, 14))]
    assert _get(first, K.OP, "to (2)").self_ns == 2_958_000.0
    assert _get(second, K.OP, "empty").self_ns == 81_553_000.0
    assert _get(second, K.OP, "matmul (5)", GPU).total_ns == 3_200_000.0


def test_old_memory_units(corpus_dir: Path) -> None:
    """Older torch prints ``Mb``/``Kb``/``b``; sizes are 1024-based."""
    [profile] = _corpus(corpus_dir, "huggingface_accelerate__profiler_md_block2.txt")
    assert profile.metadata["columns"] == ["Name", "CPU Mem", "Self CPU Mem", "# of Calls"]
    empty = _get(profile, K.OP, "aten::empty")
    assert empty.calls == 205
    assert empty.attrs["mem_bytes"] == 99_457_433.6  # 94.85 Mb
    assert _get(profile, K.OP, "aten::addmm").attrs["self_mem_bytes"] == 19_998.72  # 19.53 Kb
    strided = _get(profile, K.OP, "aten::empty_strided")
    assert (strided.attrs["mem_bytes"], strided.self_ns) == (492.0, None)
    assert _get(profile, K.OP, "aten::abs").attrs["self_mem_bytes"] == 240.0
    assert profile.metadata["self_cpu_time_total_ns"] == 69_332_000.0
    # every cell is non-negative: 10 rows x 2 columns of byte counters, scoped by the op
    counters = profile.by_kind(K.COUNTER)
    assert len(counters) == 20
    assert {(m.device, m.unit, m.better) for m in counters} == {(CPU, "bytes", "lower")}
    assert _counter(profile, "aten::empty", "CPU Mem").value == 99_457_433.6  # 94.85 Mb
    assert _counter(profile, "aten::addmm", "Self CPU Mem").value == 19_998.72  # 19.53 Kb
    assert _counter(profile, "aten::abs", "CPU Mem").value == 480.0  # 480 b
    assert _counter(profile, "aten::eq", "Self CPU Mem").value == 30.0  # 30 b


def test_docs_table_with_omitted_columns(corpus_dir: Path) -> None:
    [profile] = _corpus(corpus_dir, "huggingface_accelerate__profiler_md_block1.txt")
    assert len(profile.metrics) == 10
    conv = _get(profile, K.OP, "aten::mkldnn_convolution")
    assert _times(conv) == (20, 51_273_000.0, 51_592_000.0, 2_580_000.0)


def test_cuda_table_with_header_and_footers(corpus_dir: Path) -> None:
    [profile] = _corpus(corpus_dir, "debashishc_kernelheim__profile_in_cuda_README_table.txt")
    assert profile.label == "Profiling torch.square"
    assert profile.metadata["self_cuda_time_total_ns"] == 1_763_000.0
    assert _times(_get(profile, K.OP, "aten::pow", GPU)) == (
        1,
        1_737_000.0,
        1_748_000.0,
        1_748_000.0,
    )
    assert _get(profile, K.OP, "aten::to").self_ns == 950.0
    assert _get(profile, K.API, "cudaDeviceSynchronize").self_ns == 1_579_000.0


def test_new_memory_units_truncated_names_and_two_tables(corpus_dir: Path) -> None:
    by_cpu, by_cuda = _corpus(corpus_dir, "duoan_playground-cuda__blog_torch_profile.txt")
    assert by_cpu.label == "Top operators by self CPU time"
    assert by_cuda.label == "Top operators by CUDA time"
    backward = _get(by_cpu, K.RANGE, "backward", GPU)
    assert backward.attrs["mem_bytes"] == -540 * 1024**2
    assert backward.attrs["self_mem_bytes"] == -542.01 * 1024**2
    assert _get(by_cpu, K.RANGE, "forward", GPU).attrs["self_mem_bytes"] == -1.13 * 1024**3
    assert _get(by_cpu, K.OP, "aten::mul", GPU).self_ns == 1_459_000.0
    step = _get(by_cpu, K.STEP, "ProfilerStep")  # the merged ProfilerStep* row
    assert (step.calls, step.total_ns, step.avg_ns) == (6, 80_227_000.0, 13_371_000.0)
    assert by_cpu.steps == 6
    # two different kernels cut to the same 55 characters stay apart
    cut = "void at::native::vectorized_elementwise_kernel<4, at..."
    first, second = _get(by_cuda, K.KERNEL, cut, GPU), _get(by_cuda, K.KERNEL, f"{cut} (2)", GPU)
    assert (first.calls, first.self_ns) == (1152, 1_459_000.0)
    assert (second.calls, second.self_ns) == (576, 898_994.0)
    assert second.attrs["truncated"] is True and second.attrs["table_name"] == cut
    assert by_cuda.find(K.KERNEL, cut, device=CPU) is None  # kernels have no CPU time
    # the GPU projection of the "forward" range and the range itself: both kept
    assert _get(by_cuda, K.RANGE, "forward", GPU).total_ns == 33_661_000.0
    assert _get(by_cuda, K.RANGE, "forward (2)", GPU).total_ns == 3_246_000.0


def test_memory_columns_are_byte_counters(corpus_dir: Path) -> None:
    """CPU Mem / Self CPU Mem / CUDA Mem / Self CUDA Mem cells become counters in bytes (1024-
    based); negative cells (net frees) give none."""
    by_cpu, by_cuda = _corpus(corpus_dir, "duoan_playground-cuda__blog_torch_profile.txt")
    # forward: 4.50 KB  4.51 KB  587.86 MB  -1.13 GB
    assert _counter(by_cpu, "forward", "CPU Mem").value == 4_608.0
    assert _counter(by_cpu, "forward", "Self CPU Mem").value == 4.51 * 1024
    assert _counter(by_cpu, "forward", "CUDA Mem", GPU).value == 587.86 * 1024**2
    assert by_cpu.find(K.COUNTER, "Self CUDA Mem", device=GPU, scope="forward") is None
    # aten::add: -8 B  -8 B  576.00 MB  576.00 MB
    assert by_cpu.find(K.COUNTER, "CPU Mem", device=CPU, scope="aten::add") is None
    assert _counter(by_cpu, "aten::add", "Self CUDA Mem", GPU).value == 603_979_776.0
    # aten::mul: 0 B  0 B  1.12 GB  1.12 GB
    assert _counter(by_cpu, "aten::mul", "CPU Mem").value == 0.0
    assert _counter(by_cpu, "aten::mul", "CUDA Mem", GPU).value == 1.12 * 1024**3
    # backward: all four negative; cudaLaunchKernel: no device side (all zero), so no CUDA Mem
    assert [m for m in by_cpu.by_kind(K.COUNTER) if m.scope == "backward"] == []
    assert _counter(by_cpu, "cudaLaunchKernel", "CPU Mem").value == 0.0
    assert by_cpu.find(K.COUNTER, "CUDA Mem", device=GPU, scope="cudaLaunchKernel") is None
    # step rows give none; the rest of the 12 rows give 30 counters
    assert by_cpu.find(K.COUNTER, "CPU Mem", device=CPU, scope="ProfilerStep*") is None
    assert len(by_cpu.by_kind(K.COUNTER)) == 30
    # the second table's colliding names are the metrics' own: the GPU projection of
    # "forward" (0 B) and the range ("forward (2)", 587.86 MB)
    assert _counter(by_cuda, "forward", "CUDA Mem", GPU).value == 0.0
    assert _counter(by_cuda, "forward (2)", "CUDA Mem", GPU).value == 587.86 * 1024**2
    keys = [m.key for p in (by_cpu, by_cuda) for m in p.metrics]
    assert len(set(keys[: len(by_cpu.metrics)])) == len(by_cpu.metrics)
    assert len(set(keys[len(by_cpu.metrics) :])) == len(by_cuda.metrics)


# --- damaged and noisy files ------------------------------------------------------------------


def _seed_lines() -> list[str]:
    return seed("000").read_text().splitlines(keepends=True)


def test_cut_mid_row_keeps_complete_rows(tmp_path: Path) -> None:
    lines = _seed_lines()
    path = tmp_path / "cut.txt"
    path.write_text("".join(lines[:39]) + lines[39][:120])  # line 40 cut in the middle
    [profile] = registry.parse_file(path, format="pytorch_table")
    assert profile.metadata["rows"] == 36  # lines 4..39
    assert len(profile.warnings) == 2
    assert "line 40" in profile.warnings[0] and "cut short" in profile.warnings[0]
    assert "no closing separator" in profile.warnings[1]


def test_cut_inside_the_last_number_is_not_a_smaller_number(tmp_path: Path) -> None:
    lines = _seed_lines()
    assert lines[13].rstrip().endswith("1154")
    path = tmp_path / "cut.txt"
    path.write_text("".join(lines[:13]) + lines[13].rstrip()[:-1])  # "# of Calls" reads 115
    [profile] = registry.parse_file(path, format="pytorch_table")
    assert profile.find(K.API, "cudaLaunchKernel") is None
    assert profile.metadata["rows"] == 10
    assert "line 14" in profile.warnings[0]


def test_cut_legacy_table(corpus_dir: Path, tmp_path: Path) -> None:
    text = (corpus_dir / FOLDER / "YHRen_NGFP__reports_nfp_perf.md").read_text()
    end = text.index("to              6.21%")
    path = tmp_path / "cut.md"
    path.write_text(text[: end + 30])
    [profile] = registry.parse_file(path, format="pytorch_table")
    assert profile.metadata["rows"] == 10
    assert any("cut short" in warning for warning in profile.warnings)


def test_interleaved_log_lines_and_comment_prefix(tmp_path: Path) -> None:
    lines = _seed_lines()
    stage = (
        "STAGE:2023-12-21 21:59:44 792942:792942 ActivityProfilerController.cpp:312] "
        "Completed Stage: Warm Up\n"
    )
    path = tmp_path / "log.txt"
    path.write_text("step=000 loss=7.01\n" + "".join(lines[:20]) + stage + "".join(lines[20:]))
    [profile] = registry.parse_file(path)
    assert profile.metadata["rows"] == 84
    assert len(profile.warnings) == 1 and "line 22" in profile.warnings[0]
    commented = tmp_path / "doc.py"
    commented.write_text("".join(f"# {line}" for line in lines))
    [again] = registry.parse_file(commented)
    assert again.metadata["rows"] == 84 and again.warnings == []
    assert _get(again, K.OP, "MmBackward", GPU).total_ns == 18_183_000.0


def test_several_tables_one_profile_each(tmp_path: Path) -> None:
    table = "".join(_seed_lines())
    path = tmp_path / "many.txt"
    footer = "Self CPU time total: 8.301s\nSelf CUDA time total: 196.992ms\n"
    path.write_text(f"{table}{footer}epoch 1\n{table}==========\nafter warm-up\n{table}")
    profiles = registry.parse_file(path)
    assert [p.label for p in profiles] == ["key_averages", "key_averages (2)", "after warm-up"]
    assert profiles[0].metadata["self_cuda_time_total_ns"] == 196_992_000.0
    assert "self_cpu_time_total_ns" not in profiles[1].metadata
    assert all(len(p.metrics) == 134 for p in profiles)


def test_bad_value_names_file_line_and_column(tmp_path: Path) -> None:
    lines = _seed_lines()
    lines[5] = lines[5].replace("     204.000us", "     204.000xs", 1)
    path = tmp_path / "bad.txt"
    path.write_text("".join(lines))
    with pytest.raises(ParseError) as error:
        registry.parse_file(path)
    assert error.value.line == 6
    assert "'Self CPU'" in str(error.value) and "204.000xs" in str(error.value)
    assert str(error.value).startswith(f"{path}:6:")


def test_header_that_does_not_match_the_columns(tmp_path: Path) -> None:
    lines = _seed_lines()
    lines[1] = lines[1].replace("  # of Calls", "            ")
    path = tmp_path / "bad.txt"
    path.write_text("".join(lines))
    with pytest.raises(ParseError, match=r"bad.txt:2: header has 10 column names for 11"):
        registry.parse_file(path, format="pytorch_table")


def test_no_table(tmp_path: Path) -> None:
    path = tmp_path / "none.txt"
    path.write_text("----  ----\nnot a header\n----  ----\n")
    with pytest.raises(ParseError, match="no key_averages"):
        registry.parse_file(path, format="pytorch_table")


def test_kinds_from_names() -> None:
    cases = {
        "aten::mm": K.OP,
        "MulBackward0": K.OP,
        "autograd::engine::evaluate_function: X": K.OP,
        "cudaLaunchKernel": K.API,
        "cuLaunchKernel": K.API,
        "cudaMemcpyAsync": K.API,
        "Memcpy HtoD (Pageable -> Device)": K.MEMORY,
        "Memset (Device)": K.MEMORY,
        "nccl:all_reduce": K.COMM,
        "c10d::allreduce_": K.COMM,
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)": K.COMM,
        "void at::native::vectorized_elementwise_kernel<4, at...": K.KERNEL,
        "ampere_sgemm_128x64_tn": K.KERNEL,
        "triton_poi_fused_add_0": K.KERNEL,
        "ProfilerStep#3": K.STEP,
        "ProfilerStep*": K.STEP,
        "train_step-0": K.STEP,
        "forward": K.RANGE,
        "LAYER_0": K.RANGE,
        "Optimizer.step#Adam.step": K.RANGE,
    }
    assert {name: kind_of(name, legacy=False) for name in cases} == cases
    assert kind_of("matmul", legacy=True) is K.OP


# --- tables printed by torch in the test ------------------------------------------------------


def _unit_ns(time_us: float) -> float:
    """The unit torch's ``_format_time`` picks for a time, in ns."""
    return 1e9 if time_us >= 1e6 else 1e6 if time_us >= 1e3 else 1e3


def _close_time(parsed: float | None, time_us: float) -> bool:
    """Equal within the 3 decimals torch prints in the unit it chose."""
    assert parsed is not None
    return abs(parsed - time_us * 1000) <= 0.0005 * _unit_ns(time_us) + 1e-6


def _close_size(parsed: float, nbytes: int) -> bool:
    unit = next((u for u in (1024**3, 1024**2, 1024) if abs(nbytes) >= u), 1)
    return abs(parsed - nbytes) <= 0.005 * unit + 1e-6


def _shown(name: str) -> str:
    return name[:52] + "..." if len(name) >= 52 else name


@pytest.fixture(scope="module")
def torch_table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Any]]:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs, labels = torch.randn(32, 64), torch.randint(0, 10, (32,))
    with profile(
        activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_flops=True
    ) as prof:
        for step in range(3):
            with record_function(f"train_step-{step}"):
                with record_function("forward"):
                    loss = torch.nn.functional.cross_entropy(model(inputs), labels)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
    averages = list(prof.key_averages(group_by_input_shape=True))
    path = tmp_path_factory.mktemp("torch") / "table.txt"
    table = prof.key_averages(group_by_input_shape=True).table(row_limit=-1)
    path.write_text(f"Top ops:\n{table}")
    return path, averages


@pytest.mark.torch
def test_torch_cpu_table_matches_function_events(torch_table: tuple[Path, list[Any]]) -> None:
    path, averages = torch_table
    assert registry.detect(path).name == "pytorch_table"
    [profile] = registry.parse_file(path)
    assert profile.label == "Top ops"
    assert profile.metadata["rows"] == len(averages)
    assert profile.metadata["columns"][-2:] == ["Input Shapes", "Total KFLOPs"]
    assert profile.warnings == []
    by_row = {m.attrs["row"]: m for m in profile.metrics if m.kind not in (K.STEP, K.COUNTER)}
    steps = []
    for row, event in enumerate(averages, 1):
        if event.key.startswith("train_step-"):
            steps.append((event.key, event.cpu_time_total))
            continue
        metric = by_row[row]
        assert metric.attrs.get("table_name", metric.name) == _shown(event.key)
        assert metric.device is CPU and metric.calls == event.count
        assert _close_time(metric.self_ns, event.self_cpu_time_total), event.key
        assert _close_time(metric.total_ns, event.cpu_time_total), event.key
        assert _close_size(metric.attrs["mem_bytes"], event.cpu_memory_usage), event.key
        counter = profile.find(K.COUNTER, "Self CPU Mem", device=CPU, scope=metric.name)
        if metric.attrs["self_mem_bytes"] < 0:
            assert counter is None and event.self_cpu_memory_usage < 0, event.key
        else:
            assert counter is not None and counter.unit == "bytes", event.key
            assert _close_size(counter.value or 0.0, event.self_cpu_memory_usage), event.key
        assert metric.attrs["input_shapes"] == str(event.input_shapes)[:80]
        if event.flops:
            assert abs(metric.attrs["flops"] - event.flops) <= 0.5, event.key
        else:
            assert "flops" not in metric.attrs
    assert len(by_row) == len(averages) - 3
    [step] = profile.by_kind(K.STEP)
    assert step.name == "train_step" and profile.steps == 3
    expected = [time for _, time in sorted(steps)]
    assert all(
        _close_time(got, want) for got, want in zip(step.samples_ns or [], expected, strict=True)
    )


@pytest.mark.torch
def test_torch_stack_rows_and_flops_column(tmp_path: Path) -> None:
    """With stacks and FLOPs torch prints the FLOPs under 'Source Location' and the frame under
    'Total MFLOPs'; each further frame is a row of its own."""
    pytest.importorskip("torch")
    from torch.autograd.profiler_util import EventList, FunctionEvent

    events = [
        FunctionEvent(
            id=i,
            name=name,
            thread=0,
            start_us=i * 100,
            end_us=i * 100 + 40 + i,
            flops=flops,
            stack=[f"model.py({10 + i}): forward", "train.py(3): <module>"],
        )
        for i, (name, flops) in enumerate(
            [("aten::mm", 2_000_000), ("aten::add", 0), ("aten::mm", 4_000_000)]
        )
    ]
    event_list = EventList(events, use_device=None, with_flops=True)
    event_list._build_tree()
    path = tmp_path / "stack.txt"
    path.write_text(event_list.key_averages(group_by_stack_n=2).table(row_limit=-1))
    [profile] = registry.parse_file(path)
    assert profile.metadata["rows"] == 3 and profile.warnings == []
    first = _get(profile, K.OP, "aten::mm @ model.py(10): forward")
    assert first.attrs["stack"] == ["model.py(10): forward", "train.py(3): <module>"]
    assert (first.attrs["flops"], first.self_ns) == (2_000_000.0, 40_000.0)
    second = _get(profile, K.OP, "aten::mm @ model.py(12): forward")
    assert (second.attrs["flops"], second.self_ns) == (4_000_000.0, 42_000.0)
    added = _get(profile, K.OP, "aten::add")
    assert "flops" not in added.attrs and added.attrs["stack"][0] == "model.py(11): forward"


def test_name_that_ends_in_a_space_is_a_row(tmp_path: Path) -> None:
    """torch 2.13 with stacks prints python functions without a name (``file.py(0): ``): the
    right-aligned cell ends in a blank, and the row must still be read, not skipped."""
    sep = "-" * 55 + "  " + "  ".join(["-" * 12] * 6) + "  "
    headers = ("Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls")
    header = f"{'Name':>55}" + "".join(f"  {h:>12}" for h in headers)
    row = "".join(
        f"  {cell:>12}" for cell in ("0.09%", "72.338us", "0.20%", "168.001us", "168.001us", "1")
    )
    text = "\n".join([sep, header, sep, f"{'torch/profiler/_cupti_monitor.py(0): ':>55}{row}", sep])
    path = tmp_path / "blank_end.txt"
    path.write_text(text + "\nSelf CPU time total: 82.493ms\n")
    profile = _one(path)
    assert profile.warnings == [] and profile.metadata["rows"] == 1
    metric = _get(profile, K.RANGE, "torch/profiler/_cupti_monitor.py(0):")
    assert _times(metric) == (1, 72_338.0, 168_001.0, 168_001.0)


def test_stack_frames_of_a_step_row_stay_with_it(tmp_path: Path) -> None:
    """A ``ProfilerStep#N`` row's further stack frames belong to it, not to the row above."""
    pytest.importorskip("torch")
    from torch.autograd.profiler_util import EventList, FunctionEvent

    events = [
        FunctionEvent(
            id=i,
            name=name,
            thread=0,
            start_us=i * 1000,
            end_us=i * 1000 + duration,
            stack=stack,
        )
        for i, (name, duration, stack) in enumerate(
            [
                ("aten::mm", 500, ["model.py(10): forward", "train.py(3): <module>"]),
                ("ProfilerStep#3", 400, ["loop.py(5): train", "loop.py(9): <module>"]),
            ]
        )
    ]
    event_list = EventList(events, use_device=None)
    event_list._build_tree()
    table = event_list.key_averages(group_by_stack_n=2).table(row_limit=-1)
    path = tmp_path / "step_stack.txt"
    path.write_text(table)
    profile = _one(path)
    assert profile.warnings == [] and profile.steps == 1
    mm = _get(profile, K.OP, "aten::mm")
    assert mm.attrs["stack"] == ["model.py(10): forward", "train.py(3): <module>"]
    assert _times(mm) == (1, 500_000.0, 500_000.0, 500_000.0)
    step = _get(profile, K.STEP, "ProfilerStep")
    assert step.samples_ns == [400_000.0]


def test_table_without_closing_separator_then_another(tmp_path: Path) -> None:
    """Doc excerpts sometimes drop the closing separator; the footer or the next table ends it."""
    lines = _seed_lines()
    path = tmp_path / "doc.txt"
    path.write_text("".join(lines[:10]) + "Self CPU time total: 57.549m\n" + "".join(lines))
    first, second = registry.parse_file(path)
    assert first.metadata["rows"] == 7 and second.metadata["rows"] == 84
    assert "ends without its closing separator" in first.warnings[0]
    # the tutorial's typo (``m`` for ``ms``) is kept as text, with a warning
    assert first.metadata["self_cpu_time_total"] == "57.549m"
    assert "unreadable time" in first.warnings[1]
    path.write_text("".join(lines[:10]) + "".join(lines))
    first, second = registry.parse_file(path)
    assert first.metadata["rows"] == 7 and second.metadata["rows"] == 84


def test_only_newlines_end_lines(tmp_path: Path) -> None:
    # Text-mode lines, not str.splitlines(): \v, \f, \x85 and U+2028 stay inside a name.
    text = "".join(_seed_lines())
    for old, new in (
        ("Optimizer.zero_grad#Adam", "Optimizer.zero_grad\x0bAdam"),
        ("ForwardEmbedding_DropOut", "ForwardEmbedding\x85DropOut"),
        ("FORWARD_EMBEDDING", "FORWARD\u2028EMBEDDING"),
    ):
        text = text.replace(old, new, 1)
    path = tmp_path / "odd.txt"
    path.write_text(text, encoding="utf-8")
    profile = _one(path)
    assert profile.warnings == []
    assert _get(profile, K.RANGE, "Optimizer.zero_grad\x0bAdam.zero_grad").calls == 1
    assert _get(profile, K.RANGE, "ForwardEmbedding\x85DropOut").calls == 1
    assert _get(profile, K.RANGE, "FORWARD\u2028EMBEDDING").calls == 1


def test_cut_gzip_is_an_error_naming_the_file(tmp_path: Path) -> None:
    packed = gzip.compress(seed("000").read_bytes())
    path = tmp_path / "cut.txt.gz"
    path.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(ParseError, match=r"cut\.txt\.gz: cannot read file: .*\(pytorch_table\)"):
        registry.parse_file(path, format="pytorch_table")


# Rows of a table torch 2.13 printed (CPU, ``with_stack=True``): the Python function ``work``
# holds the autograd engine's backward ops, which run on another thread, as its children, and
# torch's self time (total less the children's) falls below zero.
NEGATIVE_SELF_LINES = (
    "-------------------------------------------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------",  # noqa: E501
    "                                                   Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg       CPU Mem  Self CPU Mem    # of Calls  Total MFLOPs",  # noqa: E501
    "-------------------------------------------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------",  # noqa: E501
    "                             gen_torch.py(12): <module>         0.03%      23.064us       100.00%      82.493ms      82.493ms           0 B     -48.00 KB             1            --",  # noqa: E501
    "                                  gen_torch.py(4): work        -2.37%   -1955.860us        99.55%      82.125ms      82.125ms      48.00 KB           0 B             1            --",  # noqa: E501
    "                                           train_step-0         0.01%       7.570us        69.37%      57.227ms      57.227ms      16.00 KB           0 B             1            --",  # noqa: E501
    "-------------------------------------------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------",  # noqa: E501
    "Self CPU time total: 82.493ms",
)
# torch ends every table line but the footer with two spaces.
NEGATIVE_SELF_TABLE = "".join(f"{line}  \n" for line in NEGATIVE_SELF_LINES[:-1]) + (
    NEGATIVE_SELF_LINES[-1] + "\n"
)


def test_a_negative_self_time_is_left_out_and_the_run_can_be_stored(tmp_path: Path) -> None:
    from perfci.usecases.submit.prepare import check_values, prepare_run

    path = tmp_path / "stack_table.txt"
    path.write_text(NEGATIVE_SELF_TABLE)
    profile = _one(path)
    work = _get(profile, MetricKind.RANGE, "gen_torch.py(4): work")
    assert work.self_ns is None
    assert (work.total_ns, work.calls) == (82_125_000.0, 1)
    assert _get(profile, MetricKind.RANGE, "gen_torch.py(12): <module>").self_ns == 23_064.0
    [warning] = [w for w in profile.warnings if "negative Self time" in w]
    assert "'gen_torch.py(4): work': -1.956 ms" in warning
    check_values(prepare_run([[profile]]))  # before: InvalidValue, the whole run refused
