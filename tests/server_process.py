"""A real perfci server in a subprocess on 127.0.0.1 (an ephemeral port), for the server tests.

``start_server(database_url)`` runs ``perfci serve`` (the command module itself, so that the
tests do not depend on how the CLI registers it) and waits for ``/healthz``; ``raw=True`` runs
uvicorn's factory directly, which starts even when the database is down (for 503 tests).

The wait is a readiness check with a deadline stretched to the machine's load
(:mod:`deadlines`): on a loaded runner ``/healthz`` answers well after "serving" is printed. The
server leads a process group of its own, which :meth:`ServerProcess.stop` ends whole, and dies
with the test process (:mod:`processes`) should that be killed first.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx
from deadlines import Deadline, scaled
from processes import end_group, own_group

REPO = Path(__file__).resolve().parents[1]
_SERVE = (
    "import sys, typer\n"
    "from perfci.cli import serve_cmd\n"
    "app = typer.Typer()\n"
    "serve_cmd.register(app)\n"
    "app.command('version')(lambda: None)\n"
    "app(['serve', *sys.argv[1:]])\n"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ServerProcess:
    url: str
    database_url: str
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):  # then killed, below
                self.process.wait(timeout=scaled(15))
        end_group(self.process)


def start_server(
    database_url: str,
    *,
    log_dir: Path,
    env: Mapping[str, str] | None = None,
    args: tuple[str, ...] = (),
    raw: bool = False,
    wait_healthy: bool = True,
    timeout_s: float = 60.0,
) -> ServerProcess:
    """Start the server and wait until it answers (healthy, unless ``wait_healthy=False``).

    ``timeout_s`` is a quiet machine's deadline, stretched to the load (:mod:`deadlines`).
    """
    port = free_port()
    environment = {**os.environ, "PERFCI_DATABASE_URL": database_url, **(env or {})}
    environment.pop("PERFCI_SERVER_URL", None)
    if raw:
        command = [
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            "perfci.server.app:create_app_from_env",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ]
    else:
        command = [
            sys.executable,
            "-c",
            _SERVE,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
            *args,
        ]
    log = log_dir / f"server-{port}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command,
            cwd=REPO,
            env=environment,
            stdout=sink,
            stderr=subprocess.STDOUT,
            **own_group(),
        )
    server = ServerProcess(
        url=f"http://127.0.0.1:{port}", database_url=database_url, process=process, log=log
    )
    try:
        _wait(server, timeout_s, wait_healthy)
    except BaseException:
        server.stop()
        raise
    return server


def _wait(server: ServerProcess, timeout_s: float, healthy: bool) -> None:
    deadline = Deadline(timeout_s)
    while not deadline.expired():
        if server.process.poll() is not None:
            raise RuntimeError(
                f"the server exited with {server.process.returncode}:\n{server.output()}"
            )
        try:
            response = httpx.get(f"{server.url}/healthz", timeout=2)
            if response.status_code == 200 or not healthy:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(
        f"the server did not answer /healthz after {deadline.describe()}:\n{server.output()}"
    )
