"""The Chrome-trace parser's two readers and two reductions give the same profile to the bit.

A small trace is read whole with ``json`` and reduced in plain Python, so that ``perfci parse``
of it imports neither msgspec nor numpy (issue 33); a large one is streamed with msgspec and
reduced with numpy. Which one runs depends on the file's size, its event count and what is
loaded already, so they must agree exactly: on real traces (the shipped example, the corpus),
on traces made here, and on the inputs the whole-file reader hands over to the streaming one.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import SHARED
from hypothesis import given, settings
from hypothesis import strategies as st

from perfci.core.errors import ParseError
from perfci.core.model import MetricKind, Profile
from perfci.formats.pytorch import _chrome_numpy, _chrome_plain, _chrome_small, chrome_trace

EXAMPLE = Path(__file__).resolve().parents[1] / "examples/gpt/profiles"
CORPUS = SHARED / "corpus" / "kineto_chrome_trace"

SIZES = [1, 2, 3, 7, 8, 9, 15, 16, 17, 127, 128, 129, 136, 255, 256, 1000, 8191, 8192, 8193, 20_001]


@pytest.mark.parametrize("size", SIZES)
def test_plain_summary_equals_numpys_to_the_bit(size: int) -> None:
    rng = random.Random(size)
    for magnitude in (3, 7, 12):
        values = [rng.randint(0, 10**magnitude) for _ in range(size)]
        plain = _chrome_plain.Columns.summary(values)
        numpy = _chrome_numpy.Columns.summary(np.array(values, dtype=np.int64))
        assert plain == numpy, (size, magnitude)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=2**53), min_size=1, max_size=300))
def test_plain_summary_equals_numpys_for_any_durations(values: list[int]) -> None:
    assert _chrome_plain.Columns.summary(values) == _chrome_numpy.Columns.summary(
        np.array(values, dtype=np.int64)
    )


def test_plain_columns_group_and_total_as_numpys() -> None:
    rng = random.Random(7)
    spans = [(100.0 * i, 100.0 * i + 90.0) for i in range(6)]
    plain, numpy = _chrome_plain.Columns(), _chrome_numpy.Columns()
    for _ in range(3):  # batches
        ids = [rng.randrange(5) for _ in range(1000)]
        micros = [rng.uniform(0.0, 50.0) for _ in ids]
        # Starts inside steps, in the gaps, before the first, after the last, unknown.
        starts = [rng.choice([rng.uniform(-50.0, 650.0), None]) for _ in ids]
        plain.add(ids, micros, list(starts))
        numpy.add(ids, micros, list(starts))
    grouped, np_grouped = plain.grouped(5), numpy.grouped(5)
    assert [durations for durations, _ in grouped] == [list(d) for d, _ in np_grouped]
    for (durations, begins), (np_durations, np_begins) in zip(grouped, np_grouped, strict=True):
        totals = plain.step_totals(spans, durations, begins)
        assert totals is not None
        assert totals == numpy.step_totals(spans, np_durations, np_begins)
    # A metric absent from one step has no per-step total on either side.
    assert plain.step_totals(spans, [5], [10.0]) is None
    assert numpy.step_totals(spans, np.array([5]), np.array([10.0])) is None


@pytest.mark.parametrize(
    "starts",
    [
        [1.0, 2, True],
        ["1.5", 2.0, "3e2"],
        ["1.5", None, 4.0],
        ["x", 2.0, None],
        [{"a": 1}, 3.0],
        [10**400, 1.0],
        [],
    ],
)
def test_plain_starts_read_as_numpys(starts: list[Any]) -> None:
    plain = list(_chrome_plain.starts_of(starts))
    numpy = _chrome_numpy._starts(starts).tolist()
    assert [str(value) for value in plain] == [str(value) for value in numpy]  # NaN == NaN


# --- whole profiles -----------------------------------------------------------------------


def _parse(path: Path, *, whole: bool, numpy: bool, monkeypatch: pytest.MonkeyPatch) -> Profile:
    """Read whole (plain columns, as always), or streamed with numpy's or plain columns."""
    with monkeypatch.context() as patch:
        if not whole:
            patch.setattr(chrome_trace, "read_small_trace", lambda path, *, format: None)
        columns = _chrome_numpy.Columns if numpy else _chrome_plain.Columns
        patch.setattr(chrome_trace, "columns_for", lambda path: columns())
        [profile] = chrome_trace.parse(path, options={})
    return profile


def _all_ways(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Profile]:
    """Whole, streamed with plain columns, streamed with numpy's."""
    return [
        _parse(path, whole=True, numpy=False, monkeypatch=monkeypatch),
        _parse(path, whole=False, numpy=False, monkeypatch=monkeypatch),
        _parse(path, whole=False, numpy=True, monkeypatch=monkeypatch),
    ]


def _event(name: str, cat: str, ts: float, dur: float, **extra: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, **extra}


