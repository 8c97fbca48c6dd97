#!/usr/bin/env bash
# bpfcost.sh: what the kernel's measurement (internal/legs) costs per call, from the kernel's
# own accounting of its BPF programs (kernel.bpf_stats_enabled: run time and count of every
# program run; the programs' runs are every task's, host-wide). A job is recorded with `iotap record` (default --data auto: kernel
# passthrough, every read and write timed in the kernel); the job itself reads the
# programs' counters with bpftool at its end, while they are still loaded. Prints, per
# program, its runs, mean ns per run and its instructions as the kernel runs them (xlated,
# with its global functions), and the summed BPF time per read or write the trace holds
# (for mmap, per page fault the trace holds).
#
# Jobs: dd4k (dd reads 128 MiB in 4 KiB blocks from the page cache), fioqd (fio 4 KiB random
# reads, O_DIRECT, libaio at depth 16), mmap (python3 maps a 128 MiB file and reads a byte
# of each page, then maps it shared and stores a byte in every 16th page), pread (200,000
# pread(2) of 4 KiB cycling through a 1 MiB file: the programs' cost on one data call and
# nothing else), getppid (200,000 getppid(2): their cost on a job's call that is no data
# call).
#
# With -b, each round runs every job with each of the named iotap binaries in turn (an
# interleaved A/B comparison: the kernel's accounting is per run, so the load of the
# machine weighs on both alike), and the summary gives per build the median over rounds.
#
# Usage: bench/bpfcost.sh [-o JOB,...] [-b IOTAP,...] [-r ROUNDS] [-d WORKDIR]
# Defaults: -o dd4k,fioqd, -b: iotap built from this checkout, -r 1. Needs root, bpftool,
# fio, python3, gcc.
set -euo pipefail
JOBS=dd4k,fioqd WORK=/var/tmp/iotap-bpfcost BINS='' ROUNDS=1
while getopts "o:b:r:d:h" o; do
  case $o in
    o) JOBS=$OPTARG ;; b) BINS=$OPTARG ;; r) ROUNDS=$OPTARG ;; d) WORK=$OPTARG ;;
    *) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "bpfcost.sh: needs root" >&2; exit 2; }
REPO=$(cd "$(dirname "$0")/.." && pwd)
rm -rf --one-file-system "$WORK"; mkdir -p "$WORK/run" "$WORK/out"
if [ -z "$BINS" ]; then
  (cd "$REPO" && go build -o "$WORK/iotap" ./cmd/iotap)
  BINS=$WORK/iotap
