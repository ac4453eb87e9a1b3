"""Hostile clients against a real ``perfci serve`` process, on SQLite and PostgreSQL (issue 13).

One suite for the attacks the service must survive, so none can be skipped quietly: gzip bombs,
bodies counted before they are decoded, made-up HTTP methods on /metrics, probing other
projects' ids and names, login forms posted from other sites, clients that trickle their
requests, expired tokens, and what an admin may delete. Every refused request is checked to
have written nothing.
"""

from __future__ import annotations

import gzip
import json
import random
import select
import socket
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from db_fixtures import DIALECTS, create_postgres, create_sqlite, drop_postgres
from deadlines import Deadline, scaled
from server_process import ServerProcess, start_server
from sqlalchemy import Engine, func
from sqlalchemy import select as sql_select

from perfci.store import engines
from perfci.store.schema import ProfileRow, Project, Run, Sample
from perfci.store.schema_service import AuditEvent, Comparison
from perfci.usecases.admin.tokens import create_token

MAX_BODY = 3_000_000
MAX_METRICS = 2_000
MAX_SAMPLES = 10_000
MAX_INFLATED = 4_000_000
MAX_RATIO = 50
METRICS_TOKEN = "metrics-" + uuid.uuid4().hex
#: The server's read deadlines, short so that the trickle tests end soon, yet long enough for a
#: server starved of CPU on a loaded 2-core machine: at 1 s, an ordinary upload was once cut
#: off before its head was read, with two whole test suites running side by side.
HEADER_TIMEOUT_S = 3.0
BODY_TIMEOUT_S = 4.0
#: How long a test keeps trickling before it calls the connection "never closed": ten times
#: the server's deadline, so a loaded machine cannot make the test fail, only a missing bound.
TRICKLE_LIMIT_S = 10 * BODY_TIMEOUT_S


