"""MLPerf training logs (``:::MLLOG`` lines): the six logs of the corpus and small logs written
here. Every number below was read off the files by hand (line numbers in the comments)."""

from __future__ import annotations

import gzip
import io
import json
import statistics
from pathlib import Path
from typing import Any

import pytest
from conftest import shared_path

from perfci.core.errors import ParseError, UnknownFormatError
from perfci.core.model import Better, Metric, MetricKind, Profile
from perfci.formats import registry
from perfci.formats.mlperf import mlperf_log
from perfci.formats.mlperf._events import marked_lines

K = MetricKind
CORPUS = "mlperf_log"
RESNET = "training_results_v4.0__NVIDIA__eos_n8_ngc24.04_mxnet__resnet__result_0.txt"
SSD = "training_results_v4.0__ASUSTeK__ESC8000A-E12-8xH100-PCIE-80GB__ssd__result_1.txt"
COMPLIANCE = (
    "training_results_v4.0__ASUSTeK__ESC8000A-E12-8xH100-PCIE-80GB__ssd__compliance_result.out"
)
DELL_LORA = "training_results_v4.0__Dell__XE9680x8H100-SXM-80GB__llama2_70b_lora__result_0.txt"
NVIDIA_LORA = "training_results_v4.0__NVIDIA__eos_n128_ngc24.04_nemo__llama2_70b_lora__result_0.txt"
DLRM = "training_results_v4.0__NVIDIA__eos_n8_ngc24.04_merlin_hugectr__dlrm_dcnv2__result_0.txt"
BERT = "LambdaLabsML_training_results_v4.0__Lambda_bert_2x8x24x1__240928162719380693721_01.log"
LOGS = (RESNET, SSD, DELL_LORA, NVIDIA_LORA, DLRM, BERT)
MS = 1_000_000  # ns per ms


def _corpus(name: str) -> Path:
    return shared_path("corpus", CORPUS, name)


def _one(path: Path) -> Profile:
    [profile] = registry.parse_file(path)
    return profile


def _get(profile: Profile, kind: MetricKind, name: str) -> Metric:
    metric = profile.find(kind, name)
    assert metric is not None, f"no {kind.value} {name!r}"
    return metric


def _line(key: str, time_ms: int, value: Any = None, **metadata: Any) -> str:
    event = {
        "namespace": "",
        "time_ms": time_ms,
        "event_type": "POINT_IN_TIME",
        "key": key,
        "value": value,
        "metadata": {"file": "train.py", "lineno": 1, **metadata},
    }
    return f":::MLLOG {json.dumps(event)}"


def _write(tmp_path: Path, lines: list[str], name: str = "result_0.txt") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def _run(start: int, *, benchmark: str = "resnet", status: str = "success") -> list[str]:
    """A small complete run: set-up, two epochs of 10 s and 12 s, two evaluations."""
    return [
        _line("cache_clear", start - 2000, True),
        _line("init_start", start - 1000),
        _line("submission_benchmark", start - 1000, benchmark),
        _line("submission_org", start - 1000, "Acme"),
        _line("global_batch_size", start - 1000, 256),
        _line("run_start", start),
        _line("epoch_start", start, epoch_num=1),
        _line("epoch_stop", start + 10_000, epoch_num=1),
        _line("tracked_stats", start + 10_000, {"throughput": 100.0}, step=1),
        _line("eval_accuracy", start + 10_500, 0.5, epoch_num=1),
        _line("epoch_start", start + 10_500, epoch_num=2),
        _line("epoch_stop", start + 22_500, epoch_num=2),
        _line("tracked_stats", start + 22_500, {"throughput": 120.0}, step=2),
        _line("eval_accuracy", start + 23_000, 0.75, epoch_num=2),
        _line("run_stop", start + 23_000, status=status),
    ]


# --- detection ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", LOGS)
def test_corpus_logs_are_detected_as_mlperf_log(name: str) -> None:
    path = _corpus(name)
    assert registry.detect(path).name == "mlperf_log"
    [profile] = registry.parse_file(path)
    assert profile.format == "mlperf_log"
    assert profile.source == str(path)