fi
IFS=, read -ra bins <<<"$BINS"
for b in "${bins[@]}"; do [ -x "$b" ] || { echo "bpfcost.sh: $b is not an executable" >&2; exit 2; }; done
cat >"$WORK/loop.c" <<'C'
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static char buf[4096];
int main(int argc, char **argv) {
  long n = atol(argv[2]);
  int fd = strcmp(argv[1], "pread") ? -1 : open("f", O_RDONLY);
  if (!strcmp(argv[1], "pread") && fd < 0) { perror("f"); return 1; }
  for (long i = 0; i < n; i++) {
    if (fd < 0) getppid();
    else if (pread(fd, buf, 4096, (i % 256) * 4096) != 4096) { perror("pread"); return 1; }
  }
  return 0;
}
C
gcc -O2 -o "$WORK/loop" "$WORK/loop.c"
old=$(sysctl -n kernel.bpf_stats_enabled)
trap 'sysctl -qw kernel.bpf_stats_enabled=$old' EXIT
sysctl -qw kernel.bpf_stats_enabled=1
IFS=, read -ra jobs <<<"$JOBS"
for r in $(seq "$ROUNDS"); do
  for job in "${jobs[@]}"; do
    for bi in "${!bins[@]}"; do
      rm -rf "$WORK/run"/*
      case $job in
        dd4k) head -c $((128 << 20)) /dev/zero >"$WORK/run/d"
          cmd="dd if=d of=/dev/null bs=4k status=none" ;;
        fioqd) head -c $((256 << 20)) /dev/urandom >"$WORK/run/fio.dat"
          cmd="fio --name=j --filename=fio.dat --rw=randread --bs=4k --direct=1 --size=256m --ioengine=libaio --iodepth=16 --number_ios=100000 --output=/dev/null" ;;
        mmap) head -c $((128 << 20)) /dev/urandom >"$WORK/run/m"; sync "$WORK/run/m"
          cmd="python3 -c 'import mmap, os
fd = os.open(\"m\", os.O_RDWR)
m = mmap.mmap(fd, 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
s = sum(m[i] for i in range(0, len(m), 4096))
w = mmap.mmap(fd, 0, flags=mmap.MAP_SHARED)
for i in range(0, len(w), 65536): w[i] = 1
w.flush()'" ;;
        pread) head -c $((1 << 20)) /dev/urandom >"$WORK/run/f"
          cmd="$WORK/loop pread 200000" ;;
        getppid) cmd="$WORK/loop getppid 200000" ;;
        *) echo "bpfcost.sh: unknown job $job" >&2; exit 2 ;;
      esac
      out="$WORK/out/$job.$bi.$r"
      # The job's parent is the recorder, which holds the programs: their ids tell them from
      # other programs of the same names on the host (another recording).
      (cd "$WORK/run" && "${bins[$bi]}" record -o "$out.iotap" -- sh -c "$cmd && bpftool -j prog show > $out.progs.json && grep -h '^prog_id' /proc/\$PPID/fdinfo/* > $out.ids") 2>"$out.log"
      calls=$("${bins[$bi]}" info "$out.iotap" | awk -v job="$job" 'job != "mmap" && /^data:/ {print $4} job == "mmap" && /^  mapped:/ {print $2}')
      echo "${calls:-0}" >"$out.calls"
      rm -f "$out.iotap"
    done
  done
done
python3 - "$WORK/out" "$ROUNDS" "$JOBS" "$BINS" <<'PY'
import json, os, statistics, sys
out, rounds, jobs, bins = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), sys.argv[4].split(",")
ours = ["sys_enter", "sys_exit", "sched_waking", "request_send", "request_end", "uring_submit", "uring_complete",
        "filemap_fault", "filemap_map_pages", "dirty_folio", "process_fork"]
for job in jobs:
    for bi, b in enumerate(bins):
        per, tot, calls, insns = {}, [], [], {}
        for r in range(1, rounds + 1):
            base = f"{out}/{job}.{bi}.{r}"
            n = int(open(base + ".calls").read().split()[0])
            total = 0
            ids = {int(l.split()[1]) for l in open(base + ".ids")}
            for p in json.load(open(base + ".progs.json")):
                if p.get("id") in ids and p.get("name") in ours and p.get("run_cnt"):
                    total += p["run_time_ns"]
                    per.setdefault(p["name"], []).append((p["run_cnt"], p["run_time_ns"] / p["run_cnt"]))
                    insns[p["name"]] = p.get("bytes_xlated", 0) // 8
            calls.append(n)
            if n:
                tot.append(total / n)
        what = "page faults of mapped files" if job == "mmap" else "reads and writes timed by the kernel"
        print(f"{job} with {b}: {statistics.median(calls):.0f} {what} (median of {rounds} runs)")
        print(f"  {'program':15} {'runs':>12} {'ns per run':>10} {'xlated':>7}")
        for name in ours:
            if name in per:
                runs = statistics.median(c for c, _ in per[name])
                ns = statistics.median(t for _, t in per[name])
                print(f"  {name:15} {runs:>12.0f} {ns:>10.1f} {insns[name]:>7}")
        if tot:
            print(f"  BPF time per {'fault' if job == 'mmap' else 'timed call'}: {statistics.median(tot):.0f} ns (all programs' runs, host-wide, over the job)")
PY
