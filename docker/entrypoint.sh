#!/bin/sh
# perfci service container entrypoint: migrate the database, then serve.
# PERFCI_DATABASE_URL names the database (required in production: PostgreSQL).
# PERFCI_HOST / PERFCI_PORT / PERFCI_WORKERS tune the server; extra arguments go to `perfci serve`.
set -eu

: "${PERFCI_HOST:=0.0.0.0}"
: "${PERFCI_PORT:=8000}"
: "${PERFCI_WORKERS:=2}"

# An SQLite file (a single-container trial) needs its folder; perfci creates only its default.
case "${PERFCI_DATABASE_URL:-}" in
    sqlite:///*) mkdir -p "$(dirname "${PERFCI_DATABASE_URL#sqlite:///}")" ;;
esac

# Migrations are idempotent; with several replicas starting at once Alembic's version table
# serialises them. Retry while the database is still starting (compose, Kubernetes).
attempt=1
until perfci db upgrade; do
    if [ "$attempt" -ge "${PERFCI_MIGRATE_ATTEMPTS:-30}" ]; then
        echo "perfci: database migration failed after $attempt attempts" >&2
        exit 1
    fi
    attempt=$((attempt + 1))
    sleep 2
done

exec perfci serve --host "$PERFCI_HOST" --port "$PERFCI_PORT" --workers "$PERFCI_WORKERS" "$@"
