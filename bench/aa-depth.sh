#!/usr/bin/env bash
# aa-depth.sh: A/A check of replay at queue depth. Records fio 4 KiB random O_DIRECT
# reads at iodepth Q (io_uring by default) through `iotap record` on a local directory,
# K times, replays each recording R times in think mode onto fresh directories of the
# same file system, and prints, per run and as medians of the paired ratios: read IOPS
# (reads over the trace's span), read p50 and p99 and the mean in-flight depth, replayed
# against recorded.
#
# Usage: bench/aa-depth.sh [-k RECORDINGS] [-r REPLAYS] [-t SECONDS] [-q DEPTH] [-e ENGINE]
#                          [-s SIZE] [-p SERVER_PROCS] [-d DIR] [-a 'REPLAY FLAGS']
# Defaults: -k 3 -r 2 -t 8 -q 16 -e io_uring -s 256M -p 0 (record's default) -d /var/tmp/iotap-aa-depth
# Needs: go, fio, python3; root (or fusermount3) for FUSE.
set -euo pipefail

K=3 R=2 T=8 Q=16 ENGINE=io_uring SIZE=256M PROCS=0 WORK=/var/tmp/iotap-aa-depth ARGS=""
while getopts "k:r:t:q:e:s:p:d:a:h" o; do
  case $o in
    k) K=$OPTARG ;; r) R=$OPTARG ;; t) T=$OPTARG ;; q) Q=$OPTARG ;; e) ENGINE=$OPTARG ;;
    s) SIZE=$OPTARG ;; p) PROCS=$OPTARG ;; d) WORK=$OPTARG ;; a) ARGS=$OPTARG ;;
    *) sed -n '2,12p' "$0"; exit 2 ;;
  esac
done
REPO=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$WORK"; mkdir -p "$WORK"
BIN=$WORK/iotap
(cd "$REPO" && go build -o "$BIN" ./cmd/iotap)
RES=$WORK/results.tsv; : >"$RES"

# row KIND K R TRACE: one line of read count, span, p50, p99 and mean depth.
row() {
  "$BIN" report --format json "$4" | python3 -c '
import json, sys
t = json.load(sys.stdin)["total"]
r = [o for o in t["ops"] if o["op"] == "read"][0]
print("\t".join(map(str, [sys.argv[1], sys.argv[2], sys.argv[3], r["count"], t["duration_ns"], r["p50_ns"], r["p99_ns"], r["inflight"]["mean"]])))' "$1" "$2" "$3" >>"$RES"
}

for k in $(seq "$K"); do
  d=$WORK/rec$k; mkdir "$d"
  fio --name=layout --filename="$d/f" --size="$SIZE" --rw=write --bs=1M --direct=1 --output=/dev/null
  (cd "$d" && "$BIN" record --server-procs "$PROCS" --target "$d" -o "$WORK/rec$k.iotap" -- \
    fio --name=randqd --filename=f --size="$SIZE" --rw=randread --bs=4k --direct=1 --ioengine="$ENGINE" \
    --iodepth="$Q" --time_based --runtime="$T" --output=/dev/null >/dev/null 2>"$WORK/rec$k.log")
  rm -rf "$d"
  row record "$k" 0 "$WORK/rec$k.iotap"
  for r in $(seq "$R"); do
    t=$WORK/t; rm -rf "$t"; mkdir "$t"
    # shellcheck disable=SC2086 # ARGS holds several flags
    "$BIN" replay "$WORK/rec$k.iotap" --target "$t" -o "$WORK/res$k.$r" $ARGS >"$WORK/res$k.$r.log" 2>&1
    row replay "$k" "$r" "$WORK/res$k.$r.t1.r1.iotap"
  done
  rm -rf "$WORK/t"
done

echo "fio randread 4k direct $ENGINE iodepth $Q, ${T}s, $SIZE; record --server-procs $PROCS; replay flags: ${ARGS:-none}; fs $(stat -f -c %T "$WORK"); $K recordings x $R replays (think mode); kernel $(uname -r), $(nproc) cpus, load $(cut -d' ' -f1 /proc/loadavg)"
python3 - "$RES" <<'PY'
import sys, statistics as st
rec, rows = {}, []
for line in open(sys.argv[1]):
    kind, k, r, n, span, p50, p99, depth = line.split("\t")
    v = (int(n) / (int(span) / 1e9), int(p50) / 1e3, int(p99) / 1e3, float(depth))
    if kind == "record":
        rec[k] = v
    else:
        rows.append((k, r, v))
print(f"{'rec':>3} {'run':>3} {'IOPS rec':>9} {'IOPS rep':>9} {'ratio':>6} {'p50 rec us':>10} {'p50 rep us':>10} {'p99 rec us':>10} {'p99 rep us':>10} {'ratio':>6} {'depth rec':>9} {'depth rep':>9}")
iops, p99s, p50s, depths = [], [], [], []
for k, r, v in rows:
    a = rec[k]
    iops.append(v[0] / a[0]); p50s.append(v[1] / a[1]); p99s.append(v[2] / a[2]); depths.append(v[3] / a[3])
    print(f"{k:>3} {r:>3} {a[0]:9.0f} {v[0]:9.0f} {v[0]/a[0]:6.3f} {a[1]:10.1f} {v[1]:10.1f} {a[2]:10.1f} {v[2]:10.1f} {v[2]/a[2]:6.3f} {a[3]:9.2f} {v[3]:9.2f}")
def m(x): return f"median {st.median(x):.3f} [{min(x):.3f} .. {max(x):.3f}]"
print()
print(f"replay / recording over {len(rows)} replays: IOPS {m(iops)}; p99 {m(p99s)}; p50 {m(p50s)}; mean depth {m(depths)}")
PY
