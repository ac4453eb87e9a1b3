"""Workload tables: seed 002 (header-row TSV), ASTRA-sim 1.0, SimAI/AICB, AICB CSV and AIOB."""

from __future__ import annotations

import gzip
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfci.core.errors import ConfigError, ParseError
from perfci.core.model import Metric, MetricKind, Profile
from perfci.formats import registry
from perfci.formats._textio import iter_lines, read_text, scaled_decimal

ASTRA = "astrasim_workload"
AICB = "aicb_simai"


def _one(path: Path, **options: str) -> Profile:
    [profile] = registry.parse_file(path, options=options)
    return profile


def _get(profile: Profile, kind: MetricKind, name: str, scope: str | None = None) -> Metric:
    metric = profile.find(kind, name, scope=scope)
    assert metric is not None, f"no {kind.value} metric {name!r} (scope {scope!r})"
    return metric


@pytest.fixture()
def seed002(seeds_dir: Path) -> Path:
    return next(seeds_dir.glob("002_*"))


def _corpus(corpus_dir: Path, folder: str, name: str) -> Path:
    return corpus_dir / folder / name


# --- seed 002: header-row TSV -----------------------------------------------------------------


def test_seed002_is_detected(seed002: Path) -> None:
    assert registry.detect(seed002).name == "workload_table"


def test_seed002_layers_in_ms(seed002: Path) -> None:
    profile = _one(seed002)
    assert profile.metadata["dialect"] == "tsv"
    assert profile.metadata["time_unit"] == "ms"
    assert profile.metadata["layers"] == 51
    addmm = _get(profile, MetricKind.LAYER, "addmm/forward")
    assert addmm.total_ns == 9_980_884.3806386  # 9.9808843806386 ms
    assert addmm.attrs == {"layer": "addmm", "phase": "forward"}
    getitem = _get(profile, MetricKind.LAYER, "getitem/forward")
    assert getitem.total_ns == float(Decimal("4.791370158793459e-09") * 10**6)
    # backward / weight-grad compute times are all 0.0 in this seed: no metric for them.
    assert profile.find(MetricKind.LAYER, "addmm/input_grad") is None
    assert len(profile.by_kind(MetricKind.LAYER)) == 42  # the 9 *_grad rows have no compute


def test_seed002_comm_rows(seed002: Path) -> None:
    profile = _one(seed002)
    comms = profile.by_kind(MetricKind.COMM)
    assert len(comms) == 9
    assert all(m.name.endswith("_grad/input_grad") for m in comms)
    grad = _get(profile, MetricKind.COMM, "addmm_grad/input_grad")
    assert grad.bytes == 4_919_040
    assert grad.attrs["comm_type"] == "ALLREDUCE_ASYNC"
    assert _get(profile, MetricKind.COMM, "lm_head_grad/input_grad").bytes == 64_379_217


def test_time_unit_option_rescales(seed002: Path) -> None:
    profile = _one(seed002, time_unit="us")
    assert _get(profile, MetricKind.LAYER, "addmm/forward").total_ns == 9_980.8843806386
    assert profile.metadata["time_unit_source"] == "option"


def test_bad_options_are_config_errors(seed002: Path) -> None:
    with pytest.raises(ConfigError, match="valid: ns, us, ms, s, cycles"):
        _one(seed002, time_unit="fortnights")
    with pytest.raises(ConfigError, match="unknown dialect"):
        _one(seed002, dialect="excel")


# --- ASTRA-sim 1.0 ----------------------------------------------------------------------------


def test_astrasim_transformer(corpus_dir: Path) -> None:
    profile = _one(
        _corpus(corpus_dir, ASTRA, "astra-sim__ASTRA-sim-1.0__Transformer_HybridParallel.txt")
    )
    assert profile.metadata["parallelism"] == "HYBRID_TRANSFORMER"
    assert profile.metadata["header"] == {"model_parallel_NPU_group": 4}
    assert profile.metadata["layers"] == 57
    assert profile.metadata["time_unit"] == "cycles"
    assert "1:1 as ns" in profile.metadata["time_unit_note"]
    q1 = _get(profile, MetricKind.COMM, "Q1/input_grad")
    assert (q1.bytes, q1.attrs["comm_type"]) == (8_388_608, "ALLREDUCE")
    assert _get(profile, MetricKind.LAYER, "Q1/weight_grad").total_ns == 2_228_224


