"""Speed of one full comparison, store read included, beside scipy on the same arrays (issue 35).

Usage::

    .venv/bin/python benchmarks/compare_speed.py [--metrics 1000,10000] [--baseline 30]
        [--repeats 5] [--rounds 3] [--store sqlite|postgres] [--profile]

For each metric count: a fresh store (SQLite temp file, or a scratch database on
``PERFCI_TEST_POSTGRES_URL``) gets ``--baseline`` main runs and one candidate run of ``--repeats``
repeats of that many kernels (not timed): the main runs as uploads store them, their values also
kept as arrays (``--fill upload``, the default), or as ``perfci ingest`` does (``--fill ingest``);
the candidate as the upload being compared has it, in rows. Then, interleaved round by
round (the machine is shared: phases timed one after the other drift):

- **perfci**: :func:`perfci.usecases.submit.compare.compare_stored_run` on the candidate, the
  real path: baseline lookup, one read of the runs' samples, GPU screen, ``compare_run``;
  also split into the store read (``run_samples_checked`` of the 31 runs) and the rest;
- **scipy**: Mann–Whitney U and Welch's t (``scipy.stats.mannwhitneyu`` and ``ttest_ind``,
  vectorised over the metrics with ``axis=1``) on the same numbers as arrays: per metric the
  baseline runs' medians against the candidate's repeats, the statistics a comparison needs.

Prints the best and median wall time per path and their ratio (target: perfci within 4× of
scipy). ``--floor`` adds what two parts of any comparison cost that keeps today's design,
beside scipy: reading the baseline runs' stored arrays as they are (one query, each column
decoded by ``np.frombuffer``, no grouping by series), and building the result's lines, one
:class:`~perfci.core.model.MetricComparison` per metric from its own values (every output —
the comment, the JSON document, the page — is made from them). Their sum is a floor under the
full comparison: what it cannot go below without another shape for the data.

``--profile`` prints cProfile's top functions of one perfci comparison. ``--store-file``
keeps the SQLite store (filled once) so that the script of another checkout (the code before a
change; a store of an older schema is upgraded) can be run in turn on the same data.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import os
import platform
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from scipy import stats
from sqlalchemy import Engine, bindparam, create_engine, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from store_speed import DEFAULT_PG, analyze

from perfci.core.model import (
    Metric,
    MetricComparison,
    MetricKind,
    Profile,
    RunComparison,
    RunContext,
)
from perfci.core.settings import Settings
from perfci.store import engines, migrate
from perfci.store.queries import get_run
from perfci.store.samples import run_samples_checked
from perfci.usecases.submit.compare import choose_baseline, compare_stored_run
from perfci.usecases.submit.ingest import ingest_run
from perfci.usecases.submit.run import submit_run

T0 = datetime(2025, 1, 1, tzinfo=UTC)
ENVIRONMENT = {"gpu": "H100", "torch": "2.4.0"}
TARGET = 4.0


def _profiles(rng: np.random.Generator, levels: np.ndarray, repeats: int) -> list[list[Profile]]:
    """``repeats`` profiles of kernels at ``levels`` ns (log-normal noise, CV 2 %)."""
    found = []
    for _ in range(repeats):
        values = levels * np.exp(rng.normal(0, 0.02, levels.size))
        metrics = [
            Metric(kind=MetricKind.KERNEL, name=f"kernel_{i}", calls=1, total_ns=v, avg_ns=v)
            for i, v in enumerate(values.tolist())
        ]
        metrics.append(
            Metric(kind=MetricKind.STEP, name="step", calls=1, total_ns=float(values.sum()))
        )
        found.append([Profile(label="p", format="synthetic", source="p.json", metrics=metrics)])
    return found


def _fill(url: str, metrics: int, baseline: int, repeats: int, how: str = "upload") -> int:
    """The store's runs; the candidate's id.

    ``how``: ``upload`` stores the baseline's main runs as uploads do (each compared with its
    own baseline, its values kept as arrays: ``run_arrays``), ``ingest`` as ``perfci ingest``
    does (rows only). The candidate is ingested either way: an upload's comparison reads its
    own run from the rows it has just written.
    """
    rng = np.random.default_rng(1)
    levels = np.exp(rng.uniform(np.log(1e3), np.log(1e7), metrics))
    engine = engines.make_engine(url)
    make = engines.make_sessionmaker(engine)
    run_id = 0
    try:
        for i in range(baseline + 1):
            branch = "main" if i < baseline else "feature"
            context = RunContext(
                project="acme/model",
                commit=f"{i:040x}",
                commit_time=(T0 + timedelta(hours=i)).isoformat(),
                branch=branch,
                base_branch="main",
                ci_run_id=str(i),
                environment=ENVIRONMENT,
            )
            with make() as session:
                if how == "upload" and branch == "main":
                    run_id = submit_run(
                        session,
                        context=context,
                        benchmark="train",
                        repeats=_profiles(rng, levels, repeats),
                        settings=Settings(),
                    ).ingest.run_id
                    continue
                run_id = ingest_run(
                    session,
                    context=context,
                    benchmark="train",
                    repeats=_profiles(rng, levels, repeats),
                    created_at=T0 + timedelta(hours=i, minutes=5),
                ).run_id
    finally:
        engine.dispose()
    return run_id


def _candidate(url: str) -> int:
    engine = engines.make_engine(url)
    try:
        with engine.connect() as c:
            return int(c.execute(text("SELECT max(id) FROM run")).scalar_one())
    finally:
        engine.dispose()


@contextmanager
def _store(kind: str, file: Path | None = None) -> Iterator[str]:
    if file is not None:  # kept between invocations (and upgraded when older)
        url = f"sqlite:///{file}"
        migrate.upgrade(url)
        yield url
        return
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            url = f"sqlite:///{folder}/compare.db"
            migrate.upgrade(url)
            yield url
        return
    admin = create_engine(
        os.environ.get("PERFCI_TEST_POSTGRES_URL", DEFAULT_PG), isolation_level="AUTOCOMMIT"
    )
    name = f"perfci_compare_speed_{os.getpid()}"
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        c.execute(text(f'CREATE DATABASE "{name}"'))
    url = admin.url.set(database=name).render_as_string(hide_password=False)
    try:
        migrate.upgrade(url)
        yield url
    finally:
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _arrays(url: str, run_id: int) -> tuple[np.ndarray, np.ndarray]:
    """The same numbers as perfci reads them: metrics × baseline run medians, metrics × repeats."""
    engine = engines.make_engine(url)
    try:
        with engines.make_sessionmaker(engine)() as session:
            run = get_run(session, run_id)
            ids = choose_baseline(session, run).run_ids
            samples = run_samples_checked(session, [*ids, run_id]).samples
    finally:
        engine.dispose()
    keys = sorted(samples, key=lambda k: k.key)
    base = np.array([[np.median(samples[k][r]) for r in ids] for k in keys])
    cand = np.array([samples[k][run_id] for k in keys])
    return base, cand


def _read_arrays(engine: Engine, run_ids: list[int]) -> Callable[[], object]:
    """Reads the runs' ``run_arrays`` rows and decodes them, nothing more (``--floor``)."""
    query = text("SELECT run_id, series_ids, value FROM run_arrays WHERE run_id IN :ids")
    query = query.bindparams(bindparam("ids", expanding=True))

    def read() -> object:
        with engine.connect() as connection:
            rows = connection.execute(query, {"ids": run_ids}).all()
        if len(rows) != len(run_ids):
            raise SystemExit("--floor needs the baseline stored as uploads do (--fill upload)")
        return [
            (np.frombuffer(series, dtype="<i4"), np.frombuffer(value, dtype="<f8"))
            for _, series, value in rows
        ]

    return read