def test_compliance_checker_output_is_not_a_log() -> None:
    # Five "INFO - Running compliance on file: /results/result_N.txt ... SUCCESS" blocks: the
    # checker's verdict on the logs, with no :::MLLOG line of its own.
    path = _corpus(COMPLIANCE)
    assert ":::MLLOG" not in path.read_text()
    with pytest.raises(UnknownFormatError):
        registry.detect(path)
    with pytest.raises(ParseError, match="no :::MLLOG events"):
        registry.parse_file(path, format="mlperf_log")


def test_sniff_refuses_every_other_corpus_folder_and_the_seeds() -> None:
    corpus = shared_path("corpus")
    others = [
        path
        for folder in sorted(corpus.iterdir())
        if folder.is_dir() and folder.name != CORPUS
        for path in sorted(folder.iterdir())
    ]
    others += sorted(shared_path("seeds").iterdir())
    assert len(others) > 20
    claimed = [p.name for p in others if p.is_file() and mlperf_log.sniff(registry.read_head(p))]
    assert claimed == []


def test_sniff_finds_the_marker_behind_rank_prefixes(tmp_path: Path) -> None:
    for prefix in ("", " 0: ", "[1,0]<stdout>:", "12: "):
        path = _write(tmp_path, ["+ echo start", prefix + _line("init_start", 1)])
        assert mlperf_log.sniff(registry.read_head(path)), prefix
    prose = _write(tmp_path, ["+ grep -c :::MLLOG result_0.txt", ":::DLPAL {}"])
    assert not mlperf_log.sniff(registry.read_head(prose))


# --- ResNet (MXNet, NVIDIA eos_n8): epochs and blocks, throughput every epoch ------------------


@pytest.fixture(scope="module")
def resnet() -> Profile:
    return _one(_corpus(RESNET))


def test_resnet_time_to_train(resnet: Profile) -> None:
    ttt = _get(resnet, K.MEASURE, "time_to_train")
    # run_start 1714090291947 (line 194), run_stop 1714090442273 (line 347): 150.326 s.
    assert ttt.total_ns == ttt.avg_ns == 150_326 * MS
    assert ttt.calls == 1
    assert ttt.unit == "ns" and ttt.better is Better.LOWER
    assert ttt.value is None


def test_resnet_epochs_are_the_step_not_its_blocks(resnet: Profile) -> None:
    # 35 epoch_start/epoch_stop pairs (epoch_num 1..35) and 9 blocks: the epochs, finer, win.
    assert resnet.steps == 35
    assert resnet.find(K.STEP, "block") is None
    epoch = _get(resnet, K.STEP, "epoch")
    assert epoch.calls == 35
    assert epoch.samples_ns is not None and len(epoch.samples_ns) == 35
    # Epoch 1: 1714090293013 (line 198) -> 1714090302510 (line 199); epoch 2: -> 1714090306588.
    assert epoch.samples_ns[:2] == [9_497 * MS, 4_078 * MS]
    # Epoch 35: 1714090438120 (line 340) -> 1714090442196 (line 341).
    assert epoch.samples_ns[-1] == 4_076 * MS
    assert epoch.warmup == 1  # the first epoch (9.5 s against ~4.1 s) warms up


def test_resnet_throughput_per_epoch(resnet: Profile) -> None:
    throughput = _get(resnet, K.MEASURE, "throughput")
    assert throughput.unit == "samples/s" and throughput.better is Better.HIGHER
    assert throughput.samples is not None and len(throughput.samples) == 35
    assert throughput.samples[:2] == [134908.30022538177, 314173.63569472043]  # lines 200, 203
    assert throughput.samples[-1] == 314299.23462248995  # line 342
    assert throughput.value == pytest.approx(statistics.fmean(throughput.samples))
    assert throughput.warmup == 1  # 134908 samples/s against ~314000: the first epoch's
    assert throughput.samples_ns is None and throughput.total_ns is None


