#!/usr/bin/env bash
# overhead.sh: side-by-side overhead of the iotap tracing layer, measured with fio.
#
# Three targets, all on the same backend filesystem:
#   native    a directory of the backend itself
#   untraced  go-fuse loopback with iotap's node code and exactly the same mount options
#   traced    the same, recording every request into a trace file (WORKDIR/overhead.trace)
# Rows (-o takes a comma-separated subset; all by default):
#   seqwrite  1 MiB sequential write              seqfsync  the same, fsync at the end
#   seqcold   1 MiB sequential read, caches dropped before each run (root only; not on tmpfs)
#   seqwarm   1 MiB sequential read, warm
#   randread  4 KiB random read for -t seconds (warm, psync, 1 job): IOPS, p50, p99, p99.9, p99.99
#   small     N small files: create+write 4 KiB+close, stat, open+read+close, unlink
#   randqd    4 KiB random O_DIRECT read for -t seconds at iodepth 16 and at iodepth 1, with io_uring
#             and with libaio (1 job): IOPS (rr4k_uring_qd16_IOPS, ...), and iodepth 16 over iodepth 1
#             of the same target in the same round (rr4k_uring_qd16/qd1: the gain the job gets from
#             its queue depth)
#   dirops    one directory of N files: stat every file from 1 thread and from 8 at once, list the
#             directory 200 times from 1 thread and from 8 (benchmount dirops): ops/s, 8 over 1
# A round runs each row on the three targets back to back, then the next row. The order of the
# targets changes every round; untraced and traced are always adjacent, either one first.
# Backends (-b): tmpfs (default: a private tmpfs on WORKDIR/backend), ext4 (a journaled ext4
# image WORKDIR/ext4.img, loop-mounted on WORKDIR/backend), or an existing directory DIR (in a
# fresh subdirectory, removed at the end). tmpfs and ext4 need root.
# Prints per row the median over rounds for each target, the ratios of medians (traced/untraced,
# untraced/native, traced/native), and the paired ratio: traced/untraced within each round,
# its median over rounds with a 95 % bootstrap confidence interval, and its min and max. Then
# the servers' CPU time per request (getrusage, read through benchmount -cpufile), untraced,
# traced and the difference: the tracer's own cost.
#
# Usage: bench/overhead.sh [-b tmpfs|ext4|DIR] [-r ROUNDS] [-s SIZE_MiB] [-t RANDREAD_SECONDS]
#                          [-n SMALL_FILES] [-o ROW,...] [-c none|kernel] [-d WORKDIR]
# Defaults: -b tmpfs -r 3 -s 512 -t 5 -n 1000 -c none -d /var/tmp/iotap-bench
# Many rounds of a few rows are cheap: bench/overhead.sh -r 15 -o randread,small -t 2
# PROFILE=1 writes CPU profiles of both servers to WORKDIR/{untraced,traced}.pprof.
# Needs: go, fio, jq, python3, FUSE (root for DirectMount, or fusermount3).
set -euo pipefail

usage() { sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 2; }
BACKEND=tmpfs ROUNDS=3 SIZE=512 RT=5 NSMALL=1000 CACHE=none WORK=/var/tmp/iotap-bench
ROWS=seqwrite,seqfsync,seqcold,seqwarm,randread,small,randqd,dirops
while getopts "b:r:s:t:n:o:c:d:h" o; do
  case $o in
    b) BACKEND=$OPTARG ;; r) ROUNDS=$OPTARG ;; s) SIZE=$OPTARG ;; t) RT=$OPTARG ;;
    n) NSMALL=$OPTARG ;; o) ROWS=$OPTARG ;; c) CACHE=$OPTARG ;; d) WORK=$OPTARG ;; *) usage ;;
  esac
done
[ $OPTIND -gt $# ] || usage
IFS=, read -ra ROWS <<<"$ROWS"
for row in "${ROWS[@]}"; do
  case $row in seqwrite|seqfsync|seqcold|seqwarm|randread|small|randqd|dirops) ;; *) echo "unknown row $row" >&2; usage ;; esac
done
has() { local x; for x in "${ROWS[@]}"; do [ "$x" = "$1" ] && return 0; done; return 1; }

REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(realpath -m "$WORK")
# Leftovers of an interrupted run: unmount whatever is mounted below WORK (deepest first, so
# that a FUSE mount whose server died goes too), then remove WORK without leaving its filesystem.
awk -v p="$WORK/" 'index($2, p) == 1 {print $2}' /proc/self/mounts | sort -r |
  while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
