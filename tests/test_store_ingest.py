"""Ingesting runs: real seeds, exact rows, idempotency, atomicity, concurrency, the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import REPO, seed
from db_fixtures import make_context, make_profile
from deadlines import Deadline, scaled
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from perfci.analysis.values import per_step_ns
from perfci.cli.main import main
from perfci.core.errors import ConfigError, ParseError, StorageError, UnknownFormatError
from perfci.core.model import Better, Metric, MetricKind, Profile, SeriesKey
from perfci.formats.registry import formats, parse_file
from perfci.store import db, engines, migrate
from perfci.store.json_text import json_text
from perfci.store.queries import get_run
from perfci.store.samples import run_samples
from perfci.store.schema import (
    ProfileRow,
    Run,
    Sample,
    Series,
    SeriesSet,
    pack_series_ids,
    unpack_series_ids,
)
from perfci.usecases.submit.ingest import ingest_run, parse_and_ingest


def _count(session: Session, model: type) -> int:
    return int(session.execute(select(func.count()).select_from(model)).scalar_one())


_TABLES = ("project", "run", "profile", "series", "series_set", "sample")


def _counts(url: str, tables: tuple[str, ...] = _TABLES) -> dict[str, int]:
    engine = engines.make_engine(url)
    try:
        with engine.connect() as connection:
            return {
                table: int(connection.execute(text(f'SELECT count(*) FROM "{table}"')).scalar_one())
                for table in tables
            }
    finally:
        engine.dispose()


# --- real seeds -------------------------------------------------------------------------------


def test_megatron_seed_two_repeats(session: Session) -> None:
    path = seed("004")
    profile = parse_file(path)[0]
    result = parse_and_ingest(
        session, [path, path], benchmark="moe", context=make_context(ci_run_id="11")
    )
    assert result.created
    assert (result.series, result.samples) == (13, 26)
    assert (_count(session, Series), _count(session, Sample), _count(session, ProfileRow)) == (
        13,
        26,
        2,
    )

    stored = run_samples(session, [result.run_id])
    iteration = SeriesKey(MetricKind.STEP, "iteration")
    assert stored[iteration] == {result.run_id: [86_850_000.0, 86_850_000.0]}
    for metric in profile.metrics:
        expected = per_step_ns(metric, profile.steps)
        assert stored[SeriesKey.of(metric)][result.run_id] == [expected, expected]

    a2a = (
        session.execute(
            select(Sample)
            .join(Series, Series.id == Sample.series_id)
            .where(Series.name == "all_to_all[exp]", Series.scope == "forward_step")
        )
        .scalars()
        .all()
    )
    assert [(s.repeat, s.calls, s.total_ns, s.avg_ns, s.bytes) for s in a2a] == [
        (0, 8, 130_000.0, 16_250.0, 281_247_744.0),
        (1, 8, 130_000.0, 16_250.0, 281_247_744.0),
    ]
    run = get_run(session, result.run_id)
    assert (run.repeats, run.commit, run.branch, run.ci_run_id) == (2, "c0ffee", "main", "11")


def test_workload_seed_keeps_bytes_only_metrics(session: Session) -> None:
    path = seed("002")
    profile = parse_file(path)[0]
    result = parse_and_ingest(session, [path], benchmark="gpt2", context=make_context())
    assert (result.series, result.samples) == (51, 51) == (len(profile.metrics),) * 2
    comm = session.execute(
        select(Sample.value, Sample.bytes)
        .join(Series, Series.id == Sample.series_id)
        .where(Series.name == "lm_head_grad/input_grad")
    ).one()
    assert comm == (None, 64_379_217.0)
    values = run_samples(session, [result.run_id])
    # Samples with no time (communication sizes only) are not comparison values.
    assert len(values) == sum(m.total_ns is not None for m in profile.metrics)
    head = SeriesKey(MetricKind.LAYER, "lm_head/forward")
    assert values[head][result.run_id] == pytest.approx([127_346_709.3706131])


def test_multi_profile_seed_uses_sections(session: Session) -> None:
    if "nsys_stats" not in formats():
        pytest.skip("the nsys_stats parser is not registered yet")
    path = seed("003")
    profiles = parse_file(path)
    result = parse_and_ingest(session, [path], benchmark="gpt", context=make_context())
    sections = set(session.execute(select(Series.section)).scalars())
    assert sections == {p.label for p in profiles}
    assert result.series == len({(SeriesKey.of(m, p.label)) for p in profiles for m in p.metrics})


def test_sections_and_merged_duplicates(session: Session) -> None:
    fwd = make_profile({"gemm": 10.0}, label="fwd", steps=2)
    bwd = make_profile({"gemm": 30.0}, label="bwd", steps=2)
    twice = make_profile({"gemm": 5.0}, label="fwd", steps=2)
    twice.metrics += make_profile({"gemm": 7.0}).metrics  # the same name on two rows
    result = ingest_run(
        session,
        context=make_context(),
        benchmark="b",
        repeats=[[fwd, bwd], [twice, make_profile({"gemm": 1.0}, label="bwd")]],
    )
    values = run_samples(session, [result.run_id])
    assert values == {
        SeriesKey(MetricKind.KERNEL, "gemm", section="fwd"): {result.run_id: [5.0, 6.0]},
        SeriesKey(MetricKind.KERNEL, "gemm", section="bwd"): {result.run_id: [15.0, 1.0]},
    }
    merged = session.execute(
        select(Sample.calls, Sample.total_ns).where(Sample.repeat == 1).order_by(Sample.total_ns)
    ).all()
    assert merged == [(1, 1.0), (2, 12.0)]


def test_bad_repeats_are_refused(session: Session) -> None:
    with pytest.raises(ConfigError, match="labelled alike"):
        ingest_run(
            session,
            context=make_context(),
            benchmark="b",
            repeats=[[make_profile({"k": 1.0}), make_profile({"k": 2.0})]],
        )
    with pytest.raises(ConfigError, match="no profiles"):
        ingest_run(session, context=make_context(), benchmark="b", repeats=[[]])
    assert _count(session, Run) == 0


def test_an_ingest_gives_the_garbage_collector_back_as_it_found_it(session: Session) -> None:
    """The run's cells are built with the cycle collector paused (issue 35); a refused run
    and a stored one both leave it as it was, on or off."""
    import gc

    was = gc.isenabled()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            with pytest.raises(ConfigError, match="no profiles"):
                ingest_run(session, context=make_context(), benchmark="b", repeats=[[]])
            assert gc.isenabled() is enabled
            ingest_run(
                session,
                context=make_context(commit=f"{int(enabled):040x}"),
                benchmark="b",
                repeats=[[make_profile({"k": 1.0})]],
            )
            assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


# --- idempotency ------------------------------------------------------------------------------


def test_reingest_with_ci_ids_stores_once(session: Session) -> None:
    context = make_context(ci_provider="github-actions", ci_run_id="42", ci_run_attempt=1)
    first = ingest_run(
        session, context=context, benchmark="b", repeats=[[make_profile({"a": 1.0, "b": 2.0})]]
    )
    # Same CI invocation, same numbers: the first copy stands (other numbers: RunConflict,
    # tests/test_abuse.py).
    again = ingest_run(
        session, context=context, benchmark="b", repeats=[[make_profile({"a": 1.0, "b": 2.0})]]
    )
    assert (first.created, again.created) == (True, False)
    assert (again.run_id, again.series, again.samples) == (first.run_id, 2, 2)
    assert (_count(session, Run), _count(session, Sample)) == (1, 2)
    retry = ingest_run(
        session,
        context=make_context(ci_provider="github-actions", ci_run_id="42", ci_run_attempt=2),
        benchmark="b",
        repeats=[[make_profile({"a": 1.0})]],
    )
    assert retry.created and retry.run_id != first.run_id


def test_reingest_without_ci_ids_dedupes_on_content(session: Session) -> None:
    context = make_context()
    first = ingest_run(
        session, context=context, benchmark="b", repeats=[[make_profile({"a": 1.0})]]
    )
    same = ingest_run(session, context=context, benchmark="b", repeats=[[make_profile({"a": 1.0})]])
    rerun = ingest_run(
        session, context=context, benchmark="b", repeats=[[make_profile({"a": 1.1})]]
    )
    assert (first.created, same.created, rerun.created) == (True, False, True)
    assert same.run_id == first.run_id != rerun.run_id
    assert (_count(session, Run), _count(session, Series)) == (2, 1)


def test_runs_listing_the_same_series_share_one_series_set(session: Session) -> None:
    def ingest(run: int, values: dict[str, float]) -> int:
        return ingest_run(
            session,
            context=make_context(ci_run_id=str(run)),
            benchmark="b",
            repeats=[[make_profile(values)]],
        ).run_id

    first = ingest(1, {"a": 1.0, "b": 2.0, "c": 3.0})
    same = ingest(2, {"a": 4.0, "b": 5.0, "c": 6.0})
    other = ingest(3, {"c": 7.0, "a": 8.0, "d": 9.0})  # reordered, one new: a new list
    lists = session.execute(select(SeriesSet)).scalars().all()
    assert len(lists) == 2
    ids = {name: id_ for id_, name in session.execute(select(Series.id, Series.name))}
    assert sorted(unpack_series_ids(s.series_ids) for s in lists) == sorted(
        [[ids["a"], ids["b"], ids["c"]], [ids["c"], ids["a"], ids["d"]]]
    )
    stored = {
        (key.name, run): values
        for key, per_run in run_samples(session, [first, same, other]).items()
        for run, values in per_run.items()
    }
    assert stored == {
        ("a", first): [1.0],
        ("b", first): [2.0],
        ("c", first): [3.0],
        ("a", same): [4.0],
        ("b", same): [5.0],
        ("c", same): [6.0],
        ("c", other): [7.0],
        ("a", other): [8.0],
        ("d", other): [9.0],
    }


# Names as parsers give them: quotes, backslashes, braces and commas (array-literal syntax),
# unicode, "NULL", an empty-looking scope, a name of spaces.
_AWKWARD_NAMES = (
    'void at::native::elementwise_kernel<128, 4, "x">(int, {lambda}, float*)',
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL\\\\x",
    "NULL",
    " ",
    "ÄÖÜ ▸ 内核",
    "a,b",
)


@pytest.mark.parametrize("first_run", [1, 3, 40], ids=["one-series", "three", "forty"])
def test_new_series_are_stored_in_the_runs_order_with_their_columns(
    session: Session, first_run: int
) -> None:
    """A run's new series are created in one statement on PostgreSQL (issue 35): every
    column as the run gave it, ids in the run's order, one alone as many, and a later run
    adding some between known ones."""
    metrics = [
        Metric(
            kind=MetricKind.KERNEL if i % 3 else MetricKind.MEMORY,
            name=_AWKWARD_NAMES[i % len(_AWKWARD_NAMES)] + f" #{i}",
            scope="" if i % 4 else f"Layer {i} ▸ attn",
            unit="ns" if i % 5 else "bytes/s",
            better=Better.LOWER if i % 5 else Better.HIGHER,
            total_ns=float(i + 1) if i % 5 else None,  # a time's number, or the value's
            value=None if i % 5 else float(i + 1),
        )
        for i in range(first_run)
    ]

    def ingest(run: int, found: list[Metric]) -> None:
        profile = Profile(label="p", format="synthetic", source="p.txt", metrics=found)
        ingest_run(
            session,
            context=make_context(ci_run_id=str(run)),
            benchmark="b",
            repeats=[[profile]],
        )

    ingest(1, metrics)
    more = [Metric(kind=MetricKind.KERNEL, name=f"new {i}", total_ns=1.0) for i in range(3)]
    ingest(2, [more[0], *metrics[:1], more[1], *metrics[1:], more[2]])
    rows = session.execute(
        select(Series.kind, Series.name, Series.scope, Series.unit, Series.better).order_by(
            Series.id
        )
    ).all()
    given = [*metrics, more[0], more[1], more[2]]
    assert [tuple(row) for row in rows] == [
        (m.kind.value, m.name, m.scope or "", m.unit, m.better.value) for m in given
    ]


def test_a_unit_holding_the_key_separator_is_stored_as_given(session: Session) -> None:
    """The one-statement creation splits columns on U+001F, which series keys cannot hold
    but a unit is not checked for: such a run takes the statement per series."""
    odd = Metric(kind=MetricKind.KERNEL, name="k", unit="ms\x1fper step", value=1.0)
    plain = Metric(kind=MetricKind.KERNEL, name="j", total_ns=2.0)
    profile = Profile(label="p", format="synthetic", source="p.txt", metrics=[odd, plain])
    ingest_run(session, context=make_context(), benchmark="b", repeats=[[profile]])
    rows = session.execute(select(Series.name, Series.unit).order_by(Series.id)).all()
    assert [tuple(row) for row in rows] == [("k", "ms\x1fper step"), ("j", "ns")]


def test_json_values_are_written_without_nan_or_infinity() -> None:
    """The store's JSON text (every JSON column, and the run's profiles on PostgreSQL): NaN
    and ±inf, which Python's json writes but no JSON reader (PostgreSQL's included) takes,
    become null at any depth; everything else is json.dumps's own text."""
    nan, inf = float("nan"), float("inf")
    plain = {"a": [1.5, 2, None, "x"], "b": {"c": True}}
    assert json_text(plain) == json.dumps(plain)
    given = {"a": [1.5, nan, {"b": inf}], "c": (-inf, 0.0), "d": "NaN"}
    assert json_text(given) == '{"a": [1.5, null, {"b": null}], "c": [null, 0.0], "d": "NaN"}'


