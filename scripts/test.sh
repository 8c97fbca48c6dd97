#!/usr/bin/env bash
# The full test suite. Packages that mount FUSE run one at a time (-p 1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

# fresh runs a command from the state of a fresh machine, whatever earlier runs left mounted
# here: as root, in a mount namespace of its own (private: nothing it mounts reaches the
# host) in which fusectl (/sys/fs/fuse/connections) is not mounted.
fresh() {
  if [ "$(id -u)" != 0 ]; then
    echo "test.sh: not root: the tests run in this mount namespace, as it is" >&2
    "$@"
    return
  fi
  unshare --mount --propagation private sh -c '
    umount -a -t fusectl 2>/dev/null || true
    if grep -q " - fusectl " /proc/self/mountinfo; then echo "test.sh: fusectl is still mounted" >&2; exit 1; fi
    exec "$@"' sh "$@"
}
fusectl_mounts() { grep -c " - fusectl " /proc/self/mountinfo || true; }
before=$(fusectl_mounts)

# Each package runs once: in parallel when its tests never mount, else one at a time
# (scripts/packages.sh).
# shellcheck disable=SC2046 # one argument per package
fresh go test -count 1 -timeout 20m $(scripts/packages.sh nomount)
# shellcheck disable=SC2046
fresh go test -p 1 -count 1 -timeout 30m $(scripts/packages.sh mount)
# A real two-node Slurm cluster on this machine (scripts/labs/slurm), started and stopped by the
# test.
go test -count 1 -timeout 15m ./e2e/slurm
# A real MooseFS (master, chunk server, FUSE client; scripts/labs/moosefs), started and stopped
# by the test.
go test -count 1 -timeout 10m ./e2e/moosefs

if [ "$(fusectl_mounts)" != "$before" ]; then
  echo "test.sh: the tests left fusectl mounted on this machine:" >&2
  grep " - fusectl " /proc/self/mountinfo >&2
  exit 1
fi