def _made_trace() -> dict[str, Any]:
    """Four profiled steps with host operators, kernels, a memcpy, memory instants and a
    metadata block on both sides of the events."""
    rng = random.Random(3)
    events: list[dict[str, Any]] = []
    for step in range(4):
        start = 1000.0 * step
        events.append(_event(f"ProfilerStep#{step + 5}", "user_annotation", start, 900.0))
        for op in range(40):
            name = f"aten::op<{op % 7}>|*_"
            events.append(_event(name, "cpu_op", start + 10 + op * 20, rng.uniform(0.5, 15.5)))
            events.append(_event(f"kernel_{op % 5}", "kernel", start + 11 + op, rng.random()))
        events.append(_event("Memcpy HtoD", "gpu_memcpy", start + 5, 2.5, args={"bytes": 4096}))
        events.append(
            {
                "ph": "i",
                "name": "[memory]",
                "ts": start + 1,
                "args": {"Total Allocated": 1000 * (step + 1), "Device Type": 1, "Device Id": 0},
            }
        )
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}],
        "traceEvents": events,
        "traceName": "made.json",
        "distributedInfo": {"rank": 2},
    }


def test_a_made_trace_reads_the_same_all_four_ways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "made.pt.trace.json"
    path.write_text(json.dumps(_made_trace()), encoding="utf-8")
    assert _chrome_small.read_small_trace(path, format="chrome_trace") is not None
    first, *others = _all_ways(path, monkeypatch)
    assert others == [first, first]
    assert first.steps == 4 and first.label == "rank2"
    op = first.find(MetricKind.OP, "aten::op<3>|*_")
    assert op is not None and op.calls == 4 * 6 and op.step_totals_ns is not None


def test_the_shipped_example_traces_read_the_same_all_three_ways(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Real torch profiler output: 1.5 MB, about 8,000 events, a gzip file."""
    for path in sorted(EXAMPLE.glob("*/r0.pt.trace.json.gz"))[:2]:
        first, *others = _all_ways(path, monkeypatch)
        assert others == [first, first], path
        assert first.steps == 4 and len(first.metrics) > 100


def test_a_small_gzip_trace_is_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "made.pt.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(_made_trace()).encode()))
    assert _chrome_small.read_small_trace(path, format="chrome_trace") is not None
    first, *others = _all_ways(path, monkeypatch)
    assert others == [first, first]


@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is absent")
def test_the_corpus_reads_the_same_all_four_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    paths = sorted(CORPUS.glob("*.json*"))
    assert len(paths) >= 8
    for path in paths:
        first, *others = _all_ways(path, monkeypatch)
        assert others == [first, first], path.name
        small = _chrome_small.read_small_trace(path, format="chrome_trace")
        # Every corpus file small enough is plain enough to be read whole.
        assert (small is not None) == (_inflated_size(path) <= _chrome_small.SMALL_BYTES)


def _inflated_size(path: Path) -> int:
    data = path.read_bytes()
    return len(gzip.decompress(data) if path.suffix == ".gz" else data)


# --- what the whole-file reader hands over ------------------------------------------------

_PLAIN = json.dumps({"traceEvents": [_event("a", "cpu_op", 1.0, 2.0)]})

HANDED_OVER = {
    "a bare inf (torch 1.8)": _PLAIN.replace('"tid": 1', '"bw": inf'),
    "a bare NaN": _PLAIN.replace('"tid": 1', '"bw": NaN'),
    "a number beyond a double": _PLAIN.replace('"dur": 2.0', '"dur": 1.8e308'),
    "a lone surrogate": _PLAIN.replace('"a"', '"\\ud800"'),
    "a key given twice": _PLAIN.replace('"dur": 2.0', '"dur": "x", "dur": 2.0'),
    "a wrongly typed dur": _PLAIN.replace('"dur": 2.0', '"dur": "2.0"'),
    "a bool dur": _PLAIN.replace('"dur": 2.0', '"dur": true'),
    "a numeric name": _PLAIN.replace('"name": "a"', '"name": 5'),
    "args not an object": _PLAIN.replace('"tid": 1', '"args": [1]'),
    "an event not an object": _PLAIN.replace('{"ph"', '3, {"ph"'),
    "traceEvents not an array": '{"traceEvents": {}}',
    "traceEvents twice": '{"traceEvents": [], "x": {"traceEvents": []}}',
    "no traceEvents": '{"schemaVersion": 1}',
    "a syntax error": _PLAIN[:-3],
    "text after the object": _PLAIN + "x",
    "an empty file": "",
    "a JSON string": '"trace"',
    "an implausible dur": _PLAIN.replace('"dur": 2.0', '"dur": 1e16'),
    "a complete event without dur": _PLAIN.replace('"dur": 2.0, ', ""),
}


@pytest.mark.parametrize("case", sorted(HANDED_OVER))
def test_what_the_whole_reader_does_not_take_reads_as_the_stream_says(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.json"
    path.write_text(HANDED_OVER[case], encoding="utf-8")
    outcomes = []
    for whole in (True, False):
        try:
            outcomes.append(_parse(path, whole=whole, numpy=False, monkeypatch=monkeypatch))
        except ParseError as exc:
            outcomes.append((exc.message, exc.line))
    assert outcomes[0] == outcomes[1]
    if case not in ("an implausible dur", "a complete event without dur"):  # decoded, then
        assert _chrome_small.read_small_trace(path, format="chrome_trace") is None  # refused


def test_a_file_over_the_size_is_streamed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.json"
    path.write_text(_PLAIN, encoding="utf-8")
    assert _chrome_small.read_small_trace(path, format="chrome_trace") is not None
    monkeypatch.setattr(_chrome_small, "SMALL_BYTES", len(_PLAIN) - 1)
    assert _chrome_small.read_small_trace(path, format="chrome_trace") is None
