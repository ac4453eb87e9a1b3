"""Uploads that once stalled, bloated or fooled the whole service, against a real ``perfci serve``
(issue 31), on SQLite and PostgreSQL.

The server runs with ``tests/parse_hook`` on its ``PYTHONPATH`` (parses that spin or allocate on
demand, whatever the real parsers' state), a parse budget of 1 s of CPU and 256 MiB per upload,
a body deadline long enough to keep uploads waiting for their bodies, its temporary files in a
folder of the test, and a rate limit of 3 uploads per token. Each test makes its own tokens.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from db_fixtures import DIALECTS, create_postgres, create_sqlite, drop_postgres
from deadlines import Deadline, scaled
from server_process import ServerProcess, start_server
from sqlalchemy import Engine, func
from sqlalchemy import select as sql_select

from perfci.store import engines
from perfci.store.schema import ProfileRow, Run, Sample
from perfci.store.schema_service import Comparison
from perfci.usecases.admin.tokens import create_token

HOOK = Path(__file__).parent / "parse_hook"
PARSE_MEMORY = 256 * 1024 * 1024
BURST = 3
#: How long a request may take before the test calls the server stalled: far beyond the
#: milliseconds /healthz takes, far below the minutes a stalled server took.
STALLED_S = 20.0


@pytest.fixture(scope="module", params=DIALECTS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("hostile")
    spool = folder / "tmp"
    spool.mkdir()
    postgres = request.param != "sqlite"
    admin = request.getfixturevalue("postgres_admin") if postgres else None
    url = create_postgres(admin) if admin is not None else create_sqlite(folder)
    path = os.pathsep.join(p for p in (str(HOOK), os.environ.get("PYTHONPATH", "")) if p)
    process = start_server(
        url,
        log_dir=folder,
        env={
            "PYTHONPATH": path,
            "TMPDIR": str(spool),
            "PERFCI_PARSE_CPU_SECONDS": "1",
            "PERFCI_PARSE_CPU_SECONDS_PER_MIB": "0",
            "PERFCI_PARSE_MEMORY_BYTES": str(PARSE_MEMORY),
            "PERFCI_UPLOAD_BURST": str(BURST),
            "PERFCI_UPLOAD_RATE": "1",
            "PERFCI_PUBLIC_METRICS": "true",
        },
        args=("--body-timeout", "300"),
    )
    yield process
    process.stop()
    assert "Traceback" not in process.output(), process.output()
    if admin is not None:
        drop_postgres(admin, url)


@pytest.fixture(scope="module")
def engine(server: ServerProcess) -> Iterator[Engine]:
    engine = engines.make_engine(server.database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def project() -> str:
    return f"hostile/p-{uuid.uuid4().hex[:8]}"


def make_token(engine: Engine, project: str, scopes: str = "upload,read") -> str:
    with engines.make_sessionmaker(engine)() as session:
        token, _ = create_token(session, project=project, scopes=scopes, name="hostile")
    return token


def counts(engine: Engine) -> dict[str, int]:
    with engine.connect() as connection:
        return {
            table.__tablename__: connection.execute(
                sql_select(func.count()).select_from(table)
            ).scalar_one()
            for table in (Run, Sample, ProfileRow, Comparison)
        }


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def run_body(metrics: list[dict[str, Any]] | None = None, **context: Any) -> dict[str, Any]:
    rows = [{"kind": "step", "name": "train_step", "total_ns": 3e7, "calls": 3}]
    rows += [{"kind": "kernel", "name": "gemm", "total_ns": 1e6, "calls": 3}, *(metrics or [])]
    document = {
        "schema_version": 1,
        "profiles": [{"label": "p", "format": "synthetic", "steps": 3, "metrics": rows}],
    }
    return {
        "benchmark": "gpt",
        "context": {
            "commit": "a" * 40,
            "branch": "main",
            "ci_run_id": uuid.uuid4().hex,  # a new run each time, unless the test names one
            "environment": {"gpu": "x"},
            **context,
        },
        "repeats": [document, document],
    }


def upload(
    server: ServerProcess, project: str, token: str, body: Any, key: str | None = None
) -> httpx.Response:
    headers = {**bearer(token), **({"Idempotency-Key": key} if key else {})}
    url = f"{server.url}/api/v1/projects/{project}/runs"
    if isinstance(body, bytes):
        headers["Content-Type"] = "application/json"
        return httpx.post(url, content=body, headers=headers, timeout=scaled(120))
    return httpx.post(url, json=body, headers=headers, timeout=scaled(120))


def upload_file(server: ServerProcess, project: str, token: str, content: bytes) -> httpx.Response:
    meta = json.dumps({"benchmark": "gpt", "context": {"branch": "main"}})
    return httpx.post(
        f"{server.url}/api/v1/projects/{project}/runs",
        data={"meta": meta},
        files=[("files", ("train.log", content, "text/plain"))],
        headers=bearer(token),
        timeout=scaled(120),
    )


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    return error


def healthz(server: ServerProcess) -> int:
    return httpx.get(f"{server.url}/healthz", timeout=scaled(STALLED_S)).status_code


# --- parsing never blocks the server ----------------------------------------------------------


def test_healthz_answers_while_a_hostile_upload_is_parsed(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    """The hook's regex holds the GIL for hours: parsed in a thread of the server (before
    issue 31), /healthz did not answer; in a worker, it is cut at its CPU budget."""
    token = make_token(engine, project)
    before = counts(engine)
    answers = []
    with ThreadPoolExecutor(1) as pool:
        sent = pool.submit(upload_file, server, project, token, b"#perfci-test: spin\n")
        while not sent.done():
            answers.append(healthz(server))
            time.sleep(0.05)
        response = sent.result()
    assert answers and set(answers) == {200}
    error = error_of(response, 422)
    assert error["code"] == "parse_budget_exceeded", error
    assert "1.0 s of CPU time" in error["message"], error
    assert "PERFCI_PARSE_CPU_SECONDS" in error["message"]
    assert counts(engine) == before
    assert upload(server, project, token, run_body()).status_code == 201  # the next one works
    metrics = httpx.get(f"{server.url}/metrics").text
    (most,) = (n for n in metrics.splitlines() if n.startswith("perfci_parse_cpu_seconds_max "))
    # The budget (1 s by the kernel's tick-based count, which the worker's own clock may read
    # a little lower), used up and not overrun.
    assert 0.5 <= float(most.split()[1]) < 2.0, most


def test_a_parse_that_holds_signals_back_is_stopped_by_the_kernel(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    token = make_token(engine, project)
    before = counts(engine)
    response = upload_file(server, project, token, b"#perfci-test: spin masked\n")
    assert error_of(response, 422)["code"] == "parse_budget_exceeded"
    assert counts(engine) == before
    assert healthz(server) == 200


def test_a_parse_over_its_memory_budget_is_a_413(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    token = make_token(engine, project)
    before = counts(engine)
    error = error_of(upload_file(server, project, token, b"#perfci-test: allocate\n"), 413)
    assert "256 MiB of memory" in error["message"], error
    assert "PERFCI_PARSE_MEMORY_BYTES" in error["message"]
    assert counts(engine) == before


# --- waiting uploads hold no connection and no memory -----------------------------------------


def _start_upload(server: ServerProcess, token: str, length: int, sent: bytes) -> socket.socket:
    """An upload of ``length`` bytes whose client sent only ``sent`` of them (and waits)."""
    host, port = server.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=scaled(60))
    sock.sendall(
        f"POST /api/v1/projects/x/runs HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n".encode()
        + sent
    )
    return sock


def test_uploads_waiting_for_their_bodies_hold_no_database_connection(
    server: ServerProcess, engine: Engine
) -> None:
    """24 slow uploads once held every pooled connection (5 + 10 overflow): every request,
    /healthz included, then waited 30 s for one and answered 503."""
    tokens = [make_token(engine, "x") for _ in range(24)]
    for token in tokens:  # used a moment ago: authenticating them writes nothing
        assert httpx.get(f"{server.url}/api/v1/projects", headers=bearer(token)).status_code == 200
    waiting = [_start_upload(server, token, 10_000, b'{"benchmark": ') for token in tokens]
    try:
        time.sleep(1.0)  # let the server take them all in
        assert healthz(server) == 200
        project = f"hostile/p-{uuid.uuid4().hex[:8]}"
        response = upload(server, project, make_token(engine, project), run_body())
        assert response.status_code == 201, response.text
    finally:
        for sock in waiting:
            sock.close()


def test_bodies_wait_on_disk_not_in_memory(server: ServerProcess, engine: Engine) -> None:
    """10 concurrent 50 MB uploads once took the server from 264 MB to 1.1 GB: bodies were read
    into memory before the upload's turn. Now they are spooled to disk as they arrive."""
    spool = Path(server.log.parent / "tmp")
    size, count = 40 * 1024 * 1024, 5
    rss_before = _rss(server)
    tail = 1000  # sent apart: the last piece to arrive is smaller than a writer's buffer
    chunk = b" " * (size - 1 - tail)
    waiting = [_start_upload(server, make_token(engine, "x"), size, chunk) for _ in range(count)]
    time.sleep(0.5)
    for sock in waiting:
        sock.sendall(b" " * tail)
    try:
        deadline = Deadline(60)
        while _spooled(spool) < count * (size - 1) and not deadline.expired():
            time.sleep(0.2)
        assert _spooled(spool) == count * (size - 1)
        grew = _rss(server) - rss_before
        assert grew < count * size // 2, f"the server grew by {grew >> 20} MiB"
    finally:
        for sock in waiting:
            sock.close()


