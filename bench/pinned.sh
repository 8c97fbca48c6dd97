#!/usr/bin/env bash
# pinned.sh: the tracing layer's cost on small files, measured finely enough to judge a few
# per cent on a noisy 2-vCPU VM. Three things make it precise:
#   - placement: the FUSE servers and the load are pinned (taskset), so that one mount does
#     not run with its application on the same CPU while the other runs across CPUs (that
#     alone moved whole runs by 25 %);
#   - interleaving: `benchmount interleave` runs each phase in blocks of 50 files on every
#     mount in turn, so the VM's drift hits both alike;
#   - instances: each of K rounds mounts fresh servers, so the luck of one process's
#     placement and memory layout is averaged out; the figures are medians over instances
#     with a 95 % bootstrap interval.
# Servers, all on one private tmpfs: u untraced go-fuse loopback (iotap's node code and
# options), t the tracer writing a trace file as `iotap record` does, and with -C a second
# untraced server w (the control: its ratio to u is the method's own error).
# Placements (-p): same (servers and load on CPU 0: every cost of the layer is on the
# request's path), cross (servers on CPU 1, load on CPU 0: as on a larger machine, where
# the application and the daemon run on different cores), or both.
# With -A REV a third server a is the tracer built from git revision REV: the two builds are
# compared within the same instances (t/a), the only way to settle a change of 1 %: runs a
# few minutes apart differ by that much.
# Prints per placement and phase the rate of t (and w, a) relative to u, and the servers' CPU
# time per file (getrusage, all servers measured over the same interval).
#
# Usage: bench/pinned.sh [-k INSTANCES] [-n FILES] [-b BLOCK] [-p same|cross|both]
#                        [-c none|kernel] [-C] [-A REV] [-d WORKDIR]   (root, 2 CPUs or more)
set -euo pipefail
K=20 N=2000 BLOCK=50 PLACE=both CACHE=none CONTROL=0 REV='' WORK=/var/tmp/iotap-pinned
while getopts "k:n:b:p:c:CA:d:h" o; do
  case $o in
    k) K=$OPTARG ;; n) N=$OPTARG ;; b) BLOCK=$OPTARG ;; p) PLACE=$OPTARG ;; c) CACHE=$OPTARG ;;
    C) CONTROL=1 ;; A) REV=$OPTARG ;; d) WORK=$OPTARG ;; *) sed -n '2,28p' "$0"; exit 2 ;;
  esac
done
case $PLACE in same | cross) PLACES=$PLACE ;; both) PLACES="same cross" ;; *) echo "pinned: -p same|cross|both" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "pinned: needs root (tmpfs and FUSE mounts)" >&2; exit 2; }
[ "$(nproc)" -ge 2 ] || { echo "pinned: needs 2 CPUs" >&2; exit 2; }
REPO=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "$REV" ]; then
  git -C "$REPO" rev-parse --verify -q "$REV^{commit}" >/dev/null ||
    { echo "pinned: $REV is not a revision of $REPO" >&2; exit 2; }
fi
SERVERS="u t"
[ "$CONTROL" = 1 ] && SERVERS="$SERVERS w"
[ -n "$REV" ] && SERVERS="$SERVERS a"
PIDS=()
declare -A PID
stop() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  PIDS=()
}
cleanup() {
  stop
  umount "$WORK/backend" 2>/dev/null || true
  git -C "$REPO" worktree remove --force "$WORK/src-a" 2>/dev/null || true
}
trap cleanup EXIT
cleanup
rm -rf "$WORK"; mkdir -p "$WORK/backend"
mount -t tmpfs -o size=1g tmpfs "$WORK/backend"
B=$WORK/benchmount
(cd "$REPO" && go build -o "$B" ./bench/benchmount)
if [ -n "$REV" ]; then
  git -C "$REPO" worktree add --detach "$WORK/src-a" "$REV" >/dev/null
  # Older revisions keep benchmount elsewhere.
  for bm in ./bench/benchmount ./internal/cmd/benchmount ./internal/fusetest/benchmount; do [ -d "$WORK/src-a/$bm" ] && break; done
  (cd "$WORK/src-a" && go build -o "$WORK/benchmount-a" "$bm")
