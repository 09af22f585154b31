#!/usr/bin/env bash
# Starts a throwaway PostgreSQL server on 127.0.0.1 for the history tests and prints its URL
# and then its data directory (for `pg_ctl stop`), one per line.
# Installs Debian's postgresql package when the server binaries are missing. Exits non-zero
# (printing nothing on stdout) when no server can be started.
set -euo pipefail
port="${GAPSCOPE_PG_PORT:-55432}"
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get install -y -q postgresql >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q postgresql >/dev/null 2>&1; }) || true
  fi
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
fi
[ -n "$bin" ] && [ -x "$bin/initdb" ] || { echo "ci-postgres: no PostgreSQL server binaries" >&2; exit 1; }
dir=$(mktemp -d /tmp/gapscope-pg.XXXXXX)
run() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; fi
fail() { echo "ci-postgres: $1" >&2; [ -f "$dir/log" ] && tail -n 20 "$dir/log" >&2; exit 1; }
run "$bin/initdb" -D "$dir/data" -A trust -U gapscope >"$dir/initdb.log" 2>&1 \
  || { cat "$dir/initdb.log" >&2; fail "initdb failed"; }
run "$bin/pg_ctl" -D "$dir/data" -o "-p $port -k $dir -c listen_addresses=127.0.0.1" -l "$dir/log" -w start >/dev/null \
  || fail "the server did not start on port $port"
run "$bin/createdb" -h 127.0.0.1 -p "$port" -U gapscope gapscope_test >&2 \
  || fail "createdb failed"
echo "postgres://gapscope@127.0.0.1:$port/gapscope_test"
echo "$dir"
