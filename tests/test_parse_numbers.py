"""Issue 31: a hostile number is a parse error (or read as none), never a crash.

A Google Benchmark ``real_time`` of ``1e308`` made ``statistics.fmean`` raise ``OverflowError``
(intermediate overflow in ``fsum``), a 500 from the service. The same held wherever a reader
summed or averaged what a file says: a huge integer (``int too large to convert to float``),
a time whose unit made it infinite (``statistics.stdev`` then raised ``AttributeError``).
Times and sizes beyond ``limits.MAX_VALUE`` (1e18) are now refused where they are read,
naming the field where the reader knows it, and the registry reports any ``ArithmeticError``
left as a ``ParseError``.

Property: for every text format, a small file of its own with its numbers replaced by hostile
ones (chosen by hypothesis, derandomised) parses into profiles or raises a perfci parse error;
the same for every real file of ../shared when it is there.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import SHARED
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from profile_files import FILES

from perfci.core.errors import ParseError, UnknownFormatError
from perfci.core.limits import MAX_VALUE
from perfci.core.model import Profile
from perfci.formats import registry

FUZZ = settings(
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
HOSTILE = (
    "1e308",
    "-1e308",
    "1.7976931348623157e308",
    "1e309",
    "9" * 400,
    "1e19",
    "nan",
    "inf",
    "-inf",
)
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?!\w)")


def _replaced(text: str, hostile: str, every: int) -> str:
    """``text`` with every ``every``-th number replaced by ``hostile``."""
    count = 0

    def swap(match: re.Match[str]) -> str:
        nonlocal count
        count += 1
        return hostile if count % every == 0 else match.group()

    return NUMBER.sub(swap, text)


def _check(path: Path, format: str) -> None:
    try:
        profiles = registry.parse_file(path, format=format)
    except (ParseError, UnknownFormatError) as exc:
        assert str(exc)
        return
    assert all(isinstance(profile, Profile) for profile in profiles)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("numbers") / "input.txt"


@pytest.mark.parametrize("name", list(FILES))
@settings(FUZZ, max_examples=25)
@given(hostile=st.sampled_from(HOSTILE), every=st.integers(1, 5))
def test_hostile_numbers_in_a_text_format(work: Path, name: str, hostile: str, every: int) -> None:
    work.write_text(_replaced(FILES[name](6), hostile, every))
    _check(work, name)


def _google_benchmark(real_time: object) -> str:
    rows = [
        {
            "name": "BM_copy",
            "run_name": "BM_copy",
            "run_type": "iteration",
            "repetitions": 2,
            "repetition_index": index,
            "iterations": 10,
            "real_time": real_time,
            "cpu_time": 1.0,
            "time_unit": "ns",
        }
        for index in range(2)
    ]
    return json.dumps({"context": {"date": "2024-01-01", "num_cpus": 1}, "benchmarks": rows})


@pytest.mark.parametrize("real_time", [1e308, 1.7e308, 10**400, 2e18])
def test_a_google_benchmark_time_out_of_range_is_refused_naming_it(
    tmp_path: Path, real_time: object
) -> None:
    path = tmp_path / "bench.json"
    path.write_text(_google_benchmark(real_time))
    with pytest.raises(ParseError) as refused:
        registry.parse_file(path, format="google_benchmark")
    message = str(refused.value)
    if isinstance(real_time, int):  # beyond any float: not a number to the reader
        assert "'real_time' is not a number" in message
    else:
        assert "'BM_copy'" in message and "'real_time'" in message
        assert f"at most {MAX_VALUE:g} ns" in message


def test_a_google_benchmark_time_in_range_is_read(tmp_path: Path) -> None:
    path = tmp_path / "bench.json"
    path.write_text(_google_benchmark(1e17))
    [profile] = registry.parse_file(path, format="google_benchmark")
    assert profile.metrics[0].avg_ns == 1e17


def test_a_duration_out_of_range_names_its_cell(tmp_path: Path) -> None:
    """Text readers read times through ``perfci.core.units``: out of range is a bad cell."""
    path = tmp_path / "nvprof.txt"
    path.write_text(
        "==1== Profiling result:\n"
        "            Type  Time(%)      Time     Calls       Avg       Min       Max  Name\n"
        " GPU activities:  100.00%  1e400ms         2  1.0000ms  1.0000ms  1.0000ms  k(float*)\n"
    )
    with pytest.raises(ParseError, match="1e400ms"):
        registry.parse_file(path, format="nvprof")


def _real_files() -> list[str]:
    """The seeds and corpus files of ../shared (but SQLite exports and gzip), relative."""
    if not SHARED.is_dir():
        return [""]
    return sorted(
        str(path.relative_to(SHARED))
        for folder in ("seeds", "corpus")
        for path in (SHARED / folder).rglob("*")
        if path.is_file()
        and path.suffix not in (".md", ".sqlite", ".gz")
        and path.stat().st_size < 2_000_000
    )


@pytest.mark.parametrize("relative", _real_files())
def test_hostile_numbers_in_a_real_file(tmp_path: Path, relative: str) -> None:
    if not relative:
        pytest.skip("needs ../shared")
    source = SHARED / relative
    try:
        name = registry.detect(source).name
    except UnknownFormatError:
        pytest.skip("not a profile")
    text = source.read_text(encoding="utf-8", errors="replace")
    path = tmp_path / source.name
    for hostile in HOSTILE:
        for every in (1, 3):
            path.write_text(_replaced(text, hostile, every), encoding="utf-8")
            _check(path, name)