rm -rf --one-file-system "$WORK"
mkdir -p "$WORK"/{u_mnt,t_mnt}
BIN=$WORK/benchmount
(cd "$REPO" && go build -o "$BIN" ./bench/benchmount)

PIDS=() BACKMNT='' BASE=''
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
  if [ -n "$BACKMNT" ]; then umount "$BACKMNT" 2>/dev/null || umount -l "$BACKMNT"; BACKMNT=''; fi
  rm -f "$WORK/ext4.img"
  case $BACKEND in tmpfs|ext4) ;; *) [ -n "$BASE" ] && rm -rf --one-file-system "$BASE" ;; esac
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Backend. Room for the read file of each target, one write file and the small files.
ROOM=$((4 * SIZE + 256 + NSMALL / 64))
case $BACKEND in
  tmpfs)
    BASE=$WORK/backend; mkdir -p "$BASE"
    mount -t tmpfs -o "size=${ROOM}m,mode=0755" iotap-bench "$BASE"; BACKMNT=$BASE ;;
  ext4)
    # Sparse image; inode tables and journal initialized now, so that no ext4lazyinit thread
    # writes them in the background during the measurements.
    BASE=$WORK/backend; mkdir -p "$BASE"
    truncate -s "$((ROOM + 256))M" "$WORK/ext4.img"
    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$WORK/ext4.img"
    mount -o loop "$WORK/ext4.img" "$BASE"; BACKMNT=$BASE ;;
  *)
    [ -d "$BACKEND" ] || { echo "backend $BACKEND: not tmpfs, ext4 or a directory" >&2; exit 2; }
    BASE=$(mktemp -d "$(realpath "$BACKEND")/iotap-bench.XXXXXX") ;;
esac
mkdir -p "$BASE"/{native,u_orig,t_orig}
FSTYPE=$(findmnt -n -o FSTYPE -T "$BASE" 2>/dev/null || stat -f -c %T "$BASE")

# Cold reads: tmpfs has no cold state, and dropping the caches needs root.
COLD=1; { [ "$FSTYPE" = tmpfs ] || [ "$(id -u)" != 0 ]; } && COLD=''

start() { # name orig mnt [trace]
  local extra=(-cpufile "$WORK/$1.cpu")
  [ -n "${4:-}" ] && extra+=(-trace "$4")
  [ -n "${PROFILE:-}" ] && extra+=(-cpuprofile "$WORK/$1.pprof")
  "$BIN" mount -cache "$CACHE" -target "$2" -mount "$3" -ready "$WORK/$1.ready" "${extra[@]}" 2>"$WORK/$1.log" &
  PIDS+=($!)
  for _ in $(seq 100); do [ -e "$WORK/$1.ready" ] && return 0; sleep 0.1; done
  echo "mount $1 failed:"; cat "$WORK/$1.log"; exit 1
}
start untraced "$BASE/u_orig" "$WORK/u_mnt"
start traced "$BASE/t_orig" "$WORK/t_mnt" "$WORK/overhead.trace"
declare -A SRV=([untraced]=${PIDS[0]} [traced]=${PIDS[1]})

