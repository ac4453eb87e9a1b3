"""Speed of the store: ingest through the real use case, raw COPY beside it, baseline query.

Usage::

    PERFCI_TEST_POSTGRES_URL=postgresql+psycopg://root@127.0.0.1:5432/test \\
        .venv/bin/python benchmarks/store_speed.py [--runs 1000] [--series 1000] [--repeats 1]
        [--stores postgres,sqlite] [--queries 20]

Each store gets a fresh database (PostgreSQL: a scratch database on the server, dropped after;
SQLite: a temp file). ``--runs`` runs of ``--series`` kernel metrics each go in one at a time
through :func:`perfci.usecases.submit.ingest.ingest_run`, one transaction and commit per run, as CI
does; building the synthetic profiles is not timed. On PostgreSQL the same sample rows are also
written with raw binary COPYs, one COPY and commit per run, on connections of their own: into
``sample_raw``, made ``LIKE sample INCLUDING ALL`` (the same table, its primary key included,
without perfci: the target's reference), and into a bare table without keys or indexes (what
the server's lower bound per run is). The three are interleaved run by run,
rotating which goes first: on a shared VM speed drifts by 2x within minutes, and phases timed
one after the other disagreed by more than the difference measured. Then all the rows go in
one COPY stream, the server's upper bound. The baseline query is ``baseline_run_ids`` (last 30
runs) + ``run_samples``, median of ``--queries`` calls. Prints a Markdown table; targets:
ingest ≥ 0.5 × raw COPY into ``sample_raw`` per run, query < 100 ms.

The table also gives CPU time per run, ingest against per-run COPY: this process's CPU plus,
when the server runs on this host (its ``/proc`` readable), the CPU of its server process.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import Engine, create_engine, text

from perfci.core.fingerprint import fingerprint_hash
from perfci.core.model import Metric, MetricKind, Profile, RunContext
from perfci.store import engines, migrate
from perfci.store.partitions import day_number
from perfci.store.queries import baseline_run_ids, environment_id
from perfci.store.samples import run_samples
from perfci.store.schema import SAMPLE_COLUMNS
from perfci.usecases.submit.ingest import ingest_run

STEPS = 10
CALLS = 20
T0 = datetime(2025, 1, 1, tzinfo=UTC)
ENVIRONMENT = {"gpu": "H100", "torch": "2.4.0"}
DEFAULT_PG = "postgresql+psycopg://root@127.0.0.1:5432/test"


@dataclass
class Cpu:
    """CPU seconds of the timed work: this process, and the server process when readable."""

    client: float = 0.0
    server: float | None = None

    @property
    def total(self) -> float:
        return self.client + (self.server or 0.0)


@dataclass
class Result:
    store: str
    samples: int
    ingest: Timed
    copies: dict[str, Timed]  # per-run raw COPYs by table (PostgreSQL)
    stream_rows_s: float | None  # all rows in one raw COPY (PostgreSQL)
    query_ms: float
    query_values: int


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def server_cpu_s(pid: int | None) -> float | None:
    """User + system CPU seconds of a local server process; None when it cannot be read."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _level(series: int) -> float:
    return 1_000.0 * (1 + series % 997)  # 1 µs .. 1 ms per call


def _per_call(run: int, series: int, repeat: int) -> float:
    return _level(series) * (1 + ((run * 31 + series * 7 + repeat * 13) % 101) / 5000)


def make_profile(run: int, series: int, repeat: int) -> Profile:
    metrics = []
    for j in range(series):
        avg = _per_call(run, j, repeat)
        metrics.append(
            Metric(
                kind=MetricKind.KERNEL,
                name=f"void kernel_{j}<float, 128>(...)",
                calls=CALLS,
                total_ns=avg * CALLS,
                avg_ns=avg,
                min_ns=avg * 0.9,
                max_ns=avg * 1.1,
                std_ns=avg * 0.05,
            )
        )
    return Profile(
        label="bench", format="synthetic", source=f"run{run}.txt", metrics=metrics, steps=STEPS
    )


def created_at(run: int) -> datetime:
    """When run ``run`` is stored."""
    return T0 + timedelta(minutes=run, seconds=30)


