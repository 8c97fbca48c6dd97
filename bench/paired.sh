#!/usr/bin/env bash
# paired.sh: tracer overhead measured with the untraced and the traced mount driven AT THE
# SAME TIME by twin loads, so both see the same machine noise (on a busy 2-core machine,
# sequential A/B runs vary by 2x between runs; simultaneous twins vary by a few percent).
# Prints, per row, the median over rounds of traced/untraced throughput, and its spread.
#
# TRACED=nop measures the layer with a recorder that discards events; TRACED=none is the
# control (both untraced).
# Usage: bench/paired.sh [-r ROUNDS] [-s SIZE_MiB] [-t SECONDS] [-n SMALL_FILES] [-c none|kernel] [-d WORKDIR]
set -euo pipefail

ROUNDS=7 SIZE=256 RT=4 NSMALL=2000 CACHE=none WORK=/var/tmp/iotap-paired
while getopts "r:s:t:n:c:d:h" o; do
  case $o in
    r) ROUNDS=$OPTARG ;; s) SIZE=$OPTARG ;; t) RT=$OPTARG ;; n) NSMALL=$OPTARG ;;
    c) CACHE=$OPTARG ;; d) WORK=$OPTARG ;; *) sed -n '2,8p' "$0"; exit 2 ;;
  esac
done
REPO=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$WORK"; mkdir -p "$WORK"/{u_orig,u_mnt,t_orig,t_mnt}
BIN=$WORK/benchmount
(cd "$REPO" && go build -o "$BIN" ./bench/benchmount)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
start() {
  local extra=(); [ -n "${4:-}" ] && extra=(-trace "$4")
  [ "$1" = traced ] && [ "${TRACED:-writer}" = nop ] && extra=(-nop)
  "$BIN" mount -cache "$CACHE" -target "$2" -mount "$3" -ready "$WORK/$1.ready" "${extra[@]}" 2>"$WORK/$1.log" &
  PIDS+=($!)
  for _ in $(seq 100); do [ -e "$WORK/$1.ready" ] && return 0; sleep 0.1; done
  echo "mount $1 failed:"; cat "$WORK/$1.log"; exit 1
}
start untraced "$WORK/u_orig" "$WORK/u_mnt"
# TRACED=writer (default: a real trace file) | nop (recording discarded: the layer's own
# cost) | none (both untraced: the control, should give 1.0)
case ${TRACED:-writer} in
  writer) start traced "$WORK/t_orig" "$WORK/t_mnt" "$WORK/paired.trace" ;;
  nop) start traced "$WORK/t_orig" "$WORK/t_mnt" "" && true ;;
  none) start traced "$WORK/t_orig" "$WORK/t_mnt" ;;
esac
U=$WORK/u_mnt T=$WORK/t_mnt RES=$WORK/results.txt; : >"$RES"
for d in "$U" "$T"; do
  fio --name=prep --directory="$d" --filename=f --rw=write --bs=1M --size="${SIZE}M" --output=/dev/null
done
# twin JOB_ARGS...: one fio run, one job per mount, started together, same parameters.
twin() {
  fio --output-format=json --ioengine=psync --fallocate=none --invalidate=0 --group_reporting=0 \
      --name=u --directory="$U" "$@" --name=t --directory="$T" "$@"
}
for r in $(seq "$ROUNDS"); do
  echo "round $r/$ROUNDS" >&2
  rm -f "$U/w" "$T/w"
  j=$(twin --filename=w --rw=write --bs=1M --size="${SIZE}M")
  echo "seqwrite_1M $(jq '[.jobs[]|.write.bw_bytes]|"\(.[0]) \(.[1])"' -r <<<"$j")" >>"$RES"
  j=$(twin --filename=f --rw=read --bs=1M --size="${SIZE}M")
  echo "seqread_1M $(jq '[.jobs[]|.read.bw_bytes]|"\(.[0]) \(.[1])"' -r <<<"$j")" >>"$RES"
  j=$(twin --filename=f --rw=randread --bs=4k --size="${SIZE}M" --time_based --runtime="$RT")
  echo "randread_4k $(jq '[.jobs[]|.read.iops]|"\(.[0]) \(.[1])"' -r <<<"$j")" >>"$RES"
  rm -rf "$U/small" "$T/small"
  "$BIN" smallfiles -dir "$U/small" -n "$NSMALL" >"$WORK/u.small" & a=$!
  "$BIN" smallfiles -dir "$T/small" -n "$NSMALL" >"$WORK/t.small" & b=$!
  wait $a $b
  paste "$WORK/u.small" "$WORK/t.small" | awk '{print "small_" $1, $2, $4}' >>"$RES"
done
cleanup; trap - EXIT
echo "paired: traced=${TRACED:-writer} cache=$CACHE rounds=$ROUNDS size=${SIZE}MiB randread=${RT}s small=$NSMALL kernel=$(uname -r) cpus=$(nproc)"
python3 - "$RES" <<'PY'
import sys, statistics, collections
r = collections.defaultdict(list)
for line in open(sys.argv[1]):
    row, u, t = line.split()
    if float(u) > 0: r[row].append(float(t) / float(u))
print(f"{'row':16} {'traced/untraced median':>22} {'min':>7} {'max':>7}  rounds")
for row, v in r.items():
    print(f"{row:16} {statistics.median(v):22.3f} {min(v):7.3f} {max(v):7.3f}  {len(v)}")
PY
