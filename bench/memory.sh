#!/usr/bin/env bash
# memory.sh: the recorder's memory over a long job that names new files without end.
# `iotap record` traces, in place on a private tmpfs, a job of R rounds; each round creates,
# writes, stats, reads and unlinks N files (`benchmount smallfiles`) in a new directory and
# removes the directory. Every 10 s the script samples the serving process's RSS and its
# lazily freed pages (LazyFree: freed, not yet reclaimed by the kernel); at the end it
# prints the samples and iotap's summary (peak RSS, path-index compactions).
# The recorder's memory should level off once the path index reaches its limit (1 Mi slots,
# about 786,000 paths), whatever R is.
#
# Usage: bench/memory.sh [-r ROUNDS] [-n FILES] [-d WORKDIR]   (root; R=400, N=5000: 2 M
# files, about 15 minutes on 2 vCPUs)
set -euo pipefail
R=400 N=5000 WORK=/var/tmp/iotap-memory
while getopts "r:n:d:h" o; do
  case $o in
    r) R=$OPTARG ;; n) N=$OPTARG ;; d) WORK=$OPTARG ;; *) sed -n '2,13p' "$0"; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "memory: needs root (tmpfs and an in-place mount)" >&2; exit 2; }
REPO=$(cd "$(dirname "$0")/.." && pwd)
cleanup() {
  [ -n "${J:-}" ] && kill -TERM "$J" 2>/dev/null && wait "$J" 2>/dev/null
  umount "$WORK/d" 2>/dev/null || true
}
trap cleanup EXIT
umount "$WORK/d" 2>/dev/null || true
rm -rf "$WORK"; mkdir -p "$WORK/d"
mount -t tmpfs -o size=2g tmpfs "$WORK/d"
(cd "$REPO" && go build -o "$WORK/iotap" ./cmd/iotap && go build -o "$WORK/benchmount" ./bench/benchmount)
JOB="for r in \$(seq $R); do $WORK/benchmount smallfiles -dir $WORK/d/s\$r -n $N >/dev/null; rmdir $WORK/d/s\$r; done"
"$WORK/iotap" record --target "$WORK/d" -o "$WORK/churn.iotap" -- sh -c "$JOB" 2>"$WORK/summary.txt" &
J=$!
SRV=''
for _ in $(seq 100); do # the serving process is the job shell's parent
  sh=$(pgrep -f "^sh -c for r in .* $WORK/benchmount" | head -1 || true)
  [ -n "$sh" ] && SRV=$(ps -o ppid= -p "$sh" | tr -d ' ') && break
  sleep 0.1
done
[ -n "$SRV" ] || { echo "memory: the job did not start:"; cat "$WORK/summary.txt"; exit 1; }
echo "rounds of $N files: $R; RSS and LazyFree of the serving process (pid $SRV), MiB"
while kill -0 "$J" 2>/dev/null; do
  round=$(find "$WORK/d" -maxdepth 1 -name 's*' -printf '%f\n' 2>/dev/null | head -1)
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$SRV/status" 2>/dev/null || true)
  lazy=$(awk '/^LazyFree/ {print $2}' "/proc/$SRV/smaps_rollup" 2>/dev/null || true)
  [ -n "$rss" ] && awk -v r="${round#s}" -v n="$N" -v rss="$rss" -v lazy="${lazy:-0}" \
    'BEGIN { printf "  round %-5s files %9d  RSS %6.1f  LazyFree %6.1f\n", r, r * n, rss / 1024, lazy / 1024 }' 
  sleep 10
done
wait "$J" || true
J=''
tail -n 4 "$WORK/summary.txt"
