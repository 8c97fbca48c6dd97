#!/usr/bin/env bash
# tpcost.sh: what a BPF program attached to system calls costs every call, for the two ways
# a program can see them: the raw tracepoints raw_syscalls sys_enter and sys_exit, which run
# it on every system call of the host (internal/legs attaches there), and the per-call
# tracepoints syscalls:sys_enter_NAME and sys_exit_NAME, which run it only on the calls
# named (here read, write, pread64, pwrite64: the data calls). The programs are empty
# (bench/tpcost), so the figures are the floor of any program attached that way.
#
# A C program times N calls of one kind in a tight loop (the fastest of 5 repetitions):
#   pread     pread(2) of 4 KiB cycling through a 1 MiB file in the page cache: a data call
#   getppid   a call that is no data call
# under each attachment (none, raw, syscalls), in an order that rotates every round; prints
# the median over rounds of ns per call and its difference from none. Then one more run of
# each with the kernel's accounting on (kernel.bpf_stats_enabled): the programs' runs and
# ns per run (the accounting's clock reads are not in the wall-clock figures); and the raw
# programs with 4 clock reads (bpf_ktime_get_ns) each, on getppid: their ns per run less the
# empty ones', divided by 4, is what a clock read costs.
#
# Usage: bench/tpcost.sh [-r ROUNDS] [-n CALLS] [-d WORKDIR]
# Defaults: -r 7 -n 200000 -d /var/tmp/iotap-tpcost. Needs root, go, gcc.
set -euo pipefail
ROUNDS=7 N=200000 WORK=/var/tmp/iotap-tpcost
while getopts r:n:d: o; do
  case $o in
    r) ROUNDS=$OPTARG ;; n) N=$OPTARG ;; d) WORK=$OPTARG ;;
    *) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "tpcost.sh: needs root" >&2; exit 2; }
REPO=$(cd "$(dirname "$0")/.." && pwd)
rm -rf --one-file-system "$WORK"; mkdir -p "$WORK"
(cd "$REPO" && go build -o "$WORK/tpcost" ./bench/tpcost)
cat >"$WORK/loop.c" <<'C'
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static char buf[4096];
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
int main(int argc, char **argv) {
  if (argc != 4) { fprintf(stderr, "usage: loop pread|getppid N FILE\n"); return 2; }
  long n = atol(argv[2]);
  int fd = open(argv[3], O_RDONLY);
  if (fd < 0) { perror(argv[3]); return 1; }
  int pr = !strcmp(argv[1], "pread");
  double best = 1e18;
  for (int r = 0; r < 5; r++) {
    double t0 = now();
    for (long i = 0; i < n; i++) {
      if (!pr) getppid();
      else if (pread(fd, buf, 4096, (i % 256) * 4096) != 4096) { perror("pread"); return 1; }
    }
    double d = (now() - t0) / n;
    if (d < best) best = d;
  }
  printf("%.1f\n", best);
  return 0;
}
C
gcc -O2 -o "$WORK/loop" "$WORK/loop.c"
head -c $((1 << 20)) /dev/urandom >"$WORK/f"
MODES=(none raw syscalls)
: >"$WORK/results.txt"
for r in $(seq "$ROUNDS"); do
  for i in "${!MODES[@]}"; do
    m=${MODES[$(((i + r) % ${#MODES[@]}))]}
    for k in pread getppid; do
      echo "$m $k $("$WORK/tpcost" -attach "$m" -- "$WORK/loop" "$k" "$N" "$WORK/f")" >>"$WORK/results.txt"
    done
  done
done
python3 - "$WORK/results.txt" "${MODES[@]}" <<'PY'
import statistics, sys
t = {}
for line in open(sys.argv[1]):
    m, k, ns = line.split()
    t.setdefault(k, {}).setdefault(m, []).append(float(ns))
modes = sys.argv[2:]
print("| call | " + " | ".join(modes) + " |")
print("|---|" + "---|" * len(modes))
for k, row in t.items():
    base = statistics.median(row["none"])
    cells = [f"{statistics.median(row[m]):.0f} ns" + ("" if m == "none" else f" ({statistics.median(row[m]) - base:+.0f})") for m in modes]
    print(f"| {k} | " + " | ".join(cells) + " |")
PY
echo "kernel's accounting (one run each): program runs ns-per-run"
for m in raw syscalls; do
  for k in pread getppid; do
    echo "$m, $k:"
    "$WORK/tpcost" -attach "$m" -stats -- "$WORK/loop" "$k" "$N" "$WORK/f" 2>&1 >/dev/null | sed -n 's/^tpcost: /  /p'
  done
done
echo "raw, getppid, 4 clock reads per run:"
"$WORK/tpcost" -attach raw -ktime 4 -stats -- "$WORK/loop" getppid "$N" "$WORK/f" 2>&1 >/dev/null | sed -n 's/^tpcost: /  /p'
