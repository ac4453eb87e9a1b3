"""Mangled uploads against a real ``perfci serve``: every answer a 2xx or a 4xx, never a 5xx.

Usage::

    .venv/bin/python benchmarks/service_fuzz.py [--minutes 10] [--seed 1] [--out DIR]
        [--postgres URL]

One ``perfci serve`` (one worker, no upload rate limit) on a fresh PostgreSQL database (on
the server ``--postgres`` or ``PERFCI_TEST_POSTGRES_URL`` names; the script makes its own
database and drops it at the end) and an upload token. For ``--minutes``, one client uploads
runs of one to three repeats of a seed or corpus file of ``../shared``: half of them as it
is, half changed by ``parse_fuzz.py``'s mutations (numbers replaced by ``nan``, ``1e309`` or
huge integers, bytes flipped, lines repeated, removed or swapped, files cut), under file
names that are sometimes odd. The ``meta`` is a plain one half the time (so that runs are stored and
compared too), else one of odd benchmark names (empty, U+001F, 500 characters, unicode),
branches (NUL, ``../``, markup), commits, pull request numbers (negative, beyond 32 bits,
text) and environments, or no usable ``meta`` at all. ``tests/test_server_fuzz.py`` checks
the API's schema on every run; this explores the upload path with real profile bytes for as
long as it is given.

Prints each 5xx answer (or dropped connection) as it comes, keeps its request in ``--out``,
and at the end the count of uploads by status class. Exit status 1 when there was one.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import requests
from parse_fuzz import SHARED, mutated, real_files
from service_load import UNLIMITED, start_replica
from sqlalchemy import create_engine, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfci.store import engines, migrate
from perfci.usecases.admin.tokens import create_token

PROJECT = "fuzz/upload"
_ODD = ("main", "", "x" * 300, "a\x00b", "ü/ß", "../../etc", "feature/x", "\x1f", "<b>", " ")
_BENCHMARKS = ("b", "bench one", "x" * 500, "\x1f", "ü", "")
_BAD_META: tuple[Any, ...] = ([], {"benchmark": None}, "x", {"context": 5}, {"benchmark": 7})


def _meta(rng: random.Random) -> Any:
    """Half the time a plain one, so that runs are stored and compared too."""
    if rng.random() < 0.5:
        return {"benchmark": "b", "context": {"branch": rng.choice(["main", "pr-1"])}}
    if rng.random() < 0.1:
        return rng.choice(_BAD_META)
    context: dict[str, Any] = {
        "branch": rng.choice(_ODD),
        "commit": rng.choice(["a" * 40, "zz", "", "0" * 40, "\x00" * 40]),
    }
    if rng.random() < 0.3:
        context["pr_number"] = rng.choice([1, -5, 2**40, "x", None])
    if rng.random() < 0.2:
        context["environment"] = {rng.choice(_ODD): rng.choice(_ODD)}
    return {"benchmark": rng.choice(_BENCHMARKS), "context": context}


def _files(rng: random.Random, files: list[Path]) -> list[tuple[str, tuple[str, bytes, str]]]:
    """One to three repeats of one real file, under its name (or an odd one): half the
    uploads as they are, the others with each repeat mutated."""
    source = rng.choice(files)
    mutate = rng.random() < 0.5
    parts = []
    for _ in range(rng.randint(1, 3)):
        data = (mutated(source, rng) if mutate else None) or source.read_bytes()
        name = source.name if rng.random() < 0.9 else rng.choice(_ODD) or "x"
        parts.append(("files", (name, data, "application/octet-stream")))
    return parts


_DATABASE = f"perfci_fuzz_{os.getpid()}"


def _database(admin: Any) -> str:
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{_DATABASE}"'))
        connection.execute(text(f'CREATE DATABASE "{_DATABASE}"'))
    return str(admin.url.set(database=_DATABASE).render_as_string(hide_password=False))


def _token(url: str) -> str:
    migrate.upgrade(url)
    engine = engines.make_engine(url)
    try:
        with engines.make_sessionmaker(engine)() as session:
            token, _ = create_token(session, project=PROJECT, scopes="upload,read", name="fuzz")
            session.commit()
    finally:
        engine.dispose()
    return token


def _keep(out: Path, index: int, meta: Any, parts: list[Any], answer: str) -> Path:
    folder = out / f"finding_{index}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "request.json").write_text(json.dumps({"meta": meta, "answer": answer[:2000]}))
    for i, (_, (name, data, _)) in enumerate(parts):
        (folder / f"file_{i}.bin").write_bytes(data)
        (folder / f"file_{i}.name").write_text(repr(name))
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="where findings are kept")
    parser.add_argument("--postgres", default=os.environ.get("PERFCI_TEST_POSTGRES_URL"))
    args = parser.parse_args()
    if not args.postgres:
        print("set PERFCI_TEST_POSTGRES_URL or pass --postgres", file=sys.stderr)
        return 2
    if not SHARED.is_dir():
        print(f"no {SHARED}: the uploads are its real files, mutated", file=sys.stderr)
        return 2
    files = real_files(3_000_000)
    out = args.out or Path(tempfile.mkdtemp(prefix="perfci-service-fuzz-"))
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    admin = create_engine(args.postgres, isolation_level="AUTOCOMMIT")
    url = _database(admin)
    statuses: Counter[str] = Counter()
    findings = 0
    replica = None
    try:
        token = _token(url)
        # No rate limit (tests/test_server_hostile.py tests it): the uploads reach the parser.
        replica = start_replica(url, 1, out / "server.log", env=UNLIMITED)
        headers = {"Authorization": f"Bearer {token}"}
        deadline = time.monotonic() + args.minutes * 60
        while time.monotonic() < deadline:
            meta, parts = _meta(rng), _files(rng, files)
            try:
                answer = requests.post(
                    f"{replica.url}/api/v1/projects/{PROJECT}/runs",
                    data={"meta": json.dumps(meta)},
                    files=parts,
                    headers=headers,
                    timeout=120,
                )
                status, text_ = f"{answer.status_code // 100}xx", answer.text
            except requests.RequestException as exc:
                status, text_ = "no answer", f"{type(exc).__name__}: {exc}"
            statuses[status] += 1
            if status in ("5xx", "no answer"):
                findings += 1
                kept = _keep(out, findings, meta, parts, text_)
                print(f"{status}: {text_[:300]} (kept in {kept})", flush=True)
    finally:
        if replica is not None:
            replica.process.terminate()
            replica.process.wait(timeout=30)
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{_DATABASE}" WITH (FORCE)'))
        admin.dispose()
    counts = ", ".join(f"{status}: {n:,}" for status, n in sorted(statuses.items()))
    print(f"{sum(statuses.values()):,} uploads ({counts}); {findings} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
