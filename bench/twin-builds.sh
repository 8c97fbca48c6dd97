#!/usr/bin/env bash
# twin-builds.sh: two builds of iotap's tracing layer, both recording a trace, driven AT THE
# SAME TIME by twin small-file loops (create+write 4 KiB, stat, read, unlink), each on its
# own directory of one private tmpfs, so that both see the same machine noise (on a busy
# machine, sequential A/B rounds as in compare-builds.sh scatter by 2x). Prints, per phase,
# the median over rounds of the rate ratio B/A, with its min and max. A B/A control run of
# one revision against itself shows the noise floor.
#
# Usage: bench/twin-builds.sh [-r ROUNDS] [-n FILES] [-c none|kernel] [-d WORKDIR] REV_A REV_B
# REV_* is any git revision; "." is the working tree. Needs root (tmpfs, FUSE).
set -euo pipefail
R=8 N=5000 CACHE=none WORK=/var/tmp/iotap-twins
while getopts "r:n:c:d:h" o; do
  case $o in r) R=$OPTARG ;; n) N=$OPTARG ;; c) CACHE=$OPTARG ;; d) WORK=$OPTARG ;; *) sed -n '2,10p' "$0"; exit 2 ;; esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || { sed -n '2,10p' "$0"; exit 2; }
REPO=$(cd "$(dirname "$0")/.." && pwd)
for rev in "$1" "$2"; do
  [ "$rev" = . ] || git -C "$REPO" rev-parse --verify -q "$rev^{commit}" >/dev/null ||
    { echo "twin-builds: $rev is not a revision of $REPO" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "twin-builds: needs root (tmpfs and FUSE mounts)" >&2; exit 2; }
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  umount "$WORK/backend" 2>/dev/null || true
  for x in a b; do git -C "$REPO" worktree remove --force "$WORK/src-$x" 2>/dev/null || true; done
}
trap cleanup EXIT
rm -rf "$WORK"; mkdir -p "$WORK/backend"
benchpkg() { for p in bench/benchmount internal/cmd/benchmount internal/fusetest/benchmount; do if [ -d "$1/$p" ]; then echo "./$p"; return; fi; done; }
build() { # label rev
  local src=$REPO
  if [ "$2" != . ]; then
    git -C "$REPO" worktree add --detach "$WORK/src-$1" "$2" >/dev/null
    src=$WORK/src-$1
  fi
  (cd "$src" && go build -o "$WORK/bm-$1" "$(benchpkg "$src")")
}
build a "$1"
build b "$2"
# The loads run from a copy of their own: a process started from a server's binary file
# shares its page-cache pages, and so warms that server's code (bench/pinned.sh).
cp "$WORK/bm-b" "$WORK/bm-load"
mount -t tmpfs -o size=2g tmpfs "$WORK/backend"
for x in a b; do
  mkdir -p "$WORK/backend/$x" "$WORK/m-$x"
  "$WORK/bm-$x" mount -trace "$WORK/backend/t-$x.iotap" -cache "$CACHE" \
    -target "$WORK/backend/$x" -mount "$WORK/m-$x" -ready "$WORK/ready-$x" 2>"$WORK/log-$x" &
  PIDS+=($!)
done
for x in a b; do
  for _ in $(seq 100); do [ -e "$WORK/ready-$x" ] && break; sleep 0.1; done
  [ -e "$WORK/ready-$x" ] || { echo "build $x did not mount:"; cat "$WORK/log-$x"; exit 1; }
done
: >"$WORK/rates.txt"
for r in $(seq "$R"); do
  "$WORK/bm-load" smallfiles -dir "$WORK/m-a/small" -n "$N" >"$WORK/a.small" & pa=$!
  "$WORK/bm-load" smallfiles -dir "$WORK/m-b/small" -n "$N" >"$WORK/b.small" & pb=$!
  wait $pa $pb
  paste "$WORK/a.small" "$WORK/b.small" | awk '{print $1, $2, $4}' >>"$WORK/rates.txt"
  rm -rf "$WORK/m-a/small" "$WORK/m-b/small"
done
echo "twin builds: A=$1 B=$2; $R rounds of $N small files on each at once, --cache $CACHE; $(nproc) cpus; load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$WORK/rates.txt" <<'PY'
import collections, statistics, sys
r = collections.defaultdict(list)
for line in open(sys.argv[1]):
    op, a, b = line.split()
    if float(a) > 0:
        r[op].append(float(b) / float(a))
print(f"{'phase':8} {'B/A median':>10} {'min':>6} {'max':>6}  rounds")
for op, v in r.items():
    print(f"{op:8} {statistics.median(v):10.3f} {min(v):6.2f} {max(v):6.2f}  {len(v)}")
PY
