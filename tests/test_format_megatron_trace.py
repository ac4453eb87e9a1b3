"""Megatron/AICB rank trace logs: seed 004, the Echo corpus traces, and made-up edge cases."""

from __future__ import annotations

from collections.abc import Callable
from itertools import zip_longest
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfci.core.errors import ParseError
from perfci.core.model import MetricKind, Profile
from perfci.formats import registry
from perfci.formats.workload import megatron_trace
from perfci.formats.workload._kv_tokenizer import (
    TokenizeError,
    parse_int_list,
    parse_kv,
    parse_kv_list,
    parse_string_list,
    scan_kv,
    scan_string_list,
    split_top_level,
)

ECHO = "echo_megatron_trace"


def _parse(path: Path) -> list[Profile]:
    return registry.parse_file(path)


def _one(path: Path) -> Profile:
    [profile] = _parse(path)
    return profile


@pytest.fixture()
def seed004(seeds_dir: Path) -> Path:
    return next(seeds_dir.glob("004_*"))


@pytest.fixture()
def rank0(corpus_dir: Path) -> Path:
    return corpus_dir / ECHO / "fwyc0573_Megatron-LM__realistic_trace_rank0.txt"


# --- tokenizer ------------------------------------------------------------------------------


def test_split_respects_brackets_parens_and_quotes() -> None:
    text = 'a=[1, 2],b=\'x,y\',c=f(1, (2, 3)),d="q,\\"r"'
    assert split_top_level(text) == ["a=[1, 2]", "b='x,y'", "c=f(1, (2, 3))", 'd="q,\\"r"']


def test_unquoted_free_text_with_commas_stays_one_value() -> None:
    fields = parse_kv(
        "description=model_chunk.finish_grad_sync(), All-reduce / reduce-"
        "scatter across DP replicas,group_kind=dp"
    )
    assert fields["description"] == (
        "model_chunk.finish_grad_sync(), All-reduce / reduce-scatter across DP replicas"
    )
    assert fields["group_kind"] == "dp"


def test_apostrophe_inside_free_text_is_not_a_string() -> None:
    fields = parse_kv("description=don't split, me,duration=1.5")
    assert fields == {"description": "don't split, me", "duration": "1.5"}


def test_string_list_unquotes_and_unescapes() -> None:
    items = parse_string_list("['a=1,b=[2, 3]', \"c='x'\", 'd=it\\'s']")
    assert items == ["a=1,b=[2, 3]", "c='x'", "d=it's"]
    assert parse_string_list("[]") == []


@pytest.mark.parametrize("text", ["a=[1, 2", "a='open", "a=(1]"])
def test_unbalanced_input_is_a_tokenize_error(text: str) -> None:
    with pytest.raises(TokenizeError):
        split_top_level(text)


def test_value_before_any_key_is_an_error() -> None:
    with pytest.raises(TokenizeError, match="expected key=value"):
        parse_kv("oops,a=1")


def test_int_list() -> None:
    assert parse_int_list("[2048, 2, 5120]") == [2048, 2, 5120]
    assert parse_int_list("None") is None
    assert parse_int_list("[2, x]") is None


# --- seed 004 -------------------------------------------------------------------------------


def test_seed004_is_detected(seed004: Path) -> None:
    assert registry.detect(seed004).name == "megatron_trace"


def test_seed004_phases(seed004: Path) -> None:
    profile = _one(seed004)
    assert profile.label == "rank2"
    assert profile.metadata["rank"] == 2
    assert profile.steps == 1  # one optimizer_step
    ranges = {m.name: m.total_ns for m in profile.by_kind(MetricKind.RANGE)}
    assert ranges == {
        "get_batch": 1_320_000.0,
        "forward_step": 28_930_000.0,
        "backward_step": 36_530_000.0,
        "optimizer_step": 18_410_000.0,
    }
    dp = profile.find(MetricKind.COMM, "dp_allreduce")
    assert dp is not None and dp.total_ns == 20_000.0
    assert dp.bytes == 373_981_184 * 4  # input__shape=[373981184], torch.float32
    assert dp.attrs["group_kind"] == "dp"
    assert profile.find(MetricKind.COMM, "exp_dp_allreduce") is not None


