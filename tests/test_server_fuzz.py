"""Schemathesis against the served /openapi.json: no 5xx, and every answer matches its schema.

The server is a real process on SQLite and on PostgreSQL (where NUL characters and integer
overflow would surface as database errors), holding one stored run; requests carry an admin
token, so generated cases reach the handlers rather than stopping at auth.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from db_fixtures import DIALECTS, create_postgres, create_sqlite, drop_postgres
from deadlines import scaled
from hypothesis import HealthCheck, given, settings
from schemathesis import checks
from server_process import ServerProcess, start_server

from perfci.store import engines
from perfci.usecases.admin.tokens import create_token

pytestmark = pytest.mark.slow
PROJECT = "fuzz/project"
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]


@pytest.fixture(scope="module", params=DIALECTS)
def fuzz_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerProcess, str]]:
    folder = tmp_path_factory.mktemp("fuzz")
    postgres = request.param != "sqlite"
    url = (
        create_postgres(request.getfixturevalue("postgres_admin"))
        if postgres
        else (create_sqlite(folder))
    )
    engine = engines.make_engine(url)
    with engines.make_sessionmaker(engine)() as session:
        token, _ = create_token(session, project=PROJECT, scopes="admin")
    engine.dispose()
    server = start_server(url, log_dir=folder, args=("--max-body-bytes", "1000000", "--api-docs"))
    body = {
        "benchmark": "b",
        "context": {"branch": "main"},
        "repeats": [
            {
                "profiles": [
                    {"steps": 1, "metrics": [{"kind": "step", "name": "s", "total_ns": 1e6}]}
                ]
            }
        ],
    }
    stored = httpx.post(
        f"{server.url}/api/v1/projects/{PROJECT}/runs",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=scaled(30),
    )
    assert stored.status_code == 201, stored.text
    yield server, token
    server.stop()
    output = server.output()
    if postgres:
        drop_postgres(request.getfixturevalue("postgres_admin"), url)
    assert "Traceback" not in output, output


def test_no_server_errors_and_responses_match_the_schema(
    fuzz_server: tuple[ServerProcess, str],
) -> None:
    server, token = fuzz_server
    api = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    operations = [result.ok() for result in api.get_all_operations()]
    assert len(operations) >= 9
    for operation in operations:
        _fuzz(operation, server.url, token)


def _fuzz(operation: schemathesis.APIOperation, base_url: str, token: str) -> None:
    @given(case=operation.as_strategy())
    @settings(
        max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    def run(case: schemathesis.Case) -> None:
        if (case.path_parameters or {}).get("project") == "0":
            case.path_parameters["project"] = PROJECT  # reach the real project now and then
        case.call_and_validate(
            base_url=base_url,
            checks=CHECKS,
            timeout=scaled(30),
            headers={"Authorization": f"Bearer {token}"},
        )

    run()
