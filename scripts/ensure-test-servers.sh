#!/usr/bin/env bash
# Install the storage servers the checkpoint tests run on 127.0.0.1 (tests/checkpoint/servers.py):
#   S3          moto's server mode  — the `moto[server]` pip package (pyproject's `checkpoint` extra)
#   GCS         fake-gcs-server     — a Go module, built with `go install` (needs Go >= 1.24)
#   Azure Blob  Azurite             — the npm package, installed with npm (needs Node >= 18)
#
#   bash scripts/ensure-test-servers.sh               install what is missing, print a summary
#   bash scripts/ensure-test-servers.sh --print-dir   the same, quietly; print the install dir
#
# Install dir: $SPOTROUTE_TEST_SERVERS_DIR, default ~/.cache/spotroute/test-servers
#   bin/fake-gcs-server   node_modules/.bin/azurite-blob
set -euo pipefail

FAKE_GCS_VERSION="${FAKE_GCS_VERSION:-v1.56.1}"
AZURITE_VERSION="${AZURITE_VERSION:-3.37.0}"
DIR="${SPOTROUTE_TEST_SERVERS_DIR:-$HOME/.cache/spotroute/test-servers}"
PRINT_DIR=0
[ "${1:-}" = "--print-dir" ] && PRINT_DIR=1
say() { echo "ensure-test-servers: $*" >&2; }
mkdir -p "$DIR/bin"

# fake-gcs-server: `go install module@version` into our own bin dir.
gcs_ok() { [ -x "$DIR/bin/fake-gcs-server" ] && [ "$(cat "$DIR/bin/.fake-gcs-version" 2>/dev/null)" = "$FAKE_GCS_VERSION" ]; }
if ! gcs_ok; then
  if command -v go >/dev/null; then
    say "building fake-gcs-server $FAKE_GCS_VERSION (go install; a few minutes, once)"
    # -p 1: the machine's two cores are shared; a parallel link of this size starves the rest.
    if GOBIN="$DIR/bin" GOFLAGS="${GOFLAGS:--p=1}" go install "github.com/fsouza/fake-gcs-server@$FAKE_GCS_VERSION" >&2; then
      echo "$FAKE_GCS_VERSION" > "$DIR/bin/.fake-gcs-version"
    else
      say "error: go install github.com/fsouza/fake-gcs-server@$FAKE_GCS_VERSION failed (GCS tests will fail)"
    fi
  else
    say "error: no Go toolchain: fake-gcs-server cannot be built (GCS tests will fail)"
  fi
fi

# Azurite: a local npm install (no global prefix, nothing outside $DIR).
azurite_ok() { [ -x "$DIR/node_modules/.bin/azurite-blob" ] && grep -q "\"version\": \"$AZURITE_VERSION\"" "$DIR/node_modules/azurite/package.json" 2>/dev/null; }
if ! azurite_ok; then
  if command -v npm >/dev/null; then
    say "installing azurite $AZURITE_VERSION (npm)"
    (cd "$DIR" && npm install --no-audit --no-fund --loglevel=error --prefix "$DIR" "azurite@$AZURITE_VERSION" >&2) \
      || say "error: npm install azurite@$AZURITE_VERSION failed (Azure tests will fail)"
  else
    say "error: no npm: Azurite cannot be installed (Azure tests will fail)"
  fi
fi

# AWS CLI: the AWS image's start-up script runs it, and the rendezvous tests run those lines
# against moto. One already on PATH is used; else a private virtualenv here (its botocore pin
# stays out of the project's), linked as bin/aws — `make test` puts bin/ on PATH.
aws_ok() { command -v aws >/dev/null || [ -x "$DIR/bin/aws" ]; }
if ! aws_ok; then
  say "installing the AWS CLI (pip, private venv)"
  { python3 -m venv "$DIR/awscli" && "$DIR/awscli/bin/pip" install --quiet awscli >&2 \
      && ln -sf "$DIR/awscli/bin/aws" "$DIR/bin/aws"; } \
    || say "error: pip install awscli failed (the AWS rendezvous tests will fail)"
fi

if [ "$PRINT_DIR" = 1 ]; then
  echo "$DIR"
else
  gcs_ok && say "fake-gcs-server $FAKE_GCS_VERSION: $DIR/bin/fake-gcs-server" || say "fake-gcs-server: MISSING"
  azurite_ok && say "azurite $AZURITE_VERSION: $DIR/node_modules/.bin/azurite-blob" || say "azurite: MISSING"
  aws_ok && say "aws CLI: $(command -v aws || echo "$DIR/bin/aws")" || say "aws CLI: MISSING"
fi
