#!/usr/bin/env bash
# Wall time of the genomics workload (scripts/workload-genomics.sh) untraced and under
# `iotap record` (in place, --cache none), on a local directory and on s3fs over a local S3
# server, alternating runs. Prints each run and the medians. As root.
#   scripts/record-overhead.sh [RUNS]   (READS=N reads per run, default 50000)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-3}
reads=${READS:-50000}
work=$(mktemp -d /tmp/iotap-overhead.XXXXXX)
(cd "$repo" && go build -o "$work/iotap" ./cmd/iotap && go build -o "$work/fakes3" ./internal/cmd/fakes3)
s3pid=""
cleanup() {
  set +e
  grep -q " $work/s3 fuse.s3fs " /proc/mounts && { fusermount3 -u "$work/s3" || umount -l "$work/s3"; }
  [ -n "$s3pid" ] && kill "$s3pid" && wait "$s3pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
"$work/fakes3" -bucket bench -url-file "$work/url" >/dev/null &
s3pid=$!
for _ in $(seq 100); do [ -s "$work/url" ] && break; sleep 0.1; done
mkdir -p "$work/s3" "$work/s3tmp" "$work/local"
printf 'iotap:iotap-secret\n' > "$work/passwd"; chmod 600 "$work/passwd"
env -u AWS_CA_BUNDLE s3fs bench "$work/s3" -o "url=$(cat "$work/url"),use_path_request_style,passwd_file=$work/passwd,tmpdir=$work/s3tmp"
for _ in $(seq 100); do grep -q " $work/s3 fuse.s3fs " /proc/mounts && break; sleep 0.1; done

one() { # dir traced? -> seconds
  local dir=$1 traced=$2 t0 t1
  mkdir -p "$dir/run" && rm -rf "${dir:?}/run/"*
  sync; echo 3 > /proc/sys/vm/drop_caches
  t0=$(date +%s.%N)
  if [ "$traced" = 1 ]; then
    (cd "$dir/run" && WORKLOAD_READS=$reads "$work/iotap" record -o "$work/t.iotap" -- sh "$repo/scripts/workload-genomics.sh" >/dev/null 2>&1)
  else
    (cd "$dir/run" && WORKLOAD_READS=$reads sh "$repo/scripts/workload-genomics.sh" >/dev/null 2>&1)
  fi
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'
}
declare -A all
for i in $(seq "$runs"); do
  for fs in local s3; do
    for tr in 0 1; do
      s=$(one "$work/$fs" $tr)
      all[$fs$tr]="${all[$fs$tr]:-} $s"
      echo "run $i $fs traced=$tr ${s}s" >&2
    done
  done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-6s %10s %10s %7s\n' fs untraced iotap ratio
for fs in local s3; do
  u=$(echo "${all[${fs}0]}" | median); t=$(echo "${all[${fs}1]}" | median)
  printf '%-6s %9.2fs %9.2fs %6.2fx\n' "$fs" "$u" "$t" "$(awk -v a="$u" -v b="$t" 'BEGIN { print b / a }')"
done
echo "($reads reads, $runs runs each, median; cache none)"
