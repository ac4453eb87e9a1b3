# syntax=docker/dockerfile:1
# The perfci service: HTTP API + dashboard. Runs migrations, then `perfci serve` (see
# docker/entrypoint.sh). Build: docker build -t perfci .   Run: docker compose up
FROM python:3.11-slim AS base

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    MPLCONFIGDIR=/tmp/matplotlib

WORKDIR /app

# Dependencies first, from the service's lock only (perfci[server] and what it needs, pinned
# as in lock.txt; no test, lint or torch packages): this layer is cached until the lock
# changes, not on every source edit. scripts/server_lock.py writes it; a test checks it.
COPY requirements/server.txt requirements/server.txt
RUN pip install -r requirements/server.txt

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
