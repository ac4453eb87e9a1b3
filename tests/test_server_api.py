"""The HTTP API against a real ``perfci serve`` process on loopback, on SQLite and PostgreSQL.

Uploads (JSON and multipart with seed files), reads, auth failures, hostile bodies, retries
with an Idempotency-Key, /healthz and /metrics. Every rejected request is checked to have
written nothing by counting rows in the database.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from conftest import REPO
from db_fixtures import DIALECTS, create_postgres, create_sqlite, drop_postgres
from deadlines import scaled
from server_process import ServerProcess, start_server
from sqlalchemy import Engine, func, select

from perfci.core.errors import AuthError
from perfci.core.model import Metric, MetricKind, Profile, RunContext
from perfci.integrations import remote
from perfci.store import engines
from perfci.store.schema import ProfileRow, Project, Run, Sample
from perfci.store.schema_service import ApiToken, Comparison
from perfci.usecases.admin.tokens import create_token, revoke_token

MAX_BODY = 2_000_000
MAX_METRICS = 5_000
METRICS_TOKEN = "metrics-" + uuid.uuid4().hex
ENV = {"gpu": "test-gpu", "torch": "2.13.0"}


@pytest.fixture(scope="module", params=DIALECTS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("server")
    if request.param == "sqlite":
        url = create_sqlite(folder)
    else:
        admin = request.getfixturevalue("postgres_admin")
        url = create_postgres(admin)
    process = start_server(
        url,
        log_dir=folder,
        env={"PERFCI_MIN_BASELINE_RUNS": "3", "PERFCI_METRICS_TOKEN": METRICS_TOKEN},
        args=("--max-body-bytes", str(MAX_BODY), "--max-metrics", str(MAX_METRICS), "--api-docs"),
    )
    yield process
    process.stop()
    assert "Traceback" not in process.output(), process.output()
    if request.param != "sqlite":
        drop_postgres(request.getfixturevalue("postgres_admin"), url)


@pytest.fixture(scope="module")
def engine(server: ServerProcess) -> Iterator[Engine]:
    engine = engines.make_engine(server.database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def project() -> str:
    return f"acme/model-{uuid.uuid4().hex[:8]}"


def make_token(engine: Engine, project: str, scopes: str = "upload,read") -> str:
    with engines.make_sessionmaker(engine)() as session:
        token, _ = create_token(session, project=project, scopes=scopes, name="test")
    return token


def counts(engine: Engine) -> dict[str, int]:
    with engine.connect() as connection:
        return {
            table.__tablename__: connection.execute(
                select(func.count()).select_from(table)
            ).scalar_one()
            for table in (Run, Sample, ProfileRow, Comparison, Project)
        }


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def document(step_ms: float, gemm_ms: float, *, names: int = 3) -> dict[str, Any]:
    metrics = [
        {"kind": "step", "name": "train_step", "total_ns": step_ms * 3e6, "calls": 3},
        {
            "kind": "kernel",
            "name": "ampere_sgemm_128x64_tn",
            "total_ns": gemm_ms * 3e6,
            "calls": 30,
        },
        {"kind": "kernel", "name": "void at::<lambda(int)>|<script>", "total_ns": 3e6, "calls": 30},
    ]
    metrics += [
        {"kind": "api", "name": f"cudaCall{i}", "device": "cpu", "total_ns": 1e5}
        for i in range(names)
    ]
    return {
        "schema_version": 1,
        "profiles": [{"label": "p", "format": "synthetic", "steps": 3, "metrics": metrics}],
    }


def run_body(
    benchmark: str,
    *,
    sha: str,
    branch: str,
    when: datetime,
    scale: float = 1.0,
    rng: np.random.Generator,
    base: str | None = None,
    ci: str | None = None,
) -> dict[str, Any]:
    repeats = []
    for _ in range(3):
        noise = float(np.exp(rng.normal(0, 0.005)))
        gemm = 6.0 * scale * noise
        repeats.append(document(gemm + 4.0, gemm))
    context = {
        "commit": sha,
        "branch": branch,
        "base_branch": base,
        "ci_provider": "test",
        "ci_run_id": ci or sha[:12],
        "ci_run_attempt": 1,
        "commit_time": when.isoformat(),
        "environment": ENV,
    }
    return {
        "benchmark": benchmark,
        "context": {k: v for k, v in context.items() if v},
        "repeats": repeats,
    }


def upload(
    server: ServerProcess, project: str, token: str | None, body: Any, **headers: str
) -> httpx.Response:
    all_headers = {**(bearer(token) if token else {}), **headers}
    url = f"{server.url}/api/v1/projects/{project}/runs"
    if isinstance(body, bytes | str):
        return httpx.post(
            url,
            content=body,
            timeout=scaled(60),
            headers={"Content-Type": "application/json", **all_headers},
        )
    return httpx.post(url, json=body, headers=all_headers, timeout=scaled(60))


def seed_history(server: ServerProcess, project: str, token: str, *, runs: int = 5) -> int:
    """``runs`` main-branch runs, then one PR run 20 % slower; returns the PR's run id."""
    rng = np.random.default_rng(3)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(runs):
        response = upload(
            server,
            project,
            token,
            run_body(
                "gpt", sha=f"{i:040x}", branch="main", when=start + timedelta(days=i), rng=rng
            ),
        )
        assert response.status_code == 201, response.text
    response = upload(
        server,
        project,
        token,
        run_body(
            "gpt",
            sha="f" * 40,
            branch="slow-pr",
            base="main",
            scale=1.2,
            rng=rng,
            when=start + timedelta(days=runs + 1),
        ),
    )
    assert response.status_code == 201, response.text
    return int(response.json()["run_id"])


