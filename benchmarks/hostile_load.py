"""Hostile load on the perfci service, on loopback (issue 31): does one client's abuse cost the
others anything?

One ``perfci serve`` (its default limits, one worker process) on a fresh PostgreSQL database
takes, all at once:

- ``--clients`` (20) CI clients, each with its own upload token, uploading ``--uploads`` (50)
  runs each (3 repeats × ``--metrics`` metrics), retrying a 429 after its ``Retry-After`` and a
  5xx or a dropped connection at once, with the same Idempotency-Key;
- ``--loris`` (5) slow-loris clients with upload tokens, each keeping an upload open that
  trickles its body (or, every other one, its head) a byte a second, and opening another
  when the server cuts it off;
- 3 pathological 64 KB text uploads, sent by three of the clients among their runs: a Megatron
  log of ``'iteration 1/1 |' * 4369``, an MLPerf summary whose lines are 2,048 spaces and an
  ``x``, and nsys stats of ``'Processing [' + '] with [' * 8190``; before issue 31 each held
  the whole server for seconds to minutes (their regular expressions backtrack);
- a prober asking ``/healthz`` every 50 ms from start to end.

It prints two Markdown tables: the figures against issue 31's targets (5xx answers, /healthz
p50 and p99, the most CPU one upload's parse worker used, as the worker measured it (the
server's ``perfci_parse_cpu_seconds_max``) and as sampled from /proc every 10 ms, the
server's own CPU per upload, peak memory of the server with its forkserver and parse workers,
runs lost and duplicated), and the answers to the pathological uploads.

    .venv/bin/python benchmarks/hostile_load.py --clients 20 --uploads 50

PERFCI_TEST_POSTGRES_URL (or --postgres) names the PostgreSQL server's admin database; the
script makes its own database and drops it at the end. Loopback only; bounded by --deadline.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
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
from service_load import PROJECT, Replica, body, descendants, start_replica
from sqlalchemy import create_engine, select, text

from perfci.store import engines, migrate
from perfci.store.schema import Run
from perfci.usecases.admin.tokens import create_token

_MB = 1024 * 1024
_TICK = os.sysconf("SC_CLK_TCK")
_RULE = "=" * 48


def pathological() -> dict[str, bytes]:
    """The three 64 KB text uploads of issue 31, by file name."""
    size = 64 * 1024
    megatron = b"iteration 1/1 |" * 4369
    head = f"{_RULE}\nMLPerf Results Summary\n{_RULE}\n".encode()
    line = b" " * 2048 + b"x\n"
    mlperf = head + line * ((size - len(head)) // len(line))
    nsys = b"Processing [" + b"] with [" * ((size - 12) // 8)
    return {
        "megatron_train.log": megatron,
        "mlperf_log_summary.txt": mlperf,
        "nsys_stats.txt": nsys,
    }


# --- what the server does: CPU and memory from /proc ------------------------------------------


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of process ``pid`` (its own, not its children's)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def memory(pids: list[int], key: str, source: str) -> int:
    """Sum of ``key`` (``VmRSS:`` in status, ``Pss:`` in smaps_rollup) over ``pids``, bytes."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/{source}").read_text().splitlines():
                if line.startswith(key):
                    total += int(line.split()[1]) * 1024
                    break
        except OSError:
            pass
    return total


@dataclass
class Monitor:
    """Samples the server's processes until stopped."""

    server: int
    helpers: set[int] = field(default_factory=set)  # forkserver, resource tracker
    worker_cpu: dict[int, float] = field(default_factory=dict)
    rss_peak: int = 0
    pss_peak: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        rounds = 0
        while not self.stop.is_set():
            pids = descendants(self.server)
            for pid in pids:
                if pid in self.helpers:
                    continue
                seconds = cpu_seconds(pid)
                if seconds is not None:
                    self.worker_cpu[pid] = max(self.worker_cpu.get(pid, 0.0), seconds)
            everyone = [self.server, *pids]
            self.rss_peak = max(self.rss_peak, memory(everyone, "VmRSS:", "status"))
            if rounds % 10 == 0:
                self.pss_peak = max(self.pss_peak, memory(everyone, "Pss:", "smaps_rollup"))
            rounds += 1
            time.sleep(0.01)


