#!/usr/bin/env bash
# bpfcost.sh: what the kernel's measurement (internal/legs) costs per call, from the kernel's
# own accounting of its BPF programs (kernel.bpf_stats_enabled: run time and count of every
# program run). A job is recorded with `iotap record` (default --data auto: kernel
# passthrough, every read and write timed in the kernel); the job itself reads the
# programs' counters with bpftool at its end, while they are still loaded. Prints, per
# program, its runs and mean ns per run, and the summed BPF time per read or write the
# trace holds (for mmap, per page fault the trace holds).
#
# Jobs: dd4k (dd reads 128 MiB in 4 KiB blocks from the page cache), fioqd (fio 4 KiB random
# reads, O_DIRECT, libaio at depth 16), mmap (python3 maps a 128 MiB file and reads a byte
# of each page, then maps it shared and stores a byte in every 16th page).
#
# Usage: bench/bpfcost.sh [-o JOB,...] [-d WORKDIR]
# Needs root, bpftool, fio, python3.
set -euo pipefail
JOBS=dd4k,fioqd WORK=/var/tmp/iotap-bpfcost
while getopts "o:d:h" o; do
  case $o in o) JOBS=$OPTARG ;; d) WORK=$OPTARG ;; *) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 2 ;; esac
done
[ "$(id -u)" = 0 ] || { echo "bpfcost.sh: needs root" >&2; exit 2; }
REPO=$(cd "$(dirname "$0")/.." && pwd)
rm -rf --one-file-system "$WORK"; mkdir -p "$WORK/run"
(cd "$REPO" && go build -o "$WORK/iotap" ./cmd/iotap)
old=$(sysctl -n kernel.bpf_stats_enabled)
trap 'sysctl -qw kernel.bpf_stats_enabled=$old' EXIT
sysctl -qw kernel.bpf_stats_enabled=1
IFS=, read -ra jobs <<<"$JOBS"
for job in "${jobs[@]}"; do
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
    *) echo "bpfcost.sh: unknown job $job" >&2; exit 2 ;;
  esac
  (cd "$WORK/run" && "$WORK/iotap" record -o "$WORK/$job.iotap" -- sh -c "$cmd && bpftool -j prog show > $WORK/$job.progs.json") 2>"$WORK/$job.log"
  calls=$("$WORK/iotap" info "$WORK/$job.iotap" | awk -v job="$job" 'job != "mmap" && /^data:/ {print $4} job == "mmap" && /^  mapped:/ {print $2}')
  python3 - "$WORK/$job.progs.json" "$job" "$calls" <<'PY'
import json, sys
progs, job, calls = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3] or 0)
ours = {"sys_enter", "sys_exit", "request_send", "request_end", "sched_waking", "uring_submit", "uring_complete",
        "filemap_fault", "filemap_map_pages", "dirty_folio"}
total = 0
what = "page faults of mapped files" if job == "mmap" else "reads and writes timed by the kernel"
print(f"{job}: {calls} {what}")
for p in progs:
    if p.get("name") in ours and p.get("run_cnt"):
        total += p["run_time_ns"]
        print(f"  {p['name']:15} {p['run_cnt']:>12} runs  {p['run_time_ns'] / p['run_cnt']:8.1f} ns per run")
if calls:
    print(f"  BPF time per {'fault' if job == 'mmap' else 'timed call'}: {total / calls:.0f} ns (all programs' runs, host-wide, over the job)")
PY
done
