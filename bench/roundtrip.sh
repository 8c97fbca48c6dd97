#!/usr/bin/env bash
# roundtrip.sh: where a short process's time goes on a traced mount, with the kernel's view of
# each FUSE request (bench/fuse-roundtrip.bt under bpftrace).
#
# Runs a shell loop of K `cat f >/dev/null` (f: 4 KiB) natively, on the untraced loopback
# (benchmount, --cache none options) and under `iotap record --cache MODE` for each MODE of -m,
# R rounds in rotating order, each under bpftrace (native too, so that the probes' own cost is
# in every row). Prints per target the wall time
# per cat (median over rounds, and its excess over native), the FUSE requests and system calls
# per cat, and the median of each part of a request:
#   app→send     the cat's system call entry to its first request's queueing (path walk, set-up)
#   send→daemon  queued to the server's read(2) of /dev/fuse returning it (waking the server)
#   daemon       that read's return to the server's reply write (the server's own work)
#   reply→end    the reply write's entry to the kernel ending the request
#   end→app      the request's end to the cat running again (waking the caller)
#   app→exit     the cat running again to its system call's return
# and the time per cat spent in system calls that went to the FUSE server (sum over calls).
#
# Usage: bench/roundtrip.sh [-r ROUNDS] [-k CATS] [-m MODE,...] [-d WORKDIR]
# Defaults: -r 3 -k 1000 -m none,kernel -d /var/tmp/iotap-roundtrip
# Needs root, bpftrace (tracefs on /sys/kernel/tracing), go, python3.
set -euo pipefail
ROUNDS=3 CATS=1000 MODES=none,kernel WORK=/var/tmp/iotap-roundtrip
while getopts "r:k:m:d:h" o; do
  case $o in
    r) ROUNDS=$OPTARG ;; k) CATS=$OPTARG ;; m) MODES=$OPTARG ;; d) WORK=$OPTARG ;;
    *) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "roundtrip.sh: needs root" >&2; exit 2; }
command -v bpftrace >/dev/null || { echo "roundtrip.sh: needs bpftrace" >&2; exit 2; }
[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing
IFS=, read -ra MODES <<<"$MODES"
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(realpath -m "$WORK")
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  PIDS=()
  awk -v p="$WORK/" 'index($2, p) == 1 {print $2}' /proc/self/mounts | sort -r |
    while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cleanup
rm -rf --one-file-system "$WORK"
mkdir -p "$WORK"/{bin,mnt,out}
(cd "$REPO" && go build -o "$WORK/bin/iotap" ./cmd/iotap && go build -o "$WORK/bin/benchmount" ./bench/benchmount)
head -c 4096 /dev/urandom >"$WORK/f4k"
LOOP="for i in \$(seq $CATS); do cat f >/dev/null; done"
TARGETS=(native loopback "${MODES[@]}")

# run TARGET ROUND
run() {
  local tgt=$1 r=$2 dir="$WORK/dir" bt='' t0 t1
  rm -rf --one-file-system "$dir"; mkdir -p "$dir"; cp "$WORK/f4k" "$dir/f"
  {
    bpftrace "$REPO/bench/fuse-roundtrip.bt" cat >"$WORK/out/$tgt.$r.bt" 2>"$WORK/out/$tgt.$r.bterr" &
    bt=$!; PIDS+=("$bt")
    for _ in $(seq 200); do grep -q Attaching "$WORK/out/$tgt.$r.bterr" "$WORK/out/$tgt.$r.bt" 2>/dev/null && break; sleep 0.05; done
    sleep 0.5 # the probes attach after the line
  }
  case $tgt in
    native) t0=$EPOCHREALTIME; (cd "$dir" && sh -c "$LOOP"); t1=$EPOCHREALTIME ;;
    loopback)
      rm -f "$WORK/ready"
      "$WORK/bin/benchmount" mount -cache none -target "$dir" -mount "$WORK/mnt" -ready "$WORK/ready" 2>"$WORK/out/server.log" &
      local p=$!
      for _ in $(seq 100); do [ -e "$WORK/ready" ] && break; sleep 0.05; done
      t0=$EPOCHREALTIME; sh -c "cd $WORK/mnt && $LOOP"; t1=$EPOCHREALTIME
      kill -TERM "$p"; wait "$p" 2>/dev/null || true ;;
    *)
      t0=$EPOCHREALTIME
      (cd "$dir" && "$WORK/bin/iotap" record --cache "$tgt" --target . -o "$WORK/out/t.iotap" -- sh -c "$LOOP") 2>"$WORK/out/$tgt.$r.summary"
      t1=$EPOCHREALTIME ;;
  esac
  echo "$tgt $r $t0 $t1" >>"$WORK/out/walls.txt"
  if [ -n "$bt" ]; then kill -INT "$bt"; wait "$bt" 2>/dev/null || true; PIDS=(); fi
}

: >"$WORK/out/walls.txt"
n=${#TARGETS[@]}
for r in $(seq "$ROUNDS"); do
  for i in $(seq 0 $((n - 1))); do
    tgt=${TARGETS[$(((i + r) % n))]}
    echo "round $r/$ROUNDS: $tgt" >&2
    run "$tgt" "$r"
  done
done

python3 - "$WORK/out" "$CATS" "${TARGETS[@]}" <<'EOF'
import glob, statistics, sys
out, cats, targets = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
walls = {}
for line in open(f"{out}/walls.txt"):
    t, r, a, b = line.split()
    walls.setdefault(t, []).append(float(b) - float(a))
nat = statistics.median(walls["native"]) / cats
parts = ["app→send", "send→daemon", "daemon", "reply→end", "end→app", "app→exit"]
print("| target | wall per cat | over native | requests per cat | FUSE calls per cat | time in FUSE calls per cat | " + " | ".join(parts) + " |")
print("|---|---|---|---|---|---|" + "---|" * len(parts))
for t in targets:
    w = statistics.median(walls[t]) / cats
    if t == "native":
        print(f"| native | {w*1e6:.0f} µs | | | | |" + " |" * len(parts))
        continue
    seg = {p: [] for p in parts}
    nreq = ncalls = 0
    callns = 0
    runs = glob.glob(f"{out}/{t}.*.bt")
    for f in runs:
        req, start = {}, {}
        for line in open(f):
            x = line.split()
            if not x or x[0] not in "SGWEBX" or len(x[0]) != 1:
                continue
            u = int(x[1])
            if x[0] == "S":
                tid, e, s = int(x[2]), int(x[3]), int(x[4])
                req[u] = {"S": s, "tid": tid}
                nreq += 1
                if e:
                    start[tid] = e
                    seg["app→send"].append(s - e)
            elif u in req:
                req[u][x[0]] = int(x[2])
                if x[0] == "X" and req[u]["tid"] in start:
                    ncalls += 1
                    callns += int(x[2]) - start.pop(req[u]["tid"])
        for v in req.values():
            for p, a, b in (("send→daemon", "S", "G"), ("daemon", "G", "W"), ("reply→end", "W", "E"), ("end→app", "E", "B"), ("app→exit", "B", "X")):
                if a in v and b in v:
                    seg[p].append(v[b] - v[a])
    k = cats * max(len(runs), 1)
    med = [f"{statistics.median(seg[p])/1e3:.1f} µs" if seg[p] else "—" for p in parts]
    print(f"| {t} | {w*1e6:.0f} µs | +{(w-nat)*1e6:.0f} µs | {nreq/k:.1f} | {ncalls/k:.1f} | {callns/k/1e3:.0f} µs | " + " | ".join(med) + " |")
EOF
