#!/usr/bin/env bash
# compare-builds.sh: two builds of iotap's tracing layer against each other, on the
# small-file loop (create+write 4 KiB, stat, read, unlink), traced both. For each round it
# mounts the two builds' benchmount (-costbyop: the layer times its own work on every
# request) on a private tmpfs, in alternating order, runs the loop twice on each, and keeps
# the loop's rates and the layer's own work per operation. Prints the paired ratio B/A of
# each phase's rate (median over rounds, min and max) and, per operation, the mean and the
# median own work of every round (a build without the median prints mean/0).
#
# Usage: bench/compare-builds.sh [-r ROUNDS] [-n FILES] [-c none|kernel] [-d WORKDIR] REV_A REV_B
# REV_* is any git revision; "." is the working tree. Needs root (tmpfs, FUSE).
set -euo pipefail
R=4 N=5000 CACHE=none WORK=/var/tmp/iotap-builds
while getopts "r:n:c:d:h" o; do
  case $o in r) R=$OPTARG ;; n) N=$OPTARG ;; c) CACHE=$OPTARG ;; d) WORK=$OPTARG ;; *) sed -n '2,11p' "$0"; exit 2 ;; esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || { sed -n '2,11p' "$0"; exit 2; }
REPO=$(cd "$(dirname "$0")/.." && pwd)
for rev in "$1" "$2"; do
  [ "$rev" = . ] || git -C "$REPO" rev-parse --verify -q "$rev^{commit}" >/dev/null ||
    { echo "compare-builds: $rev is not a revision of $REPO" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "compare-builds: needs root (tmpfs and FUSE mounts)" >&2; exit 2; }
PID=''
cleanup() {
  if [ -n "$PID" ]; then kill -TERM "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  umount "$WORK/backend" 2>/dev/null || true
  for x in a b; do git -C "$REPO" worktree remove --force "$WORK/src-$x" 2>/dev/null || true; done
}
trap cleanup EXIT
cleanup
rm -rf "$WORK"; mkdir -p "$WORK/backend"
# benchpkg DIR: benchmount's package in the source tree DIR (older revisions keep it elsewhere).
benchpkg() { for p in bench/benchmount internal/cmd/benchmount internal/fusetest/benchmount; do if [ -d "$1/$p" ]; then echo "./$p"; return; fi; done; }
build() { # label rev
  if [ "$2" = . ]; then
    (cd "$REPO" && go build -o "$WORK/bm-$1" ./bench/benchmount)
  else
    git -C "$REPO" worktree add --detach "$WORK/src-$1" "$2" >/dev/null
    (cd "$WORK/src-$1" && go build -o "$WORK/bm-$1" "$(benchpkg "$WORK/src-$1")")
  fi
}
build a "$1"
build b "$2"
# The load runs from its own copy: a process started from a server's binary file shares its
# page-cache pages, and so warms that server's code in the CPU's caches (bench/pinned.sh).
cp "$WORK/bm-b" "$WORK/bm-load"
mount -t tmpfs -o size=2g tmpfs "$WORK/backend"
: >"$WORK/rates.txt"
for r in $(seq "$R"); do
  if [ $((r % 2)) = 1 ]; then order="a b"; else order="b a"; fi
  for x in $order; do
    mkdir -p "$WORK/backend/$x" "$WORK/m-$x"; rm -f "$WORK/ready-$x"
    "$WORK/bm-$x" mount -trace "$WORK/backend/t-$x.iotap" -costbyop -cache "$CACHE" \
      -target "$WORK/backend/$x" -mount "$WORK/m-$x" -ready "$WORK/ready-$x" 2>"$WORK/log-$x-$r" &
    PID=$!
    for _ in $(seq 100); do [ -e "$WORK/ready-$x" ] && break; sleep 0.1; done
    [ -e "$WORK/ready-$x" ] || { echo "build $x did not mount:"; cat "$WORK/log-$x-$r"; exit 1; }
    for _ in 1 2; do
      echo "$r $x $("$WORK/bm-load" smallfiles -dir "$WORK/m-$x/small" -n "$N" | tr '\n' ' ')" >>"$WORK/rates.txt"
      rm -rf "$WORK/m-$x/small"
    done
    kill -TERM "$PID"; wait "$PID" || true; PID=''
  done
done
echo "builds: A=$1 B=$2; $R rounds of 2 x $N small files each, --cache $CACHE; $(nproc) cpus"
python3 - "$WORK" "$R" <<'PY'
import collections, statistics, sys, re
work, rounds = sys.argv[1], int(sys.argv[2])
rate = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(f"{work}/rates.txt"):
    f = line.split()
    r, x, kv = f[0], f[1], dict(zip(f[2::2], map(float, f[3::2])))
    for op, v in kv.items():
        rate[(r, op)][x].append(v)
ops = ["create", "stat", "read", "unlink"]
print("phase rates, B/A paired by round (median [min .. max]):")
for op in ops:
    rs = sorted(statistics.mean(rate[(str(r), op)]["b"]) / statistics.mean(rate[(str(r), op)]["a"])
                for r in range(1, rounds + 1))
    print(f"  {op:8} {statistics.median(rs):.3f} [{rs[0]:.2f} .. {rs[-1]:.2f}]")
print("the layer's own work per operation, ns, mean/median of each round:")
cost = collections.defaultdict(lambda: collections.defaultdict(list))
for x in "ab":
    for r in range(1, rounds + 1):
        for line in open(f"{work}/log-{x}-{r}"):
            m = re.match(r"cost (\S+)\s+(\d+)\s+(\d+) ns\s+\S+%(?:\s+median\s+(\d+) ns)?", line)
            if m:
                cost[m.group(1)][x].append(f"{m.group(3)}/{m.group(4) or 0}")
for op in sorted(cost, key=lambda o: -len(cost[o]["a"] + cost[o]["b"])):
    if op in ("mkdir", "rmdir", "opendir", "releasedir", "readdirplus"):
        continue
    print(f"  {op:10} A: {' '.join(cost[op]['a']):40} B: {' '.join(cost[op]['b'])}")
PY
