"""Hugging Face Trainer results, written as transformers writes them: ``save_metrics``'s
``all_results.json`` (``json.dump(..., indent=4, sort_keys=True)``) with ``speed_metrics``'s
keys, and ``trainer_state.json`` (``indent=2, sort_keys=True``) with its ``log_history``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from perfci.core.errors import ParseError
from perfci.core.model import Better, Device, Metric, MetricKind, Profile
from perfci.formats import registry
from perfci.formats.bench import hf_trainer

K = MetricKind

ALL_RESULTS = {
    "epoch": 3.0,
    "eval_accuracy": 0.8578,
    "eval_loss": 0.4112,
    "eval_runtime": 2.1456,
    "eval_samples": 408,
    "eval_samples_per_second": 190.156,
    "eval_steps_per_second": 23.77,
    "total_flos": 2.2532e15,
    "train_loss": 0.3874,
    "train_mem_cpu_alloc_delta": -1048576,
    "train_mem_gpu_peaked_delta": 5368709120,
    "train_runtime": 281.3348,
    "train_samples": 3668,
    "train_samples_per_second": 39.113,
    "train_steps_per_second": 4.894,
}


def _state() -> dict[str, Any]:
    history: list[dict[str, Any]] = []
    for step, eval_s in ((500, 2.2), (1000, 2.0), (1377, 2.1)):
        history.append(
            {
                "epoch": step / 459,
                "grad_norm": 3.2,
                "learning_rate": 1e-5,
                "loss": 0.5,
                "step": step,
            }
        )
        history.append(
            {
                "epoch": step / 459,
                "eval_loss": 0.41,
                "eval_runtime": eval_s,
                "eval_samples_per_second": 408 / eval_s,
                "eval_steps_per_second": 51 / eval_s,
                "step": step,
            }
        )
    history.append(
        {
            "epoch": 3.0,
            "step": 1377,
            "total_flos": 2.2532e15,
            "train_loss": 0.3874,
            "train_runtime": 281.3348,
            "train_samples_per_second": 39.113,
            "train_steps_per_second": 4.894,
        }
    )
    return {
        "best_global_step": None,
        "best_metric": None,
        "best_model_checkpoint": None,
        "epoch": 3.0,
        "eval_steps": 500,
        "global_step": 1377,
        "is_hyper_param_search": False,
        "is_local_process_zero": True,
        "is_world_process_zero": True,
        "log_history": history,
        "logging_steps": 500,
        "max_steps": 1377,
        "num_train_epochs": 3,
        "total_flos": 2.2532e15,
        "train_batch_size": 8,
        "trial_name": None,
        "trial_params": None,
    }


def _write(tmp_path: Path, doc: object, name: str, indent: int = 4) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=indent, sort_keys=True))
    return path


def _one(path: Path) -> Profile:
    assert registry.detect(path).name == "hf_trainer"
    [profile] = registry.parse_file(path)
    return profile


def _get(profile: Profile, name: str) -> Metric:
    metric = profile.find(K.MEASURE, name)
    assert metric is not None, f"no {name!r}: {[m.name for m in profile.metrics]}"
    return metric


def test_all_results_speeds_runtimes_and_peak_memory(tmp_path: Path) -> None:
    profile = _one(_write(tmp_path, ALL_RESULTS, "all_results.json"))
    assert sorted(m.name for m in profile.metrics) == [
        "eval_runtime",
        "eval_samples_per_second",
        "eval_steps_per_second",
        "train_mem_gpu_peaked_delta",
        "train_runtime",
        "train_samples_per_second",
        "train_steps_per_second",
    ]
    runtime = _get(profile, "train_runtime")
    assert (runtime.unit, runtime.total_ns, runtime.better) == (
        "ns",
        281_334_800_000.0,
        Better.LOWER,
    )
    speed = _get(profile, "train_samples_per_second")
    assert (speed.unit, speed.value, speed.better) == ("samples/s", 39.113, Better.HIGHER)
    memory = _get(profile, "train_mem_gpu_peaked_delta")
    assert (memory.unit, memory.value, memory.device) == ("bytes", 5368709120.0, Device.GPU)
    # The model's numbers and the signed allocation delta are kept, not compared.
    results = profile.metadata["results"]
    assert results["eval_accuracy"] == 0.8578 and results["train_mem_cpu_alloc_delta"] == -1048576
    assert not profile.warnings


def test_trainer_state_each_evaluation_is_a_sample(tmp_path: Path) -> None:
    profile = _one(_write(tmp_path, _state(), "trainer_state.json", indent=2))
    runtime = _get(profile, "eval_runtime")
    assert runtime.samples_ns == [2_200_000_000.0, 2_000_000_000.0, 2_100_000_000.0]
    assert runtime.calls == 3
    speed = _get(profile, "eval_samples_per_second")
    assert speed.samples == pytest.approx([408 / 2.2, 408 / 2.0, 408 / 2.1])
    assert _get(profile, "train_runtime").total_ns == 281_334_800_000.0
    assert profile.metadata["global_step"] == 1377
    assert profile.metadata["results"]["train_loss"] == 0.3874


def test_a_long_history_is_still_detected_from_its_first_keys(tmp_path: Path) -> None:
    state = _state()
    state["log_history"] = state["log_history"] * 2000  # far beyond the 256 KiB sniff head
    path = _write(tmp_path, state, "trainer_state.json", indent=2)
    assert path.stat().st_size > registry.HEAD_BYTES
    assert len(_one(path).metrics) == 6


@pytest.mark.parametrize(
    "doc",
    [
        {"eval_runtime": 2.0, "name": "not only numbers"},  # a flat object with text in it
        {"loss": 0.4, "accuracy": 0.9},  # numbers, but no speed key
        {"global_step": 10},  # a step count alone
        [{"name": "train_runtime", "unit": "s", "value": 1.0}],  # the action's custom JSON
    ],
)
def test_sniff_refuses_look_alikes(tmp_path: Path, doc: object) -> None:
    path = _write(tmp_path, doc, "x.json")
    assert not hf_trainer.sniff(registry.read_head(path))


def test_a_negative_speed_is_an_error_naming_the_key(tmp_path: Path) -> None:
    path = _write(tmp_path, {**ALL_RESULTS, "train_runtime": -3.0}, "all_results.json")
    with pytest.raises(ParseError, match=r"'train_runtime' cannot be negative"):
        registry.parse_file(path, format="hf_trainer")


def test_a_cut_file_names_its_line(tmp_path: Path) -> None:
    path = _write(tmp_path, ALL_RESULTS, "all_results.json")
    path.write_text(path.read_text()[:200])
    with pytest.raises(ParseError, match="invalid JSON") as caught:
        registry.parse_file(path, format="hf_trainer")
    assert caught.value.line is not None
