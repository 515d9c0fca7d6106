#!/usr/bin/env bash
# Make a real Pulumi CLI (at least the pinned version) and the two Python plugin shims available.
#
#   bash scripts/ensure-pulumi.sh               find or build, then print a one-line summary
#   bash scripts/ensure-pulumi.sh --print-dir   the same, quietly, then print the directory to
#                                               put first on PATH (the CLI and the shims are there)
#
# Order: `pulumi` on PATH if its version >= PULUMI_VERSION; else a previous build in the cache;
# else build the pinned version from the Go module proxy into the cache (a few minutes, once).
# Cache: $SPOTROUTE_TOOLS_DIR, default ~/.cache/spotroute/pulumi-v<version>.
set -euo pipefail

PULUMI_VERSION="${PULUMI_VERSION:-3.274.1}"
TOOLS_DIR="${SPOTROUTE_TOOLS_DIR:-$HOME/.cache/spotroute/pulumi-v$PULUMI_VERSION}"
BIN_DIR="$TOOLS_DIR/bin"
PRINT_DIR=0
[ "${1:-}" = "--print-dir" ] && PRINT_DIR=1

say() { if [ "$PRINT_DIR" = 0 ]; then echo "ensure-pulumi: $*"; else echo "ensure-pulumi: $*" >&2; fi; }

version_ge() {  # version_ge A B  ->  A >= B (dotted numeric, leading v ignored)
  [ "$(printf '%s\n%s\n' "${1#v}" "${2#v}" | sort -V | head -n1)" = "${2#v}" ]
}

# The shims Pulumi's release archive ships for Python plugins: the engine starts
# `pulumi-resource-pulumi-python` for dynamic providers and `pulumi-analyzer-policy-python`
# for policy packs. They run the matching module of the Python SDK with the interpreter that has
# the SDK installed: $SPOTROUTE_PYTHON (set by the router to its own interpreter), else the
# virtualenv the engine names, else the active virtualenv, else python3.
write_shims() {
  mkdir -p "$BIN_DIR"
  local module
  for pair in "pulumi-resource-pulumi-python:pulumi.dynamic" "pulumi-analyzer-policy-python:pulumi.policy"; do
    module="${pair#*:}"
    cat > "$BIN_DIR/${pair%%:*}.tmp" <<SHIM
#!/bin/sh
# Written by spotroute's scripts/ensure-pulumi.sh: runs python -m $module for the Pulumi engine.
if [ -n "\${SPOTROUTE_PYTHON:-}" ]; then
  py="\$SPOTROUTE_PYTHON"
elif [ -n "\${PULUMI_RUNTIME_VIRTUALENV:-}" ] && [ -x "\$PULUMI_RUNTIME_VIRTUALENV/bin/python" ]; then
  py="\$PULUMI_RUNTIME_VIRTUALENV/bin/python"
elif [ -n "\${VIRTUAL_ENV:-}" ] && [ -x "\$VIRTUAL_ENV/bin/python" ]; then
  py="\$VIRTUAL_ENV/bin/python"
else
  py=python3
fi
exec "\$py" -u -m $module "\$@"
SHIM
    chmod 0755 "$BIN_DIR/${pair%%:*}.tmp"
    mv "$BIN_DIR/${pair%%:*}.tmp" "$BIN_DIR/${pair%%:*}"
  done
}

build_pulumi() {
  command -v go >/dev/null || { echo "ensure-pulumi: error: no pulumi >= $PULUMI_VERSION on PATH and no Go toolchain to build it — install Go 1.24+ or put pulumi on PATH" >&2; exit 1; }
  local started work modcache pkg sdk
  started=$(date +%s)
  say "building pulumi v$PULUMI_VERSION from the Go module proxy (one time; a few minutes)"
  # pkg's go.mod replaces the sdk module with ../sdk, which `go install mod@version` refuses;
  # a workspace whose replace points at the module-cache copy of the same sdk version builds it.
  GOFLAGS=-buildvcs=false go mod download "github.com/pulumi/pulumi/pkg/v3@v$PULUMI_VERSION" "github.com/pulumi/pulumi/sdk/v3@v$PULUMI_VERSION"
  modcache="$(go env GOMODCACHE)"
  pkg="$modcache/github.com/pulumi/pulumi/pkg/v3@v$PULUMI_VERSION"
  sdk="$modcache/github.com/pulumi/pulumi/sdk/v3@v$PULUMI_VERSION"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  cat > "$work/go.work" <<EOF
go $(sed -n 's/^go //p' "$pkg/go.mod")

use $pkg

replace github.com/pulumi/pulumi/sdk/v3 => $sdk
EOF
  mkdir -p "$BIN_DIR"
  (cd "$pkg" && GOWORK="$work/go.work" GOFLAGS=-buildvcs=false go build -trimpath \
      -ldflags "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_VERSION" \
      -o "$BIN_DIR/pulumi.tmp" ./cmd/pulumi)
  mv "$BIN_DIR/pulumi.tmp" "$BIN_DIR/pulumi"
  say "built pulumi v$PULUMI_VERSION in $(( $(date +%s) - started )) s -> $BIN_DIR/pulumi"
}

found=""
if command -v pulumi >/dev/null 2>&1; then
  have="$(pulumi version 2>/dev/null || true)"
  if [ -n "$have" ] && version_ge "$have" "$PULUMI_VERSION"; then
    found="$(command -v pulumi)"
  fi
fi
if [ -z "$found" ] && [ -x "$BIN_DIR/pulumi" ] && version_ge "$("$BIN_DIR/pulumi" version)" "$PULUMI_VERSION"; then
  found="$BIN_DIR/pulumi"
fi
if [ -z "$found" ]; then
  build_pulumi
  found="$BIN_DIR/pulumi"
fi
write_shims

if [ "$PRINT_DIR" = 1 ]; then
  # The shims live in BIN_DIR; a pulumi found elsewhere on PATH keeps working behind it.
  echo "$BIN_DIR"
else
  say "pulumi $("$found" version) at $found; shims in $BIN_DIR"
  say "put it on PATH for your shell:  export PATH=\"$BIN_DIR:\$PATH\""
fi
