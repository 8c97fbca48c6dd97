#!/usr/bin/env bash
# jobs.sh: what being recorded costs real jobs, as wall time of the whole job.
#
# Jobs (rows):
#   genomics  scripts/workload-genomics.sh with WORKLOAD_READS=N (samtools, tar, sqlite3)
#   catloop   a shell loop running `cat f >/dev/null` K times on a 4 KiB file (short processes)
#   dd4k      dd writes 128 MiB in 4 KiB blocks, then reads it back (page cache)
#   dd1m      the same in 1 MiB blocks
#   fiorand   fio 4 KiB random reads of a 256 MiB file, O_DIRECT, psync (queue depth 1)
#   fioqd     the same with libaio at queue depth 16
#   fiouring  the same with io_uring at queue depth 16
#   sort      samtools sort of a BAM of about 100 MB
#   tarx      tar x of 10,000 small files
# Targets (columns), all on the same backend directory (WORKDIR, on the filesystem it is on):
#   native        the job in a directory of the backend
#   loopback      the job in an untraced go-fuse loopback of it (benchmount, --cache none
#                 options and node code), every read and write a FUSE request
#   loopback-pt   the same loopback with kernel passthrough (benchmount -passthrough): the
#                 floor of a layer whose reads and writes bypass it
#   MODE          `iotap record` of the job, for each MODE of -m: pt (--data kernel: kernel
#                 passthrough, reads and writes timed by the kernel), layer (--data layer),
#                 kernel (--cache kernel), or none (--cache none, the default --data auto);
#                 each with the default --legs auto (the kernel's legs measured, as root)
#   MODE@LEGS     the same with `--legs LEGS`, for each LEGS of -l (e.g. -l probe: what
#                 measuring the kernel's legs costs, against the round-trip probe alone)
#   MODE+metrics  with -M: the same with `--metrics 127.0.0.1:PORT`, scraped every -S seconds
#                 by a bash loop while the job runs (what serving Prometheus metrics costs)
#   before-MODE   the same with iotap built from revision -B (when given)
# A round runs every target once per job, in an order that rotates every round; each run gets
# a fresh directory. Prints per job the median wall time over rounds of each target and its
# ratio to native, then per iotap target the median of the recording summary's "layer's own
# work per request" (the cost line, self_ns_per_request in the report) and its late and
# missing attributions.
#
# Usage: bench/jobs.sh [-r ROUNDS] [-n READS] [-k CATS] [-m MODE,...] [-l LEGS,...] [-M] [-S SECONDS] [-B REV] [-o JOB,...] [-d WORKDIR]
# Defaults: -r 5 -n 120000 -k 1000 -m pt,layer -S 1 -o genomics,catloop -d /var/tmp/iotap-jobs
# Needs root (iotap record's private mount), go, samtools, sqlite3, tar, awk, fio.
set -euo pipefail

ROUNDS=5 READS=120000 CATS=1000 MODES=pt,layer LEGS='' METRICS='' SCRAPE=1 BEFORE='' JOBS=genomics,catloop WORK=/var/tmp/iotap-jobs
while getopts "r:n:k:m:l:MS:B:o:d:h" o; do
  case $o in
    r) ROUNDS=$OPTARG ;; n) READS=$OPTARG ;; k) CATS=$OPTARG ;; m) MODES=$OPTARG ;; l) LEGS=$OPTARG ;;
    M) METRICS=1 ;; S) SCRAPE=$OPTARG ;;
    B) BEFORE=$OPTARG ;; o) JOBS=$OPTARG ;; d) WORK=$OPTARG ;; *) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "jobs.sh: needs root" >&2; exit 2; }