def test_astrasim_double_tabs_and_no_final_newline(corpus_dir: Path) -> None:
    path = _corpus(
        corpus_dir, ASTRA, "astra-sim__ASTRA-sim-1.0__Transformer_HybridParallel_Fwd_In_Bckwd.txt"
    )
    assert not path.read_bytes().endswith(b"\n")
    profile = _one(path)
    assert profile.metadata["header"]["checkpoints"] == [2, 2, 11]
    assert profile.metadata["header"]["checkpoint_initiates"] == [2, 19, 10]
    assert _get(profile, MetricKind.LAYER, "Q1/forward").total_ns == 4_946_203
    last = _get(profile, MetricKind.COMM, "projection/forward")
    assert (last.bytes, last.attrs["comm_type"]) == (49_152, "ALLREDUCE")
    assert _get(profile, MetricKind.COMM, "TokenEmbedding/weight_grad").bytes == 306_432_000


def test_astrasim_per_layer_parallelism(corpus_dir: Path) -> None:
    profile = _one(
        _corpus(
            corpus_dir,
            ASTRA,
            "astra-sim__ASTRA-sim-1.0__sample_per_layer_parallel_HybridCustomized.txt",
        )
    )
    assert (
        _get(profile, MetricKind.LAYER, "layer_64_2_mlp0/forward").attrs["parallelism"]
        == "HYBRID_DATA_MODEL"
    )
    assert _get(profile, MetricKind.LAYER, "layer_64_2_mlp2/forward").attrs["parallelism"] == "DATA"
    # "REDUCESCATTER\t\t147456": the empty field from the double tab is not a column.
    assert _get(profile, MetricKind.COMM, "layer_64_2_mlp3/input_grad").bytes == 147_456


def test_astrasim_cycles_can_be_given_a_unit(corpus_dir: Path) -> None:
    path = _corpus(corpus_dir, ASTRA, "astra-sim__ASTRA-sim-1.0__microAllReduce.txt")
    assert _get(_one(path), MetricKind.LAYER, "conv1/forward").total_ns == 5
    assert _get(_one(path, time_unit="us"), MetricKind.LAYER, "conv1/forward").total_ns == 5_000


# --- SimAI / AICB workloads -------------------------------------------------------------------


def test_simai_repeated_layers_are_indexed(corpus_dir: Path) -> None:
    path = _corpus(
        corpus_dir,
        AICB,
        "aliyun_aicb__workload__simAI__model_workload__"
        "L7B-M1-C04_Llama7B_megatron_tp2_pp1_mbs1_A100.txt",
    )
    rows = [line for line in path.read_text().splitlines() if line.startswith("attention_layer\t")]
    profile = _one(path)
    assert profile.metadata["dialect"] == "simai"  # BROADCAST is a SimAI-only comm type
    assert profile.metadata["time_unit"] == "ns"
    names = [
        m.name
        for m in profile.by_kind(MetricKind.LAYER)
        if m.name.startswith("attention_layer#") and m.name.endswith("/forward")
    ]
    assert len(names) == len(rows) == 32
    assert names[0] == "attention_layer#1/forward" and names[-1] == "attention_layer#32/forward"
    assert _get(profile, MetricKind.LAYER, "attention_layer#1/forward").total_ns == 539_986
    assert _get(profile, MetricKind.COMM, "norm/forward").attrs["comm_type"] == "BROADCAST"