# CPU time in ns used so far by the server behind target $1 (all its threads, also exited ones):
# benchmount answers SIGUSR1 by renaming a fresh "utime_ns stime_ns" over its cpu file. On a
# noisy machine, CPU per request separates the tracer's cost from scheduling noise.
# The file's other fields are the layer's own measurement of its cost (traced server only):
# requests served, ns they spent in the layer, and ns of that which was the layer's own work.
# cpu prints "cpu_ns requests in_layer_ns self_ns".
cpu() {
  [ "$1" = native ] && { echo 0 0 0 0; return; }
  local f=$WORK/$1.cpu
  rm -f "$f"; kill -USR1 "${SRV[$1]}"
  for _ in $(seq 2000); do [ -e "$f" ] && break; sleep 0.005; done
  [ -e "$f" ] || { echo "no answer from the $1 server to SIGUSR1" >&2; exit 1; }
  awk '{printf "%.0f %.0f %.0f %.0f\n", $1 + $2, $3, $4, $5}' "$f"  # printf: mawk prints big sums with 6 digits
}
emit() { echo "$R $1 $2 $3" >>"$RES"; }  # row target value (round R)
cpurow() { # row target "cpu() before" requests
  [ "$2" = native ] && return
  local c1; c1=$(cpu "$2")
  emit "$1" "$2" "$(awk -v a="$3" -v b="$c1" -v n="$4" 'BEGIN {split(a, x, " "); split(b, y, " "); printf "%.3f", (y[1] - x[1]) / 1000 / (n > 0 ? n : 1)}')"
  [ "$2" = traced ] || return 0
  local sfx=${1#cpu_us_per_}
  read -r _ r0 i0 s0 <<<"$3"; read -r _ r1 i1 s1 <<<"$c1"
  [ $((r1 - r0)) -gt 0 ] || return 0
  emit "self_ns_per_req_$sfx" traced "$(awk -v s=$((s1 - s0)) -v r=$((r1 - r0)) 'BEGIN {printf "%.1f", s / r}')"
  emit "self_pct_of_layer_$sfx" traced "$(awk -v s=$((s1 - s0)) -v i=$((i1 - i0)) 'BEGIN {printf "%.3f", (i > 0 ? 100 * s / i : 0)}')"
}

declare -A DIR=([native]=$BASE/native [untraced]=$WORK/u_mnt [traced]=$WORK/t_mnt)
# Round r uses ORDERS[(r-1)%4]: over any two consecutive rounds each of untraced and traced
# goes first once, and native moves between first and last.
ORDERS=("native untraced traced" "traced untraced native" "untraced traced native" "native traced untraced")
RES=$WORK/results.txt; : >"$RES"
# Noise indicators for the header: load average at the start, steal time during the run.
LOAD0=$(cut -d' ' -f1 /proc/loadavg)
STAT0=$(grep -m1 '^cpu ' /proc/stat)

# Flush the backend's dirty data, without syncing the rest of the machine.
syncb() { sync -f "$BASE"; }
drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
# invalidate=0: fio would otherwise drop the native file's cache before each job but not the
# backend's cache behind a FUSE mount, comparing a cold native run with warm FUSE runs.
fiojson() { fio --output-format=json --ioengine=psync --fallocate=none --numjobs=1 --invalidate=0 "$@"; }

run() { # row target
  local d=${DIR[$2]} t=$2 j c0
  case $1 in
    seqwrite)
      rm -f "$d/seqw"; syncb
      c0=$(cpu "$t")
      j=$(fiojson --name=sw --directory="$d" --filename=seqw --rw=write --bs=1M --size="${SIZE}M")
      cpurow cpu_us_per_write1M "$t" "$c0" "$(jq '.jobs[0].write.total_ios' <<<"$j")"
      emit seqwrite_1M_MiBps "$t" "$(jq '.jobs[0].write.bw_bytes/1048576' <<<"$j")"
      rm -f "$d/seqw" ;;
    seqfsync)
      rm -f "$d/seqw"; syncb
      j=$(fiojson --name=sw --directory="$d" --filename=seqw --rw=write --bs=1M --size="${SIZE}M" --end_fsync=1)
      emit seqwrite_1M_fsync_MiBps "$t" "$(jq '.jobs[0].write.bw_bytes/1048576' <<<"$j")"
      rm -f "$d/seqw" ;;
    seqcold)
      [ -n "$COLD" ] || { emit seqread_1M_cold_MiBps "$t" skipped; return; }
      drop
      j=$(fiojson --name=sr --directory="$d" --filename=seqr --rw=read --bs=1M --size="${SIZE}M")
      emit seqread_1M_cold_MiBps "$t" "$(jq '.jobs[0].read.bw_bytes/1048576' <<<"$j")" ;;
    seqwarm)
      # The cold row's drops evicted the files read before the last one: read them once.
      if [ -n "$COLD" ] && has seqcold; then cat "$d/seqr" >/dev/null; fi
      c0=$(cpu "$t")
      j=$(fiojson --name=sr --directory="$d" --filename=seqr --rw=read --bs=1M --size="${SIZE}M")
      cpurow cpu_us_per_read1M "$t" "$c0" "$(jq '.jobs[0].read.total_ios' <<<"$j")"
      emit seqread_1M_warm_MiBps "$t" "$(jq '.jobs[0].read.bw_bytes/1048576' <<<"$j")" ;;
    randread)
      c0=$(cpu "$t")
      j=$(fiojson --name=rr --directory="$d" --filename=seqr --rw=randread --bs=4k --size="${SIZE}M" \
          --time_based --runtime="$RT" --percentile_list=50:99:99.9:99.99)
      cpurow cpu_us_per_read4k "$t" "$c0" "$(jq '.jobs[0].read.total_ios' <<<"$j")"
      emit randread_4k_IOPS "$t" "$(jq '.jobs[0].read.iops' <<<"$j")"
      emit randread_4k_p50_us "$t" "$(jq '.jobs[0].read.clat_ns.percentile["50.000000"]/1000' <<<"$j")"
      emit randread_4k_p99_us "$t" "$(jq '.jobs[0].read.clat_ns.percentile["99.000000"]/1000' <<<"$j")"
      # The tails: with one Go processor in the server (2 CPUs), a request that comes while
      # the trace encoder works waits for it; these rows show what that costs.
      emit randread_4k_p99.9_us "$t" "$(jq '.jobs[0].read.clat_ns.percentile["99.900000"]/1000' <<<"$j")"
      emit randread_4k_p99.99_us "$t" "$(jq '.jobs[0].read.clat_ns.percentile["99.990000"]/1000' <<<"$j")" ;;
    randqd)
      # Asynchronous direct reads keep iodepth requests in flight only if the layer lets them:
      # iodepth 16 over iodepth 1 of the same target and round is the gain the job gets.
      local eng qd iops1
      for eng in io_uring libaio; do
        for qd in 1 16; do
          j=$(fio --output-format=json --fallocate=none --numjobs=1 --invalidate=0 --name=rq --directory="$d" \
              --filename=seqr --rw=randread --bs=4k --size="${SIZE}M" --direct=1 --ioengine="$eng" --iodepth="$qd" \
              --time_based --runtime="$RT")
          emit "rr4k_${eng#io_}_qd${qd}_IOPS" "$t" "$(jq '.jobs[0].read.iops' <<<"$j")"
          [ "$qd" = 1 ] && iops1=$(jq '.jobs[0].read.iops' <<<"$j")
        done
        emit "rr4k_${eng#io_}_qd16/qd1" "$t" "$(jq --argjson a "$iops1" '.jobs[0].read.iops / ($a + 1e-9)' <<<"$j")"
      done ;;
    dirops)
      rm -rf "$d/dirops"; syncb
      local out ph; out=$("$BIN" dirops -dir "$d/dirops" -n "$NSMALL" -threads 8)
      while read -r ph v; do emit "dirops_${ph}_opsps" "$t" "$v"; done <<<"$out"
      for ph in stat list; do
        emit "dirops_${ph}_8/1" "$t" "$(awk -v p="$ph" '$1 == p "_1" {a = $2} $1 == p "_8" {b = $2} END {printf "%.3f", b / (a > 0 ? a : 1)}' <<<"$out")"
      done ;;
    small)
      rm -rf "$d/small"; syncb
      c0=$(cpu "$t")
      local out; out=$("$BIN" smallfiles -dir "$d/small" -n "$NSMALL")
      cpurow cpu_us_per_smallfile "$t" "$c0" "$NSMALL"
      while read -r ph v; do emit "small_${ph}_opsps" "$t" "$v"; done <<<"$out"
      rm -rf "$d/small" ;;
  esac
}

