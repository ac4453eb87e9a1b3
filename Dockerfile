# syntax=docker/dockerfile:1
# The perfci service: HTTP API + dashboard. Runs migrations, then `perfci serve` (see
# docker/entrypoint.sh). Build: docker build -t perfci .   Run: docker compose up

# The base image, pinned by digest so that a rebuild gets the same bytes (a tag moves).
# This digest of python:3.11-slim was taken from public Dockerfiles, not pulled here: check it
# and move it forward deliberately with
#   docker buildx imagetools inspect python:3.11-slim --format '{{json .Manifest.Digest}}'
# then build with --build-arg PYTHON_IMAGE=python:3.11-slim@sha256:<digest> or edit below.
ARG PYTHON_IMAGE=python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7
FROM ${PYTHON_IMAGE} AS base

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    MPLCONFIGDIR=/tmp/matplotlib

WORKDIR /app

# Dependencies first, from the service's lock only (perfci[server] and what it needs, pinned
# as in lock.txt; no test, lint or torch packages), every file checked against its SHA-256:
# this layer is cached until the lock changes, not on every source edit.
# `scripts/server_lock.py --hashes` writes it; a test checks it.
COPY requirements/server-hashes.txt requirements/server-hashes.txt
RUN pip install --require-hashes -r requirements/server-hashes.txt

# Then the source, installed without touching the dependencies resolved above.
COPY pyproject.toml README.md ./
COPY perfci perfci
COPY migrations migrations
RUN pip install --no-deps . && rm -rf /app/perfci /app/migrations

COPY docker/entrypoint.sh /usr/local/bin/perfci-entrypoint
RUN chmod 0755 /usr/local/bin/perfci-entrypoint \
    && useradd --system --uid 10001 --home-dir /data --create-home perfci

USER perfci
WORKDIR /data

ENV PERFCI_HOST=0.0.0.0 \
    PERFCI_PORT=8000 \
    PERFCI_WORKERS=2

EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('PERFCI_PORT', '8000'), timeout=4)" || exit 1

ENTRYPOINT ["/usr/local/bin/perfci-entrypoint"]
