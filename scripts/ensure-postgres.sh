#!/usr/bin/env bash
# Make PostgreSQL's server programs (initdb, pg_ctl, postgres) available for the shared-backend
# tests; the tests start a private cluster of their own on 127.0.0.1 (tests/backend_servers.py).
#
#   bash scripts/ensure-postgres.sh              find or install (Debian's `postgresql`), summary
#   bash scripts/ensure-postgres.sh --print-dir  the same, quietly; print the bin directory
#
# Installs with apt-get when missing (as root, or through sudo). Nothing is started here and the
# distribution's own cluster is left alone.
set -euo pipefail
PRINT_DIR=0
[ "${1:-}" = "--print-dir" ] && PRINT_DIR=1
say() { echo "ensure-postgres: $*" >&2; }

find_bin() {
  local d
  for d in /usr/lib/postgresql/*/bin; do  # Debian/Ubuntu: one directory per major version
    [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && { echo "$d"; return 0; }
  done
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(command -v initdb)"; return 0
  fi
  return 1
}

bin="$(find_bin | sort -V | tail -n1 || true)"
if [ -z "$bin" ]; then
  command -v apt-get >/dev/null || { say "error: no PostgreSQL server and no apt-get — install PostgreSQL 13+ (initdb, pg_ctl on PATH)"; exit 1; }
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  say "installing Debian's postgresql package (one time)"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >&2
  $SUDO apt-get install -y -qq --no-install-recommends postgresql >&2
  # The package starts the distribution's cluster on 5432; the tests use their own.
  bin="$(find_bin | sort -V | tail -n1)"
fi
if [ "$PRINT_DIR" = 1 ]; then
  echo "$bin"
else
  say "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') server programs in $bin"
fi
