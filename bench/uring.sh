#!/usr/bin/env bash
# uring.sh: what FUSE over io_uring saves per request on this machine, against the classic
# read/write transport on /dev/fuse, measured with the prototype server of
# bench/fuseuring (a root directory and one 4 KiB file, 0 s entry and attribute
# timeouts, the file opened with direct_io).
#
# For each round, in rotating order: native (a tmpfs file), dev (one thread reading
# /dev/fuse; dev:N for N threads) and uring (one io_uring queue per CPU, commit-and-fetch).
# Each phase is a child process timing N stat(2) of the file and N 4 KiB pread(2) of it.
# Prints per target and operation the medians over rounds of the median and p99 latency and
# of ops/s, the FUSE requests per operation and the share served through io_uring.
#
# Switches /sys/module/fuse/parameters/enable_uring to Y for the run and restores its value
# on exit.
#
# Targets (-t): native, dev, dev:N, uring, uring:nopin (queue threads not pinned to their
# CPU), uring:defer (rings with IORING_SETUP_DEFER_TASKRUN). -c pins the callers to a CPU;
# -j runs J callers at once.
#
# Usage: bench/uring.sh [-r ROUNDS] [-n OPS] [-t TARGETS] [-c DRIVER_CPU] [-j JOBS] [-d WORKDIR]
# Defaults: -r 7 -n 20000 -t native,dev,uring -j 1 -d /var/tmp/iotap-uring (root; Linux ≥ 6.14)
set -euo pipefail
ROUNDS=7 N=20000 TARGETS=native,dev,uring CPU=-1 JOBS=1 WORK=/var/tmp/iotap-uring
while getopts "r:n:t:c:j:d:h" o; do
  case $o in
    r) ROUNDS=$OPTARG ;; n) N=$OPTARG ;; t) TARGETS=$OPTARG ;; c) CPU=$OPTARG ;; j) JOBS=$OPTARG ;;
    d) WORK=$OPTARG ;;
    *) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "uring.sh: needs root (mounts)" >&2; exit 2; }
PARAM=/sys/module/fuse/parameters/enable_uring
[ -e "$PARAM" ] || { echo "uring.sh: $PARAM missing: this kernel has no FUSE over io_uring" >&2; exit 2; }
REPO=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$WORK"
(cd "$REPO" && go build -o "$WORK/fuseuring" ./bench/fuseuring)
OLD=$(cat "$PARAM")
restore() { echo "$OLD" >"$PARAM"; }
trap restore EXIT
trap 'exit 130' INT TERM
echo Y >"$PARAM"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), $(nproc) CPUs: bench/uring.sh -r $ROUNDS -n $N -t $TARGETS -c $CPU -j $JOBS"
# A private mount namespace: no other process's new namespace copies the mounts (a copy would
# keep a connection alive after its unmount here).
unshare -m --propagation private "$WORK/fuseuring" bench -work "$WORK" -targets "$TARGETS" -rounds "$ROUNDS" -n "$N" -driver-cpu "$CPU" -jobs "$JOBS"
