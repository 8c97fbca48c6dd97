#!/usr/bin/env bash
# addrspace.sh: the least address space (ulimit -v, RLIMIT_AS) iotap's commands need, found
# by bisection: a limit passes when the command succeeds RUNS times in a row under it (the
# runtime's threads and allocator reserve more in some runs than in others). It builds
# iotap twice, as `go build` does by default (cgo, where a C compiler is installed) and with
# CGO_ENABLED=0, and measures each on: info, report, report --format html, export --format
# perfetto, compare and replay --dry-run of testdata/trace/v4-small.iotap, and a replay onto
# a fresh directory; as root, also a recording of a small job. Prints one line per build
# and command, in KiB (to 10 MiB).
#
# Usage: bench/addrspace.sh [-r RUNS] [-d WORKDIR]   (RUNS=5; a few minutes)
set -euo pipefail
RUNS=5 WORK=/var/tmp/iotap-addrspace
while getopts "r:d:h" o; do
  case $o in
    r) RUNS=$OPTARG ;; d) WORK=$OPTARG ;; *) sed -n '2,11p' "$0"; exit 2 ;;
  esac
done
repo=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$WORK" && mkdir -p "$WORK"
(cd "$repo" && go build -o "$WORK/iotap-cgo" ./cmd/iotap && CGO_ENABLED=0 go build -o "$WORK/iotap-purego" ./cmd/iotap)
tr=$repo/testdata/trace/v4-small.iotap

# passes LIMIT CMD...: CMD succeeds RUNS times under ulimit -v LIMIT.
passes() {
  local lim=$1; shift
  for _ in $(seq 1 "$RUNS"); do
    (ulimit -v "$lim" && "$@" >/dev/null 2>&1) || return 1
  done
}
# least CMD...: the least passing limit, in KiB, between 100 MB and 4 GB.
least() {
  local lo=100000 hi=4000000 mid
  while [ $((hi - lo)) -gt 10240 ]; do
    mid=$(((lo + hi) / 2))
    if passes "$mid" "$@"; then hi=$mid; else lo=$mid; fi
  done
  echo "$hi"
}
replay_once() {
  local d; d=$(mktemp -d "$WORK/replay.XXXX"); mkdir "$d/t"
  "$1" replay "$tr" --target "$d/t" -o "$d/r" --sample-interval 0; local rc=$?
  rm -rf "$d"; return $rc
}
record_once() {
  local d; d=$(mktemp -d "$WORK/record.XXXX"); mkdir "$d/t"
  (cd "$d/t" && "$1" record --target "$d/t" -o "$d/r.iotap" -- sh -c 'for i in 1 2 3 4 5 6 7 8; do echo $i > f$i; cat f$i; done'); local rc=$?
  rm -rf "$d"; return $rc
}
export -f replay_once record_once
export tr WORK
for b in cgo purego; do
  bin=$WORK/iotap-$b
  for args in "info $tr" "report $tr" "report --format html $tr" "export --format perfetto $tr" "compare --force $tr $tr" "replay --dry-run $tr"; do
    # shellcheck disable=SC2086 # the arguments are words
    printf '%-7s %-45s %s KiB\n' "$b" "${args//$tr/TRACE}" "$(least "$bin" $args)"
  done
  printf '%-7s %-45s %s KiB\n' "$b" "replay TRACE onto a directory" "$(least bash -c 'replay_once "$0"' "$bin")"
  if [ "$(id -u)" = 0 ]; then
    printf '%-7s %-45s %s KiB\n' "$b" "record a small job" "$(least bash -c 'record_once "$0"' "$bin")"
  fi
done
