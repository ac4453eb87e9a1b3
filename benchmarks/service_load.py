"""Load test of the perfci service on loopback: concurrent uploads against PostgreSQL.

N clients upload M runs in total (each run: 3 repeats × ``--metrics`` metrics) to real
``perfci serve`` processes (``--replicas``, each with ``--workers``) on one fresh PostgreSQL
database, then the database is counted: every acknowledged upload must be there exactly once
(no lost, no duplicated runs). Clients spread over the replicas like a load balancer and, on a
connection error or 5xx, retry with the same Idempotency-Key on the next replica.

Scenarios: ``steady``; with ``--replicas`` > 1, ``racing`` (every run sent to two replicas at
once, half with an Idempotency-Key, half with only the CI run id) and ``replica killed`` (one
replica SIGKILLed a third of the way through); with ``--restart``, a PostgreSQL restart midway.
With ``--abuse``, a second table: time to answer and peak extra server RSS for hostile uploads
(a 1.7 M-metric 61 MB body, a 1 MB gzip inflating to 1 GB) and for the largest accepted one,
with the slowest ``/healthz`` answer another client saw meanwhile.

    .venv/bin/python benchmarks/service_load.py --clients 20 --uploads 500 --replicas 3 --abuse

Prints Markdown tables. PERFCI_TEST_POSTGRES_URL (or --postgres) names the server's admin DB.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import children
import numpy as np
import requests
from sqlalchemy import create_engine, func, select, text

from perfci.store import engines, migrate
from perfci.store.schema import Run
from perfci.usecases.admin.tokens import create_token

PROJECT = "load/test"
RETRY_STATUSES = {500, 502, 503, 504}
#: The load scenarios send every upload with one token; its rate limit (a team sets it to its
#: CI's pace: 60 at once, then 120 a minute by default) would cap the throughput measured
#: here, and answered 429 to a fifth of 300 uploads once the service took 9 a second.
UNLIMITED = {"PERFCI_UPLOAD_RATE": "100000", "PERFCI_UPLOAD_BURST": "100000"}
PERFCI = str(Path(sys.executable).with_name("perfci"))


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
    #: Runs sent more than once on purpose (racing): each must map to one stored run.
    expected_runs: int | None = None
    split: int = 0
    restart_s: float | None = None


@dataclass
class Replica:
    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def rss_bytes(self) -> int:
        """Resident memory of the server process and all its descendants (uvicorn workers,
        the forkserver and the parse workers it forks)."""
        total = 0
        for pid in [self.process.pid, *descendants(self.process.pid)]:
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
            except OSError:
                pass
        return total


def descendants(pid: int) -> list[int]:
    """``pid``'s children, grandchildren … (uvicorn workers, the forkserver and the parse
    workers it forks), from every thread's list of children."""
    found, queue = [], [pid]
    while queue:
        parent = queue.pop()
        try:
            tasks = list(Path(f"/proc/{parent}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            queue += children
    return found


def body(index: int, metrics: int, rng: np.random.Generator) -> dict[str, Any]:
    names = [f"kernel_{i:04d}<float, 128>" for i in range(metrics - 1)]
    repeats = []
    for _ in range(3):
        values = rng.lognormal(13, 1, size=len(names)) * float(np.exp(rng.normal(0, 0.01)))
        kernels = [
            {"kind": "kernel", "name": n, "calls": 10, "total_ns": float(v) * 3}
            for n, v in zip(names, values, strict=True)
        ]
        step = {
            "kind": "step",
            "name": "train_step",
            "calls": 3,
            "total_ns": float(values.sum()) * 3 * 1.2,
        }
        repeats.append(
            {
                "schema_version": 1,
                "profiles": [
                    {"label": "p", "format": "load", "steps": 3, "metrics": [step, *kernels]}
                ],
            }
        )
    return {
        "benchmark": "gpt",
        "repeats": repeats,
        "context": {
            "commit": f"{index:040x}",
            "branch": "main",
            "ci_provider": "load",
            "ci_run_id": str(index),
            "ci_run_attempt": 1,
            "environment": {"gpu": "load-gpu"},
        },
    }


def upload(
    session: requests.Session,
    urls: list[str],
    first: int,
    token: str,
    payload: dict[str, Any],
    key: str | None,
    deadline_s: float,
) -> Outcome:
    """POST until acknowledged: connection errors and 5xx are retried, with the same key, on
    the next replica (what a load balancer does with a dead backend)."""
    outcome = Outcome(key=key or str(payload["context"]["ci_run_id"]))
    started = time.perf_counter()
    headers = {"Authorization": f"Bearer {token}", **({"Idempotency-Key": key} if key else {})}
    delay = 0.2
    while True:
        url = f"{urls[(first + outcome.attempts) % len(urls)]}/api/v1/projects/{PROJECT}/runs"
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


def run_scenario(
    name: str,
    *,
    urls: list[str],
    token: str,
    clients: int,
    uploads: int,
    metrics: int,
    database_url: str,
    racing: bool = False,
    midway: Callable[[Scenario], None] | None = None,
) -> Scenario:
    """``uploads`` runs by ``clients`` threads; with ``racing`` every run is sent twice at
    once to two replicas (odd runs with a shared Idempotency-Key, even ones without: the CI
    run id decides); ``midway`` runs a third of the way through (a kill, a restart)."""
    scenario = Scenario(name=name)
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    offset = int(time.time() * 1000) % 10**9 * 1000
    payloads = [body(offset + i, metrics, rng) for i in range(uploads)]
    jobs: list[tuple[int, str | None, int]] = []
    for i in range(uploads):
        key = str(uuid.uuid4()) if (not racing or i % 2) else None
        jobs += [(i, key, i)] + ([(i, key, i + 1)] if racing else [])
    done = threading.Semaphore(0)
    helper = None
    if midway is not None:
        helper = threading.Thread(target=_midway, args=(midway, done, len(jobs) // 3, scenario))
        helper.start()
    local = threading.local()

    def work(job: tuple[int, str | None, int]) -> Outcome:
        if not hasattr(local, "session"):
            local.session = requests.Session()
        index, key, first = job
        outcome = upload(local.session, urls, first, token, payloads[index], key, 180.0)
        done.release()
        return outcome

    before = _count(database_url)
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        scenario.outcomes = list(pool.map(work, jobs))
    scenario.wall_s = time.perf_counter() - started
    if helper is not None:
        helper.join()
    scenario.expected_runs = uploads
    if racing:
        pairs = zip(scenario.outcomes[::2], scenario.outcomes[1::2], strict=True)
        scenario.split = sum(1 for a, b in pairs if a.run_id != b.run_id)
    _verify(scenario, database_url, before)
    return scenario


def _midway(
    action: Callable[[Scenario], None], done: threading.Semaphore, after: int, scenario: Scenario
) -> None:
    for _ in range(after):
        done.acquire()
    started = time.perf_counter()
    action(scenario)
    scenario.restart_s = time.perf_counter() - started


def _count(database_url: str) -> int:
    engine = create_engine(database_url)
    with engine.connect() as connection:
        found = int(connection.execute(select(func.count()).select_from(Run)).scalar_one())
    engine.dispose()
    return found


def _verify(scenario: Scenario, database_url: str, before: int) -> None:
    engine = create_engine(database_url)
    acked = {o.run_id for o in scenario.outcomes if o.run_id is not None}
    with engine.connect() as connection:
        stored = set(connection.execute(select(Run.id)).scalars())
    engine.dispose()
    scenario.stored_runs = len(stored) - before
    scenario.missing = len(acked - stored)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_replica(
    database_url: str, workers: int, log: Path, env: dict[str, str] | None = None
) -> Replica:
    """``perfci serve`` on a free loopback port, once ``/healthz`` answers."""
    port = _free_port()
    environment = {**os.environ, "PERFCI_DATABASE_URL": database_url, **(env or {})}
    with log.open("wb") as sink:
        process = children.start(
            [
                PERFCI,
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                str(workers),
                "--log-level",
                "warning",
            ],
            env=environment,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    replica = Replica(process=process, url=f"http://127.0.0.1:{port}", log=log)
    for _ in range(300):
        try:
            if requests.get(f"{replica.url}/healthz", timeout=2).status_code == 200:
                return replica
        except requests.RequestException:
            pass
        if process.poll() is not None:
            break
        time.sleep(0.2)
    process.kill()
    raise SystemExit(f"server did not start:\n{log.read_text()}")


def _row(scenario: Scenario, clients: int, metrics: int, replicas: int) -> str:
    ok = [o for o in scenario.outcomes if o.run_id is not None]
    errors = len(scenario.outcomes) - len(ok)
    latencies = sorted(o.latency_s * 1000 for o in ok)
    p99 = (
        latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))]
        if (latencies)
        else float("nan")
    )
    runs = len({o.run_id for o in ok})
    expected = scenario.expected_runs or len(scenario.outcomes)
    duplicated = scenario.stored_runs - runs + scenario.split
    lost = scenario.missing + max(0, expected - runs - errors)
    retries = sum(o.attempts - 1 for o in scenario.outcomes)
    took = f"{scenario.restart_s:.1f} s" if scenario.restart_s is not None else "—"
    return (
        f"| {scenario.name} | {replicas} | {clients} | {len(scenario.outcomes)} "
        f"| {runs} | {metrics} | {errors} | {lost} | {duplicated} | {retries} | {took} "
        f"| {len(ok) / scenario.wall_s:.1f} | {statistics.median(latencies):.0f} "
        f"| {p99:.0f} |"
    )


# --- hostile uploads: time and memory ---------------------------------------------------------


@dataclass
class AbuseResult:
    name: str
    sent_bytes: int
    status: int
    message: str
    seconds: float
    rss_before: int
    rss_peak: int
    rss_after: int
    slowest_probe_s: float


def _many_metrics_body(count: int) -> bytes:
    """A JSON run of ``count`` tiny metrics (about 36 bytes each: 1.7 M make 61 MB)."""
    out = io.BytesIO()
    out.write(
        b'{"benchmark": "abuse", "repeats": [{"schema_version": 1, "profiles": '
        b'[{"steps": 1, "metrics": ['
    )
    out.write(b",".join(b'{"kind":"op","name":"kern_%07d"}' % i for i in range(count)))
    out.write(b"]}]}]}")
    return out.getvalue()


def _gzip_bomb(inflated: int) -> bytes:
    """A perfci JSON document padded with ``inflated`` bytes of spaces, gzipped."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [
        compressor.compress(
            b'{"schema_version": 1, "perfci_version": "0", "profiles": [{"metrics": []}]'
        )
    ]
    chunk = b" " * (1 << 20)
    for _ in range(inflated >> 20):
        parts.append(compressor.compress(chunk))
    parts += [compressor.compress(b"}"), compressor.flush()]
    return b"".join(parts)


def measure(
    name: str, replica: Replica, send: Callable[[], requests.Response], sent_bytes: int
) -> AbuseResult:
    """Run ``send()`` while sampling the server's RSS every 5 ms and probing /healthz."""
    time.sleep(0.5)
    before = replica.rss_bytes()
    peak = before
    stop = threading.Event()
    slowest = 0.0

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, replica.rss_bytes())
            time.sleep(0.005)

    def probe() -> None:
        nonlocal slowest
        with requests.Session() as session:
            while not stop.is_set():
                started = time.perf_counter()
                session.get(f"{replica.url}/healthz", timeout=60)
                slowest = max(slowest, time.perf_counter() - started)
                time.sleep(0.02)

    threads = [threading.Thread(target=sample), threading.Thread(target=probe)]
    for thread in threads:
        thread.start()
    started = time.perf_counter()
    response = send()
    seconds = time.perf_counter() - started
    time.sleep(0.3)
    stop.set()
    for thread in threads:
        thread.join()
    try:
        message = response.json().get("error", {}).get("message", "") or "stored"
    except ValueError:
        message = response.text[:100]
    return AbuseResult(
        name=name,
        sent_bytes=sent_bytes,
        status=response.status_code,
        message=message[:90],
        seconds=seconds,
        rss_before=before,
        rss_peak=peak,
        rss_after=replica.rss_bytes(),
        slowest_probe_s=slowest,
    )


def run_abuse(database_url: str, token: str, log_dir: Path) -> list[AbuseResult]:
    """Hostile and worst-case uploads against one fresh single-process server (default
    limits), each measured on its own."""
    replica = start_replica(database_url, 1, log_dir / "abuse.log")
    url = f"{replica.url}/api/v1/projects/{PROJECT}/runs"
    auth = {"Authorization": f"Bearer {token}"}
    results = []
    try:
        metrics_body = _many_metrics_body(1_700_000)
        results.append(
            measure(
                "1.7 M metrics, JSON",
                replica,
                lambda: requests.post(
                    url,
                    data=metrics_body,
                    timeout=300,
                    headers={**auth, "Content-Type": "application/json"},
                ),
                len(metrics_body),
            )
        )
        bomb = _gzip_bomb(1 << 30)
        meta = json.dumps({"benchmark": "abuse", "context": {"branch": "abuse"}})
        results.append(
            measure(
                "gzip bomb 1 MB → 1 GB",
                replica,
                lambda: requests.post(
                    url,
                    data={"meta": meta},
                    files=[("files", ("bomb.json.gz", bomb))],
                    headers=auth,
                    timeout=300,
                ),
                len(bomb),
            )
        )
        nested = gzip.compress(bomb)
        results.append(
            measure(
                "gzip bomb in gzip",
                replica,
                lambda: requests.post(
                    url,
                    data={"meta": meta},
                    files=[("files", ("bomb.json.gz", nested))],
                    headers=auth,
                    timeout=300,
                ),
                len(nested),
            )
        )
        worst = body(int(time.time()), 66_000, np.random.default_rng(0))
        worst_bytes = json.dumps(worst).encode()
        results.append(
            measure(
                "largest accepted: 3 × 66 k metrics",
                replica,
                lambda: requests.post(
                    url,
                    data=worst_bytes,
                    timeout=600,
                    headers={**auth, "Content-Type": "application/json"},
                ),
                len(worst_bytes),
            )
        )
    finally:
        replica.process.send_signal(signal.SIGINT)
        replica.process.wait(timeout=60)
    return results


def _abuse_table(results: list[AbuseResult]) -> None:
    mb = 1024 * 1024
    print(
        "\n| upload | sent | answer | time | server RSS before | peak extra | after "
        "| slowest /healthz meanwhile |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r.name} | {r.sent_bytes / mb:.1f} MB | {r.status} {r.message} "
            f"| {r.seconds:.2f} s | {r.rss_before / mb:.0f} MB "
            f"| +{(r.rss_peak - r.rss_before) / mb:.0f} MB | {r.rss_after / mb:.0f} MB "
            f"| {r.slowest_probe_s * 1000:.0f} ms |",
            flush=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--uploads", type=int, default=500)
    parser.add_argument("--metrics", type=int, default=300)
    parser.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="perfci serve processes on the one database (default 1)",
    )
    parser.add_argument("--workers", type=int, default=2, help="uvicorn workers per replica")
    parser.add_argument(
        "--restart",
        action="store_true",
        help="also run the scenario with a PostgreSQL restart midway",
    )
    parser.add_argument(
        "--restart-command", default=None, help="default: pg_ctlcluster <version> main restart"
    )
    parser.add_argument(
        "--abuse", action="store_true", help="also measure hostile uploads (time, peak server RSS)"
    )
    parser.add_argument("--abuse-only", action="store_true", help="only the hostile uploads")
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
    migrate.upgrade(url)
    engine = engines.make_engine(url)
    with engines.make_sessionmaker(engine)() as session:
        token, _ = create_token(session, project=PROJECT, scopes="upload,read")
    engine.dispose()
    log_dir = Path(f"/tmp/{name}")
    log_dir.mkdir(exist_ok=True)
    rows: list[str] = []
    replicas: list[Replica] = []
    try:
        if not args.abuse_only:
            replicas = [
                start_replica(url, args.workers, log_dir / f"replica{i}.log", UNLIMITED)
                for i in range(args.replicas)
            ]
            rows = _load(args, replicas, token, url)
        if args.abuse or args.abuse_only:
            for replica in replicas:
                _stop(replica)
            replicas = []
            _report(rows, args)
            rows = []
            _abuse_table(run_abuse(url, token, log_dir))
    finally:
        for replica in replicas:
            _stop(replica)
        if rows:
            _report(rows, args)
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
    return 0


def _load(args: argparse.Namespace, replicas: list[Replica], token: str, url: str) -> list[str]:
    urls = [r.url for r in replicas]
    common = {
        "token": token,
        "clients": args.clients,
        "uploads": args.uploads,
        "metrics": args.metrics,
        "database_url": url,
    }
    rows = []

    def add(scenario: Scenario, serving: int) -> None:
        rows.append(_row(scenario, args.clients, args.metrics, serving))

    add(run_scenario("steady", urls=urls, **common), len(urls))
    if len(replicas) > 1:
        add(
            run_scenario(
                "racing: each run sent to 2 replicas at once", urls=urls, racing=True, **common
            ),
            len(urls),
        )

        def kill(_: Scenario) -> None:
            replicas[0].process.kill()
            replicas[0].process.wait()

        add(
            run_scenario("one replica SIGKILLed midway", urls=urls, midway=kill, **common),
            len(urls),
        )
    if args.restart:
        command = args.restart_command or _restart_command()
        live = [r.url for r in replicas if r.process.poll() is None]

        def restart(_: Scenario) -> None:
            subprocess.run(command.split(), check=True, capture_output=True)

        add(
            run_scenario("PostgreSQL restart midway", urls=live, midway=restart, **common),
            len(live),
        )
    return rows


def _stop(replica: Replica) -> None:
    if replica.process.poll() is None:
        replica.process.terminate()
        replica.process.wait(timeout=30)


def _report(rows: list[str], args: argparse.Namespace) -> None:
    if not rows:
        return
    print(
        f"servers: {args.replicas} × perfci serve --workers {args.workers}, one PostgreSQL; "
        f"each run 3 repeats × {args.metrics} metrics; {os.cpu_count()} CPUs shared with "
        "the clients\n"
    )
    print(
        "| scenario | replicas | clients | uploads | runs | metrics/run | errors | lost "
        "| duplicated | retries | kill/restart took | uploads/s | p50 ms | p99 ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows), flush=True)


def _restart_command() -> str:
    versions = sorted(os.listdir("/etc/postgresql"), key=lambda v: int(v) if v.isdigit() else 0)
    return f"pg_ctlcluster {versions[-1]} main restart"


if __name__ == "__main__":
    sys.exit(main())
