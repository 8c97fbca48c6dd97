#!/usr/bin/env bash
# predict.sh: does a replay predict how a job does on other storage? For real jobs and three
# backends (a local directory, s3fs and an rclone mount, both over a local S3 server on
# 127.0.0.1), each run:
#   - records the job on the local directory (iotap record): the trace replays predict from;
#   - runs the job itself on every backend, once under iotap record (its trace gives the
#     real job I/O time: summed system call time; on the local directory that is the
#     recording itself) and once without iotap (the real runtime);
#   - replays the local recording onto every backend in think mode (the prediction).
# The jobs (JOBS, comma-separated) are programs of Debian packages with workloads of their own:
#   genomics  the demo's samtools pipeline          ddcp      dd, cp, tar x, cat, rm -r
#   sqlite    sqlite3 inserts, an index, a dump      sysbench  sysbench fileio rndrw with fsyncs
#   git       git clone, status, log, grep, gc       and five metadata-heavy ones:
#   bonnie    bonnie++'s small-file phase (-s 0 -n 4:4096:512:4: 4096 files of 512 B-4 KiB
#             in 4 directories, created, stat'ed, read and deleted in order and at random)
#   tarx      tar x of 10,000 small files (100 directories, 100 B-4 KiB each)
#   postmark  postmark: 2,000 files of 500 B-10 KiB, 4,000 transactions
#   gitco     git checkout of a large tree (TREE, default Go's src/cmd: about 4,400 files)
#   rsync     rsync -a of that tree into the target, then again (every file compared)
# (dbench is not among them: it runs for a set time, so its runtime says nothing and the
# work a run does depends on the storage.)
# Before recording, each run times the job once more on the local directory: the native
# runtime the replays anchor their predictions on (replay --native-runtime), measured apart
# from the runs the predictions are checked against.
# It prints, per job and backend, the medians over the runs of the predicted and the real
# job I/O time and runtime, the prediction's error in %, the anchored prediction's, and how
# many runs' real values fell inside the printed intervals. The local row is the A/A check
# (goal 10 %), the others the cross-backend prediction (goal 15 %).
#
# Usage: bench/predict.sh            (RUNS=5 by default; RUNS=3 for a quicker run)
# Environment: RUNS (5), WORK (/var/tmp/iotap-predict, on the local file system),
#   READS (genomics job size, 10000), JOBS (genomics,ddcp,sqlite,sysbench,git,bonnie,tarx,postmark,gitco,rsync),
#   BACKENDS (local,s3fs,rclone), TREE (the tree gitco and rsync copy), REPLAY_ARGS (extra iotap replay flags).
# Needs: root, go, python3, jq, s3fs, rclone, samtools, sqlite3, tar, awk, sysbench, git, bonnie++,
#   postmark, rsync.
set -euo pipefail

RUNS=${RUNS:-5}
WORK=${WORK:-/var/tmp/iotap-predict}
READS=${READS:-10000}
JOBS=${JOBS:-genomics,ddcp,sqlite,sysbench,git,bonnie,tarx,postmark,gitco,rsync}
BACKENDS=${BACKENDS:-local,s3fs,rclone}
REPLAY_ARGS=${REPLAY_ARGS:-}
TREE=${TREE:-$(go env GOROOT)/src/cmd}
REPO=${REPO:-$(cd "$(dirname "$0")/.." && pwd)}

for p in jq python3 s3fs rclone samtools sqlite3 tar awk sysbench git bonnie++ postmark rsync; do
  command -v "$p" >/dev/null || { echo "predict: $p is not installed" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "predict: run as root (in-place recording, FUSE mounts)" >&2; exit 2; }

