#!/usr/bin/env bash
# vs-bindfs.sh: small files on native tmpfs, on libfuse's bindfs, on the untraced go-fuse
# loopback (iotap's node code and options) and on iotap, with the same loop
# (`benchmount smallfiles`: create+write 4 KiB, stat, read, unlink), pinned alike, the four
# targets in turn, R rounds. bindfs is the reference libfuse passthrough: with
# `--cache none` it gets direct_io and 0 s timeouts, as iotap's fidelity mode; with
# `--cache kernel`, its defaults (page cache, 1 s timeouts).
# Prints files/s per phase and target per round, then medians and the ratio to native.
#
# Usage: bench/vs-bindfs.sh [-r ROUNDS] [-n FILES] [-c none|kernel] [-p same|cross]
#                           [-d WORKDIR]   (root; needs bindfs: apt-get install bindfs)
set -euo pipefail
R=3 N=3000 CACHE=none PLACE=same WORK=/var/tmp/iotap-vs-bindfs
while getopts "r:n:c:p:d:h" o; do
  case $o in
    r) R=$OPTARG ;; n) N=$OPTARG ;; c) CACHE=$OPTARG ;; p) PLACE=$OPTARG ;; d) WORK=$OPTARG ;;
    *) sed -n '2,11p' "$0"; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "vs-bindfs: needs root (tmpfs and FUSE mounts)" >&2; exit 2; }
command -v bindfs >/dev/null || { echo "vs-bindfs: needs bindfs (apt-get install bindfs)" >&2; exit 2; }
case $PLACE in same) SCPU=0 ;; cross) SCPU=1 ;; *) echo "vs-bindfs: -p same|cross" >&2; exit 2 ;; esac
case $CACHE in
  none) BINDFS_OPTS=(-o "entry_timeout=0,attr_timeout=0,negative_timeout=0,direct_io") ;;
  kernel) BINDFS_OPTS=() ;;
  *) echo "vs-bindfs: -c none|kernel" >&2; exit 2 ;;
esac
REPO=$(cd "$(dirname "$0")/.." && pwd)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  fusermount3 -u "$WORK/mb" 2>/dev/null || umount "$WORK/mb" 2>/dev/null || true
  wait 2>/dev/null || true
  umount "$WORK/backend" 2>/dev/null || true
}
trap cleanup EXIT
cleanup
rm -rf "$WORK"; mkdir -p "$WORK/backend" "$WORK/mu" "$WORK/mt" "$WORK/mb"
mount -t tmpfs -o size=1g tmpfs "$WORK/backend"
mkdir -p "$WORK/backend/n" "$WORK/backend/u" "$WORK/backend/t" "$WORK/backend/b"
B=$WORK/benchmount
(cd "$REPO" && go build -o "$B" ./bench/benchmount)
for m in u t; do
  extra=()
  [ "$m" = t ] && extra=(-trace "$WORK/t.iotap")
  cp "$B" "$WORK/bin-$m" # a binary file per server (see pinned.sh)
  taskset -c "$SCPU" "$WORK/bin-$m" mount "${extra[@]}" -cache "$CACHE" -target "$WORK/backend/$m" \
    -mount "$WORK/m$m" -ready "$WORK/r$m" 2>"$WORK/$m.log" &
  PIDS+=($!)
done
for m in u t; do
  for _ in $(seq 100); do [ -e "$WORK/r$m" ] && break; sleep 0.1; done
  [ -e "$WORK/r$m" ] || { echo "vs-bindfs: server $m did not mount:"; cat "$WORK/$m.log"; exit 1; }
done
taskset -c "$SCPU" bindfs "${BINDFS_OPTS[@]}" --multithreaded "$WORK/backend/b" "$WORK/mb"
RES=$WORK/results.txt; : >"$RES"
for r in $(seq "$R"); do
  for d in native bindfs untraced iotap; do
    case $d in
      native) dir=$WORK/backend/n/x$r ;; bindfs) dir=$WORK/mb/x$r ;;
      untraced) dir=$WORK/mu/x$r ;; iotap) dir=$WORK/mt/x$r ;;
    esac
    line=$(taskset -c 0 "$B" smallfiles -dir "$dir" -n "$N" | tr '\n' ' ')
    echo "round $r $d $line" | tee -a "$RES"
  done
done
echo "small files: $R rounds of $N files, --cache $CACHE, placement $PLACE; kernel $(uname -r), $(nproc) CPUs"
python3 - "$RES" <<'PY'
import collections, statistics, sys
rate = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    for i in range(3, len(f) - 1, 2):
        rate[(f[2], f[i])].append(float(f[i + 1]))
phases = ("create", "stat", "read", "unlink")
print(f"{'files/s, median':18}" + "".join(f"{p:>18}" for p in phases))
for d in ("native", "bindfs", "untraced", "iotap"):
    cells = []
    for p in phases:
        m = statistics.median(rate[(d, p)])
        cells.append(f"{m:9.0f} ({m / statistics.median(rate[('native', p)]):.3f})")
    print(f"{d:18}" + "".join(f"{c:>18}" for c in cells))
print("(ratio to native in parentheses)")
PY