def test_seed004_sub_operations(seed004: Path) -> None:
    profile = _one(seed004)
    a2a = profile.find(MetricKind.COMM, "all_to_all[exp]", scope="forward_step")
    assert a2a is not None
    assert a2a.calls == 8
    assert a2a.attrs["comm_func"] == "all_to_all"
    assert a2a.min_ns == 0.0 and a2a.max_ns == 40_000.0
    gather = profile.find(
        MetricKind.COMM,
        "allgather[exp] gather_along_first_dim_expert_parallel",
        scope="forward_step",
    )
    assert gather is not None and gather.calls == 4
    assert profile.find(MetricKind.COMM, "all_to_all[exp]", scope="backward_step") is not None


def test_seed004_steps(seed004: Path) -> None:
    profile = _one(seed004)
    steps = {m.name: m for m in profile.by_kind(MetricKind.STEP)}
    assert set(steps) == {"forward_step", "backward_step", "optimizer_step", "iteration"}
    assert steps["backward_step"].samples_ns == [36_530_000.0]
    # get_batch starts at 3484447921.31 - 1.32 ms, optimizer_step ends at 3484448006.84 ms.
    assert steps["iteration"].samples_ns == pytest.approx([86_850_000.0], abs=1.0)


# --- Echo corpus ----------------------------------------------------------------------------


def test_realistic_rank0(rank0: Path) -> None:
    profile = _one(rank0)
    assert profile.label == "rank0"
    dp = profile.find(MetricKind.COMM, "dp_allreduce")
    assert dp is not None
    assert dp.attrs["description"] == (
        "model_chunk.finish_grad_sync(), All-reduce / reduce-scatter across DP replicas"
    )
    assert dp.bytes == 1_712_942_080 * 4
    linear = profile.find(MetricKind.COMM, "allreduce[tp] linear_fwd", scope="forward_step")
    assert linear is not None and linear.calls == 20
    assert linear.bytes == 20 * 4096 * 5120 * 4
    recv = profile.find(MetricKind.COMM, "recv_backward")
    assert recv is not None and recv.total_ns == 3_078_340_000.0
    assert recv.attrs["mg_states"] == {"cooldown": 1}
    iteration = next(m for m in profile.by_kind(MetricKind.STEP) if m.name == "iteration")
    assert iteration.samples_ns == pytest.approx([3_800_460_000.0], abs=1.0)


def test_scheduling_plan_has_extra_phases(corpus_dir: Path) -> None:
    profile = _one(corpus_dir / ECHO / "fwyc0573_Megatron-LM__scheduling_plan_rank4.txt")
    loss = profile.find(MetricKind.RANGE, "loss_func")
    assert loss is not None and loss.total_ns == 15_840_000.0
    recv = profile.find(MetricKind.COMM, "recv_forward")
    assert recv is not None and recv.attrs["mg_states"] == {"help": 1}


def test_several_ranks_in_one_file(corpus_dir: Path, tmp_path: Path) -> None:
    files = [
        corpus_dir / ECHO / f"fwyc0573_Megatron-LM__realistic_trace_rank{r}.txt" for r in (2, 0)
    ]
    combined = tmp_path / "ranks.txt"
    combined.write_text("".join(f.read_text() for f in files))
    profiles = _parse(combined)
    assert [p.label for p in profiles] == ["rank0", "rank2"]
    alone = _one(files[0])
    assert [m.key for m in profiles[1].metrics] == [m.key for m in alone.metrics]


# --- iterations and warm-up -------------------------------------------------------------------


def _iteration(rank: int, start: float, forward: float, state: str) -> list[str]:
    """One made-up iteration: forward_step, backward_step, optimizer_step (ms)."""
    lines, clock = [], start
    for op, duration in (
        ("forward_step", forward),
        ("backward_step", 2.0),
        ("optimizer_step", 1.0),
    ):
        clock += duration
        lines.append(
            f"rank:{rank}:{op}(stage_id=0,batch_id=0,mg_state={state},"
            f"duration={duration},timestamp={clock:.2f},sub_operations=[])"
        )
    return lines