def test_series_ids_pack_as_little_endian_int32() -> None:
    ids = [1, 256, 70_000, 2**31 - 1]
    packed = pack_series_ids(ids)
    assert packed[:8] == b"\x01\x00\x00\x00\x00\x01\x00\x00"
    assert len(packed) == 16 and unpack_series_ids(packed) == ids


# --- bad input and database errors write nothing ----------------------------------------------


def test_malformed_file_writes_nothing(session: Session, tmp_path: Path) -> None:
    good, bad = seed("004"), tmp_path / "garbage.txt"
    bad.write_text("this is not a profile\n\x00\x01", encoding="utf-8")
    with pytest.raises(UnknownFormatError, match=r"garbage\.txt"):
        parse_and_ingest(session, [good, bad], benchmark="b", context=make_context())
    with pytest.raises(UnknownFormatError, match=r"garbage\.txt.*unknown format 'nope'"):
        parse_and_ingest(session, [bad], benchmark="b", context=make_context(), format="nope")
    with pytest.raises(ParseError, match=r"garbage\.txt"):
        parse_and_ingest(
            session, [good, bad], benchmark="b", context=make_context(), format="megatron_trace"
        )
    assert _count(session, Run) == 0


def test_database_error_mid_ingest_rolls_back(migrated_url: str) -> None:
    engine = engines.make_engine(migrated_url)
    try:
        with engine.begin() as connection:
            connection.execute(text("DROP TABLE sample"))  # fails after run and series rows
        with (
            engines.make_sessionmaker(engine)() as session,
            pytest.raises(
                StorageError, match=r"could not store the run of 'b' \(p\.txt\): .*sample"
            ),
        ):
            ingest_run(
                session, context=make_context(), benchmark="b", repeats=[[make_profile({"a": 1.0})]]
            )
        with engine.connect() as connection:
            for table in (
                "project",
                "benchmark",
                "environment",
                "run",
                "series",
                "series_set",
                "profile",
            ):
                assert connection.execute(text(f"SELECT count(*) FROM {table}")).scalar() == 0
    finally:
        engine.dispose()