def test_simai_mixed_whitespace(corpus_dir: Path) -> None:
    profile = _one(
        _corpus(
            corpus_dir,
            AICB,
            "aliyun_aicb__workload__simAI__model_workload__"
            "L7B-D1-C02_Llama7B_deepspeed_zero3_A100.txt",
        )
    )
    assert profile.metadata["dialect"] == "simai"  # process_time is AICB's constant 100
    # "NONE\t0   4756000\tALLGATHER": spaces instead of a tab between two fields.
    assert _get(profile, MetricKind.LAYER, "Llama_layer1/input_grad").total_ns == 4_756_000
    assert _get(profile, MetricKind.COMM, "Llama_layer1/input_grad").bytes == 357_468
    assert _get(profile, MetricKind.COMM, "Llama_layer1/weight_grad").bytes == 1_889_785_610


def test_simai_header_without_colon(corpus_dir: Path) -> None:
    profile = _one(_corpus(corpus_dir, AICB, "aliyun_SimAI__example__workload_analytical.txt"))
    header = profile.metadata["header"]
    assert header["pp_comm"] == 50_331_648  # written "pp_comm 50331648"
    assert (header["ep"], header["pp"], header["all_gpus"]) == (16, 12, 9216)
    assert profile.metadata["layers"] == 1789
    assert _get(profile, MetricKind.LAYER, "grad_param_compute/input_grad").total_ns == 29_700_224


# --- AICB communication CSV and AIOB ----------------------------------------------------------


def test_aicb_post_run_csv(corpus_dir: Path) -> None:
    profile = _one(_corpus(corpus_dir, AICB, "aliyun_aicb__visualize__inputs__A100_example.csv"))
    assert profile.metadata["dialect"] == "aicb_csv"
    [step] = profile.by_kind(MetricKind.STEP)
    assert step.name == "iteration" and step.calls == 10 and profile.steps == 10
    assert step.samples_ns is not None
    assert step.samples_ns[0] == 3_298_480_033.8745117  # 3298.4800338745117 ms
    assert step.warmup == 1
    assert profile.metadata["setup_ns"] == 7_950_412_988.66272  # the init-only segment
    a2a = _get(profile, MetricKind.COMM, "all_to_all[ep_group]", scope="forward.MoE")
    assert a2a.calls == 1280 and a2a.bytes == 1280 * 33_554_432
    assert "comm_group_size" not in a2a.attrs  # the log writes None for ep_group
    gather = _get(profile, MetricKind.COMM, "all_gather[tp_group]", scope="forward.MoE")
    assert gather.attrs["comm_group_size"] == 2
    first = _get(profile, MetricKind.COMM, "all_reduce[dp_group]", scope="init.model_setup")
    assert first.calls == 4 and first.max_ns == 3_380_222_900.390625


def test_aicb_physical_workload_without_times(corpus_dir: Path) -> None:
    profile = _one(
        _corpus(
            corpus_dir,
            AICB,
            "aliyun_aicb__workload__physical__model_workload__"
            "L7B-M1-C04_Llama7B_megatron_tp2_pp1_mbs1.csv",
        )
    )
    assert profile.metadata["ranks"] == "0-127"
    comms = profile.by_kind(MetricKind.COMM)
    assert comms and all(m.total_ns is None and m.bytes is not None for m in comms)
    assert profile.by_kind(MetricKind.STEP) == []
    assert profile.steps == 1


def test_aiob_compute_file(corpus_dir: Path) -> None:
    profile = _one(_corpus(corpus_dir, AICB, "aliyun_aicb__workload__aiob_inputs__Example.txt"))
    assert profile.metadata["train_iter"] == 10 and profile.steps == 10
    assert len(profile.metrics) == 12
    emb = _get(profile, MetricKind.LAYER, "Emb")
    assert (emb.avg_ns, emb.min_ns, emb.max_ns, emb.calls) == (799_000, 782_000, 857_000, 10)
    assert _get(profile, MetricKind.LAYER, "param_time").avg_ns == 17_374_000


# --- errors -----------------------------------------------------------------------------------


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "workload.txt"
    path.write_text(text)
    return path


