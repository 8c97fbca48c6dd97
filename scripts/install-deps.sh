#!/usr/bin/env bash
# Installs the Debian packages iotap's demo and tests use, if any is missing. Needs root.
set -euo pipefail
pkgs=(fuse3 s3fs samtools sqlite3 fio git tar python3 gcc libc6-dev groff-base slurm-wlm munge moosefs-master moosefs-chunkserver moosefs-client prometheus)
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
