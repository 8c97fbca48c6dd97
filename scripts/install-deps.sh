#!/usr/bin/env bash
# Installs the Debian packages iotap's demo and tests use, if any is missing (needs root),
# and DuckDB for Node.js, which the export tests read iotap's files with.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pkgs=(fuse3 s3fs rclone samtools sqlite3 fio git tar python3 gcc libc6-dev groff-base slurm-wlm munge moosefs-master moosefs-chunkserver moosefs-client prometheus)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then echo "install-deps: need root to install: ${missing[*]}" >&2; exit 1; fi
  echo "install-deps: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  if printf '%s\n' "${missing[@]}" | grep -qx prometheus; then
    # The tests start their own Prometheus, on a port and data directory of their own: the
    # package's service (enabled, and started where apt may start services) must not run.
    if [ -d /run/systemd/system ]; then
      systemctl disable --now prometheus.service >/dev/null 2>&1 || true
    else
      service prometheus stop >/dev/null 2>&1 || true
      update-rc.d prometheus disable >/dev/null 2>&1 || true
    fi
  fi
fi

# DuckDB (npm @duckdb/node-api, the version package-lock.json pins) in the directory of the
# tests that use it; Node.js and npm are the machine's.
duck="$root/internal/export/duckdbtest/node"
if ! cmp -s "$duck/package-lock.json" "$duck/node_modules/.iotap-installed" 2>/dev/null; then
  if command -v npm >/dev/null; then
    echo "install-deps: installing DuckDB for Node.js in $duck"
    npm ci --prefix "$duck" --no-audit --no-fund --loglevel=error >/dev/null
    cp "$duck/package-lock.json" "$duck/node_modules/.iotap-installed"
  else
    echo "install-deps: npm not found: the DuckDB tests will skip (or fail under IOTAP_REQUIRE_DUCKDB=1)" >&2
  fi
fi
