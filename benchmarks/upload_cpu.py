"""CPU time of one upload in-process, by phase (issue 35: "per upload CPU ≤ 50 ms").

What the service does for ``POST /projects/{p}/runs`` once the body is parsed:
:func:`perfci.usecases.submit.run.submit_run` (ingest, the comparison against the baseline,
the comparison stored), here without HTTP, for ``--metrics`` kernels × ``--repeats`` repeats
against a baseline of ``--baseline`` stored runs of ``main``. Prints the CPU milliseconds per
upload (``time.process_time``: this process only; PostgreSQL's own work is not in it) and the
share of each phase, the comparison split into the store's read and ``compare_run``; and the wall
time per upload (the database's work included), the in-process pipeline's rate in one stream.

    .venv/bin/python benchmarks/upload_cpu.py [--store sqlite|postgres] [--uploads 30]

``--store postgres`` makes a scratch database beside ``PERFCI_TEST_POSTGRES_URL`` (default
``postgresql+psycopg://root@127.0.0.1:5432/test``) and drops it at the end.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import os
import platform
import pstats
import random
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from sqlalchemy.orm import Session
from store_speed import DEFAULT_PG, scratch_database

from perfci.core.model import Metric, MetricKind, Profile, RunContext
from perfci.core.settings import Settings
from perfci.usecases.submit import compare as submit_compare
from perfci.usecases.submit import run as submit

try:
    from perfci.store import engines, migrate
except ImportError:  # the tree issue 35 was filed on kept both in perfci.store.db
    from perfci.store import db as engines  # type: ignore[no-redef]

    migrate = engines  # type: ignore[misc]

T0 = datetime(2026, 1, 1, tzinfo=UTC)
#: (module, function) timed as a phase; nested phases are also counted in their callers.
PHASES = (
    (submit, "ingest_run"),
    (submit, "compare_stored_run"),
    (submit_compare, "run_samples_checked"),
    (submit_compare, "compare_run"),
    (submit, "save_comparison"),
    (submit, "comparison_to_json"),  # the stored document, inside save_comparison
)


def timed(spent: dict[str, float]) -> None:
    """Wrap each phase so that its CPU time adds up in ``spent``.

    A phase the tree does not have is left out: the script also times the tree the issue was
    filed on, from its own folder (``cp benchmarks/upload_cpu.py <tree>/benchmarks/``).
    """
    for module, name in PHASES:
        if hasattr(module, name):
            setattr(module, name, _phase(getattr(module, name), name, spent))


def _phase(inner: Callable[..., Any], name: str, spent: dict[str, float]) -> Callable[..., Any]:
    @functools.wraps(inner)
    def phase(*args: Any, **kwargs: Any) -> Any:
        started = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.process_time() - started

    return phase


def repeats(rng: random.Random, metrics: int, count: int) -> list[list[Profile]]:
    names = [f"kernel_{i}<float, 128>" for i in range(metrics)]
    out = []
    for _ in range(count):
        found = []
        for j, name in enumerate(names):
            ns = 1000.0 * (1 + j) * rng.lognormvariate(0, 0.02)
            found.append(Metric(kind=MetricKind.KERNEL, name=name, calls=1, total_ns=ns, avg_ns=ns))
        out.append([Profile(label="p", format="synthetic", source="p", metrics=found, steps=10)])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--metrics", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline", type=int, default=30)
    parser.add_argument("--uploads", type=int, default=30)
    parser.add_argument(
        "--profile", type=int, metavar="N", default=0, help="print cProfile's N costliest calls"
    )
    args = parser.parse_args(argv)
    rng = random.Random(1)
    spent: dict[str, float] = {}
    server = os.environ.get("PERFCI_TEST_POSTGRES_URL", DEFAULT_PG)
    with scratch_database(args.store, server) as url:
        migrate.upgrade(url)
        engine = engines.make_engine(url)
        timed(spent)
        # Once, as the service builds its settings once: not a cost of an upload.
        settings = Settings()

        def upload(i: int, branch: str, profiles: list[list[Profile]]) -> None:
            context = RunContext(
                project="p",
                commit=f"c{i}",
                branch=branch,
                environment={"gpu": "H100"},
                ci_run_id=f"r{i}",
                commit_time=(T0 + timedelta(hours=i)).isoformat(),
            )
            with Session(engine) as session:
                submit.submit_run(
                    session,
                    context=context,
                    benchmark="b",
                    repeats=profiles,
                    settings=settings,
                    baseline_branch="main",
                )

        for i in range(args.baseline):
            upload(i, "main", repeats(rng, args.metrics, args.repeats))
        spent.clear()
        cpu = 0.0
        wall = time.perf_counter()
        profiler = cProfile.Profile() if args.profile else None
        for i in range(args.baseline, args.baseline + args.uploads):
            profiles = repeats(rng, args.metrics, args.repeats)
            started = time.process_time()
            if profiler is not None:
                profiler.runcall(upload, i, "pr", profiles)
            else:
                upload(i, "pr", profiles)
            cpu += time.process_time() - started
        wall = time.perf_counter() - wall
        engine.dispose()
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(args.profile)
    per = cpu / args.uploads * 1000
    print(
        f"# One upload in-process ({platform.node()}, Python {platform.python_version()}, "
        f"{args.store}): {args.metrics} kernels × {args.repeats} repeats against "
        f"{args.baseline} runs, {args.uploads} uploads\n"
    )
    print(f"CPU per upload: {per:.1f} ms (the run's profiles built outside the timed phases)")
    print(
        f"Wall per upload: {wall / args.uploads * 1000:.1f} ms, the database's own work and "
        f"building the profiles included: {args.uploads / wall:.1f} uploads/s in one stream\n"
    )
    print("| phase | CPU ms per upload | share |\n|:--|--:|--:|")
    for _, name in PHASES:
        if name not in spent:  # not in this tree
            continue
        ms = spent[name] / args.uploads * 1000
        print(f"| {name} | {ms:.1f} | {ms / per:.0%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
