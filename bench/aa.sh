#!/usr/bin/env bash
# aa.sh: A/A check of the replay engine. Records a real job (scripts/workload-genomics.sh:
# samtools, tar, sqlite3) K times through iotap on fresh directories of one filesystem,
# replays each recording R times in think mode onto fresh directories of the same
# filesystem, and prints per run and as medians: ops and bytes replayed vs recorded,
# divergences, summed op time (I/O time) replayed vs recorded, and runtime replayed vs
# recorded vs the job run natively (without iotap).
#
# Usage: bench/aa.sh [-k RECORDINGS] [-r REPLAYS] [-n READS] [-d DIR] [-a 'REPLAY FLAGS']
# Defaults: -k 3 -r 3 -n 20000 (WORKLOAD_READS) -d /dev/shm/iotap-aa (tmpfs)
# -a passes flags to iotap replay, e.g. -a '--think-cpu spin'.
# Needs: go, jq, python3, samtools, sqlite3, tar; root (or fusermount3) for FUSE.
set -euo pipefail

K=3 R=3 N=20000 WORK=/dev/shm/iotap-aa ARGS=""
while getopts "k:r:n:d:a:h" o; do
  case $o in
    k) K=$OPTARG ;; r) R=$OPTARG ;; n) N=$OPTARG ;; d) WORK=$OPTARG ;; a) ARGS=$OPTARG ;;
    *) sed -n '2,13p' "$0"; exit 2 ;;
  esac
done
REPO=$(cd "$(dirname "$0")/.." && pwd)
JOB=$REPO/scripts/workload-genomics.sh
rm -rf "$WORK"; mkdir -p "$WORK"
BIN=$WORK/iotap
(cd "$REPO" && go build -o "$BIN" ./cmd/iotap)
export WORKLOAD_READS=$N
RES=$WORK/results.tsv; : >"$RES"
now() { date +%s.%N; }

for k in $(seq "$K"); do
  d=$WORK/native$k; mkdir "$d"
  t0=$(now); (cd "$d" && sh "$JOB" >/dev/null); t1=$(now)
  echo -e "native\t$k\t$(python3 -c "print($t1-$t0)")" >>"$RES"
  rm -rf "$d"
  d=$WORK/rec$k; mkdir "$d"
  (cd "$d" && "$BIN" record --target "$d" -o "$WORK/rec$k.iotap" -- sh "$JOB" >/dev/null 2>"$WORK/rec$k.log")
  rm -rf "$d"
  for r in $(seq "$R"); do
    t=$WORK/t; rm -rf "$t"; mkdir "$t"
    # shellcheck disable=SC2086 # ARGS holds several flags
    "$BIN" replay "$WORK/rec$k.iotap" --target "$t" -o "$WORK/res$k.$r" $ARGS >"$WORK/res$k.$r.log" 2>&1
    jq -r --arg k "$k" --arg r "$r" '["replay", $k, $r, .recorded_ops, .replayed_ops + .skipped_ops, .recorded_read_bytes + .recorded_write_bytes,
      .replayed_read_bytes + .replayed_write_bytes, .divergences, .recorded_io_ns, .replay_io_ns, .recorded_span_ns, .replay_span_ns, .round_trip_ns] | @tsv' \
      "$WORK/res$k.$r.t1.r1.json" >>"$RES"
  done
  rm -rf "$WORK/t"
done

echo "job: scripts/workload-genomics.sh, WORKLOAD_READS=$N; replay flags: ${ARGS:-none}; fs $(stat -f -c %T "$WORK"); $K recordings x $R replays (think mode); kernel $(uname -r), $(nproc) cpus, load $(cut -d' ' -f1 /proc/loadavg)"
python3 - "$RES" <<'PY'
import sys, statistics as st
native, rows = [], []
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    if f[0] == "native":
        native.append(float(f[2]))
    else:
        rows.append((int(f[1]), int(f[2])) + tuple(float(x) for x in f[3:]))
print(f"{'rec':>3} {'run':>3} {'ops rec/rep+skip':>17} {'bytes equal':>11} {'diverged':>8} {'I/O rec ms':>10} {'I/O rep ms':>10} {'I/O rep/rec':>11} {'run rec s':>9} {'run rep s':>9} {'rtt us':>6}")
ratios, runs, recio = [], [], {}
for k, r, rops, pops, rb, pb, div, rio, pio, rspan, pspan, rtt in rows:
    ratios.append(pio / rio)
    runs.append(pspan / 1e9)
    recio[k] = rio
    print(f"{k:3d} {r:3d} {int(rops):8d}/{int(pops):<8d} {str(rb == pb):>11} {int(div):8d} {rio/1e6:10.2f} {pio/1e6:10.2f} {pio/rio:11.3f} {rspan/1e9:9.3f} {pspan/1e9:9.3f} {rtt/1e3:6.1f}")
print()
print(f"I/O time, replay / recording: median {st.median(ratios):.3f} [{min(ratios):.3f} .. {max(ratios):.3f}] over {len(ratios)} replays")
v = list(recio.values())
print(f"I/O time of the recordings themselves: median {st.median(v)/1e6:.2f} ms [{min(v)/1e6:.2f} .. {max(v)/1e6:.2f}] (spread {max(v)/min(v)-1:+.1%})")
print(f"runtime: native job median {st.median(native):.3f} s; recordings median {st.median([x[9] for x in rows])/1e9:.3f} s; replays median {st.median(runs):.3f} s")
PY