def test_cut_astrasim_file_says_so(corpus_dir: Path, tmp_path: Path) -> None:
    text = _corpus(
        corpus_dir, ASTRA, "astra-sim__ASTRA-sim-1.0__Transformer_HybridParallel.txt"
    ).read_text()
    path = _write(tmp_path, "\n".join(text.splitlines()[:10]) + "\n")
    with pytest.raises(ParseError, match="declares 57 layers but only 8 rows follow"):
        registry.parse_file(path)


def test_bad_number_names_line_and_field(tmp_path: Path) -> None:
    path = _write(tmp_path, "DATA\n1\nconv1 -1 5x NONE 0 5 NONE 0 5 ALLREDUCE 1048576 5\n")
    with pytest.raises(ParseError) as info:
        registry.parse_file(path)
    assert info.value.line == 3
    assert "forward compute time" in str(info.value) and "'5x'" in str(info.value)


def test_wrong_field_count(tmp_path: Path) -> None:
    path = _write(tmp_path, "DATA\n1\nconv1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE\n")
    with pytest.raises(ParseError, match=r"workload.txt:3: expected 12 fields"):
        registry.parse_file(path)


def test_shifted_columns_are_caught(tmp_path: Path) -> None:
    path = _write(tmp_path, "DATA\n1\nconv1 -1 5 0 NONE 5 NONE 0 5 ALLREDUCE 1048576 5\n")
    with pytest.raises(ParseError, match="expected a forward communication type"):
        registry.parse_file(path)


def test_tsv_row_with_missing_cells(seed002: Path, tmp_path: Path) -> None:
    header = seed002.read_text().splitlines()[0]
    path = _write(tmp_path, header + "\nmatmul\t2.9\tNone\n")
    with pytest.raises(ParseError, match=r":2: expected 11 tab-separated fields, found 3"):
        registry.parse_file(path)


def test_aiob_without_average(tmp_path: Path) -> None:
    path = _write(tmp_path, "train_iter:3\nEmb:\n    time_gpu_max: 9\n")
    with pytest.raises(ParseError, match="expected time_gpu_avg for 'Emb'"):
        registry.parse_file(path)


def test_not_a_workload_when_forced(tmp_path: Path) -> None:
    path = _write(tmp_path, "hello world\n")
    with pytest.raises(ParseError, match="not a workload table"):
        registry.parse_file(path, format="workload_table")


# --- streaming (large tables are read line by line, numbers on a fast path) --------------------

TSV_HEADER = (
    "name\tforward_compute_time\tforward_comm_type\tforward_comm_size\t"
    "backward_compute_time\tbackward_comm_type\tbackward_comm_size\t"
    "weight_grad_compute_time\tweight_grad_comm_type\tweight_grad_comm_size\t"
    "process_time"
)


def _tsv(tmp_path: Path, *rows: str) -> Path:
    return _write(tmp_path, "\n".join((TSV_HEADER, *rows)) + "\n")


def _row(name: str, forward: str = "0.0", comm: str = "None", size: str = "0") -> str:
    return f"{name}\t{forward}\tNone\t0\t0.0\t{comm}\t{size}\t0.0\tNone\t0\t0"


def test_repeated_names_are_indexed_while_streaming(tmp_path: Path) -> None:
    # "a" repeats only after other rows; "z" first has no metric at all, then one.
    path = _tsv(
        tmp_path,
        _row("a", "1.5"),
        _row("z"),
        _row("b", "2", "ALLREDUCE", "64"),
        _row("a", "3", "ALLREDUCE", "8"),
        _row("z", "4"),
        _row("a", "5"),
    )
    names = [(m.kind.value, m.name) for m in _one(path).metrics]
    assert names == [
        ("layer", "a#1/forward"),
        ("layer", "b/forward"),
        ("comm", "b/input_grad"),
        ("layer", "a#2/forward"),
        ("comm", "a#2/input_grad"),
        ("layer", "z#2/forward"),
        ("layer", "a#3/forward"),
    ]