def sample_row(run_id: int, series_id: int, run: int, j: int, repeat: int) -> tuple[object, ...]:
    """The row ingest stores for series ``j`` of ``run`` (same numbers, same column order)."""
    avg = _per_call(run, j, repeat)
    total = avg * CALLS
    return (
        run_id,
        series_id,
        repeat,
        day_number(created_at(run)),  # the partition key (issue 17)
        total / STEPS,
        CALLS,
        total,
        None,
        avg,
        avg * 0.9,
        avg * 1.1,
        avg * 0.05,
        None,
        None,
        None,  # no per-step totals in these metrics: no fastest step
    )


def context(run: int) -> RunContext:
    return RunContext(
        project="bench",
        commit=f"{run:040x}",
        branch="main",
        commit_time=(T0 + timedelta(minutes=run)).isoformat(),
        ci_provider="bench",
        ci_run_id=str(run),
        ci_run_attempt=1,
        environment=dict(ENVIRONMENT),
    )


@dataclass
class Timed:
    """Wall seconds and CPU of one kind of write, summed over the runs."""

    seconds: float = 0.0
    cpu: Cpu = field(default_factory=Cpu)


def ingest_and_copy(
    url: str, runs: int, series: int, repeats: int, raw_copy: bool
) -> tuple[int, Timed, dict[str, Timed]]:
    """Ingest ``runs`` runs and (``raw_copy``, PostgreSQL) raw-COPY the same rows, interleaved.

    The raw COPYs go, on connections of their own, into a copy of ``sample`` ("raw") and into
    a bare table ("bare"). Interleaving run by run, rotating which goes
    first, gives all of them the same machine: on a shared VM the speed drifts by 2x over
    minutes, which made phases measured one after the other disagree by more than the
    difference being measured. Returns (samples, the ingests, the raw COPYs by table).
    """
    # One pooled connection, so that one server process does all the server work.
    engine = engines.make_engine(url, pool_size=1)
    sessions = engines.make_sessionmaker(engine)
    samples, ingests = 0, Timed()
    copies = {table: Timed() for table in (RAW_TABLES if raw_copy else ())}
    try:
        with ExitStack() as stack:
            connections = {
                table: stack.enter_context(_raw_copy_connection(url, table)) for table in copies
            }
            backends = {
                "ingest": _backend_pid(engine),
                **{table: c.info.backend_pid for table, c in connections.items()},
            }
            server_before = {name: server_cpu_s(pid) for name, pid in backends.items()}
            writers = ["ingest", *copies]
            for run in range(runs):
                profiles = [[make_profile(run, series, r)] for r in range(repeats)]
                raw_rows = _raw_rows(run, series, repeats) if copies else []
                shift = run % len(writers)
                for writer in writers[shift:] + writers[:shift]:
                    timed = ingests if writer == "ingest" else copies[writer]
                    started, cpu_started = time.perf_counter(), time.process_time()
                    if writer == "ingest":
                        with sessions() as session:
                            result = ingest_run(
                                session,
                                context=context(run),
                                benchmark="train",
                                repeats=profiles,
                                created_at=created_at(run),
                            )
                        samples += result.samples
                    else:
                        _copy_rows(connections[writer], writer, raw_rows)
                        connections[writer].commit()
                    timed.seconds += time.perf_counter() - started
                    timed.cpu.client += time.process_time() - cpu_started
                if (run + 1) % max(1, runs // 10) == 0:
                    rates = ", ".join(
                        f"{name} {samples / timed.seconds:,.0f}"
                        for name, timed in (("ingest", ingests), *copies.items())
                    )
                    print(f"  {run + 1}/{runs} runs, rows/s: {rates}", file=sys.stderr)
            # Each server process is idle between its own operations: all its CPU is theirs.
            for name, pid in backends.items():
                before, after = server_before[name], server_cpu_s(pid)
                if before is not None and after is not None:
                    (ingests if name == "ingest" else copies[name]).cpu.server = after - before
    finally:
        engine.dispose()
    return samples, ingests, copies


def _backend_pid(engine: Engine) -> int | None:
    if engine.dialect.name != "postgresql":
        return None
    with engine.connect() as connection:
        return int(connection.execute(text("SELECT pg_backend_pid()")).scalar_one())


def baseline_query_ms(url: str, rounds: int) -> tuple[float, int]:
    engine = engines.make_engine(url)
    sessions = engines.make_sessionmaker(engine)
    times, values = [], 0
    try:
        for _ in range(rounds):
            started = time.perf_counter()
            with sessions() as session:
                env = environment_id(session, fingerprint_hash(ENVIRONMENT))
                ids = baseline_run_ids(
                    session,
                    project="bench",
                    benchmark="train",
                    environment_id=env,
                    branch="main",
                    limit=30,
                )
                found = run_samples(session, ids)
            times.append(time.perf_counter() - started)
            values = sum(len(v) for per_run in found.values() for v in per_run.values())
            del found  # freeing 30,000 lists is not the next round's query
    finally:
        engine.dispose()
    return statistics.median(times) * 1000, values


_RAW_TYPES = ("int4", "int4", "int2", "int4", "float8", "int8", *["float8"] * 9)
#: The raw COPYs' tables: the ingest's own table (primary key included), and its columns alone.
RAW_TABLES = {"raw": "LIKE sample INCLUDING ALL", "bare": "LIKE sample"}


@contextmanager
def _raw_copy_connection(url: str, table: str) -> Iterator[Any]:
    """A plain psycopg connection with a new ``sample_<table>`` (see RAW_TABLES)."""
    import psycopg

    conninfo = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(conninfo) as connection:
        connection.execute(f"DROP TABLE IF EXISTS sample_{table}")
        connection.execute(f"CREATE TABLE sample_{table} ({RAW_TABLES[table]})")
        if table == "raw" and _index_columns(connection, "sample_raw") != _index_columns(
            connection, "sample"
        ):
            raise RuntimeError("sample_raw's indexes differ from sample's: not the reference")
        connection.commit()
        yield connection


def _index_columns(connection: Any, table: str) -> list[str]:
    """The columns of each index of ``table`` (its names left out: LIKE renames them)."""
    rows = connection.execute(
        "SELECT indisunique, indisprimary, pg_get_indexdef(indexrelid) FROM pg_index "
        "WHERE indrelid = %s::regclass",
        (table,),
    ).fetchall()
    return sorted(
        f"{unique} {primary} {definition.split(' USING ', 1)[1]}"
        for unique, primary, definition in rows
    )


def _copy_statement(table: str) -> str:
    return f"COPY sample_{table} ({', '.join(SAMPLE_COLUMNS)}) FROM STDIN (FORMAT BINARY)"


def _copy_rows(connection: Any, table: str, rows: list[tuple[object, ...]]) -> None:
    with connection.cursor() as cursor, cursor.copy(_copy_statement(table)) as copy:
        copy.set_types(_RAW_TYPES)
        for row in rows:
            copy.write_row(row)


def one_stream_copy_rows_s(url: str, runs: int, series: int, repeats: int) -> float:
    """Rows/s of all the rows in one COPY stream into a fresh bare table: the server's upper
    bound. Building the row tuples is not timed."""
    with _raw_copy_connection(url, "bare") as connection:
        elapsed, rows = 0.0, 0
        started = time.perf_counter()
        with connection.cursor() as cursor, cursor.copy(_copy_statement("bare")) as copy:
            copy.set_types(_RAW_TYPES)
            elapsed += time.perf_counter() - started
            for run in range(runs):
                chunk = _raw_rows(run, series, repeats)
                started = time.perf_counter()
                for row in chunk:
                    copy.write_row(row)
                elapsed += time.perf_counter() - started
                rows += len(chunk)
            started = time.perf_counter()
        connection.commit()
        elapsed += time.perf_counter() - started
    return rows / elapsed


def _raw_rows(run: int, series: int, repeats: int) -> list[tuple[object, ...]]:
    return [sample_row(run + 1, j + 1, run, j, r) for r in range(repeats) for j in range(series)]


def analyze(url: str) -> None:
    """``VACUUM ANALYZE`` every table, as autovacuum does to a store filled over a year: a
    freshly filled one has no statistics, and its plans sort on disk what an index reads in
    order."""
    engine = engines.make_engine(url)
    try:
        with engine.connect() as c:
            c.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("VACUUM ANALYZE")
    finally:
        engine.dispose()


@contextmanager
def scratch_database(store: str, server_url: str) -> Iterator[str]:
    if store == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            yield f"sqlite:///{folder}/bench.db"
        return
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    name = f"perfci_bench_{os.getpid()}"
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield admin.url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def measure(store: str, args: argparse.Namespace) -> Result:
    print(
        f"{store}: ingesting {args.runs} runs × {args.series} series × {args.repeats} repeats",
        file=sys.stderr,
    )
    with scratch_database(store, args.postgres_url) as url:
        migrate.upgrade(url)
        postgres = store == "postgres"
        samples, ingest, copies = ingest_and_copy(
            url, args.runs, args.series, args.repeats, raw_copy=postgres
        )
        query_ms, values = baseline_query_ms(url, args.queries)
        stream = (
            one_stream_copy_rows_s(url, args.runs, args.series, args.repeats) if postgres else None
        )
    return Result(store, samples, ingest, copies, stream, query_ms, values)


def table(results: list[Result], args: argparse.Namespace) -> str:
    lines = [
        f"{args.runs} runs × {args.series} series × {args.repeats} repeat(s); "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, load average {_load()}",
        "",
        "| store | samples | ingest s | ingest rows/s "
        "| raw COPY rows/s per run, copy of `sample` | **ingest / raw COPY** "
        "| raw COPY rows/s per run, bare table | ingest / bare COPY "
        "| raw COPY rows/s, one stream | ingest / one stream "
        "| CPU ms per run: ingest / raw COPY / bare COPY (client + server) "
        "| CPU ratio, raw / bare "
        "| baseline query ms (30 runs) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: |",
    ]
    for r in results:
        rate = r.samples / r.ingest.seconds
        cells = ["–"] * 8
        if r.copies:
            raw, bare = (r.samples / r.copies[t].seconds for t in ("raw", "bare"))
            stream = r.stream_rows_s or float("nan")
            cells = [
                f"{raw:,.0f}",
                f"**{rate / raw:.2f}**",
                f"{bare:,.0f}",
                f"{rate / bare:.2f}",
                f"{stream:,.0f}",
                f"{rate / stream:.2f}",
                " / ".join(
                    _cpu_ms(timed.cpu, args.runs)
                    for timed in (r.ingest, r.copies["raw"], r.copies["bare"])
                ),
                "–",
            ]
            if all(t.cpu.server is not None for t in (r.ingest, *r.copies.values())):
                cells[7] = " / ".join(
                    f"{r.copies[t].cpu.total / r.ingest.cpu.total:.2f}" for t in ("raw", "bare")
                )
        else:
            cells[6] = _cpu_ms(r.ingest.cpu, args.runs)
        lines.append(
            f"| {r.store} | {r.samples:,} | {r.ingest.seconds:.1f} | {rate:,.0f} | "
            f"{' | '.join(cells)} | {r.query_ms:.1f} ({r.query_values:,} values) |"
        )
    return "\n".join(lines)


def _cpu_ms(cpu: Cpu, runs: int) -> str:
    if cpu.server is None:
        return f"{cpu.client / runs * 1000:.2f}"
    return (
        f"{cpu.total / runs * 1000:.2f} ({cpu.client / runs * 1000:.2f} + "
        f"{cpu.server / runs * 1000:.2f})"
    )


def _load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--series", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--queries", type=int, default=20, help="baseline query rounds")
    parser.add_argument("--stores", default="postgres,sqlite")
    parser.add_argument(
        "--postgres-url", default=os.environ.get("PERFCI_TEST_POSTGRES_URL", DEFAULT_PG)
    )
    args = parser.parse_args()
    results = [measure(store.strip(), args) for store in args.stores.split(",")]
    print(table(results, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