def test_resnet_final_eval_accuracy_and_metadata(resnet: Profile) -> None:
    accuracy = _get(resnet, K.MEASURE, "eval_accuracy")
    assert accuracy.value == 0.76074  # line 345, the last of 9
    assert accuracy.calls == 9
    assert accuracy.unit == "accuracy" and accuracy.better is Better.HIGHER
    assert resnet.label == "resnet"
    meta = resnet.metadata
    assert meta["submission_benchmark"] == "resnet"
    assert meta["submission_org"] == "NVIDIA"
    assert meta["submission_division"] == "closed"
    assert meta["submission_status"] == "onprem"
    assert meta["submission_platform"] == "8xNVIDIA DGX H100"
    assert meta["seed"] == 19424
    assert meta["global_batch_size"] == 3200
    assert meta["opt_name"] == "lars"
    assert meta["status"] == "success"
    assert "train_samples" not in meta  # logged after run_start: not set-up
    assert resnet.warnings == []


# --- SSD (ASUSTeK): the last epoch ends after run_stop, 8 ranks log 8 seeds -------------------


def test_ssd_time_to_train_epochs_and_accuracy() -> None:
    ssd = _one(_corpus(SSD))
    # run_start 1715308207598 (line 116), run_stop 1715311462472 (line 144).
    assert _get(ssd, K.MEASURE, "time_to_train").total_ns == 3_254_874 * MS
    epoch = _get(ssd, K.STEP, "epoch")
    assert ssd.steps == 5
    assert epoch.samples_ns is not None
    # Epoch 0: 1715308207599 -> 1715308993423 (lines 119, 120).
    assert epoch.samples_ns[0] == 785_824 * MS
    # Epoch 4 stops on line 145, after run_stop: 1715311455551 -> 1715311462472.
    assert epoch.samples_ns[-1] == 6_921 * MS
    assert _get(ssd, K.MEASURE, "eval_accuracy").value == 0.34696834002342314  # line 142
    throughput = _get(ssd, K.MEASURE, "throughput")
    assert throughput.samples == [
        186.25592742965978,
        186.9444201542919,
        187.58269617933013,
        188.0815964300226,
        199.1251932943137,
    ]
    assert ssd.metadata["submission_org"] == "ASUSTeK"
    assert ssd.metadata["submission_platform"] == "1xESC8000A-E12"
    assert ssd.metadata["seed"] == 1048573905  # the first of the 8 ranks' seeds (line 8)
    assert ssd.metadata["local_batch_size"] == 32


# --- Llama 2 70B LoRA: blocks paired by order, eval_accuracy is a loss ------------------------


def test_dell_lora_blocks_and_eval_loss() -> None:
    lora = _one(_corpus(DELL_LORA))
    assert lora.label == "llama2_70b_lora"
    # run_start 1713994395504 (line 648), run_stop 1713996161336 (line 697).
    assert _get(lora, K.MEASURE, "time_to_train").total_ns == 1_765_832 * MS
    block = _get(lora, K.STEP, "block")
    assert lora.steps == 5
    # block_start samples_count 0 (line 649) ends with block_stop samples_count 1536 (661).
    assert block.samples_ns == [
        797_079 * MS,
        194_279 * MS,
        195_311 * MS,
        194_412 * MS,
        195_079 * MS,
    ]
    loss = _get(lora, K.MEASURE, "eval_accuracy")
    assert loss.value == 0.9239340424537659  # line 695; the target is <= 0.925
    assert loss.unit == "eval loss" and loss.better is Better.LOWER
    assert _get(lora, K.MEASURE, "throughput").samples == [
        1.9597043249334714,
        1.976902323965445,
        1.9664486467095579,
        1.9755451280241,
        1.9687839560519262,
    ]
    assert lora.metadata["submission_org"] == "Dell"
    assert lora.metadata["lora_rank"] == 16
    assert lora.metadata["status"] == "success"


