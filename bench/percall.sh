#!/usr/bin/env bash
# percall.sh: what one read or write costs the application when iotap records it through
# kernel passthrough, against the same call natively and through an untraced passthrough
# loopback, measured by a C program in a tight loop.
#
# Calls (rows), each on a 1 MiB file in the page cache, 4 KiB at a time:
#   pread     pread(2) at offsets cycling through the file
#   read      read(2) sequentially, rewinding with lseek(2) at the end of the file
#   pwrite    pwrite(2) at offsets cycling through the file
#   getppid   a system call that touches no file: what the tracepoints cost every other call
# Targets (columns):
#   native        the file in the backend directory
#   loopback-pt   the file through an untraced go-fuse loopback with kernel passthrough
#                 (benchmount -passthrough): the cost of passthrough itself
#   iotap         the file through `iotap mount --data kernel`: every read and write timed
#                 by the kernel's BPF program and written to a trace
#   bystander     the file in the backend directory while the iotap mount of the previous
#                 column is up: what recording costs calls outside the mount
# Each run times N calls of each kind, keeps the fastest of 5 repetitions (the VM's
# scheduler noise only adds), and a round runs every target in an order that rotates every
# round. Prints the median over rounds of ns per call, and its difference from native.
#
# Usage: bench/percall.sh [-r ROUNDS] [-n CALLS] [-d WORKDIR]
# Defaults: -r 7 -n 200000 -d /var/tmp/iotap-percall. Needs root, go, gcc.
set -euo pipefail
ROUNDS=7 N=200000 WORK=/var/tmp/iotap-percall
while getopts r:n:d: o; do
  case $o in
    r) ROUNDS=$OPTARG ;; n) N=$OPTARG ;; d) WORK=$OPTARG ;;
    *) sed -n 2,24p "$0"; exit 2 ;;
  esac
done
REPO=$(cd "$(dirname "$0")/.." && pwd)
PID=''
cleanup() {
  for m in "$WORK/mnt" "$WORK/mnt-iotap"; do mountpoint -q "$m" 2>/dev/null && umount "$m" 2>/dev/null || true; done
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cleanup
rm -rf --one-file-system "$WORK"
mkdir -p "$WORK"/{bin,back,mnt,mnt-iotap,logs}
(cd "$REPO" && go build -o "$WORK/bin/iotap" ./cmd/iotap && go build -o "$WORK/bin/benchmount" ./bench/benchmount)
cat >"$WORK/percall.c" <<'EOF'
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
static char buf[4096];
static int call(const char *kind, int fd, long i) {
  off_t off = (i % 256) * 4096;
  if (!strcmp(kind, "pread")) return pread(fd, buf, 4096, off) == 4096;
  if (!strcmp(kind, "pwrite")) return pwrite(fd, buf, 4096, off) == 4096;
  if (!strcmp(kind, "read")) {
    if (i % 256 == 0 && lseek(fd, 0, SEEK_SET) != 0) return 0;
    return read(fd, buf, 4096) == 4096;
  }
  getppid();
  return 1;
}
int main(int argc, char **argv) {
  if (argc != 4) { fprintf(stderr, "usage: percall FILE KIND N\n"); return 2; }
  int fd = open(argv[1], O_RDWR);
  if (fd < 0) { perror(argv[1]); return 1; }
  long n = atol(argv[3]);
  double best = 1e18;
  for (int r = 0; r < 5; r++) {
    double t0 = now();
    for (long i = 0; i < n; i++)
      if (!call(argv[2], fd, i)) { perror(argv[2]); return 1; }
    double d = (now() - t0) / n;
    if (d < best) best = d;
  }
  printf("%.1f\n", best);
  return 0;
}
EOF
gcc -O2 -o "$WORK/bin/percall" "$WORK/percall.c"
head -c $((1 << 20)) /dev/urandom >"$WORK/back/f"
KINDS=(pread read pwrite getppid)
TARGETS=(native loopback-pt iotap bystander)

# measure TARGET FILE: one line per call kind into the results.
measure() {
  for k in "${KINDS[@]}"; do echo "$1 $k $("$WORK/bin/percall" "$2" "$k" "$N")" >>"$WORK/results.txt"; done
}

# run TARGET ROUND
run() {
  local log="$WORK/logs/$1-$2.log"
  case $1 in
    native) measure native "$WORK/back/f" ;;
    loopback-pt)
      rm -f "$WORK/ready"
      "$WORK/bin/benchmount" mount -cache none -passthrough -target "$WORK/back" -mount "$WORK/mnt" -ready "$WORK/ready" 2>"$log" &
      PID=$!
      for _ in $(seq 100); do [ -e "$WORK/ready" ] && break; sleep 0.05; done
      [ -e "$WORK/ready" ] || { echo "loopback did not mount:"; cat "$log"; exit 1; }
      measure loopback-pt "$WORK/mnt/f"
      kill -TERM "$PID"; wait "$PID" 2>/dev/null || true; PID='' ;;
    iotap | bystander)
      "$WORK/bin/iotap" mount --data kernel --target "$WORK/back" --mount-at "$WORK/mnt-iotap" -o "$WORK/t.iotap" >"$log" 2>&1 &
      PID=$!
      for _ in $(seq 200); do grep -q 'serving' "$log" 2>/dev/null && break; sleep 0.05; done
      grep -q 'serving' "$log" || { echo "iotap mount did not come up:"; cat "$log"; exit 1; }
      if [ "$1" = iotap ]; then measure iotap "$WORK/mnt-iotap/f"; else measure bystander "$WORK/back/f"; fi
      kill -INT "$PID"; wait "$PID" 2>/dev/null || true; PID=''
      grep -q 'kernel passthrough' "$log" || { echo "iotap did not record through kernel passthrough:"; cat "$log"; exit 1; }
      rm -f "$WORK/t.iotap" ;;
  esac
}

: >"$WORK/results.txt"
n=${#TARGETS[@]}
for r in $(seq "$ROUNDS"); do
  for i in $(seq 0 $((n - 1))); do
    tgt=${TARGETS[$(((i + r) % n))]}
    echo "round $r/$ROUNDS: $tgt" >&2
    run "$tgt" "$r"
  done
done

python3 - "$WORK/results.txt" "${TARGETS[@]}" <<'EOF'
import statistics, sys
t = {}
for line in open(sys.argv[1]):
    tgt, kind, ns = line.split()
    t.setdefault(kind, {}).setdefault(tgt, []).append(float(ns))
targets = sys.argv[2:]
print("| call | " + " | ".join(targets) + " |")
print("|---|" + "---|" * len(targets))
for kind, row in t.items():
    nat = statistics.median(row["native"])
    cells = []
    for tg in targets:
        m = statistics.median(row[tg])
        cells.append(f"{m:.0f} ns" if tg == "native" else f"{m:.0f} ns ({m - nat:+.0f})")
    print(f"| {kind} | " + " | ".join(cells) + " |")
EOF
