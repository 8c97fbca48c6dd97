#!/usr/bin/env bash
# Lists the repository's Go packages by how their tests may run, one import path a line:
#   nomount   tests that never mount (FUSE, s3fs): safe for -race and parallel runs
#   mount     tests that mount: one package at a time (go test -p 1), as root to run at all
#   clusters  the end-to-end tests that start a lab cluster (scripts/labs), each on its own
# Every package is in exactly one list (internal/testenv's TestPackageLists checks it, and
# that a package whose tests call a mount helper is in mount).
set -euo pipefail
cd "$(dirname "$0")/.."
mount='/(cmd/iotap|fusefs|fusefs/fusectl|fusefs/fusetest|internal/cmd/fakes3|internal/legs|internal/procsample|internal/recorder|internal/s3test)$'
clusters='/e2e/(slurm|moosefs)$'
case "${1:-}" in
  nomount)  go list ./... | grep -vE "$mount" | grep -vE "$clusters" ;;
  mount)    go list ./... | grep -E "$mount" ;;
  clusters) go list ./... | grep -E "$clusters" ;;
  *) echo "usage: scripts/packages.sh nomount|mount|clusters" >&2; exit 2 ;;
esac
