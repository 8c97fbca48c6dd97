#!/usr/bin/env bash
# iotap's main job on built-in defaults, on a fresh Debian machine (as root):
#   1. install what is missing (fuse3 s3fs samtools sqlite3 ...) and build iotap,
#   2. start a local S3 server and mount a bucket of it with s3fs,
#   3. record a genomics-like job (samtools on a generated SAM, tar, sqlite3) with
#      `iotap record` over the s3fs mount and over a local directory,
#   4. check both runs wrote identical outputs, and print the report of each trace,
#   5. replay the local recording onto a fresh directory on the s3fs mount and onto a fresh
#      local directory, and print `iotap compare` of the recording and the two replays,
#   6. clean up (unmount, stop the server) even on failure.
#
# Usage: scripts/demo.sh            (DEMO_READS=N reads, default 50000; DEMO_DIR=DIR work dir)
# The traces stay in $DEMO_DIR/traces.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
reads=${DEMO_READS:-50000}
work=${DEMO_DIR:-$(mktemp -d /tmp/iotap-demo.XXXXXX)}
mkdir -p "$work"
work=$(cd "$work" && pwd)

say() { printf '\n== %s\n' "$*" >&2; }

if [ "$(id -u)" != 0 ]; then
  echo "demo: run as root (it installs packages, mounts s3fs, and records in place in a private mount namespace)" >&2
  exit 1
fi

say "installing missing packages"
"$repo/scripts/install-deps.sh"

say "building iotap"
mkdir -p "$work/bin" "$work/traces"
(cd "$repo" && go build -ldflags "-X main.version=$(git -C "$repo" describe --always --dirty 2>/dev/null || echo dev)" -o "$work/bin/iotap" ./cmd/iotap)
(cd "$repo" && go build -o "$work/bin/fakes3" ./internal/cmd/fakes3)
iotap=$work/bin/iotap

s3pid=""
s3mnt=$work/s3
cleanup() {
  set +e
  if grep -q " $s3mnt fuse.s3fs " /proc/mounts 2>/dev/null; then
    fusermount3 -u "$s3mnt" 2>/dev/null || umount -l "$s3mnt"
  fi
  if [ -n "$s3pid" ]; then kill "$s3pid" 2>/dev/null; wait "$s3pid" 2>/dev/null; fi
  rm -rf "$work/s3fs-tmp"
  echo "demo: traces kept in $work/traces" >&2
}
trap cleanup EXIT

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

local=$work/local
rm -rf "$local" && mkdir -p "$local"

say "recording the job over s3fs ($reads reads)"
(cd "$s3mnt" && WORKLOAD_READS=$reads "$iotap" record -o "$work/traces/s3fs.iotap" --label demo=s3fs \
  -- sh "$repo/scripts/workload-genomics.sh")

say "recording the same job over a local directory"
(cd "$local" && WORKLOAD_READS=$reads "$iotap" record -o "$work/traces/local.iotap" --label demo=local \
  -- sh "$repo/scripts/workload-genomics.sh")

say "comparing outputs"
if diff -r "$s3mnt" "$local" >/dev/null; then
  echo "outputs identical on s3fs and on the local directory" >&2
else
  echo "demo: outputs differ between s3fs and the local directory:" >&2
  diff -rq "$s3mnt" "$local" >&2 || true
  exit 1
fi

for t in s3fs local; do
  say "report of the $t trace"
  if "$iotap" help report >/dev/null 2>&1; then
    "$iotap" report "$work/traces/$t.iotap"
  else
    "$iotap" info "$work/traces/$t.iotap"
  fi
done

say "replaying the local recording onto s3fs and onto a fresh local directory"
mkdir -p "$s3mnt/replay" "$work/replay-local"
"$iotap" replay "$work/traces/local.iotap" --target "$work/replay-local" --target "$s3mnt/replay" \
  -o "$work/traces/replay" --progress never

say "comparison: recorded on the local directory vs replayed on local and on s3fs"
"$iotap" compare "$work/traces/local.iotap" "$work/traces/replay.t1.r1.iotap" "$work/traces/replay.t2.r1.iotap"
say "done"
