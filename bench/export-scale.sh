#!/usr/bin/env bash
# What exporting and summing up traces costs at scale (issue: Parquet export at 1M events/s
# or more, under 200 MB of memory on any trace; a summary of 1,000 traces in under a minute
# on 2 CPUs; report at 2M events/s): events/s and peak RSS of
#   iotap export --format parquet   one trace of EVENTS events (default 10,000,000)
#   iotap export --format jsonl     the same trace
#   iotap export --format parquet   TRACES small traces (default 1,000 of SMALL events) into a dataset
#   iotap summary --format parquet  the same small traces
#   iotap report                    the big trace (set EVENTS=100000000 for the 100M-event figure)
# The traces are synthetic (bench/tracegen: threads opening, reading or writing in 64 KiB
# requests and closing files, lookups that fail). Run on a quiet machine; wall times are
# medians of RUNS runs (default 3), peak RSS the largest, from /usr/bin/time.
#
#   bench/export-scale.sh                    # 10M-event trace, 1,000 small traces
#   EVENTS=1000000 TRACES=100 RUNS=1 bench/export-scale.sh   # a short check
#   ONLY=report EVENTS=100000000 bench/export-scale.sh       # report alone, 100M events
# ONLY=report measures report alone (no small traces are made); its trace takes about
# 9 bytes per event on disk (100M events: about 0.9 GB).
set -euo pipefail
cd "$(dirname "$0")/.."
EVENTS=${EVENTS:-10000000}
TRACES=${TRACES:-1000}
SMALL=${SMALL:-10000}
RUNS=${RUNS:-3}
ONLY=${ONLY:-}
case $ONLY in
'' | report) ;;
*) echo "ONLY=$ONLY: want report (or nothing for every step)" >&2; exit 2 ;;
esac
work=${WORK:-$(mktemp -d /tmp/iotap-export-scale.XXXXXX)}
mkdir -p "$work"
go build -buildvcs=true -o "$work/iotap" ./cmd/iotap
go build -o "$work/tracegen" ./bench/tracegen
[ -f "$work/big.iotap" ] || "$work/tracegen" -events "$EVENTS" -o "$work/big.iotap"
[ -n "$ONLY" ] || [ -d "$work/small" ] || "$work/tracegen" -events "$SMALL" -traces "$TRACES" -o "$work/small"
small_events=$((TRACES * SMALL))

# measure NAME EVENTS CMD...: runs CMD RUNS times (its outputs removed before each run),
# prints the median wall time, events/s and the largest peak RSS.
measure() {
  local name=$1 events=$2; shift 2
  local walls=() rss=0
  for _ in $(seq "$RUNS"); do
    rm -rf "$work/out" "$work/out.parquet" "$work/out.jsonl"
    sync
    /usr/bin/time -f '%e %M' -o "$work/time" "$@" >/dev/null 2>"$work/stderr" || { cat "$work/stderr" >&2; exit 1; }
    read -r wall kb < "$work/time"
    walls+=("$wall")
    rss=$(( kb > rss ? kb : rss ))
  done
  local med
  med=$(printf '%s\n' "${walls[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  awk -v n="$name" -v e="$events" -v w="$med" -v r="$rss" \
    'BEGIN { printf "%-34s %12d events %8.2f s %12.0f events/s %8.1f MB peak RSS\n", n, e, w, (w > 0 ? e / w : 0), r / 1024 }'
}

echo "$("$work/iotap" --version | head -1); $(nproc) CPUs; $(date -u +%Y-%m-%d)"
if [ -z "$ONLY" ]; then
  measure "export parquet (one trace)" "$EVENTS" "$work/iotap" export --format parquet -o "$work/out.parquet" "$work/big.iotap"
  measure "export jsonl (one trace)" "$EVENTS" "$work/iotap" export --format jsonl -o "$work/out.jsonl" "$work/big.iotap"
  measure "export parquet ($TRACES traces)" "$small_events" "$work/iotap" export --format parquet -o "$work/out" "$work/small"
  measure "summary parquet ($TRACES traces)" "$small_events" "$work/iotap" summary --format parquet -o "$work/out.parquet" "$work/small"
fi
measure "report (one trace)" "$EVENTS" "$work/iotap" report -o /dev/null "$work/big.iotap"
echo "traces kept in $work (WORK=$work reuses them)"
