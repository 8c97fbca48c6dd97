#!/usr/bin/env bash
# overhead.sh: side-by-side overhead of the iotap tracing layer, measured with fio.
#
# Three targets in one run, alternating order every round:
#   native    the backend directory itself
#   untraced  go-fuse loopback with iotap's node code and exactly the same mount options
#   traced    the same, recording every request into a trace file
# Rows: 1 MiB sequential write, 1 MiB sequential read (cold: caches dropped before each run
# when root; warm otherwise), 4 KiB random read (warm, psync, 1 job), and N small files
# (create+write 4 KiB+close, stat, open+read+close, unlink).
# Prints the median of each row and the ratios traced/untraced and x/native.
#
# Usage: bench/overhead.sh [-r ROUNDS] [-s SIZE_MiB] [-t RANDREAD_SECONDS] [-n SMALL_FILES]
#                          [-c none|kernel] [-d WORKDIR]
# PROFILE=1 writes CPU profiles of both servers to WORKDIR/{untraced,traced}.pprof.
# Needs: go, fio, jq, python3, FUSE (root for DirectMount, or fusermount3).
set -euo pipefail

ROUNDS=3 SIZE=512 RT=5 NSMALL=1000 CACHE=none WORK=/var/tmp/iotap-bench
while getopts "r:s:t:n:c:d:h" o; do
  case $o in
    r) ROUNDS=$OPTARG ;; s) SIZE=$OPTARG ;; t) RT=$OPTARG ;; n) NSMALL=$OPTARG ;;
    c) CACHE=$OPTARG ;; d) WORK=$OPTARG ;; *) sed -n '2,16p' "$0"; exit 2 ;;
  esac
done

REPO=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$WORK"; mkdir -p "$WORK"/{native,u_orig,u_mnt,t_orig,t_mnt}
BIN=$WORK/benchmount
(cd "$REPO" && go build -o "$BIN" ./internal/fusetest/benchmount)

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

start() { # name orig mnt [trace]
  local extra=()
  [ -n "${4:-}" ] && extra=(-trace "$4")
  [ -n "${PROFILE:-}" ] && extra+=(-cpuprofile "$WORK/$1.pprof")
  "$BIN" mount -cache "$CACHE" -target "$2" -mount "$3" -ready "$WORK/$1.ready" "${extra[@]}" 2>"$WORK/$1.log" &
  PIDS+=($!)
  for _ in $(seq 100); do [ -e "$WORK/$1.ready" ] && return 0; sleep 0.1; done
  echo "mount $1 failed:"; cat "$WORK/$1.log"; exit 1
}
start untraced "$WORK/u_orig" "$WORK/u_mnt"
start traced "$WORK/t_orig" "$WORK/t_mnt" "$WORK/overhead.trace"
declare -A SRV=([untraced]=${PIDS[0]} [traced]=${PIDS[1]})

# CPU time (utime+stime of all threads, in clock ticks) of the server behind target $1: on
# a noisy machine, CPU per request separates the tracer's cost from scheduling noise.
cpu() { [ "$1" = native ] && { echo 0; return; }; awk '{print $14+$15}' "/proc/${SRV[$1]}/stat"; }
HZ=$(getconf CLK_TCK)
cpurow() { # row target ticks_before ops
  [ "$2" = native ] && return
  local c; c=$(cpu "$2")
  echo "$1 $2 $(python3 -c "print(($c-$3)/$HZ*1e6/max($4,1))")" >>"$RES"
}

declare -A DIR=([native]=$WORK/native [untraced]=$WORK/u_mnt [traced]=$WORK/t_mnt)
TARGETS=(native untraced traced)
RES=$WORK/results.txt; : >"$RES"

drop() { if [ "$(id -u)" = 0 ]; then sync; echo 3 >/proc/sys/vm/drop_caches; fi; }
# invalidate=0: fio would otherwise drop the native file's cache before each job but not the
# backend's cache behind a FUSE mount, comparing a cold native run with warm FUSE runs.
fiojson() { fio --output-format=json --ioengine=psync --fallocate=none --numjobs=1 --invalidate=0 "$@"; }

for t in "${TARGETS[@]}"; do  # the read file, written through each target
  fio --name=prep --directory="${DIR[$t]}" --filename=seqr --rw=write --bs=1M --size="${SIZE}M" \
      --ioengine=psync --fallocate=none --output=/dev/null
done

