#!/usr/bin/env bash
# replaycost.sh: the replayer's own cost per call, against the floor. For the calls
# metadata-heavy jobs make (openat O_CREAT + close, fstatat, chmod, lchown, utimensat,
# unlink, mkdir, rename, a directory listing, 4 KiB pread and pwrite, pwrite + fdatasync),
# the same system calls are issued by a minimal loop with no bookkeeping (the floor) and by
# iotap's replayer, from a recorded trace of them (with the kernel's legs, no think time),
# afap and in think mode, on tmpfs and on ext4 (a loop-mounted image). See
# replay/callcost_test.go.
#
# Two ways to measure:
#   -m time    (default) wall-clock and CPU time per call, medians of -r rounds
#              (go test -bench CallCost): evidence only on a quiet machine.
#   -m count   user-space instructions per call (valgrind --tool=callgrind, all threads:
#              the replayer's own work, afap onto a backend that does nothing), system
#              calls per call (perf stat -e raw_syscalls:sys_enter) and heap allocations
#              per call, each run less a run that only makes the starting state (or reads
#              the trace): machine load does not change them.
# Both print, per file system and call: the floor, each replay, and the replay's excess
# over the floor per call (over: added to the job's runtime; in: added to the job I/O
# time it reports).
#
# Usage: bench/replaycost.sh [-m time|count] [-n ITEMS] [-r ROUNDS] [-s SCENARIOS] [-d WORKDIR]   (root, for the ext4 image)
set -euo pipefail
MODE=time N=4000 R=5 WORK=/var/tmp/iotap-replaycost SCEN=
while getopts "m:n:r:s:d:h" o; do
  case $o in m) MODE=$OPTARG ;; n) N=$OPTARG ;; r) R=$OPTARG ;; s) SCEN=$OPTARG ;; d) WORK=$OPTARG ;; *) sed -n '2,21p' "$0"; exit 2 ;; esac