cleanup() {
  for m in "$WORK/mnt/s3fs" "$WORK/mnt/rclone"; do
    if grep -q " $m " /proc/mounts 2>/dev/null; then fusermount3 -u "$m" 2>/dev/null || umount -l "$m" || true; fi
  done
  [ -n "${FAKES3_PID:-}" ] && kill "$FAKES3_PID" 2>/dev/null || true
}
trap cleanup EXIT
cleanup
rm -rf "$WORK"; mkdir -p "$WORK"/{bin,mnt/s3fs,mnt/rclone,local,s3fs-tmp,rclone-cache,out}
(cd "$REPO" && go build -o "$WORK/bin/iotap" ./cmd/iotap && go build -o "$WORK/bin/fakes3" ./internal/cmd/fakes3)
IOTAP=$WORK/bin/iotap
# The git job clones this bare repository (outside every target) through git's own transport.
git clone -q --bare "$REPO" "$WORK/src.git"
# Inputs of the metadata-heavy jobs, outside every target: a tarball of 10,000 small files, a
# bare repository of TREE, postmark's configuration.
python3 - "$WORK/small.tar" <<'PY'
import io, random, sys, tarfile
r = random.Random(42)
with tarfile.open(sys.argv[1], "w") as t:
    for d in range(100):
        for f in range(100):
            data = r.randbytes(r.randint(100, 4096))
            ti = tarfile.TarInfo(f"d{d:02}/f{f:03}.dat")
            ti.size, ti.mtime, ti.mode = len(data), 1700000000, 0o644
            t.addfile(ti, io.BytesIO(data))
PY
[ -d "$TREE" ] || { echo "predict: TREE $TREE is not a directory" >&2; exit 2; }
git init -q "$WORK/tree" && cp -r "$TREE/." "$WORK/tree/" && git -C "$WORK/tree" add -A &&
  git -C "$WORK/tree" -c user.name=predict -c user.email=predict@localhost commit -q -m tree &&
  git clone -q --bare "$WORK/tree" "$WORK/tree.git" && rm -rf "$WORK/tree"
printf 'set location .\nset number 2000\nset transactions 4000\nset size 500 10000\nset seed 42\nrun\nquit\n' >"$WORK/postmark.cfg"

# The S3 server, and both clients over it (one bucket each).
"$WORK/bin/fakes3" -bucket s3fs -bucket rclone -url-file "$WORK/url" >"$WORK/fakes3.log" 2>&1 &
FAKES3_PID=$!
for _ in $(seq 100); do [ -s "$WORK/url" ] && break; sleep 0.1; done
URL=$(cat "$WORK/url")
printf 'iotap:iotap-secret\n' >"$WORK/passwd-s3fs"; chmod 600 "$WORK/passwd-s3fs"
env -u AWS_CA_BUNDLE s3fs s3fs "$WORK/mnt/s3fs" -o "url=$URL,use_path_request_style,passwd_file=$WORK/passwd-s3fs,tmpdir=$WORK/s3fs-tmp"
env -u AWS_CA_BUNDLE RCLONE_CONFIG_FAKE_TYPE=s3 RCLONE_CONFIG_FAKE_PROVIDER=Other RCLONE_CONFIG_FAKE_ENDPOINT="$URL" \
  RCLONE_CONFIG_FAKE_ACCESS_KEY_ID=iotap RCLONE_CONFIG_FAKE_SECRET_ACCESS_KEY=iotap-secret RCLONE_CONFIG_FAKE_FORCE_PATH_STYLE=true \
  rclone mount fake:rclone "$WORK/mnt/rclone" --vfs-cache-mode writes --cache-dir "$WORK/rclone-cache" --daemon
for m in s3fs rclone; do
  for _ in $(seq 100); do grep -q " $WORK/mnt/$m fuse" /proc/mounts && break; sleep 0.1; done
  grep -q " $WORK/mnt/$m fuse" /proc/mounts || { echo "predict: $m did not mount" >&2; exit 1; }
done
dir_of() { case $1 in local) echo "$WORK/local" ;; *) echo "$WORK/mnt/$1" ;; esac; }