for r in $(seq "$ROUNDS"); do
  order=("${TARGETS[@]:$(( (r-1) % 3 ))}" "${TARGETS[@]:0:$(( (r-1) % 3 ))}")
  echo "round $r/$ROUNDS: ${order[*]}" >&2
  for t in "${order[@]}"; do
    d=${DIR[$t]}
    rm -f "$d/seqw"; sync
    c0=$(cpu "$t")
    j=$(fiojson --name=sw --directory="$d" --filename=seqw --rw=write --bs=1M --size="${SIZE}M")
    echo "seqwrite_1M_MiBps $t $(jq '.jobs[0].write.bw_bytes/1048576' <<<"$j")" >>"$RES"
    cpurow cpu_us_per_write1M "$t" "$c0" "$(jq '.jobs[0].write.total_ios' <<<"$j")"
    rm -f "$d/seqw"; sync
    j=$(fiojson --name=sw --directory="$d" --filename=seqw --rw=write --bs=1M --size="${SIZE}M" --end_fsync=1)
    echo "seqwrite_1M_fsync_MiBps $t $(jq '.jobs[0].write.bw_bytes/1048576' <<<"$j")" >>"$RES"
    rm -f "$d/seqw"
    drop
    j=$(fiojson --name=sr --directory="$d" --filename=seqr --rw=read --bs=1M --size="${SIZE}M")
    echo "seqread_1M_cold_MiBps $t $(jq '.jobs[0].read.bw_bytes/1048576' <<<"$j")" >>"$RES"
    c0=$(cpu "$t")
    j=$(fiojson --name=sr --directory="$d" --filename=seqr --rw=read --bs=1M --size="${SIZE}M")
    echo "seqread_1M_warm_MiBps $t $(jq '.jobs[0].read.bw_bytes/1048576' <<<"$j")" >>"$RES"
    cpurow cpu_us_per_read1M "$t" "$c0" "$(jq '.jobs[0].read.total_ios' <<<"$j")"
    c0=$(cpu "$t")
    j=$(fiojson --name=rr --directory="$d" --filename=seqr --rw=randread --bs=4k --size="${SIZE}M" \
        --time_based --runtime="$RT")
    cpurow cpu_us_per_read4k "$t" "$c0" "$(jq '.jobs[0].read.total_ios' <<<"$j")"
    echo "randread_4k_IOPS $t $(jq '.jobs[0].read.iops' <<<"$j")" >>"$RES"
    echo "randread_4k_p50_us $t $(jq '.jobs[0].read.clat_ns.percentile["50.000000"]/1000' <<<"$j")" >>"$RES"
    echo "randread_4k_p99_us $t $(jq '.jobs[0].read.clat_ns.percentile["99.000000"]/1000' <<<"$j")" >>"$RES"
    rm -rf "$d/small"
    c0=$(cpu "$t")
    "$BIN" smallfiles -dir "$d/small" -n "$NSMALL" | while read -r ph v; do
      echo "small_${ph}_opsps $t $v" >>"$RES"
    done
    cpurow cpu_us_per_smallfile "$t" "$c0" "$NSMALL"
    rm -rf "$d/small"
  done
done

cleanup; trap - EXIT
echo "cache=$CACHE size=${SIZE}MiB rounds=$ROUNDS randread=${RT}s small=$NSMALL kernel=$(uname -r) cpus=$(nproc)"
python3 - "$RES" <<'PY'
import sys, statistics, collections
vals = collections.defaultdict(list)
rows = []
for line in open(sys.argv[1]):
    row, tgt, v = line.split()
    if row not in rows: rows.append(row)
    vals[(row, tgt)].append(float(v))
lower_better = lambda r: r.endswith("_us")
cpu_rows = []
print(f"{'row':24} {'native':>10} {'untraced':>10} {'traced':>10} {'tr/untr':>8} {'untr/nat':>8} {'tr/nat':>8}")
for r in rows:
    if r.startswith("cpu_"):
        cpu_rows.append(r)
        continue
    m = {t: statistics.median(vals[(r, t)]) for t in ("native", "untraced", "traced")}
    def ratio(a, b):
        if m[b] == 0: return float("nan")
        return (m[b] / m[a]) if lower_better(r) else (m[a] / m[b])
    print(f"{r:24} {m['native']:10.1f} {m['untraced']:10.1f} {m['traced']:10.1f} "
          f"{ratio('traced','untraced'):8.3f} {ratio('untraced','native'):8.3f} {ratio('traced','native'):8.3f}")
print("ratios are speed ratios (higher is better; latency rows inverted); medians of all rounds")
print()
print(f"{'server CPU per request':24} {'untraced':>10} {'traced':>10} {'traced-untr':>12} {'ratio':>8}   (us; smallfile = create+stat+read+unlink of one file)")
for r in cpu_rows:
    u, t = statistics.median(vals[(r, "untraced")]), statistics.median(vals[(r, "traced")])
    print(f"{r:24} {u:10.2f} {t:10.2f} {t-u:12.2f} {t/u if u else float('nan'):8.3f}")
PY
ls -l "$WORK/overhead.trace" | awk '{print "trace file:", $5, "bytes"}'