def test_nvidia_lora_128_nodes() -> None:
    lora = _one(_corpus(NVIDIA_LORA))
    # run_start 1714905569479 (line 23), run_stop 1714905658686 (line 90).
    assert _get(lora, K.MEASURE, "time_to_train").total_ns == 89_207 * MS
    block = _get(lora, K.STEP, "block")
    assert block.calls == lora.steps == 11
    assert block.samples_ns is not None
    assert block.samples_ns[:2] == [55_773 * MS, 2_280 * MS]  # lines 24-26, 30-32
    assert _get(lora, K.MEASURE, "eval_accuracy").value == 0.9244787096977234  # line 88
    assert lora.metadata["submission_platform"] == "128xNVIDIA DGX H100"


# --- DLRM DCNv2: one epoch whose stop carries a fractional epoch_num ---------------------------


def test_dlrm_one_epoch_and_final_auc() -> None:
    dlrm = _one(_corpus(DLRM))
    # run_start 1714154050377 (line 31), run_stop 1714154133392 (line 90).
    assert _get(dlrm, K.MEASURE, "time_to_train").total_ns == 83_015 * MS
    # epoch_start epoch_num 0 (line 32) -> epoch_stop epoch_num 0.9494... (line 91).
    assert _get(dlrm, K.STEP, "epoch").samples_ns == [83_015 * MS]
    assert _get(dlrm, K.MEASURE, "throughput").samples == [47927528.75144804]  # line 92
    auc = _get(dlrm, K.MEASURE, "eval_accuracy")
    assert auc.value == 0.8029254078865051  # line 88, the last of 19
    assert auc.calls == 19
    assert auc.better is Better.HIGHER
    assert dlrm.metadata["global_batch_size"] == 135168
    assert dlrm.metadata["cache_clear"] is True


# --- BERT (Lambda, raw slurm log): " 0: " prefixes, bash traces, 16 ranks --------------------


def test_bert_raw_slurm_log() -> None:
    bert = _one(_corpus(BERT))
    assert bert.label == "bert"
    # " 0: :::MLLOG" run_start 1727541073594 (line 1051), run_stop 1727541290963 (line 1221).
    assert _get(bert, K.MEASURE, "time_to_train").total_ns == 217_369 * MS
    # One epoch (1727541073630 -> 1727541290962, lines 1052, 1218) and one block: the epoch.
    assert _get(bert, K.STEP, "epoch").samples_ns == [217_332 * MS]
    assert bert.steps == 1
    throughput = _get(bert, K.MEASURE, "throughput")
    assert throughput.samples is not None and len(throughput.samples) == 19
    assert throughput.samples[0] == 12197.45718569789  # line 1060
    assert throughput.samples[-1] == 12408.327038413554  # line 1222, after run_stop
    assert _get(bert, K.MEASURE, "eval_accuracy").value == 0.7203731536865234  # line 1212
    assert bert.metadata["submission_org"] == "SUBMISSION_ORG_PLACEHOLDER"
    assert bert.metadata["seed"] == 31871
    assert bert.metadata["global_batch_size"] == 768


def test_gzip_log_parses_the_same(tmp_path: Path) -> None:
    path = tmp_path / "result_0.txt.gz"
    path.write_bytes(gzip.compress(_corpus(RESNET).read_bytes()))
    assert registry.detect(path).name == "mlperf_log"
    ttt = _get(_one(path), K.MEASURE, "time_to_train")
    assert ttt.total_ns == 150_326 * MS


# --- cut, garbled, duplicated -----------------------------------------------------------------


