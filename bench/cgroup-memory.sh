#!/usr/bin/env bash
# cgroup-memory.sh: iotap record under a cgroup memory limit, with Go's memory limit taken
# from the cgroup (iotap's default) and without it (GOMEMLIMIT=off), alternated.
# The job, in place, creates N empty files in one directory (xargs touch), lists them and
# stats each one: the recorder's heap grows with the files the kernel holds. Each run gets
# a fresh cgroup with memory limit M MiB holding iotap, its recorder and the job, and prints
# how it ended, the recorder's peak RSS and the largest heap goal of its garbage collector
# (GODEBUG=gctrace=1).
#
# Usage: bench/cgroup-memory.sh [-m MIB] [-n FILES] [-r ROUNDS] [-d WORKDIR]
#   (root; M=100, N=200000, R=1: one run each way, about 3 minutes on 2 vCPUs)
set -euo pipefail
M=100 N=200000 R=1 WORK=/var/tmp/iotap-cgroup-memory
while getopts "m:n:r:d:h" o; do
  case $o in
    m) M=$OPTARG ;; n) N=$OPTARG ;; r) R=$OPTARG ;; d) WORK=$OPTARG ;; *) sed -n '2,12p' "$0"; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "cgroup-memory: needs root (cgroups, an in-place mount)" >&2; exit 2; }
REPO=$(cd "$(dirname "$0")/.." && pwd)
# A cgroup v2 hierarchy with the memory controller for new cgroups, else the v1 memory one.
if grep -qw memory /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
  CG=/sys/fs/cgroup/iotap-bench-$$ LIMIT=memory.max
elif [ -d /sys/fs/cgroup/memory ]; then
  CG=/sys/fs/cgroup/memory/iotap-bench-$$ LIMIT=memory.limit_in_bytes
else
  echo "cgroup-memory: no cgroup hierarchy with the memory controller" >&2; exit 2
fi
cleanup() { [ -d "$CG" ] && rmdir "$CG" 2>/dev/null || true; }
trap cleanup EXIT
mkdir -p "$WORK"
(cd "$REPO" && go build -o "$WORK/iotap" ./cmd/iotap)
echo "limit ${M} MiB ($CG/$LIMIT), $N files; GOMEMLIMIT=off: without Go's memory limit"
for r in $(seq "$R"); do
  for mode in cgroup off; do
    rm -rf "$WORK/data"; mkdir "$WORK/data"
    mkdir "$CG"; echo $((M << 20)) > "$CG/$LIMIT"
    env=(GODEBUG=gctrace=1); [ $mode = off ] && env+=(GOMEMLIMIT=off)
    (
      echo $BASHPID > "$CG/cgroup.procs"
      cd "$WORK/data"
      exec env "${env[@]}" "$WORK/iotap" record -o "$WORK/t.iotap" -- sh -c \
        "mkdir d && cd d && seq -f f%g $N | xargs touch && ls -f | wc -l >/dev/null && find . -type f | xargs stat -c %s >/dev/null"
    ) >"$WORK/out.txt" 2>&1 || true
    awk -v run="$r" -v mode="$mode" '
      /^gc / { for (i = 1; i < NF; i++) if ($(i+1) == "MB" && $(i+2) == "goal," && $i + 0 > g) g = $i + 0 }
      /job exit|recorder killed/ { sub(/^ *(iotap: |iotap record: )/, ""); end = $0 }
      /recorder peak RSS/ { sub(/.*recorder peak RSS /, ""); sub(/ \(.*/, ""); rss = $0 }
      END { printf "run %d  Go limit %-7s %-40s peak RSS %-8s max heap goal %d MB\n", run, mode, end, rss, g }' "$WORK/out.txt"
    rmdir "$CG" || echo "cgroup-memory: $CG still holds processes" >&2
  done
done
