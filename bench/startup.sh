#!/usr/bin/env bash
# startup.sh: what a recording costs before and after the job, whatever the job: the wall
# time of `iotap record -- true` in an empty directory, with the default settings (kernel
# passthrough and the kernel's program), with --data layer (the program without its
# data-call and page-fault parts) and with --data layer --legs probe (no BPF program).
# Rounds run every build and setting in an order that rotates every round; prints the
# median, minimum and maximum of each.
#
# Usage: bench/startup.sh [-r ROUNDS] [-d WORKDIR] [-b [LABEL=]BINARY]... [-t]
# Defaults: -r 15 -d /var/tmp/iotap-startup, the build of this checkout. Each -b adds an
# iotap binary to compare (labelled LABEL, or its file name). -t also prints, per build and
# setting, the median time of each step of the recorder's timeline (IOTAP_DEBUG; builds
# without one print none): when the step ended, and the step's own time since the one
# before, which other load on the machine moves less than the whole. Needs root, go.
set -euo pipefail
ROUNDS=15 WORK=/var/tmp/iotap-startup TIMELINE=0
labels=() bins=()
while getopts r:d:b:t o; do
  case $o in
    r) ROUNDS=$OPTARG ;; d) WORK=$OPTARG ;; t) TIMELINE=1 ;;
    b) if [[ $OPTARG == *=* ]]; then labels+=("${OPTARG%%=*}") bins+=("${OPTARG#*=}"); else labels+=("$(basename "$OPTARG")") bins+=("$OPTARG"); fi ;;
    *) sed -n 2,15p "$0"; exit 2 ;;
  esac
done
REPO=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$WORK"; mkdir -p "$WORK/job" "$WORK/out"
if [ ${#bins[@]} -eq 0 ]; then
  (cd "$REPO" && go build -o "$WORK/iotap" ./cmd/iotap)
  labels=(checkout) bins=("$WORK/iotap")
else
  for i in "${!bins[@]}"; do
    [ -x "${bins[$i]}" ] || { echo "startup: ${bins[$i]} is not an executable" >&2; exit 2; }
    bins[i]=$(realpath "${bins[$i]}")
  done
fi
modes=("default" "--data layer" "--data layer --legs probe")
# Every (build, setting) pair, as "build setting".
combos=()
for b in "${!bins[@]}"; do for m in "${!modes[@]}"; do combos+=("$b $m"); done; done
n=${#combos[@]}
now() { date +%s%N; }
# ms prints a Go duration (330µs, 12.5ms, 1.2s) in milliseconds.
ms() { awk -v d="$1" 'BEGIN { v = d + 0; if (d ~ /µs$/) v /= 1000; else if (d ~ /ms$/) v += 0; else if (d ~ /s$/) v *= 1000; print v }'; }
load0=$(cut -d' ' -f1-3 /proc/loadavg)
cd "$WORK/job"
: >"$WORK/out/steps"
for r in $(seq "$ROUNDS"); do
  for k in $(seq 0 $((n - 1))); do
    read -r b m <<<"${combos[$(((k + r) % n))]}"
    # shellcheck disable=SC2206 # the setting's flags, one word each
    args=(${modes[$m]})
    [ "${modes[$m]}" = default ] && args=()
    debug=()
    [ "$TIMELINE" = 1 ] && debug=(IOTAP_DEBUG=1)
    t0=$(now)
    env "${debug[@]}" "${bins[$b]}" record "${args[@]}" -o "$WORK/out/t.iotap" -- true >/dev/null 2>"$WORK/out/err" ||
      { echo "startup: ${labels[$b]}: iotap record ${modes[$m]} failed:" >&2; cat "$WORK/out/err" >&2; exit 1; }
    t1=$(now)
    echo "$b $m $(((t1 - t0) / 1000))"
    if [ "$TIMELINE" = 1 ]; then
      sed -n 's/.*msg=timeline step=\("[^"]*"\|[^ ]*\) at=\([^ ]*\).*/\1\t\2/p' "$WORK/out/err" | tr -d '"' |
        while IFS=$'\t' read -r step at; do printf '%s\t%s\t%s\t%s\t%s\n' "$b" "$m" "$r" "$step" "$(ms "$at")"; done >>"$WORK/out/steps"
    fi
  done
done >"$WORK/out/times"
echo "iotap record -- true, $ROUNDS rounds, $(date -u +%FT%TZ), $(nproc) CPUs, load $load0 before, $(cut -d' ' -f1-3 /proc/loadavg) after"
echo "| build | settings | median | min–max |"
echo "|---|---|---|---|"
for c in "${combos[@]}"; do
  read -r b m <<<"$c"
  awk -v b="$b" -v m="$m" '$1 == b && $2 == m { print $3 }' "$WORK/out/times" | sort -n |
    awk -v l="${labels[$b]}" -v s="${modes[$m]}" '{ a[NR] = $1 } END { printf "| %s | %s | %.0f ms | %.0f–%.0f ms |\n", l, s, a[int((NR + 1) / 2)] / 1000, a[1] / 1000, a[NR] / 1000 }'
done
[ "$TIMELINE" = 1 ] || exit 0
echo
echo "The recorder's timeline (IOTAP_DEBUG), medians over the rounds: when each step ended, in ms since iotap record began, and (in parentheses) the step's own time since the step before."
for c in "${combos[@]}"; do
  read -r b m <<<"$c"
  awk -F'\t' -v b="$b" -v m="$m" '$1 == b && $2 == m' "$WORK/out/steps" | grep -q . || continue
  echo
  echo "${labels[$b]}, ${modes[$m]}:"
  echo "| step | ends at | own time |"
  echo "|---|---|---|"
  awk -F'\t' -v b="$b" -v m="$m" '
    function median(list,   k, x, i, j, t) {
      k = split(list, x, " ")
      for (i = 2; i <= k; i++) { t = x[i]; for (j = i - 1; j >= 1 && x[j] > t; j--) x[j + 1] = x[j]; x[j + 1] = t }
      return k % 2 ? x[(k + 1) / 2] : (x[k / 2] + x[k / 2 + 1]) / 2
    }
    $1 == b && $2 == m {
      if (!($4 in seen)) { seen[$4] = 1; order[++ns] = $4 }
      at[$4] = at[$4] " " $5
      own[$4] = own[$4] " " ($3 == round ? $5 - prev : $5)
      round = $3; prev = $5
    }
    END { for (i = 1; i <= ns; i++) printf "| %s | %.1f ms | (%.1f ms) |\n", order[i], median(at[order[i]]), median(own[order[i]]) }
  ' "$WORK/out/steps"
done
