#!/bin/sh
# First start: create the cluster, the user and database named by POSTGRES_USER/POSTGRES_DB (password
# POSTGRES_PASSWORD) with the vector extension; every start: run the server on PGPORT, reachable by password.
set -eu
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    [ -n "${POSTGRES_PASSWORD:-}" ] || { echo "Set POSTGRES_PASSWORD: the database is reached over the network by password." >&2; exit 1; }
    pwfile=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
    initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
        --encoding=UTF8 --no-locale >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    pg_ctl -D "$PGDATA" -w -o "-c listen_addresses='' -k /tmp" start >/dev/null
    [ "$db" = postgres ] || createdb -h /tmp -U "$user" "$db"
    # Calypso's first migration creates it too; here it also serves a least-privileged user later.
    psql -h /tmp -U "$user" -d "$db" -qc 'CREATE EXTENSION IF NOT EXISTS vector'
    pg_ctl -D "$PGDATA" -w -m fast stop >/dev/null
    echo "initialised $PGDATA: database $db, user $user, extension vector"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -k /tmp "$@"