def test_slow_first_iteration_is_warmup(tmp_path: Path) -> None:
    lines = (
        _iteration(0, 0.0, 40.0, "steady")
        + _iteration(0, 100.0, 10.0, "steady")
        + _iteration(0, 200.0, 10.5, "steady")
    )
    path = tmp_path / "trace.txt"
    path.write_text("\n".join(lines) + "\n")
    profile = _one(path)
    forward = next(m for m in profile.by_kind(MetricKind.STEP) if m.name == "forward_step")
    assert forward.samples_ns == [40_000_000.0, 10_000_000.0, 10_500_000.0]
    assert forward.warmup == 1
    assert profile.steps == 3


def test_pipeline_warmup_state_is_not_process_warmup(tmp_path: Path) -> None:
    lines = _iteration(0, 0.0, 10.0, "warmup") + _iteration(0, 100.0, 10.0, "steady")
    path = tmp_path / "trace.txt"
    path.write_text("\n".join(lines))  # no final newline
    forward = next(m for m in _one(path).by_kind(MetricKind.STEP) if m.name == "forward_step")
    assert forward.warmup == 0


def test_other_log_lines_are_skipped_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "trace.txt"
    path.write_text("starting job\n" + "\n".join(_iteration(3, 0.0, 5.0, "steady")) + "\n")
    profile = _one(path)
    assert profile.label == "rank3"
    assert profile.warnings == ["1 lines that are not rank:N:op(...) records were skipped"]


# --- errors -----------------------------------------------------------------------------------


def test_truncated_record_names_the_line(seed004: Path, tmp_path: Path) -> None:
    text = seed004.read_text()
    cut = tmp_path / "cut.txt"
    cut.write_text(text[: text.index("sub_operations", text.index("rank:2:backward_step"))])
    with pytest.raises(ParseError) as info:
        registry.parse_file(cut, format="megatron_trace")
    assert info.value.line == 3
    assert "rank:N:op" in str(info.value)


def test_missing_duration_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "trace.txt"
    path.write_text("rank:0:forward_step(stage_id=0,duration=None,sub_operations=[])\n")
    with pytest.raises(ParseError, match=r"trace.txt:1: expected duration="):
        registry.parse_file(path, format="megatron_trace")


def test_unbalanced_sub_operations_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "trace.txt"
    path.write_text("rank:0:forward_step(duration=1.0,sub_operations=['a=1)\n")
    with pytest.raises(ParseError, match="malformed record"):
        registry.parse_file(path, format="megatron_trace")


def test_no_records_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.txt"
    path.write_text("hello\n")
    with pytest.raises(ParseError, match="no rank:N:op"):
        megatron_trace.parse(path, options={})


# --- fast paths and streaming ---------------------------------------------------------------

_KEYS = st.sampled_from(["a", "k.v", "_x", " s", "1a", "é", "", "sub_operations"])
_VALUES = st.sampled_from(
    [
        "1.5",
        "None",
        "x y",
        " sp ",
        "[1, 2]",
        "[]",
        "[ ]",
        "['a=1,b=2', 'c=3']",
        "['x']",
        "[ 'a' , 'b' ]",
        "(a, b)",
        "f(1)",
        "a (b, c) d",
        "don't",
        '"q"',
        "a=b",
        "",
        "é",
        "[1, [2]]",
        "(",
        ")",
        "x)",
        "['a\\'b']",
        '["a"]',
        "{a}",
        "a\\b",
        "'a'",
        "a, b",
        "[2048,4096]",
    ]
)
_RECORDS = st.lists(
    st.one_of(st.tuples(_KEYS, _VALUES).map("=".join), _VALUES), min_size=1, max_size=5
).map(",".join)


