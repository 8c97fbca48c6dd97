#!/usr/bin/env bash
# startup.sh: what a recording costs before and after the job, whatever the job: the wall
# time of `iotap record -- true` in an empty directory, with the default settings (kernel
# passthrough and the kernel's program), with --data layer (the program without its
# data-call and page-fault parts) and with --data layer --legs probe (no BPF program).
# Rounds run the three in an order that rotates every round; prints the median, minimum and
# maximum of each.
#
# Usage: bench/startup.sh [-r ROUNDS] [-d WORKDIR]
# Defaults: -r 15 -d /var/tmp/iotap-startup. Needs root, go.
set -euo pipefail
ROUNDS=15 WORK=/var/tmp/iotap-startup
while getopts r:d: o; do
  case $o in
    r) ROUNDS=$OPTARG ;; d) WORK=$OPTARG ;;
    *) sed -n 2,10p "$0"; exit 2 ;;
  esac
done
REPO=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$WORK"; mkdir -p "$WORK/job" "$WORK/out"
(cd "$REPO" && go build -o "$WORK/iotap" ./cmd/iotap)
modes=("default" "--data layer" "--data layer --legs probe")
now() { date +%s%N; }
cd "$WORK/job"
for r in $(seq "$ROUNDS"); do
  for k in 0 1 2; do
    i=$(((k + r) % 3))
    # shellcheck disable=SC2206 # the mode's flags, one word each
    args=(${modes[$i]})
    [ "${modes[$i]}" = default ] && args=()
    t0=$(now)
    "$WORK/iotap" record "${args[@]}" -o "$WORK/out/t.iotap" -- true >/dev/null 2>"$WORK/out/err" ||
      { echo "startup: iotap record ${modes[$i]} failed:" >&2; cat "$WORK/out/err" >&2; exit 1; }
    t1=$(now)
    echo "$i $(((t1 - t0) / 1000))"
  done
done >"$WORK/out/times"
echo "iotap record -- true, $ROUNDS rounds, $(date -u +%FT%TZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| settings | median | min–max |"
echo "|---|---|---|"
for i in 0 1 2; do
  awk -v i="$i" '$1 == i { print $2 }' "$WORK/out/times" | sort -n |
    awk -v m="${modes[$i]}" '{ a[NR] = $1 } END { printf "| %s | %.0f ms | %.0f–%.0f ms |\n", m, a[int((NR + 1) / 2)] / 1000, a[1] / 1000, a[NR] / 1000 }'
done