IFS=, read -ra MODES <<<"$MODES"
IFS=, read -ra JOBS <<<"$JOBS"
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(realpath -m "$WORK")
PID='' SPID=''
cleanup() {
  if [ -n "$PID" ]; then kill -TERM "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; PID=''; fi
  if [ -n "$SPID" ]; then kill "$SPID" 2>/dev/null || true; wait "$SPID" 2>/dev/null || true; SPID=''; fi
  awk -v p="$WORK/" 'index($2, p) == 1 {print $2}' /proc/self/mounts | sort -r |
    while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
  [ -z "$BEFORE" ] || git -C "$REPO" worktree remove --force "$WORK/src-before" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cleanup
rm -rf --one-file-system "$WORK"
mkdir -p "$WORK"/{bin,runs,traces,logs,mnt}
(cd "$REPO" && go build -o "$WORK/bin/iotap" ./cmd/iotap && go build -o "$WORK/bin/benchmount" ./bench/benchmount)
TARGETS=(native loopback loopback-pt "${MODES[@]}")
if [ -n "$LEGS" ]; then
  IFS=, read -ra legs <<<"$LEGS"
  for m in "${MODES[@]}"; do for l in "${legs[@]}"; do TARGETS+=("$m@$l"); done; done
fi
if [ -n "$METRICS" ]; then
  for m in "${MODES[@]}"; do TARGETS+=("$m+metrics"); done
  MPORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
fi
if [ -n "$BEFORE" ]; then
  git -C "$REPO" worktree add --detach "$WORK/src-before" "$BEFORE" >/dev/null
  (cd "$WORK/src-before" && go build -o "$WORK/bin/iotap-before" ./cmd/iotap)
  for m in "${MODES[@]}"; do TARGETS+=("before-$m"); done
fi
GENOMICS=$REPO/scripts/workload-genomics.sh
head -c 4096 /dev/urandom >"$WORK/f4k"
# The jobs' inputs, made once: copied into each run's directory before it is timed.
mkdir -p "$WORK/inputs"
for job in "${JOBS[@]}"; do
  case $job in
    fio*) [ -e "$WORK/inputs/fio.dat" ] || head -c $((256 << 20)) /dev/urandom >"$WORK/inputs/fio.dat" ;;
    sort) [ -e "$WORK/inputs/in.bam" ] || (cd "$WORK/inputs" && WORKLOAD_READS=1500000 sh -c \
      "sed -n '/^N=/p;/^awk/,/reads.sam\$/p' $GENOMICS | sh && samtools view -b -o in.bam reads.sam && rm reads.sam") ;;
    tarx) [ -e "$WORK/inputs/files.tar" ] || (cd "$WORK/inputs" && mkdir -p files && python3 -c '
import os, random
random.seed(7)
for i in range(10000):
    d = "files/d%03d" % (i // 100)
    os.makedirs(d, exist_ok=True)
    with open("%s/f%05d" % (d, i), "wb") as f:
        f.write(os.urandom(random.randint(512, 8192)))
' && tar -cf files.tar files && rm -rf files) ;;
  esac
done

# jobcmd JOB: the job's shell command (run in its directory).
jobcmd() {
  local fio="fio --name=j --filename=fio.dat --rw=randread --bs=4k --direct=1 --size=256m --output=/dev/null"
  case $1 in
    genomics) echo "WORKLOAD_READS=$READS sh $GENOMICS >/dev/null" ;;
    catloop) echo "for i in \$(seq $CATS); do cat f >/dev/null; done" ;;
    dd4k) echo "dd if=/dev/zero of=d bs=4k count=32768 status=none && dd if=d of=/dev/null bs=4k status=none" ;;
    dd1m) echo "dd if=/dev/zero of=d bs=1M count=128 status=none && dd if=d of=/dev/null bs=1M status=none" ;;
    fiorand) echo "$fio --ioengine=psync --number_ios=20000" ;;
    fioqd) echo "$fio --ioengine=libaio --iodepth=16 --number_ios=100000" ;;
    fiouring) echo "$fio --ioengine=io_uring --iodepth=16 --number_ios=100000" ;;
    sort) echo "samtools sort -m 64M -o sorted.bam in.bam" ;;
    tarx) echo "tar xf files.tar" ;;
  esac
}

# inputs JOB DIR: copies the job's input into its run directory.
inputs() {
  case $1 in
    catloop) cp "$WORK/f4k" "$2/f" ;;
    fio*) cp "$WORK/inputs/fio.dat" "$2/" ;;
    sort) cp "$WORK/inputs/in.bam" "$2/" ;;
    tarx) cp "$WORK/inputs/files.tar" "$2/" ;;
  esac
}

# scrape: fetches the metrics every SCRAPE seconds, as Prometheus would, until killed.
scrape() {
  while sleep "$SCRAPE"; do
    { exec 3<>"/dev/tcp/127.0.0.1/$MPORT" && printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3 && cat <&3 >/dev/null; exec 3<&-; } 2>/dev/null || true
  done
}

