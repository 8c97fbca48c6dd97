#!/usr/bin/env bash
# The full test suite. Packages that mount FUSE run one at a time (-p 1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# shellcheck disable=SC2046 # one argument per package
go test -count 1 -timeout 20m $(scripts/nomount-packages.sh)
go test -p 1 -count 1 -timeout 30m ./fusefs/... ./internal/procsample/... ./cmd/...
# A real two-node Slurm cluster on this machine (ci/slurm), started and stopped by the test.
go test -count 1 -timeout 15m ./e2e/slurm
# A real MooseFS (master, chunk server, FUSE client; ci/moosefs), started and stopped by the test.
go test -count 1 -timeout 10m ./e2e/moosefs