def _rss(server: ServerProcess) -> int:
    status = Path(f"/proc/{server.process.pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) * 1024


def _spooled(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("perfci-upload-*/body.json"))


def test_a_token_over_its_rate_is_answered_429_before_its_body_is_read(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    token, other = make_token(engine, project), make_token(engine, project)
    for _ in range(BURST):
        assert upload(server, project, token, run_body()).status_code == 201
    before = counts(engine)
    refused = upload(server, project, token, run_body())
    error = error_of(refused, 429)
    assert error["code"] == "too_many_requests" and "PERFCI_UPLOAD_RATE" in error["message"]
    assert int(refused.headers["Retry-After"]) >= 1
    assert counts(engine) == before
    assert upload(server, project, other, run_body()).status_code == 201


# --- integrity --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metric", "named"),
    [
        ({"kind": "bench", "name": "case", "total_ns": 5e6, "samples_ns": [-5e6] * 3}, "samples"),
        ({"kind": "measure", "name": "tput", "total_ns": 5e6, "value": -1.0}, "value"),
        (
            {"kind": "measure", "name": "mem", "unit": "bytes", "total_ns": 1.0, "samples": [-1]},
            "samples",
        ),
        ({"kind": "kernel", "name": "k", "total_ns": 5e6, "samples_ns": [5e6, -1.0]}, "samples_ns"),
    ],
)
def test_a_bad_number_of_any_kind_is_a_422_naming_it(
    server: ServerProcess, engine: Engine, project: str, metric: dict[str, Any], named: str
) -> None:
    """A `bench` or `measure` metric carrying `total_ns` once kept negative samples (201), and
    a pull request 2x slower carrying one got `no-baseline`: its gate passed."""
    token = make_token(engine, project)
    before = counts(engine)
    error = error_of(upload(server, project, token, run_body([metric])), 422)
    assert error["code"] == "invalid_value", error
    assert metric["name"] in error["message"] and named in error["message"], error
    assert counts(engine) == before


@pytest.mark.parametrize(
    ("field", "metric"),
    [
        ("total_ns", {"kind": "kernel", "name": "k", "total_ns": 10**400}),
        ("calls", {"kind": "kernel", "name": "k", "total_ns": 5e6, "calls": 10**400}),
    ],
)
def test_an_integer_beyond_any_float_is_a_422_naming_its_field(
    server: ServerProcess, engine: Engine, project: str, field: str, metric: dict[str, Any]
) -> None:
    """A 401-digit JSON integer is refused by the upload's schema, never divided by the steps
    (where it would overflow) nor sent to the database."""
    token = make_token(engine, project)
    before = counts(engine)
    error = error_of(upload(server, project, token, run_body([metric])), 422)
    assert error["code"] == "invalid_request", error
    assert f"metrics.2.{field}" in error["message"], error
    assert counts(engine) == before


def test_a_name_holding_the_key_separator_is_a_422_and_nothing_is_stored(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    """Scope ``s\\x1f`` with name ``n`` and scope ``s`` with name ``\\x1fn`` digest alike: the
    upload once failed at the write with the database's unique-key error."""
    token = make_token(engine, project)
    before = counts(engine)
    metrics = [
        {"kind": "kernel", "name": "n", "scope": "s\x1f", "total_ns": 1e6, "calls": 3},
        {"kind": "kernel", "name": "\x1fn", "scope": "s", "total_ns": 2e6, "calls": 3},
    ]
    error = error_of(upload(server, project, token, run_body(metrics)), 422)
    assert error["code"] == "invalid_request", error
    assert "U+001F" in error["message"] and "scope 's\\x1f'" in error["message"], error
    assert counts(engine) == before


def test_a_key_reused_for_another_commit_branch_or_pull_request_is_a_409(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    """The same Idempotency-Key and numbers with another context once answered 200 with the
    old run, and the new commit's run was never stored."""
    token = make_token(engine, project)
    key = uuid.uuid4().hex
    first = upload(server, project, token, run_body(ci_run_id="1"), key)
    assert first.status_code == 201, first.text
    run_id = first.json()["run_id"]
    again = upload(server, project, token, run_body(ci_run_id="1"), key)
    assert again.status_code == 200 and again.json()["run_id"] == run_id
    for change, named in (
        ({"commit": "b" * 40}, "commit"),
        ({"branch": "feature"}, "branch 'main', not 'feature'"),
        ({"pr_number": 7}, "pr_number none, not 7"),
    ):
        before = counts(engine)
        error = error_of(
            # a token each: the rate limit allows each only BURST uploads
            upload(
                server, project, make_token(engine, project), run_body(ci_run_id="1", **change), key
            ),
            409,
        )
        assert error["run_id"] == run_id and named in error["message"], error
        assert counts(engine) == before


# --- smaller: 500s and logout -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [("since", "0001-01-01T00:00:00+14:00"), ("until", "9999-12-31T23:59:59-14:00")],
)
def test_dates_beyond_utc_are_a_422_naming_the_field(
    server: ServerProcess, engine: Engine, project: str, field: str, value: str
) -> None:
    token = make_token(engine, project)
    assert upload(server, project, token, run_body()).status_code == 201
    for path, params in (
        (f"/api/v1/projects/{project}/runs", {}),
        (f"/api/v1/projects/{project}/benchmarks/gpt/series", {"kind": "step", "name": "x"}),
    ):
        response = httpx.get(
            server.url + path, params={**params, field: value}, headers=bearer(token), timeout=30
        )
        error = error_of(response, 422)
        assert f"`{field}`" in error["message"], (path, error)


@pytest.mark.parametrize("depth", [600, 1000, 5000])
def test_deeply_nested_bodies_are_a_4xx_naming_the_field(
    server: ServerProcess, engine: Engine, project: str, depth: int
) -> None:
    token = make_token(engine, project)
    nested = '{"x": ' * depth + "1" + "}" * depth
    body = json.dumps(run_body()).replace('{"gpu": "x"}', nested).encode()
    message = error_of(upload(server, project, token, body), 422)["message"]
    assert "environment" in message or "nested too deeply" in message, message
    metadata = run_body()
    metadata["repeats"][0]["profiles"][0]["metadata"] = json.loads(
        '{"x": [' * 100 + "1" + "]}" * 100
    )
    message = error_of(upload(server, project, token, metadata), 422)["message"]
    assert "metadata" in message and "nested" in message, message
    admin = make_token(engine, project, "admin")
    patch = httpx.patch(
        f"{server.url}/api/v1/projects/{project}",
        content=b'{"public": ' + b"[" * depth + b"]" * depth + b"}",
        headers={**bearer(admin), "Content-Type": "application/json"},
    )
    assert 400 <= patch.status_code < 500, patch.text


def test_a_logout_posted_from_another_site_is_refused(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    url = f"{server.url}/logout"
    cookie = {"perfci_token": make_token(engine, project, "read")}
    for headers in ({"Origin": "https://evil.example"}, {"Referer": "https://evil.example/"}, {}):
        refused = httpx.post(url, headers=headers, cookies=cookie)
        assert refused.status_code == 403, (headers, refused.text)
        assert "set-cookie" not in refused.headers
    done = httpx.post(url, headers={"Origin": server.url}, cookies=cookie)
    assert done.status_code == 303 and 'perfci_token=""' in done.headers["set-cookie"]
