#!/usr/bin/env bash
# Lists the Go packages whose tests never mount FUSE (safe for -race and parallel runs).
cd "$(dirname "$0")/.." && go list ./... | grep -vE '/(fusefs|fusefs/fusectl|cmd/iotap|fusefs/fusetest|internal/procsample|internal/recorder|e2e/slurm|e2e/moosefs)$'
