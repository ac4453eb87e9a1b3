"""Property: whatever the bytes, parsing gives profiles or a perfci parse error, nothing else.

``registry.parse_file`` is the boundary users hit; for any input it must return profiles or
raise ``ParseError`` / ``UnknownFormatError`` (never a traceback). Checked for arbitrary bytes
(with detection, and with each registered format forced), and for every seed and a few corpus
files cut short at random points or with a random chunk removed, which is what a crashed
profiler or an interrupted upload leaves behind.

Example counts are tuned so the file runs in well under a minute on 2 cores.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SHARED, shared_path
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfci.core.errors import ParseError, UnknownFormatError
from perfci.core.model import Profile
from perfci.formats import registry

# derandomize: the same examples on every run, so CI is reproducible; raise max_examples
# locally (or drop derandomize) to explore further.
FUZZ = settings(
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# A few real files per family, chosen for the ways they can break when cut: gzip (chrome),
# SQLite pages (nsys export), long single-line records (Megatron), counted rows (ASTRA-sim).
CORPUS_SAMPLES = (
    "echo_megatron_trace/fwyc0573_Megatron-LM__realistic_trace_rank0.txt",
    "astrasim_workload/astra-sim__ASTRA-sim-1.0__Transformer_HybridParallel_Fwd_In_Bckwd.txt",
    "aicb_simai/aliyun_aicb__workload__physical__model_workload__"
    "L7B-M1-C04_Llama7B_megatron_tp2_pp1_mbs1.csv",
    "aicb_simai/aliyun_aicb__workload__aiob_inputs__Example.txt",
    "kineto_chrome_trace/hta__critical_path__simple_add__benchmark_result_493459_"
    "1694039959_trace.json.gz",
    "nsys_sqlite/Jorgedavyd_cuda__profiling_report4.sqlite",
    "nvprof/ericreinsmidt_GameOfLife__nvprof_output.txt",
    "nsys_stats/YKTian__torch_gcn_profile_nsys.txt",
)


def _real_files() -> list[str]:
    """Seeds and corpus samples, relative to ../shared ("" when it is absent)."""
    seeds = sorted(p.name for p in (SHARED / "seeds").glob("0*")) if SHARED.is_dir() else []
    return (
        [f"seeds/{name}" for name in seeds] + [f"corpus/{name}" for name in CORPUS_SAMPLES]
        if SHARED.is_dir()
        else [""]
    )


def _check(path: Path, data: bytes, format: str | None = None) -> None:
    """Parse ``data`` written to ``path``: profiles, or one of the two parse errors."""
    path.write_bytes(data)
    try:
        profiles = registry.parse_file(path, format=format)
    except (ParseError, UnknownFormatError) as exc:
        assert str(exc)  # a message for the user, not an empty error
        return
    assert isinstance(profiles, list)
    assert all(isinstance(profile, Profile) for profile in profiles)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "input"


@settings(FUZZ, max_examples=200)
@given(data=st.binary(max_size=4096))
def test_arbitrary_bytes_with_detection(work: Path, data: bytes) -> None:
    _check(work, data)


@pytest.mark.parametrize("format", list(registry.formats()))
@settings(FUZZ, max_examples=40)
@given(data=st.binary(max_size=2048) | st.text(max_size=2048).map(str.encode))
def test_arbitrary_bytes_forced_format(work: Path, format: str, data: bytes) -> None:
    _check(work, data, format=format)


@pytest.fixture()
def real_bytes(request: pytest.FixtureRequest) -> bytes:
    data: bytes = shared_path(*str(request.param).split("/")).read_bytes()
    return data


@pytest.mark.parametrize("real_bytes", _real_files(), indirect=True)
@settings(FUZZ, max_examples=30)
@given(cut=st.floats(min_value=0.0, max_value=1.0))
def test_real_file_cut_short(work: Path, real_bytes: bytes, cut: float) -> None:
    _check(work, real_bytes[: int(len(real_bytes) * cut)])


@pytest.mark.parametrize("real_bytes", _real_files(), indirect=True)
@settings(FUZZ, max_examples=20)
@given(start=st.floats(min_value=0.0, max_value=1.0), length=st.integers(1, 4096))
def test_real_file_with_a_chunk_removed(
    work: Path, real_bytes: bytes, start: float, length: int
) -> None:
    begin = int(len(real_bytes) * start)
    _check(work, real_bytes[:begin] + real_bytes[begin + length :])