# --- concurrency and crashes ------------------------------------------------------------------


def test_concurrent_ingests_of_one_run_store_one_copy(migrated_url: str) -> None:
    engine = engines.make_engine(migrated_url, pool_size=8)
    sessions = engines.make_sessionmaker(engine)
    values = {f"kernel_{i}": float(i) for i in range(3000)}
    context = make_context(ci_run_id="7")
    barrier, results, errors = threading.Barrier(4), [], []

    def ingest() -> None:
        try:
            with sessions() as session:
                barrier.wait()
                results.append(
                    ingest_run(
                        session,
                        context=context,
                        benchmark="b",
                        repeats=[[make_profile(values)]] * 2,
                    )
                )
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=ingest) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(scaled(60))
    engine.dispose()
    assert errors == []
    assert sorted(r.created for r in results) == [False, False, False, True]
    assert len({r.run_id for r in results}) == 1
    assert {(r.series, r.samples) for r in results} == {(3000, 6000)}
    counts = _counts(migrated_url)
    assert (counts["run"], counts["series"], counts["sample"]) == (1, 3000, 6000)


def test_concurrent_first_ingests_of_a_new_project_all_store(migrated_url: str) -> None:
    # Different runs of one new project at once: all create its project, benchmark,
    # environment and commit, and overlapping new series listed in different orders (four
    # orders, two of them twice: four new lists of series, each raced for).
    engine = engines.make_engine(migrated_url, pool_size=8)
    sessions = engines.make_sessionmaker(engine)
    names = [f"kernel_{i}" for i in range(2000)]
    workers = 6
    barrier, results, errors = threading.Barrier(workers), [], []

    def ingest(worker: int) -> None:
        shift = worker % 4 * 500
        order = names[shift:] + names[:shift]
        try:
            with sessions() as session:
                barrier.wait()
                results.append(
                    ingest_run(
                        session,
                        context=make_context(ci_run_id=str(worker)),
                        benchmark="b",
                        repeats=[
                            [make_profile({name: float(names.index(name)) for name in order})]
                        ],
                    )
                )
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=ingest, args=(worker,)) for worker in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(scaled(60))
    assert errors == []
    assert sorted(r.created for r in results) == [True] * workers
    assert len({r.run_id for r in results}) == workers
    counts = _counts(migrated_url)
    assert (
        counts["project"],
        counts["run"],
        counts["series"],
        counts["series_set"],
        counts["sample"],
    ) == (1, workers, 2000, 4, workers * 2000)
    # Every sample is on its own series, whichever ingest created the series or the list.
    with sessions() as session:
        stored = run_samples(session, [r.run_id for r in results])
    engine.dispose()
    assert {
        key.name: {run: values for run, values in per_run.items()}
        for key, per_run in stored.items()
    } == {name: {r.run_id: [float(i)] for r in results} for i, name in enumerate(names)}