def _build_lines(result: RunComparison) -> Callable[[], object]:
    """Builds each of ``result``'s lines anew from its values (``--floor``)."""
    names = [f.name for f in dataclasses.fields(MetricComparison)]
    values = [tuple(getattr(m, name) for name in names) for m in result.metrics]
    return lambda: [MetricComparison(*line) for line in values]


def _scipy(base: np.ndarray, cand: np.ndarray) -> None:
    stats.mannwhitneyu(base, cand, axis=1, alternative="two-sided")
    stats.ttest_ind(np.log(base), np.log(cand), axis=1, equal_var=False)


def _timed(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def _one_size(kind: str, metrics: int, args: argparse.Namespace) -> None:
    file = None if args.store_file is None else Path(f"{args.store_file}.{metrics}")
    filled = file is not None and file.exists()
    with _store(kind, file) as url:
        run_id = (
            _candidate(url)
            if filled
            else _fill(url, metrics, args.baseline, args.repeats, args.fill)
        )
        if kind == "postgres":
            # Statistics, as autovacuum keeps them: without any the planner guessed 764 rows
            # for the baseline's 1.5 M and sorted them on disk (1.6 s of server time, 0.7 s
            # with them, reading the key's order).
            analyze(url)
        base, cand = _arrays(url, run_id)
        engine = engines.make_engine(url)
        make = engines.make_sessionmaker(engine)

        def full() -> object:
            with make() as session:
                return compare_stored_run(session, run_id)

        def read() -> object:
            with make() as session:
                ids = choose_baseline(session, get_run(session, run_id)).run_ids
                return run_samples_checked(session, [*ids, run_id])

        with make() as session:
            baseline_ids = choose_baseline(session, get_run(session, run_id)).run_ids
        floor = (
            {"arrays": _read_arrays(engine, baseline_ids), "lines": _build_lines(full())}
            if args.floor
            else {}
        )
        try:
            full()  # warm: imports, caches, the database's pages
            _scipy(base, cand)  # warm: scipy's lazy set-up
            for part in floor.values():
                part()
            if args.profile:
                profiler = cProfile.Profile()
                profiler.runcall(full)
                pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
            times: dict[str, list[float]] = {"perfci": [], "read": [], "scipy": []}
            times.update({name: [] for name in floor})
            for _ in range(args.rounds):
                times["perfci"].append(_timed(full))
                times["read"].append(_timed(read))
                times["scipy"].append(_timed(lambda: _scipy(base, cand)))
                for name, part in floor.items():
                    times[name].append(_timed(part))
        finally:
            engine.dispose()
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = med["perfci"] / med["scipy"]
    print(
        f"| {kind} | {metrics:,} × {args.baseline} runs × {args.repeats} repeats | "
        f"{min(times['perfci']):.3f} / {med['perfci']:.3f} | {med['read']:.3f} | "
        f"{min(times['scipy']):.3f} / {med['scipy']:.3f} | {ratio:.1f}× "
        f"({'met' if ratio <= TARGET else 'NOT met'}) |"
        + (
            f" {med['arrays']:.3f} + {med['lines']:.3f} | "
            f"{(med['arrays'] + med['lines']) / med['scipy']:.1f}× |"
            if floor
            else ""
        ),
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics", default="1000,10000")
    parser.add_argument("--baseline", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also time reading the baseline's arrays as stored and building the result's "
        "lines: a floor under any comparison of today's design",
    )
    parser.add_argument(
        "--fill",
        choices=("upload", "ingest"),
        default="upload",
        help="store the baseline runs as uploads do (their values also kept as arrays, what a "
        "comparison reads of them) or as `perfci ingest` does (rows only)",
    )
    parser.add_argument(
        "--store-file",
        type=Path,
        help="SQLite store kept at this path (+ .<metrics>): filled once, reused after, so "
        "that two checkouts (before/after) can be timed in turn on the same store",
    )
    args = parser.parse_args(argv)
    print(
        f"{platform.machine()}, Python {platform.python_version()}, numpy {np.__version__}; "
        f"wall seconds best / median of {args.rounds} interleaved rounds"
    )
    floor = " floor: arrays read + lines, s | floor × scipy |" if args.floor else ""
    print(
        "| store | comparison | perfci (full) | of which store read | scipy MWU + Welch | ratio |"
        + floor
    )
    print("|---|---|---|---|---|---|" + "---|---|" * bool(floor))
    for metrics in (int(m) for m in args.metrics.split(",")):
        _one_size(args.store, metrics, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
