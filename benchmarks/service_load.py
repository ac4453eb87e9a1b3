"""Load test of the perfci service on loopback: concurrent uploads against PostgreSQL.

N clients upload M runs in total (each run: 3 repeats × ``--metrics`` metrics) to a real
``perfci`` server (uvicorn, ``--workers``) on a fresh PostgreSQL database, then the database is
counted: every acknowledged upload must be there exactly once (no lost, no duplicated runs).
With ``--restart`` PostgreSQL is restarted (``pg_ctlcluster VERSION main restart``) while the
uploads run; clients retry with the same Idempotency-Key, so the service must recover without
losing or doubling an acknowledged upload.

    .venv/bin/python benchmarks/service_load.py --clients 20 --uploads 500 --restart

Prints a Markdown table. PERFCI_TEST_POSTGRES_URL (or --postgres) names the server's admin DB.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import requests
from sqlalchemy import create_engine, func, select, text

from perfci.store import db
from perfci.store.schema import Run
from perfci.usecases.tokens import create_token

PROJECT = "load/test"
RETRY_STATUSES = {500, 502, 503, 504}


@dataclass
class Outcome:
    key: str
    run_id: int | None = None
    latency_s: float = 0.0
    attempts: int = 0
    error: str | None = None


@dataclass
class Scenario:
    name: str
    outcomes: list[Outcome] = field(default_factory=list)
    wall_s: float = 0.0
    stored_runs: int = 0
    missing: int = 0
    restart_s: float | None = None


def body(index: int, metrics: int, rng: np.random.Generator) -> dict[str, Any]:
    names = [f"kernel_{i:04d}<float, 128>" for i in range(metrics - 1)]
    repeats = []
    for _ in range(3):
        values = rng.lognormal(13, 1, size=len(names)) * float(np.exp(rng.normal(0, 0.01)))
        kernels = [{"kind": "kernel", "name": n, "calls": 10, "total_ns": float(v) * 3}
                   for n, v in zip(names, values, strict=True)]
        step = {"kind": "step", "name": "train_step", "calls": 3,
                "total_ns": float(values.sum()) * 3 * 1.2}
        repeats.append({"schema_version": 1, "profiles": [
            {"label": "p", "format": "load", "steps": 3, "metrics": [step, *kernels]}]})
    return {"benchmark": "gpt", "repeats": repeats, "context": {
        "commit": f"{index:040x}", "branch": "main", "ci_provider": "load",
        "ci_run_id": str(index), "ci_run_attempt": 1, "environment": {"gpu": "load-gpu"}}}


def upload(session: requests.Session, url: str, token: str, payload: dict[str, Any],
           key: str, deadline_s: float) -> Outcome:
    """POST until acknowledged, retrying connection errors and 5xx with the same key."""
    outcome = Outcome(key=key)
    started = time.perf_counter()
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": key}
    delay = 0.2
    while True:
        outcome.attempts += 1
        try:
            response = session.post(url, json=payload, headers=headers, timeout=(5, 120))
            if response.status_code in (200, 201):
                outcome.run_id = int(response.json()["run_id"])
                break
            if response.status_code not in RETRY_STATUSES:
                outcome.error = f"HTTP {response.status_code}: {response.text[:200]}"
                break
            reason = f"HTTP {response.status_code}"
        except requests.RequestException as exc:
            reason = type(exc).__name__
        if time.perf_counter() - started > deadline_s:
            outcome.error = f"gave up after {outcome.attempts} attempts: {reason}"
            break
        time.sleep(delay)
        delay = min(delay * 2, 2.0)
    outcome.latency_s = time.perf_counter() - started
    return outcome


def run_scenario(name: str, *, base_url: str, token: str, clients: int, uploads: int,
                 metrics: int, database_url: str, restart: str | None) -> Scenario:
    scenario = Scenario(name=name)
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    offset = int(time.time() * 1000) % 10**9 * 1000
    payloads = [body(offset + i, metrics, rng) for i in range(uploads)]
    url = f"{base_url}/api/v1/projects/{PROJECT}/runs"
    done = threading.Semaphore(0)
    restarter = None
    if restart:
        restarter = threading.Thread(target=_restart_midway,
                                     args=(restart, done, uploads // 3, scenario))
        restarter.start()
    local = threading.local()

    def work(i: int) -> Outcome:
        if not hasattr(local, "session"):
            local.session = requests.Session()
        outcome = upload(local.session, url, token, payloads[i], str(uuid.uuid4()), 120.0)
        done.release()
        return outcome

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        scenario.outcomes = list(pool.map(work, range(uploads)))
    scenario.wall_s = time.perf_counter() - started
    if restarter is not None:
        restarter.join()
    _verify(scenario, database_url)
    return scenario


def _restart_midway(command: str, done: threading.Semaphore, after: int,
                    scenario: Scenario) -> None:
    for _ in range(after):
        done.acquire()
    started = time.perf_counter()
    subprocess.run(command.split(), check=True, capture_output=True)
    scenario.restart_s = time.perf_counter() - started


def _verify(scenario: Scenario, database_url: str) -> None:
    engine = create_engine(database_url)
    acked = {o.run_id for o in scenario.outcomes if o.run_id is not None}
    with engine.connect() as connection:
        stored = set(connection.execute(select(Run.id)).scalars())
        scenario.stored_runs = connection.execute(select(func.count()).select_from(Run)
                                                  ).scalar_one()
    engine.dispose()
    scenario.missing = len(acked - stored)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_server(database_url: str, workers: int, log: Path) -> tuple[subprocess.Popen[bytes],
                                                                       str]:
    port = _free_port()
    env = {**os.environ, "PERFCI_DATABASE_URL": database_url}
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--factory",
             "perfci.server.app:create_app_from_env", "--host", "127.0.0.1", "--port",
             str(port), "--workers", str(workers), "--log-level", "warning"],
            env=env, stdout=sink, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if requests.get(f"{base}/healthz", timeout=2).status_code == 200:
                return process, base
        except requests.RequestException:
            pass
        time.sleep(0.2)
    process.kill()
    raise SystemExit(f"server did not start:\n{log.read_text()}")


def _row(scenario: Scenario, clients: int, metrics: int) -> str:
    ok = [o for o in scenario.outcomes if o.run_id is not None]
    errors = len(scenario.outcomes) - len(ok)
    latencies = sorted(o.latency_s * 1000 for o in ok)
    p99 = latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))] if (
        latencies) else float("nan")
    duplicated = scenario.stored_runs - len({o.run_id for o in ok})
    retries = sum(o.attempts - 1 for o in scenario.outcomes)
    restart = f"{scenario.restart_s:.1f} s" if scenario.restart_s is not None else "—"
    return (f"| {scenario.name} | {clients} | {len(scenario.outcomes)} | {metrics} | {errors} "
            f"| {scenario.missing} | {duplicated} | {retries} | {restart} "
            f"| {len(ok) / scenario.wall_s:.1f} | {statistics.median(latencies):.0f} "
            f"| {p99:.0f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--uploads", type=int, default=500)
    parser.add_argument("--metrics", type=int, default=300)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--restart", action="store_true",
                        help="also run the scenario with a PostgreSQL restart midway")
    parser.add_argument("--restart-command", default=None,
                        help="default: pg_ctlcluster <version> main restart")
    parser.add_argument("--postgres", default=os.environ.get("PERFCI_TEST_POSTGRES_URL"))
    args = parser.parse_args()
    if not args.postgres:
        raise SystemExit("set PERFCI_TEST_POSTGRES_URL or pass --postgres")
    # pre-ping: the restart scenario kills this engine's pooled connection too.
    admin = create_engine(args.postgres, isolation_level="AUTOCOMMIT", pool_pre_ping=True)
    name = f"perfci_load_{os.getpid()}"
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    url = admin.url.set(database=name).render_as_string(hide_password=False)
    db.upgrade(url)
    engine = db.make_engine(url)
    with db.make_sessionmaker(engine)() as session:
        token, _ = create_token(session, project=PROJECT, scopes="upload,read")
    engine.dispose()
    log = Path(f"/tmp/{name}.log")
    server, base = _start_server(url, args.workers, log)
    rows = []
    try:
        steady = run_scenario("steady", base_url=base, token=token, clients=args.clients,
                              uploads=args.uploads, metrics=args.metrics, database_url=url,
                              restart=None)
        rows.append(_row(steady, args.clients, args.metrics))
        if args.restart:
            command = args.restart_command or _restart_command()
            restarted = run_scenario("PostgreSQL restart midway", base_url=base, token=token,
                                     clients=args.clients, uploads=args.uploads,
                                     metrics=args.metrics, database_url=url, restart=command)
            # Runs of the first scenario are still in the table: count this one's alone.
            restarted.stored_runs -= steady.stored_runs
            rows.append(_row(restarted, args.clients, args.metrics))
    finally:
        server.terminate()
        server.wait(timeout=30)
        _report(rows, args)
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
    return 0


def _report(rows: list[str], args: argparse.Namespace) -> None:
    print(f"server: uvicorn --workers {args.workers}, PostgreSQL; each run 3 repeats × "
          f"{args.metrics} metrics; {os.cpu_count()} CPUs shared with the clients\n")
    print("| scenario | clients | uploads | metrics/run | errors | lost | duplicated | retries "
          "| restart took | uploads/s | p50 ms | p99 ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows), flush=True)


def _restart_command() -> str:
    versions = sorted(os.listdir("/etc/postgresql"), key=lambda v: int(v) if v.isdigit() else 0)
    return f"pg_ctlcluster {versions[-1]} main restart"


if __name__ == "__main__":
    sys.exit(main())