def _outcome(function: Callable[[str], object], text: str) -> object:
    try:
        return function(text)
    except TokenizeError as exc:
        return ("error", str(exc), exc.column)


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(
    text=st.one_of(
        _RECORDS,
        st.lists(_RECORDS.map(repr), max_size=3).map(lambda items: "[" + ", ".join(items) + "]"),
        st.lists(_RECORDS.map(repr), max_size=3).map(lambda items: " [" + ",".join(items) + "] "),
    )
)
def test_fast_paths_equal_the_scanner(text: str) -> None:
    assert _outcome(parse_kv, text) == _outcome(scan_kv, text)
    assert _outcome(parse_string_list, text) == _outcome(scan_string_list, text)
    assert _outcome(parse_kv_list, text) == _outcome(
        lambda t: [scan_kv(item) for item in scan_string_list(t)], text
    )


def test_free_text_with_a_parenthesised_aside() -> None:
    text = "description=Expert DP sync (expert params, fp32),group_kind=ep_dp"
    assert (
        parse_kv(text)
        == scan_kv(text)
        == {"description": "Expert DP sync (expert params, fp32)", "group_kind": "ep_dp"}
    )


def test_interleaved_ranks_equal_one_file_per_rank(corpus_dir: Path, tmp_path: Path) -> None:
    files = [
        corpus_dir / ECHO / f"fwyc0573_Megatron-LM__realistic_trace_rank{r}.txt" for r in (0, 1)
    ]
    texts = [f.read_text().splitlines() for f in files]
    mixed = [line for pair in zip_longest(*texts, fillvalue="") for line in pair]
    path = tmp_path / "mixed.txt"
    path.write_text("\n".join(mixed) + "\n")
    assert [p.metrics for p in _parse(path)] == [_one(f).metrics for f in files]


def test_a_missing_timestamp_drops_only_the_iteration(tmp_path: Path) -> None:
    lines = _iteration(0, 0.0, 10.0, "steady") + _iteration(0, 100.0, 10.0, "steady")
    lines[4] = lines[4].replace(",timestamp=", ",timestamp=None,was=")
    path = tmp_path / "trace.txt"
    path.write_text("\n".join(lines) + "\n")
    steps = {m.name for m in _one(path).by_kind(MetricKind.STEP)}
    assert steps == {"forward_step", "backward_step", "optimizer_step"}


def test_sub_operations_named_alike_are_one_metric(tmp_path: Path) -> None:
    subs = [
        "group=tp,comm_func=allreduce,duration=1.0,input__shape=[4],input__dtype=torch.int8",
        "group= tp ,comm_func=allreduce ,duration=2.0,input__shape=[2, 2],"
        "input__dtype=torch.float16",
        "group=tp,comm_func=allreduce,duration=None,input__shape=None,input__dtype=int8",
    ]
    line = f"rank:0:forward_step(duration=5.0,sub_operations={subs!r})"
    path = tmp_path / "trace.txt"
    path.write_text(line + "\n" + line.replace("input__shape=None", "input__shape=[1]") + "\n")
    [sub] = [m for m in _one(path).by_kind(MetricKind.COMM) if m.scope == "forward_step"]
    assert (sub.name, sub.calls, sub.samples_ns) == ("allreduce[tp]", 6, [1e6, 2e6] * 2)
    assert sub.bytes is None  # one call has no shape: a partial sum would understate it
    assert sub.attrs == {"comm_func": "allreduce", "group": "tp", "input__dtype": "torch.int8"}


def test_durations_with_units_or_grouping_still_parse(tmp_path: Path) -> None:
    path = tmp_path / "trace.txt"
    path.write_text(
        "rank:0:get_batch(duration=1,234.5,sub_operations=[])\n"
        "rank:0:get_batch(duration=250us,sub_operations=[])\n"
        "rank:0:get_batch(duration= 2.5 ,sub_operations=[])\n"
    )
    [metric] = _one(path).by_kind(MetricKind.RANGE)
    assert metric.samples_ns == [1_234_500_000.0, 250_000.0, 2_500_000.0]