# The read file, written through each target; an untimed small-file pass warms every server
# (heap, buffer pools) and the backend's inode and dentry caches.
for t in native untraced traced; do
  if has seqcold || has seqwarm || has randread || has randqd; then
    fio --name=prep --directory="${DIR[$t]}" --filename=seqr --rw=write --bs=1M --size="${SIZE}M" \
        --ioengine=psync --fallocate=none --output=/dev/null
  fi
  if has small; then "$BIN" smallfiles -dir "${DIR[$t]}/small" -n "$NSMALL" >/dev/null; rm -rf "${DIR[$t]}/small"; fi
done

for R in $(seq "$ROUNDS"); do
  read -ra order <<<"${ORDERS[(R - 1) % 4]}"
  echo "round $R/$ROUNDS: ${order[*]}" >&2
  for row in "${ROWS[@]}"; do
    for t in "${order[@]}"; do run "$row" "$t"; done
  done
done

STEAL=$(printf '%s\n%s\n' "$STAT0" "$(grep -m1 '^cpu ' /proc/stat)" |
  awk '{t = 0; for (i = 2; i <= 9; i++) t += $i; if (NR == 1) {t0 = t; s0 = $9} else printf "%.1f", 100 * ($9 - s0) / (t - t0 > 0 ? t - t0 : 1)}')
cleanup; trap - EXIT
echo "backend=$BACKEND fstype=$FSTYPE cache=$CACHE size=${SIZE}MiB rounds=$ROUNDS randread=${RT}s small=$NSMALL"
echo "kernel=$(uname -r) cpus=$(nproc) load1_at_start=$LOAD0 steal=${STEAL}%"
python3 - "$RES" <<'PY'
import collections, random, statistics, sys