fi
cpu() { # server -> its CPU time so far, ns
  rm -f "$WORK/c$1"; kill -USR1 "${PID[$1]}"
  for _ in $(seq 200); do [ -s "$WORK/c$1" ] && break; sleep 0.01; done
  awk '{printf "%.0f\n", $1+$2}' "$WORK/c$1"
}
RES=$WORK/results.txt; : >"$RES"
for place in $PLACES; do
  if [ "$place" = same ]; then SCPU=0; else SCPU=1; fi
  for k in $(seq "$K"); do
    dirs=()
    for m in $SERVERS; do
      mkdir -p "$WORK/backend/o$m" "$WORK/m$m"; rm -f "$WORK/r$m"
      extra=() bin=$B
      case $m in t) extra=(-trace "$WORK/t.iotap") ;; a) extra=(-trace "$WORK/a.iotap") bin=$WORK/benchmount-a ;; esac
      # Each server runs its own copy of its binary: servers started from one file share
      # its page-cache pages, so their code is warm in the CPU's caches for each other. With
      # -A, that favoured this tree's tracer (same file as the untraced server) over REV's
      # by about 1 % of server CPU in an A/A run of identical code.
      cp "$bin" "$WORK/bin-$m"
      taskset -c "$SCPU" "$WORK/bin-$m" mount "${extra[@]}" -cache "$CACHE" -cpufile "$WORK/c$m" \
        -target "$WORK/backend/o$m" -mount "$WORK/m$m" -ready "$WORK/r$m" 2>"$WORK/$m.log" &
      PID[$m]=$!; PIDS+=($!)
      dirs+=("$WORK/m$m")
    done
    for m in $SERVERS; do
      for _ in $(seq 100); do [ -e "$WORK/r$m" ] && break; sleep 0.1; done
      [ -e "$WORK/r$m" ] || { echo "pinned: server $m did not mount:"; cat "$WORK/$m.log"; exit 1; }
    done
    list=$(IFS=,; echo "${dirs[*]}")
    taskset -c 0 "$B" interleave -dirs "$list" -n 500 -block "$BLOCK" >/dev/null # warm-up
    declare -A C0=()
    for m in $SERVERS; do C0[$m]=$(cpu "$m"); done
    taskset -c 0 "$B" interleave -dirs "$list" -n "$N" -block "$BLOCK" | sed "s/^/$place $k /" >>"$RES"
    i=0
    for m in $SERVERS; do
      echo "$place $k cpu $i $(( ($(cpu "$m") - ${C0[$m]}) / N ))" >>"$RES"; i=$((i + 1))
    done
    stop
  done
done
echo "small files: $K instances of $N files per server, blocks of $BLOCK, --cache $CACHE; kernel $(uname -r), $(nproc) CPUs"
python3 - "$RES" "$SERVERS" <<'PY'
import collections, random, statistics, sys
names = sys.argv[2].split()
label = {"t": "iotap/untraced", "w": "control/untraced", "a": "REV's iotap/untraced"}
ratio = collections.defaultdict(list)  # (place, phase, dir) -> per-instance ratios
rate = collections.defaultdict(list)   # (place, phase, dir) -> rates
cpu = collections.defaultdict(dict)    # (place, k) -> dir -> ns per file
for line in open(sys.argv[1]):
    f = line.split()
    place, k = f[0], f[1]
    if f[2] == "phase":
        d = int(f[5])
        rate[(place, f[3], d)].append(float(f[7]))
        if d > 0:
            ratio[(place, f[3], d)].append(float(f[9]))
    elif f[2] == "cpu":
        cpu[(place, k)][int(f[3])] = int(f[4])
def ci(xs):
    rng = random.Random(1)
    ms = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(2000))
    return ms[50], ms[1949]
for place in dict.fromkeys(p for p, _, _ in ratio):
    print(f"placement {place}: median over instances [95 % CI]")
    for d in range(1, len(names)):
        for phase in ("create", "stat", "read", "unlink"):
            xs = ratio[(place, phase, d)]
            lo, hi = ci(xs)
            r0 = statistics.median(rate[(place, phase, 0)])
            print(f"  {phase:6} {label[names[d]]:17} {statistics.median(xs):.3f} [{lo:.3f} .. {hi:.3f}]   untraced {r0:8.0f} files/s")
        ks = [k for (p, k) in cpu if p == place]
        rs = [cpu[(place, k)][d] / cpu[(place, k)][0] for k in ks]
        diff = statistics.median(cpu[(place, k)][d] - cpu[(place, k)][0] for k in ks) / 1000
        base = statistics.median(cpu[(place, k)][0] for k in ks) / 1000
        lo, hi = ci(rs)
        print(f"  server CPU per file, {label[names[d]]}: {statistics.median(rs):.3f} [{lo:.3f} .. {hi:.3f}], {diff:+.1f} us of {base:.0f} us")
    if "a" in names:  # this tree's tracer against REV's, instance by instance
        t, a = names.index("t"), names.index("a")
        print(f"  this tree / REV, both traced:")
        for phase in ("create", "stat", "read", "unlink"):
            xs = [x / y for x, y in zip(ratio[(place, phase, t)], ratio[(place, phase, a)])]
            lo, hi = ci(xs)
            print(f"    {phase:6} rate {statistics.median(xs):.4f} [{lo:.4f} .. {hi:.4f}]")
        ks = [k for (p, k) in cpu if p == place]
        xs = [cpu[(place, k)][t] / cpu[(place, k)][a] for k in ks]
        lo, hi = ci(xs)
        print(f"    server CPU per file {statistics.median(xs):.4f} [{lo:.4f} .. {hi:.4f}]")
PY