def test_log_cut_before_run_stop_keeps_its_blocks(tmp_path: Path) -> None:
    # The Dell log up to line 691: four blocks done, the fifth started (block_start, line 691).
    lines = _corpus(DELL_LORA).read_text().splitlines()[:691]
    lora = _one(_write(tmp_path, lines))
    assert lora.find(K.MEASURE, "time_to_train") is None
    block = _get(lora, K.STEP, "block")
    assert block.samples_ns == [797_079 * MS, 194_279 * MS, 195_311 * MS, 194_412 * MS]
    assert lora.steps == 4
    assert _get(lora, K.MEASURE, "eval_accuracy").value == 0.9294555187225342  # line 689
    assert "status" not in lora.metadata
    assert lora.warnings == [
        "no run_stop event (the log ends before the run did): no time_to_train",
        "1 block_start event(s) without a block_stop",
    ]


def test_rank_prefixes_and_duplicated_lines_count_once(tmp_path: Path) -> None:
    lines = ["+ srun -l --ntasks=4 ./run_and_time.sh", ":::DLPAL dgx-h100 1 8", "STARTING TIMING"]
    for event in _run(1_000_000):
        # Every rank logs every event; mpirun --tag-output and srun -l prefixes mixed.
        lines += [f"[{rank},0]<stdout>:{event}" for rank in range(2)]
        lines += [f"{rank:2d}: {event}" for rank in range(4)]
        lines.append("+ echo 'RESULT,resnet,42,23,root,2024-04-26 12:00:00 AM'")
    lines.append(':::SYSJSON {"submitter": "Acme", "division": "closed"}')
    profile = _one(_write(tmp_path, lines))
    assert _get(profile, K.MEASURE, "time_to_train").total_ns == 23_000 * MS
    assert _get(profile, K.STEP, "epoch").samples_ns == [10_000 * MS, 12_000 * MS]
    assert profile.steps == 2
    throughput = _get(profile, K.MEASURE, "throughput")
    assert throughput.samples == [100.0, 120.0]
    assert throughput.value == 110.0
    eval_accuracy = _get(profile, K.MEASURE, "eval_accuracy")
    assert eval_accuracy.value == 0.75 and eval_accuracy.calls == 2
    assert profile.metadata["submission_org"] == "Acme"
    assert profile.warnings == []


def test_ranks_logging_run_start_at_different_ms_make_one_run(tmp_path: Path) -> None:
    run = _run(1_000_000)
    start = run.index(_line("run_start", 1_000_000))
    run[start + 1 : start + 1] = [_line("run_start", 1_000_003), _line("run_start", 1_000_001)]
    [profile] = registry.parse_file(_write(tmp_path, run))
    assert _get(profile, K.MEASURE, "time_to_train").total_ns == 23_000 * MS  # the first start
    assert profile.warnings == [
        "2 more run_start and 0 more run_stop event(s) in one run: the first of each counts"
    ]


def test_garbled_line_is_skipped_with_a_warning_naming_it(tmp_path: Path) -> None:
    run = _run(1_000_000)
    # Line 9 (1-based): a rank killed mid-write, then another rank's line run into it.
    run[8] = run[8][:60]  # ':::MLLOG {"namespace": "", "time_ms": 1010000, "event_type":'
    run.insert(9, " 3: " + run[9][:40] + " 5: :::MLLOG {broken")
    profile = _one(_write(tmp_path, run))
    assert _get(profile, K.MEASURE, "time_to_train").total_ns == 23_000 * MS
    assert _get(profile, K.MEASURE, "throughput").samples == [120.0]  # line 9's was lost
    assert profile.warnings == [
        "3 :::MLLOG line(s) could not be read and were skipped (first at line 9: invalid "
        "JSON after :::MLLOG (Expecting value))"
    ]


def test_two_events_run_together_on_one_line_are_both_read(tmp_path: Path) -> None:
    run = _run(1_000_000)
    run[6:8] = [f"{run[6]} 1: {run[7]}"]  # epoch_start and epoch_stop of epoch 1 on one line
    profile = _one(_write(tmp_path, run))
    assert _get(profile, K.STEP, "epoch").samples_ns == [10_000 * MS, 12_000 * MS]