# The jobs, run in the current directory with relative paths. GNU tar's "file changed as
# we read it" (exit 1) is taken as a warning on every backend: rclone's mount changes a
# file's times when its upload completes, after the writer closed it.
mkdir -p "$WORK/shim"
printf '#!/bin/sh\n%s "$@"; rc=$?; [ $rc = 1 ] && exit 0; exit $rc\n' "$(command -v tar)" >"$WORK/shim/tar"
chmod +x "$WORK/shim/tar"
export PATH="$WORK/shim:$PATH"
job_cmd() {
  case $1 in
    genomics) echo "WORKLOAD_READS=$READS sh $REPO/scripts/workload-genomics.sh >/dev/null" ;;
    ddcp) echo 'dd if=/dev/urandom of=data bs=1M count=16 status=none && cp data copy && mkdir -p tree/a tree/b &&
      for i in $(seq 1 40); do dd if=data of=tree/a/f$i bs=64k count=4 skip=$i status=none; done &&
      cp copy tree/b/ && tar cf tree.tar tree && mkdir x && tar xf tree.tar -C x && cat x/tree/a/* >/dev/null && rm -r tree x' ;;
    sqlite) echo 'sqlite3 db.sqlite "create table t(id integer primary key, k text, v blob);" &&
      for b in 1 2 3 4 5 6 7 8; do sqlite3 db.sqlite "begin; with recursive c(x) as (select 1 union all select x+1 from c where x<2500)
        insert into t(k, v) select hex(randomblob(8)), randomblob(200) from c; commit;"; done &&
      sqlite3 db.sqlite "create index tk on t(k); select count(*) from t where k like '"'"'A%'"'"';" >/dev/null &&
      sqlite3 db.sqlite ".dump" >dump.sql' ;;
    sysbench) echo 'o="--file-num=16 --file-total-size=32M" && sysbench fileio $o prepare >/dev/null &&
      sysbench fileio $o --file-test-mode=rndrw --file-fsync-freq=100 --time=0 --events=4000 --threads=1 run >/dev/null &&
      sysbench fileio $o cleanup >/dev/null' ;;
    git) echo "git clone -q --no-local $WORK/src.git repo && cd repo && git status >/dev/null &&
      git log --stat >/dev/null && git grep -q fuse && git gc -q" ;;
    bonnie) echo 'bonnie++ -d . -s 0 -n 4:4096:512:4 -u root -q -x 1 >/dev/null' ;;
    tarx) echo "tar xf $WORK/small.tar" ;;
    postmark) echo "postmark $WORK/postmark.cfg >/dev/null" ;;
    gitco) echo "git clone -q --no-checkout $WORK/tree.git repo && cd repo && git checkout -q -f HEAD" ;;
    rsync) echo "rsync -a $TREE/ tree/ && rsync -a $TREE/ tree/" ;;
    *) echo "predict: unknown job $1" >&2; exit 2 ;;
  esac
}
now() { date +%s.%N; }
fresh() { rm -rf "$1"; mkdir -p "$1"; }
# summed op time and span of a trace, as replay counts them: an afap replay onto tmpfs.
trace_times() {
  local t=/dev/shm/iotap-predict-scratch
  fresh "$t"
  "$IOTAP" replay "$1" --target "$t" --timing afap -o "$1.afap" --sample-interval 0 >/dev/null 2>&1 || true
  jq -r '[.recorded_io_ns, .recorded_span_ns] | @tsv' "$1.afap.t1.r1.json"
  rm -rf "$t"
}

RES=$WORK/results.tsv; : >"$RES"
IFS=, read -ra jobs <<<"$JOBS"
IFS=, read -ra backends <<<"$BACKENDS"
for run in $(seq "$RUNS"); do
  for job in "${jobs[@]}"; do
    cmd=$(job_cmd "$job")
    # The native runtime the replays anchor on.
    d=$WORK/local/anchor-$job-$run; fresh "$d"; sync
    a0=$(now); (cd "$d" && sh -c "$cmd"); a1=$(now)
    rm -rf "$d"
    anchor=$(python3 -c "print(f'{($a1-$a0)*1e9:.0f}ns')")
    rec=$WORK/out/$job.$run.rec.iotap
    d=$WORK/local/rec-$job-$run; fresh "$d"
    (cd "$d" && "$IOTAP" record --target "$d" -o "$rec" -- sh -c "$cmd" >/dev/null 2>"$rec.log")
    rm -rf "$d"
    for b in "${backends[@]}"; do
      base=$(dir_of "$b")
      # The job itself: runtime without iotap, job I/O time under iotap record.
      d=$base/native-$job-$run; fresh "$d"; sync
      t0=$(now); (cd "$d" && sh -c "$cmd"); t1=$(now)
      rm -rf "$d"
      real=$rec # A/A: the recording itself is the real run
      if [ "$b" != local ]; then
        real=$WORK/out/$job.$run.$b.iotap
        d=$base/real-$job-$run; fresh "$d"; sync
        (cd "$d" && "$IOTAP" record --target "$d" -o "$real" -- sh -c "$cmd" >/dev/null 2>"$real.log")
        rm -rf "$d"
      fi
      read -r rio rspan < <(trace_times "$real")
      # The prediction: the local recording replayed onto the backend.
      d=$base/replay-$job-$run; fresh "$d"; sync
      # shellcheck disable=SC2086 # REPLAY_ARGS holds several flags
      "$IOTAP" replay "$rec" --target "$d" -o "$WORK/out/$job.$run.$b.replay" --sample-interval 0 --native-runtime "$anchor" $REPLAY_ARGS >"$WORK/out/$job.$run.$b.replay.log" 2>&1
      rm -rf "$d"
      jq -r --arg job "$job" --arg b "$b" --arg run "$run" --arg wall "$(python3 -c "print($t1-$t0)")" --arg rio "$rio" --arg rspan "$rspan" \
        '[$job, $b, $run, .replay_io_ns, .replay_span_ns, .recorded_io_ns, .recorded_span_ns, $rio, $rspan, $wall, .divergences, .fallbacks, .round_trip_ns, .lag_p99_ns, .replayer_cpu_share,
          .prediction.runtime_low_ns, .prediction.runtime_high_ns, .prediction.io_low_ns, .prediction.io_high_ns,
          .prediction.anchored_runtime_ns, .prediction.anchored_runtime_low_ns, .prediction.anchored_runtime_high_ns] | @tsv' \
        "$WORK/out/$job.$run.$b.replay.t1.r1.json" >>"$RES"
    done
  done
done

echo "bench/predict.sh, RUNS=$RUNS, $(date -u +%Y-%m-%d), kernel $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); local: $(stat -f -c %T "$WORK/local"); s3fs $(s3fs --version 2>&1 | grep -o 'V[0-9.]*' | head -1), rclone $(rclone version 2>/dev/null | head -1 | awk '{print $2}') --vfs-cache-mode writes, over gofakes3 on 127.0.0.1"
python3 - "$RES" <<'PY'
import sys, statistics as st
from collections import defaultdict
rows = defaultdict(list)
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    rows[(f[0], f[1])].append([float(x) if x not in ("", "null") else float("nan") for x in f[3:]])
def err(p, r):
    return 100 * (p - r) / r if r else float("nan")
inside = defaultdict(lambda: [0, 0])  # what -> [runs inside, runs]
print("| job | backend | predicted I/O s | real I/O s | error | predicted runtime s | real runtime s | error | anchored runtime s | error | runs inside interval: I/O, runtime, anchored | recorded runtime s | divergences | replayer lag p99 ms |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
for (job, b), rs in rows.items():
    m = lambda i: st.median(r[i] for r in rs)
    pio, pspan, lio, lspan, rio, rspan, wall = (m(i) for i in range(7))
    div, lag = m(7), m(10)
    anch = m(16)
    cnt = []
    for what, val, lo, hi in (("io", 4, 14, 15), ("runtime", 6, 12, 13), ("anchored", 6, 17, 18)):
        n = k = 0
        for r in rs:
            real = r[val] * (1e9 if val == 6 else 1)
            if r[lo] == r[lo] and r[hi] == r[hi]:
                n += 1
                k += r[lo] <= real <= r[hi]
        inside[what][0] += k; inside[what][1] += n
        cnt.append(f"{k}/{n}")
    print(f"| {job} | {b} | {pio/1e9:.3f} | {rio/1e9:.3f} | {err(pio, rio):+.1f} % | {pspan/1e9:.3f} | {wall:.3f} | {err(pspan/1e9, wall):+.1f} % "
          f"| {anch/1e9:.3f} | {err(anch/1e9, wall):+.1f} % | {', '.join(cnt)} | {lspan/1e9:.3f} | {div:.0f} | {lag/1e6:.2f} |")
print()
for what, (k, n) in inside.items():
    print(f"runs whose real {what} lies inside the printed interval: {k} of {n} ({100*k/max(n,1):.0f} %)")
PY
