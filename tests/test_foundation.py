"""The shared building blocks: units, the JSON document round trip, the registry."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from perfci.core.errors import ParseError, UnknownFormatError
from perfci.core.jsondoc import from_document, to_document
from perfci.core.model import Device, Metric, MetricKind, Profile
from perfci.core.units import parse_duration, parse_int, parse_number, parse_size
from perfci.formats import registry


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("4.91060s", 4_910_600_000.0),
        ("588ns", 588.0),
        ("4.0922ms", 4_092_200.0),
        ("13.695us", 13_695.0),
        ("  12.979us ", 12_979.0),
        ("3,509,732,403", 3_509_732_403.0),
    ],
)
def test_parse_duration_exact(text: str, ns: float) -> None:
    assert parse_duration(text, unit="ns") == ns


def test_parse_duration_default_unit_and_errors() -> None:
    assert parse_duration("1.5", unit="ms") == 1_500_000.0
    assert parse_duration("--") is None
    with pytest.raises(ValueError, match="without a unit"):
        parse_duration("1.5")
    with pytest.raises(ValueError, match="unknown time unit"):
        parse_duration("1.5parsecs")


def test_numbers_and_sizes() -> None:
    assert parse_int("1,200") == 1200
    assert parse_number("12.373.190", grouping=".") == 12_373_190
    assert parse_number("2.176,0", grouping=".") == 2176.0
    assert parse_number("4.79e-09") == pytest.approx(4.79e-09)
    assert parse_size("4.50 KB") == 4608.0
    assert parse_size("-540.00 MB") == -540.0 * 1024**2
    assert parse_size("492 b") == 492.0
    with pytest.raises(ValueError):
        parse_int("1.5")
    with pytest.raises(ValueError):
        parse_number("nanx")


def _profile() -> Profile:
    return Profile(
        label="p",
        format="nvprof",
        source="x.txt",
        steps=3,
        metadata={"a": 1},
        metrics=[
            Metric(MetricKind.KERNEL, "k<1>|*_", calls=4, total_ns=10.5),
            Metric(
                MetricKind.STEP,
                "Train step",
                device=Device.GPU,
                samples_ns=[8.0, 1.0, 1.0],
                warmup=1,
            ),
            Metric(MetricKind.KERNEL, "sgemm", scope="Layer 0", calls=1),
        ],
    )


def test_document_round_trip(tmp_path: Path) -> None:
    doc = to_document([_profile()])
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(doc))
    [back] = registry.parse_file(path)
    assert back == _profile()
    assert back.find(MetricKind.STEP, "Train step").steady_samples() == [1.0, 1.0]
    assert "self_ns" not in doc["profiles"][0]["metrics"][0]  # absent fields omitted


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"profiles": [{"metrics": [{"kind": "bogus", "name": "x"}]}]}, "unknown metric kind"),
        ({"profiles": [{"metrics": [{"kind": "kernel"}]}]}, "without a 'name'"),
        (
            {"profiles": [{"metrics": [{"kind": "kernel", "name": "x", "total_ns": "1"}]}]},
            "must be a number",
        ),
        ({"profiles": [], "schema_version": 99}, "newer than this perfci"),
        ([1, 2], "expected an object"),
    ],
)
def test_document_rejects_bad_input(doc: object, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        from_document(doc, source="upload.json")


@pytest.mark.parametrize("total", [math.inf, 10**400], ids=["inf", "401 digits"])
def test_document_rejects_non_finite(total: float) -> None:
    # A JSON integer of hundreds of digits is a Python int beyond any float: refused as such,
    # not an OverflowError out of the parser.
    doc = {"profiles": [{"metrics": [{"kind": "kernel", "name": "x", "total_ns": total}]}]}
    with pytest.raises(ParseError, match="'total_ns' must be finite"):
        from_document(doc)


def test_unknown_format_lists_names(tmp_path: Path) -> None:
    path = tmp_path / "mystery.txt"
    path.write_text("nothing a profiler would print\n")
    with pytest.raises(
        UnknownFormatError,
        match=r"text starting 'nothing a profiler would print': not a format perfci reads; "
        r"see `perfci formats`",
    ):
        registry.parse_file(path)
    with pytest.raises(UnknownFormatError, match=r"known formats: .*perfci_json"):
        registry.parse_file(path, format="nope")


@pytest.mark.parametrize(
    ("text", "looks_like"),
    [
        ("[RANK 0] comm op: all_reduce | time (ms): 12.5\n", "text starting '[RANK 0] comm op"),
        ("{step 1} loss 2.5\n", "text starting '{step 1} loss 2.5'"),
        ('[\n  {"case": "gemm"}\n]', "a JSON array of objects with keys case"),
        ("[]", "a JSON array"),
    ],
)
def test_a_log_line_in_brackets_is_not_called_json(
    tmp_path: Path, text: str, looks_like: str
) -> None:
    path = tmp_path / "run.log"
    path.write_text(text)
    with pytest.raises(UnknownFormatError) as caught:
        registry.parse_file(path)
    assert f"{looks_like}" in str(caught.value)


@pytest.mark.parametrize(
    ("name", "advice"),
    [
        ("step.nsys-rep", "Nsight Systems report: export it with `nsys export --type sqlite"),
        ("old.qdrep", "Nsight Systems report: export it with `nsys export --type sqlite"),
        ("kernels.ncu-rep", "Nsight Compute report: print it with `ncu --import FILE --csv`"),
        ("blob.bin", "see `perfci formats`"),
    ],
)
def test_a_profilers_binary_report_is_refused_saying_how_to_export_it(
    tmp_path: Path, name: str, advice: str
) -> None:
    """Users upload the native report by mistake: the refusal says what to run on it."""
    path = tmp_path / name
    path.write_bytes(b"\x1fNV\x00\x07" + bytes(range(256)) * 8)
    with pytest.raises(UnknownFormatError) as caught:
        registry.parse_file(path)
    message = str(caught.value)
    assert f"{name}: binary data: not a format perfci reads; " in message
    assert advice in message


def test_an_unknown_json_document_is_refused_with_what_it_looks_like(tmp_path: Path) -> None:
    # A JSON tool output perfci does not read: the refusal says what it is, not "--format".
    path = tmp_path / "results.json"
    path.write_text(
        '{"benchmark_results": [{"case": "gemm", "ms": 1.5}], "host": {"cpu": "x"}, "v": 3}'
    )
    with pytest.raises(
        UnknownFormatError,
        match=r"a JSON object with keys benchmark_results, host, v: not a format perfci reads",
    ):
        registry.parse_file(path)
    listing = tmp_path / "list.json"
    listing.write_text('[{"metric": "latency", "p50": 3}]')
    with pytest.raises(UnknownFormatError, match=r"a JSON array of objects with keys metric, p50"):
        registry.parse_file(listing)