def test_a_log_without_one_readable_event_is_a_parse_error_naming_the_line(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, ["+ ./run_and_time.sh", ':::MLLOG {"key": "run_start", "time_'])
    with pytest.raises(ParseError) as caught:
        registry.parse_file(path)
    assert caught.value.line == 2
    assert str(caught.value) == (
        f"{path}:2: invalid JSON after :::MLLOG (Unterminated string starting at) (mlperf_log)"
    )


def test_events_without_key_or_time_are_unreadable(tmp_path: Path) -> None:
    run = _run(1_000_000)
    run += [':::MLLOG {"time_ms": 5, "value": 1}', ':::MLLOG {"key": "x", "time_ms": "soon"}']
    run += [':::MLLOG ["an", "array"]']  # not "{": the marker in prose, not an event
    profile = _one(_write(tmp_path, run))
    assert profile.warnings == [
        "2 :::MLLOG line(s) could not be read and were skipped (first at line 16: the "
        ':::MLLOG object has no "key" string)'
    ]


def test_log_cut_before_run_start_has_nothing_to_measure(tmp_path: Path) -> None:
    path = _write(tmp_path, _run(1_000_000)[:5])
    with pytest.raises(ParseError, match="5 :::MLLOG event\\(s\\) but no run_start"):
        registry.parse_file(path)


def test_inference_loadgen_detail_log_gives_its_results(tmp_path: Path) -> None:
    """LoadGen's detail log: its result_* keys, read by the rule mlperf_summary uses too."""
    lines = [
        _line("loadgen_version", 0, "4.1 @ 3a1b2c"),
        _line("sut_name", 0, "PySUT"),
        _line("effective_scenario", 1, "Server"),
        _line("effective_target_qps", 1, 1000),  # a setting, not a result
        _line("result_scheduled_samples_per_sec", 2, 998.2),
        _line("result_completed_samples_per_sec", 2, 997.9),
        _line("result_99.00_percentile_latency_ns", 2, 14_500_000),
        _line("early_stopping_latency_ms", 2, 15.25),
        _line("result_validity", 2, "VALID"),
        _line("result_min_duration_met", 2, True),
    ]
    profile = _one(_write(tmp_path, lines, "mlperf_log_detail.txt"))
    assert (profile.label, profile.metadata["sut"], profile.metadata["result"]) == (
        "Server",
        "PySUT",
        "VALID",
    )
    scheduled = _get(profile, MetricKind.MEASURE, "result_scheduled_samples_per_sec")
    assert (scheduled.value, scheduled.unit, scheduled.better) == (998.2, "1/s", Better.HIGHER)
    p99 = _get(profile, MetricKind.MEASURE, "result_99.00_percentile_latency_ns")
    assert (p99.avg_ns, p99.unit, p99.better) == (14_500_000, "ns", Better.LOWER)
    assert _get(profile, MetricKind.MEASURE, "early_stopping_latency_ms").avg_ns == 15.25e6
    assert len(profile.metrics) == 4
    assert profile.warnings == []


def test_an_invalid_loadgen_run_is_read_with_a_warning_naming_what_was_unmet(
    tmp_path: Path,
) -> None:
    lines = [
        _line("effective_scenario", 1, "Offline"),
        _line("result_samples_per_second", 2, 1234.5),
        _line("result_validity", 2, "INVALID"),
        _line("result_min_duration_met", 2, False),
        _line("result_min_queries_met", 2, True),
    ]
    profile = _one(_write(tmp_path, lines, "mlperf_log_detail.txt"))
    assert _get(profile, MetricKind.MEASURE, "result_samples_per_second").value == 1234.5
    [warning] = profile.warnings
    assert warning.startswith("LoadGen marked this run INVALID (min duration)")


# --- several runs, status, eval directions ---------------------------------------------------