def test_fast_numbers_equal_decimal_conversion(tmp_path: Path) -> None:
    cells = [
        "4.791370158793459e-09",
        "9.9808843806386",
        "1E+2",
        "7.",
        "0.000123",
        "123456789.123456789",
        "3",
        "1e-330",
        "-0.0",
        " 2.5",
        "1_000",
        "2.5e3",
    ]
    path = _tsv(tmp_path, *(_row(f"r{i}", cell) for i, cell in enumerate(cells)))
    for unit, factor in (("ms", 10**6), ("s", 10**9), ("ns", 1)):
        profile = _one(path, time_unit=unit)
        got = {m.attrs["layer"]: m.total_ns for m in profile.metrics}
        want = {f"r{i}": float(Decimal(cell.strip()) * factor) for i, cell in enumerate(cells)}
        assert got == {k: v for k, v in want.items() if v}


def test_number_memo_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("perfci.formats.workload._layer_metrics._MEMO_SIZE", 3)
    values = [f"{i}.25" for i in range(10)] * 2
    path = _tsv(tmp_path, *(_row(f"r{i}", v, "ALLREDUCE", v) for i, v in enumerate(values)))
    profile = _one(path)
    layers = [m.total_ns for m in profile.by_kind(MetricKind.LAYER)]
    assert layers == [float(Decimal(v) * 10**6) for v in values]
    assert [m.bytes for m in profile.by_kind(MetricKind.COMM)] == [float(v) for v in values]


# Mostly good cells, one bad value each: a bad cell anywhere makes the whole file an error.
_NAMES = ["a", "b", " a", "a ", "a b", "é", "a\u00a0", "x\x1fy"]
_CELLS = {
    "time": ["0", "0.0", "1.5", "2", " 2", "4.79e-09", "1e-330", "None", "-1"],
    "comm": ["None", "NONE", "ALLREDUCE", " ALLREDUCE", "", "BROADCAST", "bad type"],
    "size": ["0", "64", " 64", "None", "7.5", "x"],
    "tail": ["", "\t", "\t\t", " ", "\t1"],  # trailing tabs or space; an extra cell
}


def _outcome(path: Path, *, memos: bool) -> object:
    with pytest.MonkeyPatch.context() as patch:
        if not memos:  # the reference: every row converted from its cells, nothing reused
            patch.setattr("perfci.formats.workload._layer_metrics._remember", lambda _m, _k, v: v)
        try:
            [profile] = registry.parse_file(path, format="workload_table")
        except ParseError as exc:
            return str(exc)
    return profile.metrics, profile.metadata, profile.warnings


@given(
    cells=st.lists(
        st.fixed_dictionaries({key: st.sampled_from(values) for key, values in _CELLS.items()}),
        min_size=1,
        max_size=3,
    ),
    rows=st.lists(st.tuples(st.sampled_from(_NAMES), st.integers(0, 2)), min_size=1, max_size=12),
)
@settings(max_examples=300, deadline=None, derandomize=True, database=None)
def test_reused_rows_and_numbers_equal_fresh_conversion(
    tmp_path_factory: pytest.TempPathFactory,
    cells: list[dict[str, str]],
    rows: list[tuple[str, int]],
) -> None:
    # Rows share their cells but the name (as layers do in real tables), so that row plans
    # and number memos are reused, also for names that need strip() or are not ASCII.
    lines = []
    for name, pick in rows:
        row = cells[pick % len(cells)]
        lines.append(_row(name, row["time"], row["comm"], row["size"]) + row["tail"])
    path = _tsv(tmp_path_factory.mktemp("reuse"), *lines)
    assert _outcome(path, memos=True) == _outcome(path, memos=False)


def test_errors_come_in_the_order_of_a_whole_file_read(tmp_path: Path) -> None:
    # A bad number on line 2 and a short row on line 3: the short row is reported, as before
    # streaming (rows were all split first, numbers converted after).
    path = _tsv(tmp_path, _row("a", "5x"), "b\t1")
    with pytest.raises(ParseError, match=r":3: expected 11 tab-separated fields"):
        registry.parse_file(path)
    path = _write(tmp_path, "DATA\n3\nconv1 -1 5x NONE 0 5 NONE 0 5 ALLREDUCE 1048576 5\n")
    with pytest.raises(ParseError, match="declares 3 layers but only 1 rows follow"):
        registry.parse_file(path)