def test_run_metadata_and_commit_time_are_stored(session: Session) -> None:
    profile = make_profile({"a": 1.0}, steps=4)
    profile.metadata = {"gpu": "H100", "ranks": [0, 1], "note": "ü"}
    first = ingest_run(
        session,
        context=make_context(commit="abc", ci_run_id="1"),
        benchmark="b",
        repeats=[[profile]],
    )
    assert get_run(session, first.run_id).commit_time is None  # a bare --commit
    stored = session.execute(select(ProfileRow)).scalar_one()
    assert (
        stored.run_id,
        stored.repeat,
        stored.label,
        stored.format,
        stored.source,
        stored.steps,
        stored.meta,
    ) == (first.run_id, 0, "p", "synthetic", "p.txt", 4, profile.metadata)
    later = ingest_run(
        session,
        context=make_context(commit="abc", ci_run_id="2", commit_time="2025-03-01T10:00:00Z"),
        benchmark="b",
        repeats=[[make_profile({"a": 2.0})]],
    )
    # The commit learns its time from the later run, and both runs share it.
    expected = datetime(2025, 3, 1, 10, tzinfo=UTC)
    assert get_run(session, later.run_id).commit_time == expected
    assert get_run(session, first.run_id).commit_time == expected
    values = run_samples(session, [first.run_id, later.run_id])
    assert values == {
        SeriesKey(MetricKind.KERNEL, "a"): {first.run_id: [0.25], later.run_id: [2.0]}
    }


