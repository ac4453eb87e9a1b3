"""SimAI's ``<prefix>EndToEnd.csv``, written here in the shapes aliyun/SimAI's
``astra-sim/workload/Layer.cc`` (``Layer::report``) prints: no public results file is in
../shared/corpus. The ns-3 build writes the header

    "layer_name,"+run_name+",fwd compute,wg compute,ig compute,fwd exposed comm,wg exposed comm,
    ig exposed comm,fwd total comm,algbw,busbw,wg total comm,algbw,busbw,ig total comm,algbw,
    busbw,workload finished at"

(one line), rows of ``std::to_string`` µs, a ``SUM,`` row and ``total exposed comm,<x>,total
comp,<y>,total time,<z>``; ``CSVWriter::write_res`` then prepends the summary (``File name,
Expose DP comm, ...`` and its ``value (percent%)`` line). The analytical build drops ``workload
finished at``, the ``SUM`` and total rows, and prints whole µs."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SHARED

from perfci.core.errors import ParseError
from perfci.core.model import Better, Metric, MetricKind, Profile
from perfci.formats import registry
from perfci.formats.workload import simai_results

K = MetricKind
RATES = "algbw,busbw"
HEADER = (
    "layer_name,{run},fwd compute,wg compute,ig compute,fwd exposed comm,wg exposed comm,"
    f"ig exposed comm,fwd total comm,{RATES},wg total comm,{RATES},ig total comm,{RATES}"
)
NS3_HEADER = HEADER.format(run="test1") + ",workload finished at"
SUMMARY_KEYS = (
    "File name, Expose DP comm, Expose DP_EP comm, Expose TP comm, Expose_EP_comm, "
    "Expose_PP_comm, bubble time, total comp, total exposed comm, Total time"
)
# Each phase's rates differ, so a rate read from another phase's columns shows.
NS3_ROWS = [
    # A layer with only a data-parallel collective: no compute, 0/0 rates for the other phases.
    "grad_norm,test1,0.000000,0.000000,0.000000,0.000000,1200.000000,0.000000,0.000000,-nan,"
    "0.000000,3000.500000,931.322571,1746.229820,0.000000,-nan,0.000000,60612.345000",
    "attention_layer,test1,1500.000000,1400.000000,1300.000000,123.456000,0.000000,20.000000,"
    "400.000000,58.207661,87.311491,0.000000,-nan,0.000000,380.000000,61.271222,91.906833,"
    "60612.345000",
    "mlp_layer,test1,2500.000000,2400.000000,2300.000000,200.000000,0.000000,10.000000,"
    "800.000000,58.207661,87.311491,0.000000,-nan,0.000000,760.000000,61.271222,91.906833,"
    "60612.345000",
    "attention_layer,test1,1500.000000,1400.000000,1300.000000,123.456000,0.000000,20.000000,"
    "400.000000,58.207661,87.311491,0.000000,-nan,0.000000,380.000000,61.271222,91.906833,"
    "60612.345000",
]
NS3 = [
    SUMMARY_KEYS,
    "test1, 1200 (1.98%), 0 (0.00%), 800 (1.32%), 0 (0.00%), 0 (0.00%), 0 (0.00%), "
    "56000 (92.39%), 4612 (7.61%), 60612",
    NS3_HEADER,
    *NS3_ROWS,
    "SUM,test1,5500.000000,5200.000000,4900.000000,446.912000,1200.000000,50.000000,"
    "1600.000000,NONE,NONE,3000.500000,NONE,NONE,1520.000000,NONE,NONE",
    "total exposed comm,4612.345000,total comp,56000.000000,total time,60612.345000",
]
ANALYTICAL = [
    SUMMARY_KEYS,
    "llama7b-tp2-pp1-dp4, 1200 (9.26%), 0 (0.00%), 354 (2.73%), 0 (0.00%), 0 (0.00%), "
    "0 (0.00%), 11400 (88.00%), 1554 (12.00%), 12954",
    HEADER.format(run="Analytical_test"),
    "attention_layer,Analytical_test,1500,1400,1300,124,0,20,124,58.21,87.31,0,-nan,0.00,20,"
    "61.27,91.91",
    "mlp_layer,Analytical_test,2500,2400,2300,200,0,10,200,58.21,87.31,0,-nan,0.00,10,61.27,91.91",
    "grad_norm,Analytical_test,0,0,0,0,1200,0,0,-nan,0.00,1200,931.32,1746.23,0,-nan,0.00",
]
NS3_LINE = {line: number for number, line in enumerate(NS3, 1)}


def _write(
    tmp_path: Path, lines: list[str], *, sep: str = "\n", end: str = "\n", name: str = "a.csv"
) -> Path:
    path = tmp_path / name
    path.write_bytes((sep.join(lines) + end).encode())
    return path


def _one(path: Path) -> Profile:
    assert registry.detect(path).name == "simai_results"
    [profile] = registry.parse_file(path)
    return profile


def _get(profile: Profile, kind: MetricKind, name: str) -> Metric:
    metric = profile.find(kind, name)
    assert metric is not None, f"no {kind.value} {name!r}"
    return metric


def _names(profile: Profile, kind: MetricKind) -> list[str]:
    return [metric.name for metric in profile.by_kind(kind)]


def test_layer_rows_give_compute_and_exposed_comm_per_phase(tmp_path: Path) -> None:
    profile = _one(_write(tmp_path, NS3, name="ncclFlowModel_EndToEnd.csv"))
    # 3 layers x 3 phases of compute (grad_norm computes nothing); exposed comm where non-zero.
    assert len(profile.by_kind(K.LAYER)) == 9
    assert _names(profile, K.COMM) == [
        "grad_norm/weight_grad",
        "attention_layer#1/forward",
        "attention_layer#1/input_grad",
        "mlp_layer/forward",
        "mlp_layer/input_grad",
        "attention_layer#2/forward",
        "attention_layer#2/input_grad",
    ]
    # µs → ns, exactly.
    assert _get(profile, K.LAYER, "mlp_layer/weight_grad").total_ns == 2_400_000.0
    forward = _get(profile, K.COMM, "attention_layer#1/forward")
    assert (forward.total_ns, forward.avg_ns, forward.calls) == (123_456.0, 123_456.0, 1)
    assert forward.attrs["layer"] == "attention_layer"
    assert profile.find(K.LAYER, "attention_layer/forward") is None  # repeated: indexed


def test_each_phase_takes_the_algbw_and_busbw_after_its_total_comm(tmp_path: Path) -> None:
    profile = _one(_write(tmp_path, NS3))
    forward = _get(profile, K.COMM, "mlp_layer/forward").attrs
    assert (forward["total_comm_ns"], forward["algbw_gib_s"], forward["busbw_gib_s"]) == (
        800_000.0,
        58.207661,
        87.311491,
    )
    input_grad = _get(profile, K.COMM, "mlp_layer/input_grad").attrs
    assert (input_grad["algbw_gib_s"], input_grad["busbw_gib_s"]) == (61.271222, 91.906833)
    weight_grad = _get(profile, K.COMM, "grad_norm/weight_grad")
    assert weight_grad.total_ns == 1_200_000.0
    assert weight_grad.attrs == {
        "layer": "grad_norm",
        "phase": "weight_grad",
        "comm_time": "exposed",
        "total_comm_ns": 3_000_500.0,
        "algbw_gib_s": 931.322571,
        "busbw_gib_s": 1746.22982,
    }


def test_the_run_is_one_iteration_with_its_totals_as_measures(tmp_path: Path) -> None:
    profile = _one(_write(tmp_path, NS3))
    assert profile.steps == 1
    [step] = profile.by_kind(K.STEP)
    assert (step.name, step.samples_ns) == ("iteration", [60_612_345.0])
    assert "'total time' row" in step.attrs["definition"]
    measures = {m.name: m for m in profile.by_kind(K.MEASURE)}
    # Zero totals (DP_EP, EP, PP, bubble) are left out.
    assert set(measures) == {
        "total compute",
        "total exposed comm",
        "exposed DP comm",
        "exposed TP comm",
        "total comm/forward",
        "total comm/input_grad",
        "total comm/weight_grad",
    }
    # The total row's six decimals win over the summary's whole µs; its percent is kept.
    exposed = measures["total exposed comm"]
    assert (exposed.avg_ns, exposed.attrs["percent_of_total"]) == (4_612_345.0, 7.61)
    assert (exposed.unit, exposed.better) == ("ns", Better.LOWER)
    assert measures["exposed DP comm"].avg_ns == 1_200_000.0
    assert measures["exposed DP comm"].attrs == {"percent_of_total": 1.98}
    assert measures["total comm/weight_grad"].avg_ns == 3_000_500.0  # the SUM row
    assert profile.metadata == {
        "run_name": "test1",
        "file_name": "test1",
        "layers": 4,
        "time_unit": "us (converted to ns)",
        "rate_unit": "GiB/s",
    }
    assert profile.warnings == []


def test_the_analytical_build_has_no_finish_column_sum_or_total_row(tmp_path: Path) -> None:
    profile = _one(_write(tmp_path, ANALYTICAL, name="llama7b-tp2-pp1-dp4EndToEnd.csv"))
    [step] = profile.by_kind(K.STEP)
    assert step.samples_ns == [12_954_000.0]  # the summary's Total time
    assert "summary" in step.attrs["definition"]
    assert _get(profile, K.MEASURE, "total compute").avg_ns == 11_400_000.0
    # No SUM row: the layers' sum per phase.
    assert _get(profile, K.MEASURE, "total comm/input_grad").avg_ns == 30_000.0
    assert _get(profile, K.COMM, "attention_layer/forward").attrs["algbw_gib_s"] == 58.21
    assert profile.metadata["run_name"] == "Analytical_test"
    assert profile.metadata["file_name"] == "llama7b-tp2-pp1-dp4"
    assert len(profile.metrics) == 1 + 7 + 6 + 5  # step, measures, layers, comms


def test_a_file_without_summary_takes_its_step_from_workload_finished_at(
    tmp_path: Path,
) -> None:
    profile = _one(_write(tmp_path, [NS3_HEADER, *NS3_ROWS]))
    [step] = profile.by_kind(K.STEP)
    assert step.samples_ns == [60_612_345.0]
    assert "workload finished at" in step.attrs["definition"]
    assert "file_name" not in profile.metadata
    assert _get(profile, K.MEASURE, "total comm/forward").avg_ns == 1_600_000.0


def test_summary_keys_without_their_values_line_leave_the_header_alone(tmp_path: Path) -> None:
    profile = _one(_write(tmp_path, [SUMMARY_KEYS, NS3_HEADER, *NS3_ROWS]))
    assert profile.metadata["layers"] == 4
    assert "file_name" not in profile.metadata
    assert profile.find(K.MEASURE, "exposed DP comm") is None


def test_non_finite_cells_are_left_out_with_a_warning(tmp_path: Path) -> None:
    lines = [*ANALYTICAL]
    lines[1] = (
        "x, 0 (nan%), 0 (nan%), 0 (nan%), 0 (nan%), 0 (nan%), NaN or Inf (nan%), "
        "11400 (nan%), 1554 (nan%), NaN or Inf"
    )
    profile = _one(_write(tmp_path, lines))
    assert profile.by_kind(K.STEP) == []
    assert profile.find(K.MEASURE, "pipeline bubble") is None
    assert _get(profile, K.MEASURE, "total compute").attrs == {}
    assert any("non-finite" in w and w.startswith("2 ") for w in profile.warnings)
    assert any("no step metric" in w for w in profile.warnings)


def test_crlf_bom_blank_lines_and_trailing_commas_read_the_same(tmp_path: Path) -> None:
    plain = registry.parse_file(_write(tmp_path, NS3, name="plain.csv"))[0]
    messy = [NS3[0], NS3[1], "", NS3_HEADER + ",", *(row + "," for row in NS3_ROWS), *NS3[-2:]]
    messy[0] = "\ufeff" + messy[0]
    path = _write(tmp_path, messy, sep="\r\n", end="", name="messy.csv")
    assert registry.detect(path).name == "simai_results"
    [profile] = registry.parse_file(path)
    assert profile.metrics == plain.metrics
    assert profile.warnings == []


def test_a_last_row_cut_short_is_left_out_with_a_warning(tmp_path: Path) -> None:
    cut = [NS3_HEADER, *NS3_ROWS[:3], NS3_ROWS[3][:60]]
    profile = _one(_write(tmp_path, cut, end=""))
    assert profile.metadata["layers"] == 3
    assert profile.find(K.LAYER, "attention_layer/forward") is not None  # no second one now
    assert profile.warnings == ["line 5, the file's last line, was cut short: left out"]


@pytest.mark.parametrize(
    ("lines", "line", "expected"),
    [
        # A short row that is not the file's cut-short end.
        ([NS3_HEADER, NS3_ROWS[1][:60], NS3_ROWS[2]], 2, "expected 18 comma-separated cells"),
        ([NS3_HEADER, NS3_ROWS[1] + ",7"], 2, "more than the header's 18 columns"),
        (
            [NS3_HEADER, NS3_ROWS[1].replace("123.456000", "12x.4")],
            2,
            r"expected a number for column 6 \(fwd exposed comm\), found '12x.4'",
        ),
        (
            [NS3_HEADER, NS3_ROWS[0].replace("931.322571", "fast")],
            2,
            r"column 13 \(algbw of wg total comm\), found 'fast'",
        ),
        (
            [NS3_HEADER, NS3_ROWS[1].replace("1400.000000", "-1400.0")],
            2,
            r"non-negative time in column 4 \(wg compute\)",
        ),
        (
            [*NS3[:-1], "total exposed comm,4612.345000,total comp,56000.000000,total time"],
            len(NS3),
            "label,value pairs",
        ),
        ([NS3_HEADER, NS3_ROWS[1], NS3_HEADER], 3, "a second 'layer_name,...' header"),
        (["layer_name,test1,a,b,c", "x,test1,1,2,3"], 1, "fwd compute,wg compute"),
    ],
)
def test_bad_rows_are_errors_naming_line_and_column(
    tmp_path: Path, lines: list[str], line: int, expected: str
) -> None:
    path = _write(tmp_path, lines)
    with pytest.raises(ParseError, match=expected) as caught:
        registry.parse_file(path, format="simai_results")
    assert (caught.value.line, caught.value.format) == (line, "simai_results")
    assert str(caught.value).startswith(f"{path}:{line}: ")


def test_a_bad_number_in_the_summary_names_its_column(tmp_path: Path) -> None:
    lines = [*NS3]
    lines[1] = lines[1].replace("800 (1.32%)", "8OO (1.32%)")
    with pytest.raises(ParseError, match=r"column 4 \(Expose TP comm\), found '8OO'") as caught:
        registry.parse_file(_write(tmp_path, lines))
    assert caught.value.line == NS3_LINE[NS3[1]]


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        ([SUMMARY_KEYS, NS3[1]], "no SimAI results header"),
        ([NS3_HEADER], "header but no layer rows"),
    ],
)
def test_files_without_layers_are_refused(tmp_path: Path, lines: list[str], expected: str) -> None:
    with pytest.raises(ParseError, match=expected):
        registry.parse_file(_write(tmp_path, lines), format="simai_results")


def test_rows_without_a_layer_name_are_left_out_with_a_warning(tmp_path: Path) -> None:
    # SimAI writes the layer cell only for stat row 0.
    profile = _one(_write(tmp_path, [NS3_HEADER, NS3_ROWS[2], "," + NS3_ROWS[1].split(",", 1)[1]]))
    assert profile.metadata["layers"] == 1
    assert any("without a layer name" in w for w in profile.warnings)


def test_layer_names_line_up_with_the_simai_workload_it_simulated(tmp_path: Path) -> None:
    # The AICB workload (ns) that the results above would come from: same layers, same order.
    row = "{}\t-1\t{}\tALLREDUCE\t1048576\t{}\tALLREDUCE\t1048576\t{}\tNONE\t0\t100"
    workload = [
        "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 1 pp: 1 vpp: 2 ga: 1 "
        "all_gpus: 8 checkpoints: 0 checkpoint_initiates: 0 pp_comm: 0",
        "3",
        row.format("attention_layer", 1500000, 1300000, 1400000),
        row.format("mlp_layer", 2500000, 2300000, 2400000),
        row.format("attention_layer", 1500000, 1300000, 1400000),
    ]
    [simulated] = registry.parse_file(_write(tmp_path, workload, name="workload.txt"))
    assert simulated.format == "workload_table"
    results = _one(_write(tmp_path, [NS3_HEADER, *NS3_ROWS[1:]]))
    layers = {m.name: m.total_ns for m in results.by_kind(K.LAYER)}
    assert layers == {m.name: m.total_ns for m in simulated.by_kind(K.LAYER)}
    assert set(_names(results, K.COMM)) == set(_names(simulated, K.COMM))


OTHER_CSV = {
    "dynamo_csv": "dev,name,batch_size,speedup,abs_latency\ncuda,m,1,1.2,3.4\n",
    "nsys_stats_csv": "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),"
    "StdDev (ns),Name\n50.0,100,2,50.0,50.0,40,60,14.1,kernel\n",
    "workload_table": "comm_type,comm_group,comm_group_size,msg_size,stage,dst,src,additional,"
    "_elapsed_time,algbw,busbw,count\nCommType.all_reduce,CommGroup.dp_group,8,1024,"
    "forward.Embedding,,,,1.5,2.0,3.5,1\n",
}


@pytest.mark.parametrize("expected", sorted(OTHER_CSV))
def test_other_csv_formats_keep_their_files(tmp_path: Path, expected: str) -> None:
    path = tmp_path / "other.csv"
    path.write_text(OTHER_CSV[expected])
    assert not simai_results.sniff(registry.read_head(path))
    assert registry.detect(path).name == expected


def test_a_csv_that_only_starts_like_it_is_not_taken(tmp_path: Path) -> None:
    path = _write(tmp_path, ["layer_name,run,forward,backward", "a,run,1,2"])
    assert not simai_results.sniff(registry.read_head(path))
    assert simai_results.sniff(registry.read_head(_write(tmp_path, NS3, name="b.csv")))


@pytest.mark.skipif(not (SHARED / "corpus").is_dir(), reason="needs ../shared/corpus")
def test_no_corpus_file_is_taken_for_it() -> None:
    files = [path for path in sorted((SHARED / "corpus").rglob("*")) if path.is_file()]
    assert files
    taken = [path.name for path in files if simai_results.sniff(registry.read_head(path))]
    assert taken == []
