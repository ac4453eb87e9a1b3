"""Speed of the store: ingest through the real use case, raw COPY beside it, baseline query.

Usage::

    PERFCI_TEST_POSTGRES_URL=postgresql+psycopg://root@127.0.0.1:5432/test \\
        .venv/bin/python benchmarks/store_speed.py [--runs 1000] [--series 1000] [--repeats 1]
        [--stores postgres,sqlite] [--queries 20]

Each store gets a fresh database (PostgreSQL: a scratch database on the server, dropped after;
SQLite: a temp file). ``--runs`` runs of ``--series`` kernel metrics each go in one at a time
through :func:`perfci.usecases.ingest.ingest_run`, one transaction and commit per run, as CI
does; building the synthetic profiles is not timed. On PostgreSQL the same sample rows are then
written with one binary COPY into a bare table (no keys, no indexes) as the raw upper bound.
The baseline query is ``baseline_run_ids`` (last 30 runs) + ``run_samples``, median of
``--queries`` calls. Prints a Markdown table; targets: ingest ≥ 0.5 × COPY, query < 100 ms.

On a shared, loaded machine wall times swing by 2-3x between phases a minute apart, so the
table also gives CPU time per run, ingest against per-run COPY: this process's CPU plus, when
the server runs on this host (its ``/proc`` readable), the CPU of its server process.
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
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import Engine, create_engine, text

from perfci.context import fingerprint_hash
from perfci.model import Metric, MetricKind, Profile, RunContext
from perfci.store import db
from perfci.store.queries import baseline_run_ids, environment_id, run_samples
from perfci.store.schema import SAMPLE_COLUMNS
from perfci.usecases.ingest import ingest_run

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
    ingest_s: float
    ingest_cpu: Cpu
    copy_rows_s: tuple[float, float] | None
    copy_cpu: Cpu | None
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
        metrics.append(Metric(kind=MetricKind.KERNEL, name=f"void kernel_{j}<float, 128>(...)",
                              calls=CALLS, total_ns=avg * CALLS, avg_ns=avg, min_ns=avg * 0.9,
                              max_ns=avg * 1.1, std_ns=avg * 0.05))
    return Profile(label="bench", format="synthetic", source=f"run{run}.txt", metrics=metrics,
                   steps=STEPS)


def sample_row(run_id: int, series_id: int, run: int, j: int, repeat: int) -> tuple[object, ...]:
    """The row ingest stores for series ``j`` of ``run`` (same numbers, same column order)."""
    avg = _per_call(run, j, repeat)
    total = avg * CALLS
    return (run_id, series_id, repeat, total / STEPS, CALLS, total, None, avg, avg * 0.9,
            avg * 1.1, avg * 0.05, None, None)


def context(run: int) -> RunContext:
    return RunContext(project="bench", commit=f"{run:040x}", branch="main",
                      commit_time=(T0 + timedelta(minutes=run)).isoformat(),
                      ci_provider="bench", ci_run_id=str(run), ci_run_attempt=1,
                      environment=dict(ENVIRONMENT))


def ingest_all(url: str, runs: int, series: int, repeats: int) -> tuple[int, float, Cpu]:
    # One pooled connection, so that one server process does all the server work.
    engine = db.make_engine(url, pool_size=1)
    sessions = db.make_sessionmaker(engine)
    samples, elapsed, cpu = 0, 0.0, Cpu()
    backend = _backend_pid(engine)
    server_before = server_cpu_s(backend)
    try:
        for run in range(runs):
            profiles = [[make_profile(run, series, r)] for r in range(repeats)]
            started, cpu_started = time.perf_counter(), time.process_time()
            with sessions() as session:
                result = ingest_run(session, context=context(run), benchmark="train",
                                    repeats=profiles,
                                    created_at=T0 + timedelta(minutes=run, seconds=30))
            elapsed += time.perf_counter() - started
            cpu.client += time.process_time() - cpu_started
            samples += result.samples
            if (run + 1) % max(1, runs // 10) == 0:
                print(f"  {run + 1}/{runs} runs, {samples / elapsed:,.0f} rows/s",
                      file=sys.stderr)
        server_after = server_cpu_s(backend)
        if server_before is not None and server_after is not None:
            # The server process is idle between runs: all its CPU is the ingests'.
            cpu.server = server_after - server_before
    finally:
        engine.dispose()
    return samples, elapsed, cpu


def _backend_pid(engine: Engine) -> int | None:
    if engine.dialect.name != "postgresql":
        return None
    with engine.connect() as connection:
        return int(connection.execute(text("SELECT pg_backend_pid()")).scalar_one())


def baseline_query_ms(url: str, rounds: int) -> tuple[float, int]:
    engine = db.make_engine(url)
    sessions = db.make_sessionmaker(engine)
    times, values = [], 0
    try:
        for _ in range(rounds):
            started = time.perf_counter()
            with sessions() as session:
                env = environment_id(session, fingerprint_hash(ENVIRONMENT))
                ids = baseline_run_ids(session, project="bench", benchmark="train",
                                       environment_id=env, branch="main", limit=30)
                found = run_samples(session, ids)
            times.append(time.perf_counter() - started)
            values = sum(len(v) for per_run in found.values() for v in per_run.values())
            del found  # freeing 30,000 lists is not the next round's query
    finally:
        engine.dispose()
    return statistics.median(times) * 1000, values


def raw_copy_rows_s(url: str, runs: int, series: int,
                    repeats: int) -> tuple[tuple[float, float], Cpu]:
    """Rows/s of raw binary COPYs of the same rows into a bare table (no keys, no indexes).

    Two figures: one COPY and one commit per run (the granularity of an ingest: one CI run
    per transaction), and all rows in one COPY stream (the server's upper bound). Building
    the row tuples is not timed. Also the CPU of the per-run COPYs, as for ingests.
    """
    import psycopg

    conninfo = url.replace("postgresql+psycopg://", "postgresql://")
    statement = f"COPY sample_raw ({', '.join(SAMPLE_COLUMNS)}) FROM STDIN (FORMAT BINARY)"
    types = ("int4", "int4", "int2", "float8", "int8", *["float8"] * 8)
    with psycopg.connect(conninfo) as connection:
        connection.execute("CREATE TABLE sample_raw (run_id int4, series_id int4, repeat int2, "
                           "value float8, calls int8, total_ns float8, self_ns float8, "
                           "avg_ns float8, min_ns float8, max_ns float8, std_ns float8, "
                           "median_ns float8, bytes float8)")
        connection.commit()
        per_run, rows, cpu = 0.0, 0, Cpu()
        backend = connection.info.backend_pid
        server_before = server_cpu_s(backend)
        for run in range(runs):
            chunk = _raw_rows(run, series, repeats)
            started, cpu_started = time.perf_counter(), time.process_time()
            with connection.cursor() as cursor, cursor.copy(statement) as copy:
                copy.set_types(types)
                for row in chunk:
                    copy.write_row(row)
            connection.commit()
            per_run += time.perf_counter() - started
            cpu.client += time.process_time() - cpu_started
            rows += len(chunk)
        server_after = server_cpu_s(backend)
        if server_before is not None and server_after is not None:
            cpu.server = server_after - server_before
        connection.execute("TRUNCATE sample_raw")
        connection.commit()
        stream = 0.0
        started = time.perf_counter()
        with connection.cursor() as cursor, cursor.copy(statement) as copy:
            copy.set_types(types)
            stream += time.perf_counter() - started
            for run in range(runs):
                chunk = _raw_rows(run, series, repeats)
                started = time.perf_counter()
                for row in chunk:
                    copy.write_row(row)
                stream += time.perf_counter() - started
            started = time.perf_counter()
        connection.commit()
        stream += time.perf_counter() - started
    return (rows / per_run, rows / stream), cpu


def _raw_rows(run: int, series: int, repeats: int) -> list[tuple[object, ...]]:
    return [sample_row(run + 1, j + 1, run, j, r) for r in range(repeats) for j in range(series)]


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
    print(f"{store}: ingesting {args.runs} runs × {args.series} series × {args.repeats} "
          "repeats", file=sys.stderr)
    with scratch_database(store, args.postgres_url) as url:
        db.upgrade(url)
        samples, elapsed, ingest_cpu = ingest_all(url, args.runs, args.series, args.repeats)
        query_ms, values = baseline_query_ms(url, args.queries)
        copy_rate, copy_cpu = ((raw_copy_rows_s(url, args.runs, args.series, args.repeats))
                               if store == "postgres" else (None, None))
    return Result(store, samples, elapsed, ingest_cpu, copy_rate, copy_cpu, query_ms, values)


def table(results: list[Result], args: argparse.Namespace) -> str:
    lines = [f"{args.runs} runs × {args.series} series × {args.repeats} repeat(s); "
             f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
             f"Python {platform.python_version()}, load average {_load()}",
             "",
             "| store | samples | ingest s | ingest rows/s | raw COPY rows/s, per run "
             "| ingest / COPY per run | raw COPY rows/s, one stream | ingest / COPY stream "
             "| CPU ms per run, ingest / COPY (client + server) | ingest / COPY per run, CPU "
             "| baseline query ms (30 runs) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        rate = r.samples / r.ingest_s
        cells = ["–"] * 4
        if r.copy_rows_s:
            per_run, stream = r.copy_rows_s
            cells = [f"{per_run:,.0f}", f"{rate / per_run:.2f}", f"{stream:,.0f}",
                     f"{rate / stream:.2f}"]
        cpu_cells = [_cpu_ms(r.ingest_cpu, args.runs), "–"]
        if r.copy_cpu is not None:
            cpu_cells[0] += f" / {_cpu_ms(r.copy_cpu, args.runs)}"
            if r.ingest_cpu.server is not None and r.copy_cpu.server is not None:
                cpu_cells[1] = f"{r.copy_cpu.total / r.ingest_cpu.total:.2f}"
        lines.append(f"| {r.store} | {r.samples:,} | {r.ingest_s:.1f} | {rate:,.0f} | "
                     f"{' | '.join(cells)} | {' | '.join(cpu_cells)} | "
                     f"{r.query_ms:.1f} ({r.query_values:,} values) |")
    return "\n".join(lines)


def _cpu_ms(cpu: Cpu, runs: int) -> str:
    if cpu.server is None:
        return f"{cpu.client / runs * 1000:.2f}"
    return (f"{cpu.total / runs * 1000:.2f} ({cpu.client / runs * 1000:.2f} + "
            f"{cpu.server / runs * 1000:.2f})")


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
    parser.add_argument("--postgres-url",
                        default=os.environ.get("PERFCI_TEST_POSTGRES_URL", DEFAULT_PG))
    args = parser.parse_args()
    results = [measure(store.strip(), args) for store in args.stores.split(",")]
    print(table(results, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