done
case $MODE in time | count) ;; *) echo "replaycost: -m time or -m count" >&2; exit 2 ;; esac
REPO=$(cd "$(dirname "$0")/.." && pwd)
EXT4=$WORK/ext4
cleanup() {
  if grep -q " $EXT4 " /proc/mounts 2>/dev/null; then umount "$EXT4" || true; fi
  if [ -n "${LOOP:-}" ]; then losetup -d "$LOOP" || true; fi
  rm -rf "$WORK/tmpfs" "$WORK/ext4.img" /dev/shm/iotap-replaycost
}
trap cleanup EXIT
cleanup
mkdir -p "$WORK/ext4" /dev/shm/iotap-replaycost
rm -rf /dev/shm/iotap-replaycost/*
ln -sfn /dev/shm/iotap-replaycost "$WORK/tmpfs"
if [ "$(id -u)" = 0 ]; then
  truncate -s 2G "$WORK/ext4.img"
  LOOP=$(losetup --find --show "$WORK/ext4.img")
  mkfs.ext4 -q "$LOOP"
  mount "$LOOP" "$EXT4"
  DIRS="tmpfs=/dev/shm/iotap-replaycost,ext4=$EXT4"
else
  echo "replaycost: not root: no ext4 image, tmpfs only" >&2
  DIRS="tmpfs=/dev/shm/iotap-replaycost"
fi
TEST=$WORK/replay.test
(cd "$REPO" && go test -c -o "$TEST" ./replay)
SCENARIOS=${SCEN:-create-close,stat,chmod,chown,utimes,unlink,mkdir,rename,readdir,read-4k,write-4k,write-fsync}
CALLS="create-close=2 stat=1 chmod=1 chown=1 utimes=1 unlink=1 mkdir=1 rename=1 readdir=4 read-4k=1 write-4k=1 write-fsync=2"
calls_of() { for kv in $CALLS; do if [ "${kv%%=*}" = "$1" ]; then echo "${kv#*=}"; fi; done; }
echo "replaycost: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $N items per run, $(date -u +%F)"

if [ "$MODE" = time ]; then
  re=$(echo "$SCENARIOS" | tr , '|')
  IOTAP_CALLCOST_DIRS=$DIRS IOTAP_CALLCOST_ITEMS=$N "$TEST" -test.run '^$' -test.bench "^BenchmarkCallCost/.*/($re)/" \
    -test.benchtime 1x -test.count "$R" | tee "$WORK/bench.txt"
  # Medians over the rounds, then the table.
  awk '
    /^BenchmarkCallCost\// {
      split($1, p, "/"); key = p[2] "/" p[3] "/" p[4]; sub(/-[0-9]+$/, "", key)
      for (i = 3; i < NF; i += 2) v[key, $(i+1), ++n[key, $(i+1)]] = $i
      keys[key] = 1
    }
    function med(k, m,   c, a, i, j, t) {
      c = n[k, m]; if (c == 0) return 0
      for (i = 1; i <= c; i++) a[i] = v[k, m, i]
      for (i = 2; i <= c; i++) for (j = i; j > 1 && a[j] < a[j-1]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
      return (c % 2) ? a[(c+1)/2] : (a[c/2] + a[c/2+1]) / 2
    }
    END {
      for (k in keys) {
        split(k, p, "/"); if (p[3] != "floor") continue
        base = p[1] "/" p[2]
        f = med(base "/floor", "wall-ns/call"); a = med(base "/replay-afap", "wall-ns/call"); t = med(base "/replay-think", "wall-ns/call")
        fi_ = med(base "/floor", "in-ns/call"); ti = med(base "/replay-think", "in-ns/call")
        printf "%-6s %-13s %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f %8.0f %8.2f\n", p[1], p[2], f, a, t, t - f, fi_, ti, ti - fi_, med(base "/replay-think", "allocs/call")
      }
    }' "$WORK/bench.txt" >"$WORK/table.txt"
  printf "\n%-6s %-13s %9s %9s %9s %9s %9s %9s %8s %8s\n" fs call floor afap think over in-floor in-think in-over allocs
  printf "%-6s %-13s %9s %9s %9s %9s %9s %9s %8s %8s\n" "" "" ns/call ns/call ns/call think ns/call ns/call ns/call /call
  sort -k1,1r -k2,2 "$WORK/table.txt"
  exit 0
fi

# -m count: one run per (fs, scenario, mode) under callgrind and under perf. valgrind 3.19
# does not know openat2, which the replayer's directory backend needs: the instructions are
# the replayer's own work in an afap replay onto a backend that does nothing (null-afap),
# against the floor's, with the garbage collector off and one P (GOGC=off GOMAXPROCS=1:
# the counts then repeat within 1 %; what the collector costs follows the allocations);
# the system calls and allocations are those of the real replay.
command -v valgrind >/dev/null || { echo "replaycost: valgrind is not installed" >&2; exit 2; }
command -v perf >/dev/null || { echo "replaycost: perf is not installed" >&2; exit 2; }
ir() { # DIR SCEN MODE: user-space instructions of the whole run (RDTSCP and asynchronous
  # preemption signals are off: valgrind 3.19 handles neither)
  GOGC=off GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off IOTAP_CLOCK=vdso IOTAP_CALLCOST_ONCE="$1:$2:$3" IOTAP_CALLCOST_ITEMS=$N \
    valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.$3.out" \
    "$TEST" -test.run '^TestCallCostOnce$' -test.count 1 >"$WORK/cg.log" 2>&1 || { cat "$WORK/cg.log" >&2; exit 1; }
  rm -rf "$1"/iotap-callcost-*
  awk '/^summary:/ { print $2 }' "$WORK/cg.$3.out"
}
sys() { # DIR SCEN MODE: system calls and heap allocations of the whole run
  IOTAP_CALLCOST_ONCE="$1:$2:$3" IOTAP_CALLCOST_ITEMS=$N perf stat -x, -e raw_syscalls:sys_enter -o "$WORK/perf.out" \
    "$TEST" -test.run '^TestCallCostOnce$' -test.count 1 -test.v >"$WORK/perf.log" 2>&1 || { cat "$WORK/perf.log" >&2; exit 1; }
  rm -rf "$1"/iotap-callcost-*
  echo "$(awk -F, '/sys_enter/ { print $1 }' "$WORK/perf.out") $(awk '/^callcost calls/ { print $5 }' "$WORK/perf.log")"
}
per() { awk -v a="$1" -v b="$2" -v c="$3" 'BEGIN { printf "%.2f", (a - b) / c }'; }
printf "\n%-6s %-13s %9s %9s %9s | %9s %9s %9s | %9s %9s\n" fs call "Ir floor" "Ir afap" "Ir over" \
  "sys floor" "sys afap" "sys think" "allocs" "allocs"
printf "%-6s %-13s %9s %9s %9s | %9s %9s %9s | %9s %9s\n" "" "" "/call" "/call" "/call" "/call" "/call" "/call" "afap" "think"
IFS=, read -ra dirs <<<"$DIRS"
IFS=, read -ra scens <<<"$SCENARIOS"
for d in "${dirs[@]}"; do
  fs=${d%%=*} dir=${d#*=}
  for s in "${scens[@]}"; do
    c=$(( N * $(calls_of "$s") ))
    if [ "$fs" = "${dirs[0]%%=*}" ]; then # instructions do not depend on the file system
      i0=$(ir "$dir" "$s" setup) n0=$(ir "$dir" "$s" null-setup)
      if=$(( ($(ir "$dir" "$s" floor) - i0) / c ))
      ia=$(( ($(ir "$dir" "$s" null-afap) - n0) / c ))
      io=$(( ia - if ))
    else
      if=- ia=- io=-
    fi
    read -r s0 _ < <(sys "$dir" "$s" setup)
    read -r sf _ < <(sys "$dir" "$s" floor)
    read -r sa ma < <(sys "$dir" "$s" replay-afap)
    read -r st mt < <(sys "$dir" "$s" replay-think)
    printf "%-6s %-13s %9s %9s %9s | %9s %9s %9s | %9s %9s\n" "$fs" "$s" "$if" "$ia" "$io" \
      "$(per "$sf" "$s0" "$c")" "$(per "$sa" "$s0" "$c")" "$(per "$st" "$s0" "$c")" "$(per "$ma" 0 "$c")" "$(per "$mt" 0 "$c")"
  done
done