def test_gzip_crlf_and_bom_read_like_plain(seed002: Path, tmp_path: Path) -> None:
    plain = _one(seed002)
    data = seed002.read_bytes()
    for name, variant in (
        ("crlf.txt", data.replace(b"\n", b"\r\n")),
        ("gz.txt", gzip.compress(data)),
        ("bom.txt", b"\xef\xbb\xbf" + data),
    ):
        path = tmp_path / name
        path.write_bytes(variant)
        profile = _one(path)
        assert profile.metrics == plain.metrics and profile.metadata == plain.metadata


def test_blank_lines_of_tabs_are_skipped(tmp_path: Path) -> None:
    path = _tsv(tmp_path, _row("a", "1"), "\t" * 10, "", " \t ", _row("b", "2"))
    assert [m.name for m in _one(path).metrics] == ["a/forward", "b/forward"]


def test_empty_table_with_forced_dialect_is_a_parse_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "\n  \n")
    with pytest.raises(ParseError, match="expected a header"):
        registry.parse_file(path, format="workload_table", options={"dialect": "tsv"})


def test_lone_bom_line_before_the_table(seed002: Path, tmp_path: Path) -> None:
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbf\n" + seed002.read_bytes())
    assert _one(path).metadata["layers"] == 51


@pytest.mark.parametrize("block_size", [1, 2, 3, 7, 1 << 20])
def test_iter_lines_gives_the_lines_of_splitlines(tmp_path: Path, block_size: int) -> None:
    text = "a\r\nb\rc\n\nd\x0be\x1cf\u2028g\x85h é\ufffd\r"
    data = text.encode() + b"\xff\xe2\x82 tail"
    path = tmp_path / "lines.txt"
    for raw in (data, gzip.compress(data)):
        path.write_bytes(raw)
        want = read_text(path, format="x").splitlines()
        assert list(iter_lines(path, format="x", block_size=block_size)) == want


def test_iter_lines_read_errors_are_parse_errors(tmp_path: Path) -> None:
    path = tmp_path / "cut.gz"
    path.write_bytes(gzip.compress(b"DATA\n1\n" * 1000)[:-20])
    with pytest.raises(ParseError, match="cannot read file"):
        list(iter_lines(path, format="workload_table"))
    with pytest.raises(ParseError, match="cannot read file"):
        list(iter_lines(tmp_path / "absent.txt", format="workload_table"))


@given(
    mantissa=st.integers(0, 10**17),
    point=st.integers(0, 18),
    exponent=st.one_of(st.none(), st.integers(-340, 24)),
    sign=st.sampled_from(["", "-", "+"]),
    power=st.sampled_from([0, 3, 6, 9]),
)
@settings(max_examples=300, deadline=None, derandomize=True, database=None)
def test_scaled_decimal_is_the_decimal_value(
    mantissa: int, point: int, exponent: int | None, sign: str, power: int
) -> None:
    digits = str(mantissa)
    text = sign + (digits[:point] + "." + digits[point:] if 0 < point < len(digits) else digits)
    if exponent is not None:
        text += f"e{exponent}"
    value = scaled_decimal(text, power)
    if value is not None:
        assert repr(value) == repr(float(Decimal(text) * 10**power))


@pytest.mark.parametrize(
    "text",
    [
        "",
        " 1",
        "1 ",
        ".5",
        "1_0",
        "nan",
        "inf",
        "-inf",
        "1e",
        "١",
        "0x10",
        "1,5",
        "+",
        "5ms",
        "1" * 25,
        "1e30",
    ],
)
def test_scaled_decimal_leaves_other_texts_to_decimal(text: str) -> None:
    assert scaled_decimal(text, 6) is None