vals = collections.defaultdict(dict)  # (row, target) -> {round: value}
rows, skipped = [], set()
for line in open(sys.argv[1]):
    rnd, row, tgt, v = line.split()
    if row not in rows:
        rows.append(row)
    if v == "skipped":
        skipped.add(row)
    else:
        vals[(row, tgt)][int(rnd)] = float(v)

def med(row, tgt):
    v = list(vals[(row, tgt)].values())
    return statistics.median(v) if v else float("nan")

def speed(row, a, b):
    """Speed ratio a/b (higher is better for a; latency rows inverted)."""
    if a == 0 or b == 0:
        return float("nan")
    return b / a if row.endswith("_us") else a / b

def paired(row, f):
    u, t = vals[(row, "untraced")], vals[(row, "traced")]
    return [f(row, t[r], u[r]) for r in sorted(u) if r in t]

def ci(p, n=4000, seed=1):
    """95 % bootstrap confidence interval of the median of p (percentile method)."""
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(p, k=len(p))) for _ in range(n))
    return meds[int(0.025 * n)], meds[int(0.975 * n) - 1]

def spread(p, fmt):
    if not p:
        return "-"
    lo, hi = ci(p)
    return f"{fmt(statistics.median(p))} [{fmt(lo)} .. {fmt(hi)}] ({fmt(min(p))} .. {fmt(max(p))})"

print(f"{'row':24} {'native':>10} {'untraced':>10} {'traced':>10} {'tr/untr':>8} {'untr/nat':>8} {'tr/nat':>8}"
      f"   paired tr/untr: median [95% CI] (min .. max)")
cpu_rows, self_rows = [], []
for r in rows:
    if r.startswith("cpu_"):
        cpu_rows.append(r)
        continue
    if r.startswith("self_"):
        self_rows.append(r)
        continue
    if r in skipped:
        print(f"{r:24} {'-':>10} {'-':>10} {'-':>10} {'-':>8} {'-':>8} {'-':>8}   - (skipped: no cold cache on tmpfs, or not root)")
        continue
    m = {t: med(r, t) for t in ("native", "untraced", "traced")}
    p = paired(r, speed)
    print(f"{r:24} {m['native']:10.1f} {m['untraced']:10.1f} {m['traced']:10.1f} "
          f"{speed(r, m['traced'], m['untraced']):8.3f} {speed(r, m['untraced'], m['native']):8.3f} "
          f"{speed(r, m['traced'], m['native']):8.3f}   {spread(p, lambda x: f'{x:.3f}')}")
print("ratios are speed ratios (higher is better; latency rows inverted): of the medians over all")
print("rounds, and paired: median of the ratios measured back to back within each round, its 95 %")
print("bootstrap confidence interval, and the smallest and largest ratio of a round")
if cpu_rows:
    print()
    print(f"{'server CPU per request':24} {'untraced':>10} {'traced':>10} {'traced-untr':>12} {'ratio':>8}"
          f"   paired traced-untr: median [95% CI] (min .. max)")
    for r in cpu_rows:
        u, t = med(r, "untraced"), med(r, "traced")
        p = paired(r, lambda _, a, b: a - b)
        print(f"{r:24} {u:10.2f} {t:10.2f} {t - u:12.2f} {t / u if u else float('nan'):8.3f}"
              f"   {spread(p, lambda x: f'{x:.2f}')}")
    print("us of server CPU (getrusage: all threads) per fio request or per small file (create+stat+read+unlink)")
if self_rows:
    print()
    print(f"{'layer, own measurement':32} {'traced':>10}   median [95% CI] (min .. max) over rounds")
    for r in self_rows:
        p = list(vals[(r, "traced")].values())
        print(f"{r:32} {med(r, 'traced'):10.2f}   {spread(p, lambda x: f'{x:.2f}')}")
    print("the traced layer's own work (timing, attribution, recording) per request it served, in ns, and as")
    print("a % of the time requests spent in the layer (the rest is go-fuse's bridge and the backend)")
PY
cleanup; trap - EXIT # the traced server closes its trace and logs its writer's figures
stat -c 'trace file: %s bytes' "$WORK/overhead.trace"
awk '/encoder CPU/ {printf "trace writer: %d events; its encoder used %.0f ns of CPU per event\n", $2, $(NF-1) / ($2 > 0 ? $2 : 1)}' "$WORK/traced.log"
