#!/usr/bin/env bash
# smallfile-cpu.sh: where the tracing layer's cost on small files goes. Four servers on one
# private tmpfs, each running the small-file loop (create+write 4 KiB, stat, read, unlink)
# in turn, in rotating order:
#   u  untraced go-fuse loopback (iotap's node code)
#   n  the tracer recording into a no-op recorder (the layer's bookkeeping alone)
#   t  the tracer recording into a trace file (bookkeeping + trace writer), as iotap records
#   c  t with benchmount -costbyop: it times its own work on every request, by operation
# Prints each server's CPU time per small file (getrusage through benchmount -cpufile),
# medians over the rounds, and the paired differences n-u, t-u, t-n, c-t; then, from c, the
# layer's own work per operation over all rounds.
#
# Usage: bench/smallfile-cpu.sh [-r ROUNDS] [-n FILES] [-d WORKDIR]   (root)
set -euo pipefail
R=8 N=10000 WORK=/var/tmp/iotap-sfcpu
while getopts "r:n:d:h" o; do
  case $o in r) R=$OPTARG ;; n) N=$OPTARG ;; d) WORK=$OPTARG ;; *) sed -n '2,12p' "$0"; exit 2 ;; esac
done
REPO=$(cd "$(dirname "$0")/.." && pwd)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  umount "$WORK/backend" 2>/dev/null || true
}
trap cleanup EXIT
rm -rf "$WORK"; mkdir -p "$WORK/backend"
mount -t tmpfs -o size=1g tmpfs "$WORK/backend"
B=$WORK/benchmount
(cd "$REPO" && go build -o "$B" ./bench/benchmount)
declare -A PID
for m in u n t c; do
  mkdir -p "$WORK/backend/o$m" "$WORK/m$m"
  extra=()
  case $m in n) extra=(-nop) ;; t) extra=(-trace "$WORK/t.iotap") ;; c) extra=(-trace "$WORK/c.iotap" -costbyop) ;; esac
  "$B" mount "${extra[@]}" -cpufile "$WORK/c$m" -target "$WORK/backend/o$m" -mount "$WORK/m$m" -ready "$WORK/r$m" 2>"$WORK/$m.log" &
  PID[$m]=$!; PIDS+=($!)
done
for m in u n t c; do
  for _ in $(seq 100); do [ -e "$WORK/r$m" ] && break; sleep 0.1; done
  [ -e "$WORK/r$m" ] || { echo "server $m did not mount:"; cat "$WORK/$m.log"; exit 1; }
done
cpu() { # server -> CPU ns so far
  rm -f "$WORK/c$1"; kill -USR1 "${PID[$1]}"
  for _ in $(seq 200); do [ -s "$WORK/c$1" ] && break; sleep 0.01; done
  awk '{printf "%.0f\n", $1+$2}' "$WORK/c$1"
}
for m in u n t c; do "$B" smallfiles -dir "$WORK/m$m/small" -n 1000 >/dev/null; rm -rf "$WORK/m$m/small"; done # warm-up
RES=$WORK/results.txt; : >"$RES"
for r in $(seq "$R"); do
  case $((r % 4)) in 0) order="u n t c" ;; 1) order="n t c u" ;; 2) order="t c u n" ;; *) order="c u n t" ;; esac
  for m in $order; do
    c0=$(cpu "$m"); "$B" smallfiles -dir "$WORK/m$m/small" -n "$N" >/dev/null; c1=$(cpu "$m")
    rm -rf "$WORK/m$m/small"
    echo "$r $m $(( (c1 - c0) / N ))" >>"$RES"
  done
done
echo "small files: $N per round, $R rounds; tmpfs; kernel $(uname -r), $(nproc) cpus, load $(cut -d' ' -f1 /proc/loadavg)"
python3 - "$RES" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    r, m, ns = line.split()
    d[int(r)][m] = int(ns) / 1000
med = lambda xs: statistics.median(list(xs))
for m, what in (("u", "untraced"), ("n", "tracer, no-op recorder"), ("t", "tracer, trace writer"), ("c", "t timing every request")):
    print(f"{what:24} {med(d[r][m] for r in d):8.1f} us of server CPU per small file")
for a, b in (("n", "u"), ("t", "u"), ("t", "n"), ("c", "t")):
    diffs = [d[r][a] - d[r][b] for r in d]
    print(f"paired {a}-{b}: median {med(diffs):+.1f} us [{min(diffs):+.1f} .. {max(diffs):+.1f}]")
PY
cleanup; trap - EXIT # the servers exit; c prints its cost per operation
echo "the traced layer's own work per operation (requests, mean ns per request, share of its own work, median):"
grep '^cost ' "$WORK/c.log" | sed 's/^cost /  /'