KILLED_INGEST = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[3])
    from db_fixtures import make_context, make_profile
    from perfci.store import _bulk, db, engines, migrate
    from perfci.usecases.submit.ingest import ingest_run

    real = _bulk.write_samples

    def write_then_hang(session, rows):
        real(session, rows)
        Path(sys.argv[2]).write_text("written")  # the samples are in, not committed
        time.sleep(120)

    _bulk.write_samples = write_then_hang
    engine = engines.make_engine(sys.argv[1])
    with engines.make_sessionmaker(engine)() as session:
        ingest_run(session, context=make_context(ci_run_id="9"), benchmark="b",
                   repeats=[[make_profile({f"k{i}": float(i) for i in range(5000)})]])
""")


def test_killed_ingest_leaves_no_partial_run(migrated_url: str, tmp_path: Path) -> None:
    marker = tmp_path / "written"
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED_INGEST, migrated_url, str(marker), str(REPO / "tests")],
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        deadline = Deadline(60)
        while not marker.exists():
            assert process.poll() is None, "the ingest process died before writing"
            assert not deadline.expired(), f"the ingest never wrote: {deadline.describe()}"
            time.sleep(0.05)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(scaled(10))
    assert _counts(migrated_url) == dict.fromkeys(
        ("project", "run", "profile", "series", "series_set", "sample"), 0
    )
    # Nothing is left locked either: the same run goes in now.
    engine = engines.make_engine(migrated_url)
    try:
        with engines.make_sessionmaker(engine)() as session:
            result = ingest_run(
                session,
                context=make_context(ci_run_id="9"),
                benchmark="b",
                repeats=[[make_profile({"k0": 0.0})]],
            )
        assert result.created
    finally:
        engine.dispose()


# --- the CLI ----------------------------------------------------------------------------------


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_ingest_and_reingest(migrated_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "ingest",
        str(seed("004")),
        str(seed("004")),
        "--benchmark",
        "moe",
        "--project",
        "acme",
        "--commit",
        "abc123",
        "--branch",
        "main",
        "--ci-run-id",
        "5",
        "--ci-run-attempt",
        "1",
        "--env",
        "gpu=H100",
        "--database-url",
        migrated_url,
        "--json",
    ]
    code, out, _ = _cli(capsys, *args)
    assert code == 0
    first = json.loads(out)
    assert (first["created"], first["series"], first["samples"]) == (True, 13, 26)
    code, out, _ = _cli(capsys, *args)
    assert code == 0 and json.loads(out)["created"] is False
    assert json.loads(out)["run_id"] == first["run_id"]
    engine = engines.make_engine(migrated_url)
    try:
        with Session(engine) as session:
            run = get_run(session, first["run_id"])
    finally:
        engine.dispose()
    assert (run.project, run.commit, run.branch, run.ci_run_attempt) == (
        "acme",
        "abc123",
        "main",
        1,
    )
    assert run.environment["gpu"] == "H100"


def test_cli_bad_file_exits_2_and_writes_nothing(
    migrated_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "broken.log"
    bad.write_text("no profile here\n", encoding="utf-8")
    code, _, err = _cli(
        capsys,
        "ingest",
        str(seed("004")),
        str(bad),
        "--benchmark",
        "b",
        "--project",
        "p",
        "--database-url",
        migrated_url,
    )
    assert code == 2 and "broken.log" in err
    code, _, err = _cli(
        capsys,
        "ingest",
        str(bad),
        "--benchmark",
        "b",
        "--format",
        "nope",
        "--project",
        "p",
        "--database-url",
        migrated_url,
    )
    assert code == 2 and "broken.log" in err and "nope" in err
    assert _counts(migrated_url)["run"] == 0


def test_cli_database_error_exits_2_naming_the_files(
    migrated_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = engines.make_engine(migrated_url)
    try:
        with engine.begin() as connection:
            connection.execute(text("DROP TABLE sample"))  # fails after the run's own rows
    finally:
        engine.dispose()
    # Two repeats of one workload (unrelated formats are refused before the store is opened).
    again = tmp_path / "rank-copy.txt"
    again.write_bytes(seed("004").read_bytes())
    code, _, err = _cli(
        capsys,
        "ingest",
        str(seed("004")),
        str(again),
        "--benchmark",
        "b",
        "--project",
        "p",
        "--database-url",
        migrated_url,
    )
    assert code == 2
    assert "could not store the run of 'b'" in err and "sample" in err
    assert seed("004").name in err and again.name in err
    counts = _counts(migrated_url, tables=tuple(t for t in _TABLES if t != "sample"))
    assert counts == dict.fromkeys(counts, 0)


def test_cli_db_commands_redact_password(
    empty_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = empty_url
    if url.startswith("postgresql"):
        # A password the trust-auth test server ignores, to check it is never printed.
        url = url.replace("root@", "root:s3cret@")
    code, out, _ = _cli(capsys, "db", "current", "--database-url", url)
    assert code == 0 and "no perfci schema" in out
    code, out, _ = _cli(capsys, "db", "upgrade", "--database-url", url)
    assert code == 0 and migrate.head_revision() in out
    code, out, _ = _cli(capsys, "db", "current", "--database-url", url)
    assert code == 0 and "(head)" in out
    code, out, _ = _cli(capsys, "db", "downgrade", "base", "--database-url", url)
    assert code == 0 and "base" in out
    assert migrate.current(url) is None
    code, _, err = _cli(
        capsys,
        "db",
        "current",
        "--database-url",
        "postgresql+psycopg://root:s3cret@127.0.0.1:1/none",
    )
    assert code == 2 and "could not" in err
    assert "s3cret" not in capsys.readouterr().out + err + out


def test_open_store_migrates_sqlite_but_not_postgres(empty_url: str, tmp_path: Path) -> None:
    from perfci.core.settings import Settings

    if empty_url.startswith("sqlite"):
        (tmp_path / "nested").mkdir()  # perfci creates .perfci/, not the folders above it
        url = f"sqlite:///{tmp_path / 'nested' / '.perfci' / 'perfci.db'}"
        store = db.open_store(Settings(database_url=url))
        store.close()
        assert migrate.current(url) == migrate.head_revision()
        default = db.open_store(Settings(), root=tmp_path)
        default.close()
        assert (tmp_path / ".perfci" / "perfci.db").is_file()
        return
    with pytest.raises(StorageError, match="perfci db upgrade"):
        db.open_store(Settings(database_url=empty_url))
    assert migrate.current(empty_url) is None
    migrate.upgrade(empty_url)
    db.open_store(Settings(database_url=empty_url)).close()


def test_postgres_pool_replaces_connections_dropped_while_idle(
    migrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not migrated_url.startswith("postgresql"):
        pytest.skip("the idle ping is PostgreSQL's")
    engine = engines.make_engine(migrated_url, pool_size=1)
    try:
        with engine.connect() as connection:
            first = connection.execute(text("SELECT pg_backend_pid()")).scalar_one()
        with engine.connect() as connection:  # used a moment ago: no ping, same connection
            assert connection.execute(text("SELECT pg_backend_pid()")).scalar_one() == first
        admin = engines.make_engine(migrated_url)
        with admin.connect() as connection:
            connection.execute(text(f"SELECT pg_terminate_backend({first})"))
        admin.dispose()
        monkeypatch.setattr(engines, "PING_AFTER_IDLE_S", 0.0)  # as if idle for long
        with engine.connect() as connection:
            assert connection.execute(text("SELECT pg_backend_pid()")).scalar_one() != first
    finally:
        engine.dispose()
