#!/usr/bin/env bash
# iotap's main job on built-in defaults, on a fresh Debian machine (as root):
#   1. install what is missing (fuse3 s3fs samtools sqlite3 ...) and build iotap,
#   2. start the storage of each backend: a local S3 server and an s3fs mount of a bucket
#      of it; with moosefs, a MooseFS cluster on this machine (scripts/labs/moosefs),
#   3. record a genomics-like job (samtools on a generated SAM, tar, sqlite3) with
#      `iotap record` over each backend's directory,
#   4. check every run wrote outputs identical to the local run's, and print the report of
#      each trace,
#   5. replay the local recording onto a fresh directory of each backend, and print
#      `iotap compare` of the recording and the replays,
#   6. end with `iotap compare` of the job as recorded on each backend, the local directory
#      as the baseline: its verdict lines say how much slower each backend made the job,
#   7. clean up (unmount, stop the servers) even on failure, and say where the iotap binary
#      and the traces are.
# Each comparison is printed once.
#
# Usage: scripts/demo.sh
#   DEMO_BACKENDS=LIST  comma-separated, from local, s3fs, moosefs (default local,s3fs; local
#                       is the baseline and always runs)
#   DEMO_READS=N        reads in the job (default 50000)
#   DEMO_DIR=DIR        work directory (default a new one under /tmp)
# The traces stay in $DEMO_DIR/traces.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
reads=${DEMO_READS:-50000}
backends=${DEMO_BACKENDS:-local,s3fs}

say() { printf '\n== %s\n' "$*" >&2; }

# The backends in order, local first.
others=()
for b in ${backends//,/ }; do
  case "$b" in
  local) ;;
  s3fs | moosefs)
    case " ${others[*]} " in *" $b "*) ;; *) others+=("$b") ;; esac
    ;;
  *) echo "demo: unknown backend '$b' in DEMO_BACKENDS (want local, s3fs, moosefs)" >&2; exit 2 ;;
  esac
done
has() { case " ${others[*]} " in *" $1 "*) return 0 ;; esac; return 1; }

if [ "$(id -u)" != 0 ]; then
  echo "demo: run as root (it installs packages, mounts s3fs and MooseFS, and records in place in a private mount namespace)" >&2
  exit 1
fi

work=${DEMO_DIR:-$(mktemp -d /tmp/iotap-demo.XXXXXX)}
mkdir -p "$work"
work=$(cd "$work" && pwd)
# MooseFS's daemons run as user mfs and keep their state under $work: it must be searchable.
if has moosefs; then chmod 755 "$work"; fi

say "installing missing packages"
"$repo/scripts/install-deps.sh"

say "building iotap"
mkdir -p "$work/bin" "$work/traces"
(cd "$repo" && go build -ldflags "-X main.version=$(git -C "$repo" describe --always --dirty 2>/dev/null || echo dev)" -o "$work/bin/iotap" ./cmd/iotap)
if has s3fs; then (cd "$repo" && go build -o "$work/bin/fakes3" ./internal/cmd/fakes3); fi
iotap=$work/bin/iotap

s3pid=""
s3mnt=$work/s3
mfslab=$work/mfslab
mfsmnt=""
cleanup() {
  set +e
  if grep -q " $s3mnt fuse.s3fs " /proc/mounts 2>/dev/null; then
    fusermount3 -u "$s3mnt" 2>/dev/null || umount -l "$s3mnt"
  fi
  if [ -n "$s3pid" ]; then kill "$s3pid" 2>/dev/null; wait "$s3pid" 2>/dev/null; fi
  rm -rf "$work/s3fs-tmp"
  if [ -e "$mfslab/.mfslab" ]; then MFSLAB_DIR=$mfslab "$repo/scripts/labs/moosefs/stop.sh"; fi
  echo >&2
  if [ -x "$work/bin/iotap" ]; then echo "demo: the iotap binary is $work/bin/iotap" >&2; fi
  echo "demo: the traces are in $work/traces:" >&2
  (cd "$work/traces" 2>/dev/null && ls -- *.iotap 2>/dev/null | sed 's/^/  /') >&2
  echo "demo: e.g. $work/bin/iotap report --format html -o report.html $work/traces/local.iotap" >&2
}
trap cleanup EXIT