# --- the clients ------------------------------------------------------------------------------


@dataclass
class Tally:
    acked: list[int] = field(default_factory=list)
    gave_up: int = 0
    answers_5xx: int = 0
    answers_429: int = 0
    connection_errors: int = 0
    hostile: list[tuple[str, int, str, float]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def upload_run(
    session: requests.Session, url: str, token: str, payload: Any, tally: Tally, deadline: float
) -> None:
    """POST until acknowledged, as perfci's client does: 429 waits ``Retry-After``, a 5xx or
    a dropped connection is retried, with the same Idempotency-Key."""
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": str(uuid.uuid4())}
    while time.monotonic() < deadline:
        try:
            response = session.post(url, json=payload, headers=headers, timeout=(5, 120))
        except requests.RequestException:
            with tally.lock:
                tally.connection_errors += 1
            time.sleep(0.2)
            continue
        if response.status_code in (200, 201):
            with tally.lock:
                tally.acked.append(int(response.json()["run_id"]))
            return
        with tally.lock:
            tally.answers_5xx += response.status_code >= 500
            tally.answers_429 += response.status_code == 429
        if response.status_code == 429:
            time.sleep(float(response.headers.get("Retry-After", "1")))
        elif response.status_code < 500:
            break
        else:
            time.sleep(0.2)
    with tally.lock:
        tally.gave_up += 1


def upload_hostile(
    session: requests.Session, url: str, token: str, name: str, content: bytes, tally: Tally
) -> None:
    meta = json.dumps({"benchmark": "hostile", "context": {"branch": "main"}})
    started = time.monotonic()
    response = session.post(
        url,
        data={"meta": meta},
        files=[("files", (name, content))],
        headers={"Authorization": f"Bearer {token}"},
        timeout=(5, 300),
    )
    seconds = time.monotonic() - started
    try:
        error = response.json().get("error", {})
        answer = f"{error.get('code', '')}: {error.get('message', '')}"[:110]
    except ValueError:
        answer = response.text[:110]
    with tally.lock:
        tally.answers_5xx += response.status_code >= 500
        tally.hostile.append((name, response.status_code, answer, seconds))


def client(
    index: int, args: argparse.Namespace, url: str, token: str, tally: Tally, deadline: float
) -> None:
    rng = np.random.default_rng(index)
    hostile = list(pathological().items())
    with requests.Session() as session:
        for n in range(args.uploads):
            # Clients 0, 1 and 2 send one each, a quarter, half and three quarters through.
            if index < len(hostile) and n == args.uploads * (index + 1) // 4:
                upload_hostile(session, url, token, *hostile[index], tally)
            payload = body(index * 100_000 + n, args.metrics, rng)
            payload["context"]["ci_run_id"] = uuid.uuid4().hex
            upload_run(session, url, token, payload, tally, deadline)


@dataclass
class Loris:
    opened: int = 0
    cut: int = 0


def slow_loris(
    index: int, host: str, port: int, token: str, stop: threading.Event, loris: Loris
) -> None:
    """Keep one upload open, trickling a byte a second; open another when it is cut."""
    while not stop.is_set():
        loris.opened += 1
        try:
            with socket.create_connection((host, port), timeout=5) as sock:
                if index % 2:
                    sock.sendall(f"POST /api/v1/projects/{PROJECT}/runs HTTP/1.1\r\n".encode())
                    trickle = b"X-Slow: " + b"a" * 100_000
                else:
                    sock.sendall(
                        f"POST /api/v1/projects/{PROJECT}/runs HTTP/1.1\r\nHost: {host}\r\n"
                        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                        "Content-Length: 1000000\r\n\r\n".encode()
                    )
                    trickle = b" " * 100_000
                for byte in trickle:
                    if stop.wait(1.0):
                        return
                    sock.sendall(bytes([byte]))
        except OSError:
            loris.cut += 1


def probe(url: str, stop: threading.Event, latencies: list[float], failures: list[str]) -> None:
    with requests.Session() as session:
        while not stop.is_set():
            started = time.perf_counter()
            try:
                status = session.get(f"{url}/healthz", timeout=10).status_code
                if status != 200:
                    failures.append(str(status))
            except requests.RequestException as exc:
                failures.append(type(exc).__name__)
            latencies.append(time.perf_counter() - started)
            time.sleep(0.05)


# --- the run ----------------------------------------------------------------------------------


def run(args: argparse.Namespace, url: str, tokens: list[str], log_dir: Path) -> dict[str, Any]:
    metrics_token = uuid.uuid4().hex
    replica: Replica = start_replica(
        url, 1, log_dir / "server.log", env={"PERFCI_METRICS_TOKEN": metrics_token}
    )
    server = replica.process.pid
    # perfci serve runs uvicorn in its own process; its first children are the forkserver and
    # multiprocessing's resource tracker, started when the app did (warm).
    time.sleep(1.0)
    monitor = Monitor(server=server, helpers=set(descendants(server)))
    server_cpu = cpu_seconds(server) or 0.0
    stop = threading.Event()
    latencies: list[float] = []
    failures: list[str] = []
    tally, loris = Tally(), Loris()
    host, port = replica.url.removeprefix("http://").split(":")
    threads = [
        threading.Thread(target=monitor.run),
        threading.Thread(target=probe, args=(replica.url, stop, latencies, failures)),
        *[
            threading.Thread(
                target=slow_loris,
                args=(i, host, int(port), tokens[args.clients + i], stop, loris),
            )
            for i in range(args.loris)
        ],
    ]
    for thread in threads:
        thread.start()
    endpoint = f"{replica.url}/api/v1/projects/{PROJECT}/runs"
    deadline = time.monotonic() + args.deadline
    started = time.perf_counter()
    try:
        with ThreadPoolExecutor(max_workers=args.clients) as pool:
            for future in [
                pool.submit(client, i, args, endpoint, tokens[i], tally, deadline)
                for i in range(args.clients)
            ]:
                future.result()
        wall = time.perf_counter() - started
        server_cpu = (cpu_seconds(server) or 0.0) - server_cpu
        scraped = requests.get(
            f"{replica.url}/metrics", headers={"Authorization": f"Bearer {metrics_token}"}
        ).text
    finally:
        stop.set()
        monitor.stop.set()
        for thread in threads:
            thread.join(timeout=15)
        replica.process.terminate()
        replica.process.wait(timeout=60)
    return {
        "wall": wall,
        "tally": tally,
        "loris": loris,
        "latencies": latencies,
        "failures": failures,
        "monitor": monitor,
        "server_cpu": server_cpu,
        "parse_cpu": _metric(scraped, "perfci_parse_cpu_seconds_max"),
        "parses": _metric(scraped, "perfci_parse_cpu_seconds_count"),
    }


def _metric(scraped: str, name: str) -> float:
    """The value of the unlabelled metric ``name`` in a Prometheus text page."""
    for line in scraped.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise SystemExit(f"/metrics has no {name}:\n{scraped}")


def verify(url: str, acked: list[int]) -> tuple[int, int]:
    """Runs lost (acknowledged, not stored) and duplicated (stored beyond the acknowledged)."""
    engine = create_engine(url)
    with engine.connect() as connection:
        stored = set(connection.execute(select(Run.id)).scalars())
    engine.dispose()
    return len(set(acked) - stored), len(stored) - len(set(acked))


def report(args: argparse.Namespace, result: dict[str, Any], lost: int, duplicated: int) -> None:
    tally: Tally = result["tally"]
    monitor: Monitor = result["monitor"]
    latencies = sorted(s * 1000 for s in result["latencies"])
    p50 = statistics.median(latencies)
    p99 = latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))]
    workers = sorted(monitor.worker_cpu.values(), reverse=True)
    expected = args.clients * args.uploads
    ok = len(tally.acked)
    print(
        f"one perfci serve (default limits, 1 worker process), one PostgreSQL; {args.clients} "
        f"clients × {args.uploads} runs of 3 repeats × {args.metrics} metrics, {args.loris} "
        f"slow-loris clients, 3 pathological 64 KB uploads; {os.cpu_count()} CPUs shared with "
        f"the clients; {result['wall']:.0f} s\n"
    )
    print("| measure | value | target |")
    print("|---|---|---|")
    rows = [
        ("runs acknowledged", f"{ok} of {expected} ({tally.gave_up} gave up)", "all"),
        ("5xx answers", str(tally.answers_5xx), "0"),
        ("429 answers (waited and retried)", str(tally.answers_429), "—"),
        ("dropped connections (retried)", str(tally.connection_errors), "—"),
        (
            f"/healthz p50 / p99 / max ({len(latencies)} probes, {len(result['failures'])} "
            "not 200)",
            f"{p50:.0f} / {p99:.0f} / {latencies[-1]:.0f} ms",
            "p99 < 200 ms",
        ),
        (
            f"most CPU one upload's parse worker used, as it measured ({result['parses']:.0f} "
            "parses)",
            f"{result['parse_cpu']:.2f} s",
            "< 2 s",
        ),
        (
            f"the three most, sampled from /proc every 10 ms ({len(workers)} workers seen)",
            ", ".join(f"{w:.2f} s" for w in workers[:3]) or "—",
            "< 2 s",
        ),
        (
            "server process CPU per acknowledged run (store, compare)",
            f"{result['server_cpu'] / max(ok, 1) * 1000:.0f} ms",
            "—",
        ),
        (
            "peak memory, server + forkserver + workers, RSS summed",
            f"{monitor.rss_peak / _MB:.0f} MB",
            "< 600 MB",
        ),
        (
            "peak memory, the same, PSS (shared pages counted once)",
            f"{monitor.pss_peak / _MB:.0f} MB",
            "< 600 MB",
        ),
        ("runs lost / duplicated", f"{lost} / {duplicated}", "0 / 0"),
        (
            "slow-loris connections opened / cut by the server",
            f"{result['loris'].opened} / {result['loris'].cut}",
            "—",
        ),
    ]
    for measure, value, target in rows:
        print(f"| {measure} | {value} | {target} |")
    print("\n| pathological upload | answer | seconds |")
    print("|---|---|---|")
    for name, status, answer, seconds in sorted(tally.hostile):
        shown = answer.replace("|", "\\|")  # a pipe of the quoted file, not a column
        print(f"| {name} | {status} {shown} | {seconds:.1f} |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--uploads", type=int, default=50, help="runs per client")
    parser.add_argument("--metrics", type=int, default=100, help="metrics per repeat")
    parser.add_argument("--loris", type=int, default=5, help="slow-loris clients")
    parser.add_argument("--deadline", type=float, default=900, help="seconds; clients stop")
    parser.add_argument("--postgres", default=os.environ.get("PERFCI_TEST_POSTGRES_URL"))
    args = parser.parse_args()
    if not args.postgres:
        raise SystemExit("set PERFCI_TEST_POSTGRES_URL or pass --postgres")
    admin = create_engine(args.postgres, isolation_level="AUTOCOMMIT")
    name = f"perfci_hostile_{os.getpid()}"
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    url = admin.url.set(database=name).render_as_string(hide_password=False)
    try:
        migrate.upgrade(url)
        engine = engines.make_engine(url)
        with engines.make_sessionmaker(engine)() as session:
            tokens = [
                create_token(session, project=PROJECT, scopes="upload,read", name=f"c{i}")[0]
                for i in range(args.clients + args.loris)
            ]
        engine.dispose()
        log_dir = Path(f"/tmp/{name}")
        log_dir.mkdir(exist_ok=True)
        result = run(args, url, tokens, log_dir)
        lost, duplicated = verify(url, result["tally"].acked)
        report(args, result, lost, duplicated)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