def test_several_runs_in_one_log_give_one_profile_each(tmp_path: Path) -> None:
    second = _run(2_000_000, status="aborted")
    second[3] = _line("submission_org", 1_999_000, "Other")
    profiles = registry.parse_file(_write(tmp_path, _run(1_000_000) + second))
    assert [p.label for p in profiles] == ["resnet #1", "resnet #2"]
    first, then = profiles
    assert _get(first, K.MEASURE, "time_to_train").total_ns == 23_000 * MS
    assert _get(then, K.MEASURE, "time_to_train").total_ns == 23_000 * MS
    assert first.metadata["submission_org"] == "Acme"
    assert then.metadata["submission_org"] == "Other"
    assert then.metadata["status"] == "aborted"
    assert then.warnings == ["run_stop status is 'aborted', not 'success'"]


def test_a_log_repeated_verbatim_is_one_run(tmp_path: Path) -> None:
    # Same events, same time_ms: the same run read twice, not a second run.
    [profile] = registry.parse_file(_write(tmp_path, _run(1_000_000) * 2))
    assert profile.label == "resnet"
    assert profile.steps == 2


def test_a_restart_without_run_stop_keeps_the_cut_run(tmp_path: Path) -> None:
    cut = _run(1_000_000)[:9]  # set-up, run_start, epoch 1, its throughput
    first, second = registry.parse_file(_write(tmp_path, cut + _run(2_000_000)))
    assert first.find(K.MEASURE, "time_to_train") is None
    assert _get(first, K.STEP, "epoch").samples_ns == [10_000 * MS]
    assert _get(second, K.MEASURE, "time_to_train").total_ns == 23_000 * MS


def test_a_second_run_start_without_set_up_keeps_the_set_up_of_the_first(tmp_path: Path) -> None:
    again = [line for line in _run(2_000_000) if '"key": "run_start"' in line]
    again += _run(2_000_000)[6:]  # epochs, evaluations, run_stop
    first, second = registry.parse_file(_write(tmp_path, _run(1_000_000) + again))
    assert (first.label, second.label) == ("resnet #1", "resnet #2")
    assert second.metadata["submission_org"] == "Acme"
    assert _get(second, K.MEASURE, "time_to_train").total_ns == 23_000 * MS


def test_eval_direction_follows_the_benchmark(tmp_path: Path) -> None:
    gpt3 = _one(_write(tmp_path, _run(1_000_000, benchmark="gpt3"), "gpt3.txt"))
    perplexity = _get(gpt3, K.MEASURE, "eval_accuracy")
    assert (perplexity.unit, perplexity.better) == ("log perplexity", Better.LOWER)
    # Stable Diffusion logs FID and CLIP as eval_accuracy, told apart by metadata.metric.
    run = _run(1_000_000, benchmark="stable_diffusion")
    run[-1:-1] = [
        _line("eval_accuracy", 1_023_000, 80.5, metric="FID", step_num=1000),
        _line("eval_accuracy", 1_023_000, 0.18, metric="CLIP", step_num=1000),
    ]
    sd = _one(_write(tmp_path, run, "sd.txt"))
    fid = _get(sd, K.MEASURE, "eval_accuracy (FID)")
    clip = _get(sd, K.MEASURE, "eval_accuracy (CLIP)")
    assert (fid.value, fid.unit, fid.better) == (80.5, "FID", Better.LOWER)
    assert (clip.value, clip.unit, clip.better) == (0.18, "CLIP score", Better.HIGHER)


# --- the line scan ----------------------------------------------------------------------------


def test_marked_lines_numbers_lines_across_block_boundaries() -> None:
    text = (
        'noise\r\n 0: :::MLLOG {"a": 1}\n\n+ trace :::MLLOG\n'
        '[1,0]<stdout>::::MLLOG {"b": 2} 1: :::MLLOG {"c": 3}\nlast :::MLLOG {"d": 4}'
    )
    expected = [
        (2, '{"a": 1}'),
        (4, ""),
        (5, '{"b": 2} 1: :::MLLOG {"c": 3}'),
        (5, '{"c": 3}'),
        (6, '{"d": 4}'),
    ]
    for block_size in (1, 3, 7, 64, 1 << 20):
        found = list(marked_lines(io.BytesIO(text.encode()), block_size=block_size))
        assert found == expected, block_size