# dir[b] is where backend b runs the job; rdir[b] where the local recording is replayed.
declare -A dir rdir
dir[local]=$work/local
rdir[local]=$work/replay-local

if has s3fs; then
  say "starting a local S3 server"
  rm -f "$work/s3.url"
  "$work/bin/fakes3" -bucket demo -url-file "$work/s3.url" >/dev/null &
  s3pid=$!
  for _ in $(seq 100); do [ -s "$work/s3.url" ] && break; sleep 0.1; done
  url=$(cat "$work/s3.url")
  echo "S3 endpoint $url, bucket demo" >&2

  say "mounting the bucket with s3fs at $s3mnt"
  mkdir -p "$s3mnt" "$work/s3fs-tmp"
  printf 'iotap:iotap-secret\n' > "$work/passwd-s3fs"
  chmod 600 "$work/passwd-s3fs"
  env -u AWS_CA_BUNDLE s3fs demo "$s3mnt" -o "url=$url,use_path_request_style,passwd_file=$work/passwd-s3fs,tmpdir=$work/s3fs-tmp"
  for _ in $(seq 100); do grep -q " $s3mnt fuse.s3fs " /proc/mounts && break; sleep 0.1; done
  dir[s3fs]=$s3mnt
  rdir[s3fs]=$s3mnt/replay
fi

if has moosefs; then
  say "starting a MooseFS cluster (master, chunk server, mfsmount) in $mfslab"
  MFSLAB_DIR=$mfslab "$repo/scripts/labs/moosefs/start.sh"
  mfsmnt=$(cat "$mfslab/ready")
  dir[moosefs]=$mfsmnt/job
  rdir[moosefs]=$mfsmnt/replay
fi

rm -rf "${dir[local]}" && mkdir -p "${dir[local]}"
for b in "${others[@]}"; do mkdir -p "${dir[$b]}"; done

for b in "${others[@]}" local; do
  if [ "$b" = local ]; then
    say "recording the same job over a local directory"
  else
    say "recording the job over $b ($reads reads)"
  fi
  (cd "${dir[$b]}" && WORKLOAD_READS=$reads "$iotap" record -o "$work/traces/$b.iotap" --label "demo=$b" \
    -- sh "$repo/scripts/workload-genomics.sh")
done

say "comparing outputs"
for b in "${others[@]}"; do
  if diff -r --exclude=replay "${dir[$b]}" "${dir[local]}" >/dev/null; then
    echo "outputs identical on $b and on the local directory" >&2
  else
    echo "demo: outputs differ between $b and the local directory:" >&2
    diff -rq --exclude=replay "${dir[$b]}" "${dir[local]}" >&2 || true
    exit 1
  fi
done

for b in "${others[@]}" local; do
  say "report of the $b trace"
  if "$iotap" help report >/dev/null 2>&1; then
    "$iotap" report "$work/traces/$b.iotap"
  else
    "$iotap" info "$work/traces/$b.iotap"
  fi
done

targets=(--target "${rdir[local]}")
replays=("$work/traces/replay.t1.r1.iotap")
mkdir -p "${rdir[local]}"
i=1
for b in "${others[@]}"; do
  mkdir -p "${rdir[$b]}"
  targets+=(--target "${rdir[$b]}")
  i=$((i + 1))
  replays+=("$work/traces/replay.t$i.r1.iotap")
done
say "replaying the local recording onto a fresh local directory${others[*]:+ and onto ${others[*]}}"
# --no-compare: the comparison below, with the recording as the baseline, covers the
# replays' own.
"$iotap" replay "$work/traces/local.iotap" "${targets[@]}" -o "$work/traces/replay" --progress never --no-compare

say "comparison: recorded on the local directory vs replayed on local${others[*]:+ and on ${others[*]}}"
"$iotap" compare "$work/traces/local.iotap" "${replays[@]}"

if [ ${#others[@]} -gt 0 ]; then
  # The job's own calls differ by storage (programs size their buffers by st_blksize: 4 KiB
  # on ext4 and s3fs, 64 KiB on MooseFS), so these are not the same work: --force.
  recs=("$work/traces/local.iotap")
  for b in "${others[@]}"; do recs+=("$work/traces/$b.iotap"); done
  say "the answer: the job as recorded on the local directory (the baseline) and on ${others[*]}"
  "$iotap" compare --force "${recs[@]}"
fi
