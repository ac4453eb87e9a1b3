"""Reads off the primary (issue 17): with ``read_database_url`` the service's dashboard pages,
series histories, run lists and weekly reports read the replica; uploads, comparisons, run
pages and tokens stay on the primary; the replica's engine refuses writes, as a hot standby
does.

A real ``perfci serve`` on SQLite and PostgreSQL. The "replica" is a second database holding
other runs than the primary, so that every answer shows which database it came from (a
streaming replica would hold the same runs a moment later; which database a route reads is
what is tested).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import numpy as np
import pytest
from db_fixtures import DIALECTS, create_postgres, create_sqlite, drop_postgres, make_context
from deadlines import scaled
from server_process import ServerProcess, start_server
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from test_server_api import ENV, bearer, counts, make_token, run_body, upload

from perfci.cli.main import main
from perfci.core.model import Metric, MetricKind, Profile
from perfci.store import engines
from perfci.usecases.admin.db import read_engine
from perfci.usecases.submit.ingest import ingest_run

PROJECT = "acme/replicated"
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # a Monday: ISO week 2026-W10
REPLICA_SHAS = [f"{'ab' * 19}{i:02d}" for i in range(2)]


@pytest.fixture(params=DIALECTS)
def two_stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(primary URL, replica URL): two migrated databases of one dialect."""
    if request.param == "sqlite":
        yield create_sqlite(tmp_path), create_sqlite(tmp_path)
        return
    admin = request.getfixturevalue("postgres_admin")
    urls = create_postgres(admin), create_postgres(admin)
    yield urls
    for url in urls:
        drop_postgres(admin, url)


def _replica_runs(url: str) -> None:
    """Two main runs of ``gpt`` in the replica, a 77 ms step: numbers the primary never has."""
    engine = engines.make_engine(url)
    try:
        for i, sha in enumerate(REPLICA_SHAS):
            when = START + timedelta(days=i)
            step = Metric(kind=MetricKind.STEP, name="train_step", calls=3, total_ns=3 * 77e6)
            profile = Profile(
                label="p", format="synthetic", source="r.json", metrics=[step], steps=3
            )
            with engines.make_sessionmaker(engine)() as session:
                ingest_run(
                    session,
                    context=make_context(
                        project=PROJECT,
                        commit=sha,
                        commit_time=when.isoformat(),
                        environment=ENV,
                        ci_provider="test",
                        ci_run_id=sha[:12],
                        ci_run_attempt=1,
                    ),
                    benchmark="gpt",
                    repeats=[[profile]],
                    created_at=when,
                )
    finally:
        engine.dispose()


@pytest.fixture
def service(two_stores: tuple[str, str], tmp_path: Path) -> Iterator[tuple[ServerProcess, str]]:
    primary, replica = two_stores
    engine = engines.make_engine(primary)
    token = make_token(engine, PROJECT, "upload,read,admin")
    engine.dispose()
    assert main(["project", "update", PROJECT, "--public", "--database-url", primary]) == 0
    _replica_runs(replica)
    server = start_server(primary, log_dir=tmp_path, env={"PERFCI_READ_DATABASE_URL": replica})
    try:
        yield server, token
    finally:
        server.stop()


def test_history_reads_come_from_the_replica_and_writes_go_to_the_primary(
    service: tuple[ServerProcess, str], two_stores: tuple[str, str]
) -> None:
    server, token = service
    primary, replica = two_stores
    rng = np.random.default_rng(1)
    uploaded = []
    for i in range(4):
        body = run_body(
            "gpt", sha=f"{i:040x}", branch="main", when=START + timedelta(days=i), rng=rng
        )
        response = upload(server, PROJECT, token, body)
        assert response.status_code == 201, response.text
        uploaded.append(int(response.json()["run_id"]))

    # Uploads (and their comparisons) went to the primary only.
    primary_engine, replica_engine = engines.make_engine(primary), engines.make_engine(replica)
    try:
        assert counts(primary_engine)["run"] == 4 and counts(primary_engine)["comparison"] == 4
        assert counts(replica_engine)["run"] == 2 and counts(replica_engine)["comparison"] == 0
    finally:
        primary_engine.dispose()
        replica_engine.dispose()

    api = f"{server.url}/api/v1/projects/{PROJECT}"
    history = httpx.get(
        f"{api}/benchmarks/gpt/series",
        params={"kind": "step", "name": "train_step"},
        headers=bearer(token),
        timeout=scaled(30),
    ).json()
    assert [p["commit"] for p in history["points"]] == REPLICA_SHAS
    assert {v for p in history["points"] for v in p["values"]} == {77e6}

    runs = httpx.get(
        f"{api}/runs",
        params={"since": "2026-01-01T00:00:00Z"},
        headers=bearer(token),
        timeout=scaled(30),
    ).json()
    assert [r["commit"] for r in runs["runs"]] == REPLICA_SHAS

    weekly = httpx.get(
        f"{api}/reports/weekly",
        params={"week": "2026-W10"},
        headers=bearer(token),
        timeout=scaled(30),
    ).json()
    assert [b["runs_in_period"] for b in weekly["benchmarks"]] == [2]

    page = httpx.get(f"{server.url}/p/{PROJECT}/b/gpt", timeout=scaled(30)).text
    assert REPLICA_SHAS[0][:7] in page and f"{0:040x}"[:7] + "<" not in page

    # A run page and a comparison are what a pull request links to: the primary answers.
    comparison = httpx.get(
        f"{server.url}/api/v1/runs/{uploaded[-1]}/comparison",
        headers=bearer(token),
        timeout=scaled(30),
    )
    assert comparison.status_code == 200 and comparison.json()["run_id"] == uploaded[-1]


def test_without_a_replica_every_read_is_the_primarys(two_stores: tuple[str, str]) -> None:
    from perfci.core.settings import Settings
    from perfci.server.app import create_app

    primary, replica = two_stores
    app = create_app(Settings(database_url=primary))
    assert app.state.read_sessions is None  # routes read through the request's own session
    app = create_app(Settings(database_url=primary, read_database_url=replica))
    bind = app.state.read_sessions.kw["bind"]
    assert bind.url.database == make_url(replica).database != make_url(primary).database
    bind.dispose()


def test_the_replica_engine_refuses_writes(two_stores: tuple[str, str]) -> None:
    _, replica = two_stores
    _replica_runs(replica)
    engine, sessions = read_engine(replica)
    try:
        with sessions() as session:
            assert session.execute(text("SELECT count(*) FROM run")).scalar_one() == 2
        with sessions() as session, pytest.raises(DBAPIError, match=r"read-only|readonly"):
            session.execute(
                text(
                    "INSERT INTO project (name, public, created_at) "
                    "VALUES ('x', false, '2026-01-01')"
                )
            )
            session.commit()
    finally:
        engine.dispose()