# run JOB TARGET ROUND: one timed run; appends "JOB TARGET SECONDS" to the results and, for
# iotap targets, "JOB TARGET cost-line" lines to the costs.
run() {
  local job=$1 tgt=$2 r=$3 dir="$WORK/runs/$1-$2" cmd t0 t1 log="$WORK/logs/$1-$2-$3.log"
  rm -rf --one-file-system "$dir"; mkdir -p "$dir"
  inputs "$job" "$dir"
  cmd=$(jobcmd "$job")
  sync
  case $tgt in
    native)
      t0=$EPOCHREALTIME; (cd "$dir" && sh -c "$cmd") >"$log" 2>&1; t1=$EPOCHREALTIME ;;
    loopback|loopback-pt)
      local pt=()
      [ "$tgt" = loopback-pt ] && pt=(-passthrough)
      rm -f "$WORK/ready"
      "$WORK/bin/benchmount" mount -cache none "${pt[@]}" -target "$dir" -mount "$WORK/mnt" -ready "$WORK/ready" 2>"$log.server" &
      PID=$!
      for _ in $(seq 100); do [ -e "$WORK/ready" ] && break; sleep 0.05; done
      [ -e "$WORK/ready" ] || { echo "loopback did not mount:"; cat "$log.server"; exit 1; }
      t0=$EPOCHREALTIME; sh -c "cd $WORK/mnt && $cmd" >"$log" 2>&1; t1=$EPOCHREALTIME
      kill -TERM "$PID"; wait "$PID" 2>/dev/null || true; PID='' ;;
    *) # iotap record, run from the target as a job is (the job starts in the caller's directory)
      local bin=$WORK/bin/iotap mode=$tgt legs=() metrics=()
      case $tgt in before-*) bin=$WORK/bin/iotap-before mode=${tgt#before-} ;; esac
      case $mode in *@*) legs=(--legs "${mode#*@}"); mode=${mode%@*} ;; esac
      case $mode in *+metrics) metrics=(--metrics "127.0.0.1:$MPORT"); mode=${mode%+metrics} ;; esac
      local how=()
      case $mode in
        pt) how=(--cache none --data kernel) ;;
        layer) how=(--cache none --data layer) ;;
        *) how=(--cache "$mode") ;;
      esac
      if [ ${#metrics[@]} -gt 0 ]; then scrape & SPID=$!; fi
      t0=$EPOCHREALTIME
      (cd "$dir" && "$bin" record "${how[@]}" "${legs[@]}" "${metrics[@]}" --target . -o "$WORK/traces/t.iotap" -- sh -c "$cmd") >"$log" 2>&1
      t1=$EPOCHREALTIME
      if [ -n "$SPID" ]; then kill "$SPID" 2>/dev/null || true; wait "$SPID" 2>/dev/null || true; SPID=''; fi ;;
  esac
  echo "$job $tgt $(python3 -c "print(f'{$t1 - $t0:.4f}')")" >>"$WORK/results.txt"
  case $tgt in native|loopback*) ;; *)
    echo "$job $tgt $(grep -h 'recording cost:\|threads:\|looking up\|^iotap: job exit' "$log" | tr -s ' ' | tr '\n' ' ')" >>"$WORK/costs.txt"
    grep -q 'job exit 0' "$log" || { echo "jobs.sh: $job under $tgt failed:"; tail -20 "$log"; exit 1; } ;;
  esac
  rm -f "$WORK/traces/t.iotap"
}

: >"$WORK/results.txt"; : >"$WORK/costs.txt"
n=${#TARGETS[@]}
for r in $(seq "$ROUNDS"); do
  for job in "${JOBS[@]}"; do
    for i in $(seq 0 $((n - 1))); do
      tgt=${TARGETS[$(((i + r) % n))]}
      echo "round $r/$ROUNDS: $job on $tgt" >&2
      run "$job" "$tgt" "$r"
    done
  done
done

python3 - "$WORK/results.txt" "$WORK/costs.txt" "${TARGETS[@]}" <<'EOF'
import re, statistics, sys
res, costs, targets = sys.argv[1], sys.argv[2], sys.argv[3:]
t = {}
for line in open(res):
    job, tgt, s = line.split()
    t.setdefault(job, {}).setdefault(tgt, []).append(float(s))
print("| job | " + " | ".join(targets) + " |")
print("|---|" + "---|" * len(targets))
for job, row in t.items():
    nat = statistics.median(row["native"])
    cells = []
    for tg in targets:
        m = statistics.median(row[tg])
        cells.append(f"{m:.2f} s" if tg == "native" else f"{m:.2f} s ({m / nat:.2f}×)")
    print(f"| {job} | " + " | ".join(cells) + " |")
units = {"ns": 1, "µs": 1e3, "ms": 1e6, "s": 1e9}
c, under = {}, {}
for line in open(costs):
    job, tgt, rest = line.split(" ", 2)
    m = re.search(r"recording cost: ([\d.]+)(ns|µs|ms|s) of the layer's own work per request", rest)
    a = re.search(r"(\d+) attributed from the kernel's proc connector, (\d+) late, (\d+) missing", rest)
    e = re.search(r"iotap: job exit 0 after ([\d.]+)(ns|µs|ms|s)", rest)
    c.setdefault((job, tgt), []).append((float(m.group(1)) * units[m.group(2)] if m else None, a.groups() if a else None))
    if e:
        under.setdefault(job, {}).setdefault(tgt, []).append(float(e.group(1)) * units[e.group(2)] / 1e9)
if under:
    print()
    print("Time under the recording (the summary's `job exit 0 after`: from the layer and the kernel's view ready to the trace closed, without iotap's start-up):")
    print()
    itgts = [tg for tg in targets if any(tg in row for row in under.values())]
    print("| job | native | " + " | ".join(itgts) + " |")
    print("|---|---|" + "---|" * len(itgts))
    for job, row in under.items():
        nat = statistics.median(t[job]["native"])
        cells = [f"{statistics.median(row[tg]):.2f} s ({statistics.median(row[tg]) / nat:.2f}×)" if tg in row else "—" for tg in itgts]
        print(f"| {job} | {nat:.2f} s | " + " | ".join(cells) + " |")
print()
print("| job | target | layer's own work per request (median) | threads attributed, late, missing (last run) |")
print("|---|---|---|---|")
for (job, tgt), v in c.items():
    s = [x for x, _ in v if x is not None]
    att = v[-1][1]
    print(f"| {job} | {tgt} | {statistics.median(s) / 1e3:.2f} µs | {', '.join(att) if att else '(from /proc)'} |" if s else f"| {job} | {tgt} | — | — |")
EOF