@pytest.fixture(scope="module", params=DIALECTS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("abuse")
    postgres = request.param != "sqlite"
    url = (
        create_postgres(request.getfixturevalue("postgres_admin"))
        if postgres
        else (create_sqlite(folder))
    )
    process = start_server(
        url,
        log_dir=folder,
        env={
            "PERFCI_METRICS_TOKEN": METRICS_TOKEN,
            "PERFCI_MAX_SAMPLES": str(MAX_SAMPLES),
            "PERFCI_MAX_INFLATED_BYTES": str(MAX_INFLATED),
            "PERFCI_MAX_INFLATION_RATIO": str(MAX_RATIO),
        },
        args=(
            "--max-body-bytes",
            str(MAX_BODY),
            "--max-metrics",
            str(MAX_METRICS),
            "--header-timeout",
            str(HEADER_TIMEOUT_S),
            "--body-timeout",
            str(BODY_TIMEOUT_S),
        ),
    )
    yield process
    process.stop()
    assert "Traceback" not in process.output(), process.output()
    if postgres:
        drop_postgres(request.getfixturevalue("postgres_admin"), url)


@pytest.fixture(scope="module")
def engine(server: ServerProcess) -> Iterator[Engine]:
    engine = engines.make_engine(server.database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def project() -> str:
    return f"abuse/p-{uuid.uuid4().hex[:8]}"


def make_token(
    engine: Engine, project: str, scopes: str = "upload,read", expires_at: datetime | None = None
) -> str:
    with engines.make_sessionmaker(engine)() as session:
        token, _ = create_token(
            session, project=project, scopes=scopes, name="abuse", expires_at=expires_at
        )
    return token


def counts(engine: Engine) -> dict[str, int]:
    with engine.connect() as connection:
        return {
            table.__tablename__: connection.execute(
                sql_select(func.count()).select_from(table)
            ).scalar_one()
            for table in (Run, Sample, ProfileRow, Comparison, Project)
        }


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def document(metrics: int = 3, samples: int = 0) -> dict[str, Any]:
    rows: list[dict[str, Any]] = [
        {"kind": "step", "name": "train_step", "total_ns": 3e7, "calls": 3}
    ]
    rows += [
        {"kind": "kernel", "name": f"k{i}", "total_ns": 1e6 + i, "calls": 3}
        for i in range(metrics - 1)
    ]
    if samples:
        rows[0]["samples_ns"] = [1e7] * samples
    return {
        "schema_version": 1,
        "perfci_version": "0",
        "profiles": [{"label": "p", "format": "synthetic", "steps": 3, "metrics": rows}],
    }


def run_body(
    benchmark: str = "gpt", *, ci: str | None = None, metrics: int = 3, samples: int = 0
) -> dict[str, Any]:
    return {
        "benchmark": benchmark,
        "context": {
            "commit": "a" * 40,
            "branch": "main",
            "ci_provider": "test",
            "ci_run_id": ci or uuid.uuid4().hex,
            "ci_run_attempt": 1,
            "environment": {"gpu": "abuse-gpu"},
        },
        "repeats": [document(metrics, samples) for _ in range(2)],
    }


def upload(server: ServerProcess, project: str, token: str, body: Any) -> httpx.Response:
    url = f"{server.url}/api/v1/projects/{project}/runs"
    if isinstance(body, bytes):
        return httpx.post(
            url,
            content=body,
            timeout=scaled(60),
            headers={"Content-Type": "application/json", **bearer(token)},
        )
    return httpx.post(url, json=body, headers=bearer(token), timeout=scaled(60))


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    return error


# --- gzip bombs and counted bodies (points 2 and 3) -------------------------------------------


def multipart(
    server: ServerProcess, project: str, token: str, files: list[tuple[str, bytes]]
) -> httpx.Response:
    meta = json.dumps({"benchmark": "gz", "context": {"branch": "main"}})
    return httpx.post(
        f"{server.url}/api/v1/projects/{project}/runs",
        data={"meta": meta},
        files=[("files", (name, data, "application/gzip")) for name, data in files],
        headers=bearer(token),
        timeout=scaled(60),
    )


def bomb(inflated: int) -> bytes:
    """A perfci JSON document padded with ``inflated`` bytes of spaces, gzipped (~1000:1)."""
    head = json.dumps(document())[:-1].encode()
    return gzip.compress(head + b" " * inflated + b"}", compresslevel=9)


def test_an_honest_gzip_profile_is_accepted(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    token = make_token(engine, project)
    data = gzip.compress(json.dumps(document(50)).encode())
    response = multipart(server, project, token, [("r0.json.gz", data), ("r1.json.gz", data)])
    assert response.status_code == 201, response.text
    assert response.json()["series"] == 50


def test_cut_short_and_concatenated_gzip(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    token = make_token(engine, project)
    text = json.dumps(document(20)).encode()
    before = counts(engine)
    cut = multipart(server, project, token, [("cut.json.gz", gzip.compress(text)[:-30])])
    assert "cut.json.gz" in error_of(cut, 422)["message"]
    assert counts(engine) == before
    half = len(text) // 2
    joined = gzip.compress(text[:half]) + gzip.compress(text[half:])  # what `cat a.gz b.gz` gives
    response = multipart(server, project, token, [("r0.json.gz", joined)])
    assert response.status_code == 201, response.text
    assert response.json()["series"] == 20


@pytest.mark.parametrize("layers", [1, 2])
def test_a_gzip_bomb_is_refused_before_parsing_and_writes_nothing(
    server: ServerProcess, engine: Engine, project: str, layers: int
) -> None:
    token = make_token(engine, project)
    data = bomb(40_000_000)
    for _ in range(layers - 1):
        data = gzip.compress(data)
    assert len(data) < MAX_BODY / 10
    before = counts(engine)
    error = error_of(multipart(server, project, token, [("bomb.json.gz", data)]), 413)
    assert "bomb.json.gz" in error["message"]
    assert f"at most {MAX_INFLATED} bytes and {MAX_RATIO} times" in error["message"]
    assert counts(engine) == before


def test_a_bomb_within_the_ratio_is_stopped_by_the_size_cap(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    token = make_token(engine, project)
    # Random digits compress about 2.4:1, far under the ratio cap; four files of 1.5 MB
    # inflate to 6 MB together, over the cap on what one upload may inflate to.
    rng = random.Random(7)
    data = gzip.compress("".join(rng.choices("0123456789", k=1_500_000)).encode())
    assert 4 * len(data) < MAX_BODY - 10_000
    before = counts(engine)
    response = multipart(server, project, token, [(f"r{i}.json.gz", data) for i in range(4)])
    assert f"at most {MAX_INFLATED} bytes" in error_of(response, 413)["message"]
    assert counts(engine) == before


def test_json_bodies_over_the_counts_are_refused_before_decoding(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    token = make_token(engine, project)
    before = counts(engine)
    metrics = error_of(upload(server, project, token, run_body(metrics=MAX_METRICS)), 413)
    assert f"at most {MAX_METRICS}" in metrics["message"] and "metrics" in metrics["message"]
    samples = error_of(upload(server, project, token, run_body(samples=MAX_SAMPLES)), 413)
    assert f"at most {MAX_SAMPLES}" in samples["message"] and "samples" in samples["message"]
    # Many metrics and a wrong type at the very end: a 422 from the count, not a full decode.
    broken = json.dumps(run_body(metrics=MAX_METRICS * 2))[:-1] + ', "repeats": 5}'
    assert error_of(upload(server, project, token, broken.encode()), 422)["message"]
    assert counts(engine) == before
    within = upload(server, project, token, run_body(metrics=MAX_METRICS // 2 - 1))
    assert within.status_code == 201, within.text


def test_a_multipart_json_document_over_the_count_is_refused(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    token = make_token(engine, project)
    before = counts(engine)
    data = json.dumps(document(MAX_METRICS + 1)).encode()
    response = multipart(server, project, token, [("r0.json", data)])
    assert f"at most {MAX_METRICS}" in error_of(response, 413)["message"]
    assert counts(engine) == before


def test_a_text_profile_over_the_count_is_refused_while_it_is_read(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    """Issue 31: a gzipped Dynamo CSV of 100,000 model rows (0.3 MB) is refused at the
    metric cap by its reader, not after the whole file was parsed."""
    token = make_token(engine, project)
    before = counts(engine)
    rows = "".join(f"cuda,model{index},1,1.5,2.0\n" for index in range(100_000))
    data = gzip.compress(("dev,name,batch_size,speedup,abs_latency\n" + rows).encode())
    response = multipart(server, project, token, [("inductor_performance.csv.gz", data)])
    message = error_of(response, 413)["message"]
    assert f"more than {MAX_METRICS} metrics" in message
    assert "refused while reading" in message
    assert "inductor_performance.csv" in message
    assert counts(engine) == before


# --- /metrics (point 4) -----------------------------------------------------------------------


def _series(text: str) -> set[str]:
    """The label sets of the request counter (without their values)."""
    return {
        line.rsplit(" ", 1)[0]
        for line in text.splitlines()
        if line.startswith("perfci_http_requests_total{")
    }


def test_made_up_methods_and_paths_do_not_grow_the_metrics(server: ServerProcess) -> None:
    assert error_of(httpx.get(f"{server.url}/metrics"), 401)
    with httpx.Client(base_url=server.url, timeout=scaled(30)) as client:

        def scrape() -> str:
            response = client.get("/metrics", headers=bearer(METRICS_TOKEN))
            assert response.status_code == 200
            return response.text

        scrape()  # counts itself from now on
        for i in range(10):
            client.request(f"M{i}", f"/api/v1/runs/{i + 1}")
            client.request(f"X{i}", f"/nothing/{i}")
            client.get(f"/no/such/path/{uuid.uuid4().hex}")
        first = scrape()
        for i in range(1000):
            client.request(f"MADEUP{i}", f"/api/v1/runs/{i + 1}")
            client.request(f"Q{i}", f"/random/{uuid.uuid4().hex}")
        second = scrape()
    assert _series(second) == _series(first)
    assert 'method="other",route="/api/v1/runs/{run_id}"' in second
    assert 'route="unmatched"' in second
    assert "MADEUP" not in second and "/random/" not in second


# --- cross-project reads (point 5) ------------------------------------------------------------


def _stored_run(server: ServerProcess, engine: Engine, project: str) -> int:
    response = upload(server, project, make_token(engine, project), run_body())
    assert response.status_code == 201, response.text
    return int(response.json()["run_id"])


@pytest.mark.parametrize("order", ["existing first", "missing first"])
def test_another_projects_ids_and_names_look_missing(
    server: ServerProcess, engine: Engine, project: str, order: str
) -> None:
    theirs = _stored_run(server, engine, project + "-b")
    missing = 2_000_000_000
    mine = make_token(engine, project, "admin")
    paths = [
        ("GET", "/api/v1/runs/{}"),
        ("GET", "/api/v1/runs/{}/comparison"),
        ("DELETE", "/api/v1/runs/{}"),
    ]
    ids = [theirs, missing] if order == "existing first" else [missing, theirs]
    for method, template in paths:
        answers = [
            httpx.request(method, server.url + template.format(i), headers=bearer(mine))
            for i in ids
        ]
        bodies = [
            error_of(a, 404)["message"].replace(str(i), "N")
            for a, i in zip(answers, ids, strict=True)
        ]
        assert bodies[0] == bodies[1], (method, template, bodies)
        anonymous = [httpx.request(method, server.url + template.format(i)) for i in ids]
        assert error_of(anonymous[0], 401) == error_of(anonymous[1], 401)
    names = [project + "-b", f"nobody/{uuid.uuid4().hex}"]
    names = names if order == "existing first" else names[::-1]
    for suffix in ("benchmarks", "runs", "alerts", "reports/weekly?week=2026-W01"):
        answers = [
            httpx.get(f"{server.url}/api/v1/projects/{n}/{suffix}", headers=bearer(mine))
            for n in names
        ]
        bodies = [
            error_of(a, 404)["message"].replace(n, "P") for a, n in zip(answers, names, strict=True)
        ]
        assert bodies[0] == bodies[1], (suffix, bodies)
        anonymous = [httpx.get(f"{server.url}/api/v1/projects/{n}/{suffix}") for n in names]
        assert error_of(anonymous[0], 401) == error_of(anonymous[1], 401)
    patched = [
        httpx.patch(
            f"{server.url}/api/v1/projects/{n}", json={"public": True}, headers=bearer(mine)
        )
        for n in names
    ]
    assert [p.status_code for p in patched] == [404, 404]
    alerts = [
        httpx.patch(f"{server.url}/api/v1/alerts/{i}", json={"status": "dismissed"})
        for i in (1, missing)
    ]
    assert [a.status_code for a in alerts] == [401, 401]


# --- smaller holes (point 10) -----------------------------------------------------------------


def test_benchmark_names_with_a_slash_are_reachable(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    token = make_token(engine, project)
    stored = upload(server, project, token, run_body("nlp/bert-large"))
    assert stored.status_code == 201, stored.text
    url = f"{server.url}/api/v1/projects/{project}/benchmarks/nlp/bert-large/series"
    for address in (url, url.replace("nlp/bert", "nlp%2Fbert")):
        response = httpx.get(
            address, params={"kind": "step", "name": "train_step"}, headers=bearer(token)
        )
        assert response.status_code == 200, response.text
        assert response.json()["benchmark"] == "nlp/bert-large"
        assert [p["run_id"] for p in response.json()["points"]] == [stored.json()["run_id"]]


def test_patching_a_project_answers_its_real_counts(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    token = make_token(engine, project)
    for benchmark in ("a", "b", "b"):
        assert upload(server, project, token, run_body(benchmark)).status_code == 201
    patched = httpx.patch(
        f"{server.url}/api/v1/projects/{project}",
        json={"public": False},
        headers=bearer(make_token(engine, project, "admin")),
    )
    assert patched.status_code == 200, patched.text
    assert (patched.json()["benchmarks"], patched.json()["runs"]) == (2, 3)


def test_security_headers_and_docs_off_by_default(server: ServerProcess) -> None:
    for path in ("/", "/login", "/api/v1/projects", "/api/v1/runs/1", "/healthz"):
        headers = httpx.get(server.url + path).headers
        assert headers["x-frame-options"] == "DENY", path
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "same-origin"
        policy = headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy and "default-src 'none'" in policy
        assert "script-src" not in policy  # no scripts at all: default-src 'none' holds
    for path in ("/docs", "/redoc", "/openapi.json"):
        assert httpx.get(server.url + path).status_code == 404


def test_a_login_posted_from_another_site_is_refused(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    token = make_token(engine, project, "read")
    url = f"{server.url}/login"
    for headers in (
        {"Origin": "https://evil.example"},
        {"Referer": "https://evil.example/x"},
        {"Origin": "null"},
        {},
    ):
        refused = httpx.post(url, data={"token": token}, headers=headers)
        assert refused.status_code == 403, (headers, refused.text)
        assert "set-cookie" not in refused.headers
    same = httpx.post(url, data={"token": token}, headers={"Origin": server.url})
    assert same.status_code == 303 and "perfci_token=" in same.headers["set-cookie"]


def _closed_while_trickling(sock: socket.socket, trickle: bytes) -> bool:
    """Send ``trickle`` a byte at a time; True once the server has closed the connection."""
    deadline = Deadline(TRICKLE_LIMIT_S)
    for byte in trickle:
        if deadline.expired():
            return False
        try:
            sock.send(bytes([byte]))
        except OSError:
            return True
        readable, _, _ = select.select([sock], [], [], 0.1)
        if readable:
            try:
                if sock.recv(65536) == b"":
                    return True
            except OSError:
                return True
    return False


@pytest.mark.parametrize("phase", ["headers", "body"])
def test_a_trickling_client_is_disconnected(server: ServerProcess, phase: str) -> None:
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=scaled(TRICKLE_LIMIT_S)) as sock:
        if phase == "body":
            sock.sendall(
                b"POST /api/v1/projects/x/y/runs HTTP/1.1\r\nHost: t\r\n"
                b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
            )
            trickle = b" " * 100_000
        else:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n")
            trickle = b"X-Slow: " + b"a" * 100_000
        assert _closed_while_trickling(sock, trickle)
    assert httpx.get(f"{server.url}/healthz").status_code == 200


def test_an_expired_token_is_refused_with_a_clear_401(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    expired = make_token(engine, project, expires_at=datetime.now(UTC) - timedelta(seconds=1))
    valid = make_token(engine, project, expires_at=datetime.now(UTC) + timedelta(days=1))
    before = counts(engine)
    assert "expired" in error_of(upload(server, project, expired, run_body()), 401)["message"]
    assert counts(engine) == before
    assert upload(server, project, valid, run_body()).status_code == 201


# --- deleting a run (point 1, the admin API call) ---------------------------------------------


def test_an_admin_deletes_a_run_and_it_is_audited(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    run_id = _stored_run(server, engine, project)
    url = f"{server.url}/api/v1/runs/{run_id}"
    assert error_of(httpx.delete(url), 401)
    assert error_of(httpx.delete(url, headers=bearer(make_token(engine, project))), 403)
    admin = make_token(engine, project, "admin")
    before = counts(engine)
    deleted = httpx.delete(url, headers=bearer(admin))
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["run_id"] == run_id and deleted.json()["project"] == project
    assert deleted.json()["samples"] > 0 and deleted.json()["comparisons"] == 1
    after = counts(engine)
    assert after["run"] == before["run"] - 1 and after["comparison"] == before["comparison"] - 1
    assert error_of(httpx.get(url, headers=bearer(admin)), 404)
    assert error_of(httpx.delete(url, headers=bearer(admin)), 404)
    with engine.connect() as connection:
        audit = connection.execute(
            sql_select(AuditEvent.actor, AuditEvent.target).where(AuditEvent.project == project)
        ).all()
    assert [target for _, target in audit] == [f"run {run_id}"]
    assert admin not in audit[0][0] and admin[:12] in audit[0][0]


@pytest.mark.parametrize("week", ["9999-W52", "0001-W01", "2026-W00", "2026-W54"])
def test_weeks_at_the_edges_of_the_calendar_are_a_4xx(
    server: ServerProcess, engine: Engine, project: str, week: str
) -> None:
    token = make_token(engine, project, "read")
    _stored_run(server, engine, project)
    response = httpx.get(
        f"{server.url}/api/v1/projects/{project}/reports/weekly",
        params={"week": week},
        headers=bearer(token),
        timeout=scaled(30),
    )
    assert 400 <= response.status_code < 500, response.text
    assert "week" in response.json()["error"]["message"]


@pytest.mark.parametrize(("field", "value"), [("samples_ns", [-5, -5, -5]), ("total_ns", -1e6)])
def test_a_bad_value_is_refused_naming_the_metric_and_writes_nothing(
    server: ServerProcess, engine: Engine, project: str, field: str, value: Any
) -> None:
    token = make_token(engine, project)
    body = run_body()
    metric = body["repeats"][1]["profiles"][0]["metrics"][0]  # the step, train_step
    metric[field] = value
    before = counts(engine)
    error = error_of(upload(server, project, token, body), 422)
    assert error["code"] == "invalid_value" and "train_step" in error["message"], error
    assert counts(engine) == before
    assert upload(server, project, token, run_body()).status_code == 201  # the next one works