def assert_error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert "Traceback" not in response.text
    return body["error"]


# --- uploads and reads ------------------------------------------------------------------------


def test_json_upload_then_read_everything_back(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    token = make_token(engine, project)
    pr_run = seed_history(server, project, token)
    headers = bearer(token)

    run = httpx.get(f"{server.url}/api/v1/runs/{pr_run}", headers=headers).json()
    assert run["project"] == project and run["branch"] == "slow-pr"
    assert run["verdict"] == "regression" and run["repeats"] == 3
    comparison = httpx.get(f"{server.url}/api/v1/runs/{pr_run}/comparison", headers=headers).json()
    assert comparison["verdict"] == "regression"
    assert comparison["baseline"]["runs"] == 5
    regressed = {m["series"]["name"] for m in comparison["metrics"] if m["verdict"] == "regression"}
    assert {"train_step", "ampere_sgemm_128x64_tn"} <= regressed
    assert comparison["contributions"][0]["series"]["name"] == "ampere_sgemm_128x64_tn"

    benchmarks = httpx.get(
        f"{server.url}/api/v1/projects/{project}/benchmarks", headers=headers
    ).json()["benchmarks"]
    assert [b["name"] for b in benchmarks] == ["gpt"]
    assert benchmarks[0]["runs"] == 6 and benchmarks[0]["latest_run_id"] == pr_run
    assert benchmarks[0]["latest_step_ns"] == pytest.approx(11.2e6, rel=0.05)

    series = httpx.get(
        f"{server.url}/api/v1/projects/{project}/benchmarks/gpt/series",
        params={"kind": "kernel", "name": "ampere_sgemm_128x64_tn"},
        headers=headers,
    ).json()
    assert series["branch"] == "main" and len(series["points"]) == 5
    assert all(len(p["values"]) == 3 for p in series["points"])
    assert series["points"][0]["values"][0] == pytest.approx(6e6, rel=0.05)

    runs = httpx.get(
        f"{server.url}/api/v1/projects/{project}/runs", params={"branch": "main"}, headers=headers
    ).json()["runs"]
    assert len(runs) == 5 and all(r["branch"] == "main" for r in runs)


def test_multipart_upload_of_seed_files(
    server: ServerProcess, engine: Engine, project: str, seeds_dir: Path
) -> None:
    token = make_token(engine, project)
    seed = next(seeds_dir.glob("004_*.txt"))
    meta = {
        "benchmark": "aicb",
        "context": {"commit": "a" * 40, "branch": "main", "environment": ENV},
    }
    files = [("files", (f"rank{i}_{seed.name}", seed.read_bytes(), "text/plain")) for i in range(3)]
    response = httpx.post(
        f"{server.url}/api/v1/projects/{project}/runs",
        data={"meta": json.dumps(meta)},
        files=files,
        headers=bearer(token),
        timeout=scaled(60),
    )
    assert response.status_code == 201, response.text
    answer = response.json()
    assert (
        answer["created"] and answer["series"] >= 10 and answer["samples"] == 3 * answer["series"]
    )
    run = httpx.get(f"{server.url}/api/v1/runs/{answer['run_id']}", headers=bearer(token))
    assert run.json()["repeats"] == 3
    with engine.connect() as connection:
        sources = (
            connection.execute(
                select(ProfileRow.source).where(ProfileRow.run_id == answer["run_id"])
            )
            .scalars()
            .all()
        )
    assert sorted(sources) == sorted(f"rank{i}_{seed.name}" for i in range(3))


def test_a_file_whose_metadata_holds_nan_is_stored_with_nulls(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    """Python's json reads NaN and Infinity; a Google Benchmark context holding them was
    written back as they are, which PostgreSQL refused: a 503 for a client's file (found by
    benchmarks/service_fuzz.py). JSON cannot hold them: they are stored as null."""
    token = make_token(engine, project)
    text = (REPO / "tests/data/bench/google_benchmark_repetitions.json").read_text()
    assert '"num_sharing": 2' in text and '"mhz_per_cpu": 2596' in text
    text = text.replace('"num_sharing": 2', '"num_sharing": NaN', 1)
    text = text.replace('"mhz_per_cpu": 2596', '"mhz_per_cpu": -Infinity', 1)
    response = httpx.post(
        f"{server.url}/api/v1/projects/{project}/runs",
        data={"meta": json.dumps({"benchmark": "gbench", "context": {"branch": "main"}})},
        files=[("files", ("bm.json", text.encode(), "application/json"))],
        headers=bearer(token),
        timeout=scaled(60),
    )
    assert response.status_code == 201, response.text
    with engine.connect() as connection:
        stored = connection.execute(
            select(ProfileRow.meta).where(ProfileRow.run_id == response.json()["run_id"])
        ).scalar_one()
    assert stored["context"]["mhz_per_cpu"] is None
    assert [cache["num_sharing"] for cache in stored["context"]["caches"]] == [1, 1, 1, None]


def test_a_file_whose_metadata_holds_nul_is_stored_and_one_whose_names_do_is_refused(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    """PostgreSQL keeps neither NUL nor half of a surrogate pair in a JSON value: a corrupted
    Nsight Compute report whose host name read NUL + ".0.1" was answered 503
    ``database_unavailable`` (benchmarks/service_fuzz.py), as if the store were down. What
    describes a profile is stored with U+FFFD in their place; a case named so is refused
    (422, naming it), on both stores alike."""
    token = make_token(engine, project)
    text = (REPO / "tests/data/bench/google_benchmark_repetitions.json").read_text()
    assert '"host_name": "vm"' in text and '"executable": "bm.py"' in text
    text = text.replace('"host_name": "vm"', '"host_name": "\\u0000.0.1"', 1)
    text = text.replace('"executable": "bm.py"', '"executable": "bm\\udcff.py"', 1)

    def send(body: str) -> httpx.Response:
        return httpx.post(
            f"{server.url}/api/v1/projects/{project}/runs",
            data={"meta": json.dumps({"benchmark": "gbench", "context": {"branch": "main"}})},
            files=[("files", ("bm.json", body.encode(), "application/json"))],
            headers=bearer(token),
            timeout=scaled(60),
        )

    response = send(text)
    assert response.status_code == 201, response.text
    with engine.connect() as connection:
        stored = connection.execute(
            select(ProfileRow.meta).where(ProfileRow.run_id == response.json()["run_id"])
        ).scalar_one()
    assert (stored["context"]["host_name"], stored["context"]["executable"]) == (
        "\ufffd.0.1",
        "bm\ufffd.py",
    )
    refused = send(text.replace('"sort_list/64"', '"sort_list/\\ud800"'))
    assert refused.status_code == 422, refused.text
    assert "U+D800 (half of a surrogate pair)" in refused.json()["error"]["message"]


def test_retry_with_the_same_idempotency_key_returns_the_same_run(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    token = make_token(engine, project)
    rng = np.random.default_rng(1)
    body = run_body("gpt", sha="b" * 40, branch="main", rng=rng, when=datetime.now(UTC))
    del body["context"]["ci_run_id"]
    first = upload(server, project, token, body, **{"Idempotency-Key": "job-42"})
    assert first.status_code == 201, first.text
    before = counts(engine)
    again = upload(server, project, token, body, **{"Idempotency-Key": "job-42"})
    assert again.status_code == 200, again.text
    assert again.json()["run_id"] == first.json()["run_id"]
    assert again.json()["created"] is False
    assert again.json()["comparison"] == first.json()["comparison"]
    # The same key with other numbers: a 409 naming the stored run, and nothing written.
    body["repeats"] = body["repeats"][:2]
    conflict = upload(server, project, token, body, **{"Idempotency-Key": "job-42"})
    assert conflict.status_code == 409, conflict.text
    assert conflict.json()["error"]["run_id"] == first.json()["run_id"]
    assert counts(engine) == before
    other = upload(server, project, token, body, **{"Idempotency-Key": "job-43"})
    assert other.status_code == 201 and other.json()["run_id"] != first.json()["run_id"]


# --- auth -------------------------------------------------------------------------------------


def test_missing_wrong_revoked_and_wrong_scope_tokens_write_nothing(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    good = make_token(engine, project)
    read_only = make_token(engine, project, "read")
    other = make_token(engine, project + "-other", "upload,read")
    revoked = make_token(engine, project)
    with engines.make_sessionmaker(engine)() as session:
        revoked_id = (
            session.execute(select(ApiToken.id).order_by(ApiToken.id.desc())).scalars().first()
        )
        assert revoked_id is not None
        revoke_token(session, revoked_id)
    body = run_body(
        "gpt", sha="c" * 40, branch="main", rng=np.random.default_rng(2), when=datetime.now(UTC)
    )
    before = counts(engine)
    assert_error(upload(server, project, None, body), 401)
    assert_error(upload(server, project, "pci_" + "x" * 43, body), 401)
    assert_error(upload(server, project, good[:-1] + ("A" if good[-1] != "A" else "B"), body), 401)
    assert "revoked" in assert_error(upload(server, project, revoked, body), 401)["message"]
    assert_error(upload(server, project, read_only, body), 403)
    # Another project's token: as if the project did not exist (tests/test_server_abuse.py).
    assert_error(upload(server, project, other, body), 404)
    malformed = httpx.post(
        f"{server.url}/api/v1/projects/{project}/runs",
        json=body,
        headers={"Authorization": f"Basic {good}"},
    )
    assert_error(malformed, 401)
    assert counts(engine) == before
    assert good not in server.output() and revoked not in server.output()


def test_reads_need_a_read_token_unless_the_project_is_public(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    uploader = make_token(engine, project, "upload")
    admin = make_token(engine, project, "admin")
    response = upload(
        server,
        project,
        uploader,
        run_body(
            "gpt", sha="d" * 40, branch="main", rng=np.random.default_rng(4), when=datetime.now(UTC)
        ),
    )
    assert response.status_code == 201, response.text
    run_url = f"{server.url}/api/v1/runs/{response.json()['run_id']}"
    bench_url = f"{server.url}/api/v1/projects/{project}/benchmarks"
    assert_error(httpx.get(run_url), 401)
    assert_error(httpx.get(bench_url), 401)
    assert_error(httpx.get(run_url, headers=bearer(uploader)), 403)
    assert httpx.get(run_url, headers=bearer(admin)).status_code == 200
    made_public = httpx.patch(
        f"{server.url}/api/v1/projects/{project}", json={"public": True}, headers=bearer(uploader)
    )
    assert_error(made_public, 403)
    made_public = httpx.patch(
        f"{server.url}/api/v1/projects/{project}", json={"public": True}, headers=bearer(admin)
    )
    assert made_public.status_code == 200 and made_public.json()["public"] is True
    assert httpx.get(run_url).status_code == 200
    assert httpx.get(bench_url).status_code == 200
    assert_error(httpx.get(bench_url, headers=bearer("pci_wrong")), 401)
    assert_error(httpx.get(f"{server.url}/api/v1/runs/2147483647", headers=bearer(admin)), 404)


# --- hostile input ----------------------------------------------------------------------------


def _valid(project: str) -> dict[str, Any]:
    return run_body(
        "gpt", sha="e" * 40, branch="main", rng=np.random.default_rng(5), when=datetime.now(UTC)
    )


def _with(body: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    body = json.loads(json.dumps(body))
    target = body
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return body


METRIC = ("repeats", 0, "profiles", 0, "metrics", 0)
HOSTILE: dict[str, tuple[int, Any]] = {
    "not json": (422, b'{"benchmark": "gpt", "repeats": [}'),
    "json array": (422, b"[1, 2, 3]"),
    "empty body": (422, b""),
    "lone surrogate": (422, b'{"benchmark": "\\ud800", "repeats": []}'),
    "no repeats": (422, lambda b: _with(b, ("repeats",), [])),
    "benchmark not a string": (422, lambda b: _with(b, ("benchmark",), ["gpt"])),
    "10k-char benchmark": (422, lambda b: _with(b, ("benchmark",), "b" * 10_000)),
    "10k-char metric name": (422, lambda b: _with(b, (*METRIC, "name"), "k" * 10_000)),
    "10k-char branch": (422, lambda b: _with(b, ("context", "branch"), "x" * 10_000)),
    "NUL in a name": (422, lambda b: _with(b, (*METRIC, "name"), "a\x00b")),
    "unknown kind": (422, lambda b: _with(b, (*METRIC, "kind"), "quantum")),
    "string time": (422, lambda b: _with(b, (*METRIC, "total_ns"), "fast")),
    "huge pr number": (422, lambda b: _with(b, ("context", "pr_number"), 2**40)),
    "bad commit time": (422, lambda b: _with(b, ("context", "commit_time"), "yesterday")),
    "unknown schema_version": (422, lambda b: _with(b, ("repeats", 0, "schema_version"), 99)),
    "unknown top-level field": (422, lambda b: _with(b, ("surprise",), 1)),
    "too many metrics": (
        413,
        lambda b: _with(b, ("repeats", 0), document(10, 6, names=MAX_METRICS + 1)),
    ),
    "over the body limit": (413, lambda b: _with(b, ("context", "ci_url"), "x" * MAX_BODY)),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_bodies_get_4xx_and_write_nothing(
    server: ServerProcess, engine: Engine, project: str, case: str
) -> None:
    token = make_token(engine, project)
    status, make = HOSTILE[case]
    body = make(_valid(project)) if callable(make) else make
    before = counts(engine)
    error = assert_error(upload(server, project, token, body), status)
    assert error["message"]
    assert counts(engine) == before


def test_bad_multipart_uploads_get_4xx_and_write_nothing(
    server: ServerProcess, engine: Engine, project: str, seeds_dir: Path
) -> None:
    token = make_token(engine, project)
    url = f"{server.url}/api/v1/projects/{project}/runs"
    seed = next(seeds_dir.glob("004_*.txt")).read_bytes()
    meta = json.dumps({"benchmark": "aicb", "context": {"branch": "main"}})
    before = counts(engine)
    truncated = httpx.post(
        url,
        data={"meta": meta},
        headers=bearer(token),
        files=[
            ("files", ("ok.txt", seed, "text/plain")),
            ("files", ("cut.txt", seed[: len(seed) // 2], "text/plain")),
        ],
    )
    message = assert_error(truncated, 422)["message"]
    assert "cut.txt" in message and "perfci-upload" not in message
    garbage = httpx.post(
        url,
        data={"meta": meta},
        headers=bearer(token),
        files=[("files", ("x.bin", b"\x00\x01garbage", "text/plain"))],
    )
    assert_error(garbage, 422)
    no_meta = httpx.post(
        url, headers=bearer(token), files=[("files", ("ok.txt", seed, "text/plain"))]
    )
    assert_error(no_meta, 422)
    bad_meta = httpx.post(
        url,
        data={"meta": '{"benchmark": 5}'},
        headers=bearer(token),
        files=[("files", ("ok.txt", seed, "text/plain"))],
    )
    assert "meta" in assert_error(bad_meta, 422)["message"]
    wrong_type = httpx.post(
        url, content=b"hello", headers={**bearer(token), "Content-Type": "text/plain"}
    )
    assert_error(wrong_type, 415)
    assert counts(engine) == before


# --- operations -------------------------------------------------------------------------------


def test_healthz_metrics_and_openapi(server: ServerProcess) -> None:
    health = httpx.get(f"{server.url}/healthz")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    httpx.get(f"{server.url}/api/v1/runs/1")
    assert_error(httpx.get(f"{server.url}/metrics"), 401)
    metrics = httpx.get(f"{server.url}/metrics", headers=bearer(METRICS_TOKEN))
    assert metrics.status_code == 200
    assert metrics.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = metrics.text
    assert 'perfci_http_requests_total{method="GET",route="/healthz",status="200"}' in text
    assert 'route="/api/v1/runs/{run_id}"' in text
    assert "perfci_http_request_duration_seconds_bucket" in text
    assert 'perfci_uploads_total{result="created"}' in text
    schema = httpx.get(f"{server.url}/openapi.json").json()
    upload_op = schema["paths"]["/api/v1/projects/{project}/runs"]["post"]
    assert set(upload_op["requestBody"]["content"]) == {"application/json", "multipart/form-data"}
    assert {"RunCreate", "RunCreated", "RunPublic", "ComparisonPublic", "ErrorPublic"} <= set(
        schema["components"]["schemas"]
    )


def test_healthz_is_503_when_the_database_is_down(tmp_path: Path) -> None:
    down = "postgresql+psycopg://root@127.0.0.1:1/nothing?connect_timeout=2"
    server = start_server(down, log_dir=tmp_path, raw=True, wait_healthy=False)
    try:
        assert_error(httpx.get(f"{server.url}/healthz", timeout=scaled(10)), 503)
        assert_error(httpx.get(f"{server.url}/api/v1/projects", timeout=scaled(10)), 503)
    finally:
        server.stop()


# --- remote mode ------------------------------------------------------------------------------


def _profiles(scale: float) -> list[Profile]:
    metrics = [
        Metric(MetricKind.STEP, "train_step", calls=1, total_ns=10e6 * scale),
        Metric(MetricKind.KERNEL, "gemm", calls=10, total_ns=6e6 * scale),
    ]
    return [Profile(label="p", format="test", source="mem", metrics=metrics, steps=1)]


def test_remote_upload_of_profiles_and_files(
    server: ServerProcess, engine: Engine, project: str, seeds_dir: Path
) -> None:
    token = make_token(engine, project)
    context = RunContext(project=project, commit="1" * 40, branch="main", environment=ENV)
    answer = remote.upload_run(
        server.url,
        token,
        project=project,
        benchmark="gpt",
        context=context,
        repeats=[_profiles(1.0), _profiles(1.01)],
    )
    assert answer["created"] and remote.comparison_of(answer).run_id == answer["run_id"]
    again = remote.upload_run(
        server.url,
        token,
        project=project,
        benchmark="gpt",
        context=context,
        repeats=[_profiles(1.0), _profiles(1.01)],
    )
    assert again["run_id"] == answer["run_id"] and again["created"] is False
    seed = next(seeds_dir.glob("004_*.txt"))
    files = remote.upload_run(
        server.url, token, project=project, benchmark="aicb", context=context, repeats=[seed, seed]
    )
    assert files["created"] and files["samples"] == 2 * files["series"]
    with pytest.raises(AuthError, match="invalid API token") as caught:
        remote.upload_run(
            server.url,
            "pci_nope",
            project=project,
            benchmark="gpt",
            context=context,
            repeats=[_profiles(1.0)],
        )
    assert caught.value.status == 401


def test_a_remote_upload_of_profiles_whose_source_said_nan_is_stored(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    """The CLI's remote mode sends parsed profiles as JSON: a NaN in what the source said
    (metadata, a metric's attrs) would be no JSON to the server. It is sent as null."""
    token = make_token(engine, project)
    profiles = _profiles(1.0)
    profiles[0].metadata = {"context": {"mhz_per_cpu": float("nan"), "loads": [float("inf"), 1]}}
    profiles[0].metrics[1].attrs = {"occupancy": float("nan")}
    answer = remote.upload_run(
        server.url,
        token,
        project=project,
        benchmark="gpt-nan",
        context=RunContext(project=project, commit="2" * 40, branch="main", environment=ENV),
        repeats=[profiles],
    )
    assert answer["created"]
    with engine.connect() as connection:
        stored = connection.execute(
            select(ProfileRow.meta).where(ProfileRow.run_id == answer["run_id"])
        ).scalar_one()
    assert stored == {"context": {"mhz_per_cpu": None, "loads": [None, 1]}}


def test_remote_mode_ingest_and_check_upload_to_the_server(
    server: ServerProcess,
    engine: Engine,
    project: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With PERFCI_SERVER_URL and PERFCI_TOKEN the CLI holds no database: it uploads."""
    from perfci.cli.main import main

    monkeypatch.setenv("PERFCI_SERVER_URL", server.url)
    monkeypatch.setenv("PERFCI_TOKEN", make_token(engine, project))
    monkeypatch.setenv("PERFCI_DATABASE_URL", "sqlite:////nonexistent/never-used.db")
    rng = np.random.default_rng(11)

    def files(tag: str, scale: float) -> list[str]:
        paths = []
        for r in range(3):
            gemm = 6.0 * scale * float(np.exp(rng.normal(0, 0.005)))
            path = tmp_path / f"{tag}-{r}.json"
            path.write_text(json.dumps({"perfci_version": "0.1.0", **document(gemm + 4.0, gemm)}))
            paths.append(str(path))
        return paths

    common = ["--benchmark", "gpt", "--project", project, "--env", "gpu=remote-test"]
    for i in range(4):
        assert (
            main(
                [
                    "ingest",
                    *files(f"base{i}", 1.0),
                    *common,
                    "--commit",
                    f"{i:040x}",
                    "--branch",
                    "main",
                    "--ci-run-id",
                    f"b{i}",
                ]
            )
            == 0
        )
    before = counts(engine)
    profiles = [arg for f in files("pr", 1.2) for arg in ("--profile", f)]
    code = main(
        [
            "check",
            *profiles,
            *common,
            "--commit",
            "f" * 40,
            "--branch",
            "fix",
            "--base-branch",
            "main",
            "--ci-run-id",
            "pr1",
            "--no-comment",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1, out
    assert "ampere_sgemm_128x64_tn" in out
    after = counts(engine)
    assert after["run"] == before["run"] + 1 and after["comparison"] == before["comparison"] + 1
    monkeypatch.delenv("PERFCI_TOKEN")
    assert main(["ingest", *files("x", 1.0), *common, "--commit", "e" * 40]) == 2
    assert "PERFCI_TOKEN" in capsys.readouterr().err


def test_weekly_report_and_alerts_over_the_api(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    """A step change on main shows in the weekly report; its alert is listed and dismissed."""
    from perfci.usecases.weekly.report import build_weekly_report
    from perfci.usecases.weekly.weeks import week_bounds

    token = make_token(engine, project, "upload,read")
    admin = make_token(engine, project, "admin")
    rng = np.random.default_rng(8)
    start = datetime(2026, 1, 1, tzinfo=UTC)  # a Thursday: runs 20.. fall in 2026-W04/W05
    for i in range(32):
        body = run_body(
            "gpt",
            sha=f"{i:040x}",
            branch="main",
            rng=rng,
            when=start + timedelta(days=i),
            scale=1.3 if i >= 20 else 1.0,
        )
        assert upload(server, project, token, body).status_code == 201
    weeks = {}
    for week in ("2026-W04", "2026-W05"):
        response = httpx.get(
            f"{server.url}/api/v1/projects/{project}/reports/weekly",
            params={"week": week},
            headers=bearer(token),
            timeout=scaled(60),
        )
        assert response.status_code == 200, response.text
        weeks[week] = response.json()
    found = [
        cp
        for report in weeks.values()
        for trend in report["benchmarks"]
        for cp in trend["change_points"]
    ]
    assert found and found[0]["commit"] == f"{20:040x}"
    assert found[0]["change"] == pytest.approx(0.18, abs=0.05)  # gemm 6 → 7.8 ms of 10 ms
    assert counts(engine)["run"] >= 32
    with engines.make_sessionmaker(engine)() as session:  # what `perfci report` does: record them
        for week in weeks:
            since, until = week_bounds(week)
            build_weekly_report(session, project=project, since=since, until=until)
    listed = httpx.get(
        f"{server.url}/api/v1/projects/{project}/alerts",
        params={"status": "open"},
        headers=bearer(token),
        timeout=scaled(30),
    ).json()
    assert [a["commit"] for a in listed["alerts"]] == [f"{20:040x}"]
    alert_id = listed["alerts"][0]["id"]
    url = f"{server.url}/api/v1/alerts/{alert_id}"
    refused = httpx.patch(
        url, json={"status": "dismissed"}, headers=bearer(token), timeout=scaled(30)
    )
    assert refused.status_code == 403
    done = httpx.patch(
        url,
        json={"status": "dismissed", "note": "expected: bigger model"},
        headers=bearer(admin),
        timeout=scaled(30),
    )
    assert done.status_code == 200 and done.json()["status"] == "dismissed"
    assert done.json()["note"] == "expected: bigger model"
    bad = httpx.get(
        f"{server.url}/api/v1/projects/{project}/reports/weekly",
        params={"week": "2026-W60"},
        headers=bearer(token),
        timeout=scaled(30),
    )
    assert bad.status_code == 422 and "week" in bad.json()["error"]["message"]


# --- replicas ---------------------------------------------------------------------------------


def _post_until_acknowledged(
    urls: list[str], project: str, token: str, body: dict[str, Any], key: str | None, first: int
) -> int:
    """POST to replica ``first``, moving on to the next replica on a connection error or 5xx
    (what a load balancer does); returns the acknowledged run id."""
    headers = {**bearer(token), **({"Idempotency-Key": key} if key else {})}
    for attempt in range(30):
        url = urls[(first + attempt) % len(urls)]
        try:
            response = httpx.post(
                f"{url}/api/v1/projects/{project}/runs",
                json=body,
                headers=headers,
                timeout=scaled(60),
            )
        except httpx.HTTPError:
            continue
        if response.status_code in (200, 201):
            return int(response.json()["run_id"])
        assert response.status_code >= 500, response.text
    raise AssertionError(f"no replica acknowledged {key or body['context']['ci_run_id']}")


@pytest.mark.postgres
def test_three_replicas_racing_the_same_runs_store_each_once_and_survive_a_kill(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Three `perfci serve` processes on one PostgreSQL database: the same run sent to two
    replicas at once is stored once, and killing a replica mid-upload loses nothing."""
    from concurrent.futures import ThreadPoolExecutor

    admin = request.getfixturevalue("postgres_admin")
    url = create_postgres(admin)
    replicas = [start_server(url, log_dir=tmp_path) for _ in range(3)]
    engine = engines.make_engine(url)
    try:
        project = "replicas/race"
        token = make_token(engine, project)
        rng = np.random.default_rng(11)
        bodies = [
            run_body(
                "gpt", sha=f"{i:040x}", branch="main", rng=rng, when=datetime.now(UTC), ci=f"ci-{i}"
            )
            for i in range(10)
        ]
        # Half race on an Idempotency-Key, half on the CI run id alone.
        keys = [f"key-{i}" if i % 2 else None for i in range(10)]
        urls = [r.url for r in replicas]
        with ThreadPoolExecutor(max_workers=20) as pool:
            racing = [
                pool.submit(_post_until_acknowledged, urls, project, token, body, key, copy)
                for body, key in zip(bodies, keys, strict=True)
                for copy in (0, 1)
            ]
            ids = [f.result() for f in racing]
        assert all(ids[2 * i] == ids[2 * i + 1] for i in range(10)), ids
        assert counts(engine)["run"] == 10
        # Kill replica 0 while uploads aimed at it are in flight; clients move on.
        more = [
            run_body(
                "gpt", sha=f"{i:040x}", branch="main", rng=rng, when=datetime.now(UTC), ci=f"ci-{i}"
            )
            for i in range(10, 20)
        ]
        with ThreadPoolExecutor(max_workers=10) as pool:
            futures = [
                pool.submit(_post_until_acknowledged, urls, project, token, body, f"late-{i}", 0)
                for i, body in enumerate(more)
            ]
            replicas[0].process.kill()
            acknowledged = [f.result() for f in futures]
        with engine.connect() as connection:
            stored = set(connection.execute(select(Run.id)).scalars())
        assert set(acknowledged) <= stored and len(set(acknowledged)) == 10
        assert len(stored) == 20
    finally:
        engine.dispose()
        for replica in replicas:
            replica.stop()
        for replica in replicas[1:]:
            assert "Traceback" not in replica.output(), replica.output()
        drop_postgres(admin, url)


def test_uploads_carry_units_and_direction_and_a_throughput_drop_regresses(
    server: ServerProcess, engine: Engine, project: str
) -> None:
    """Schema 2 documents (issue 15): a tokens/s measure, higher is better, through the API."""
    token = make_token(engine, project)
    rng = np.random.default_rng(4)
    start = datetime(2026, 2, 1, tzinfo=UTC)

    def body(sha: str, branch: str, day: int, speed: float, base: str | None = None) -> Any:
        repeats = []
        for _ in range(3):
            tokens = 12_000.0 * speed * float(np.exp(rng.normal(0, 0.004)))
            measure = {
                "kind": "measure",
                "name": "throughput",
                "unit": "tokens/s",
                "better": "higher",
                "value": tokens,
            }
            repeats.append(
                {"schema_version": 2, "profiles": [{"label": "serve", "metrics": [measure]}]}
            )
        context = {
            "commit": sha,
            "branch": branch,
            "commit_time": (start + timedelta(days=day)).isoformat(),
            "environment": ENV,
        }
        if base:
            context["base_branch"] = base
        return {"benchmark": "serve", "context": context, "repeats": repeats}

    for i in range(5):
        response = upload(server, project, token, body(f"{i + 100:040x}", "main", i, 1.0))
        assert response.status_code == 201, response.text
    response = upload(server, project, token, body("e" * 40, "slow-serve", 6, 0.9, base="main"))
    assert response.status_code == 201, response.text
    run_id = response.json()["run_id"]
    comparison = httpx.get(
        f"{server.url}/api/v1/runs/{run_id}/comparison", headers=bearer(token)
    ).json()
    (line,) = comparison["metrics"]
    assert line["series"]["unit"] == "tokens/s" and line["series"]["better"] == "higher"
    assert line["verdict"] == "regression" and comparison["verdict"] == "regression"
    assert line["change"] == pytest.approx(-0.10, abs=0.01)
    bad = body("d" * 40, "main", 7, 1.0)
    bad["repeats"][0]["profiles"][0]["metrics"][0]["better"] = "sideways"
    assert_error(upload(server, project, token, bad), 422)
