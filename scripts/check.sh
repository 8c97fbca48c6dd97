#!/usr/bin/env bash
# The checks a developer runs without root: gofmt, go vet, go mod tidy, golangci-lint (the
# version .ci/run installs, put in $(go env GOPATH)/bin if missing), the arm64 build, and the
# tests. As an ordinary user, every test that needs root, FUSE, s3fs, a cgroup, DuckDB or a
# cluster skips and names what it needs: the IOTAP_REQUIRE_* variables are cleared here (CI,
# .ci/run, sets them so that nothing skips there). The lab clusters' tests (e2e/slurm,
# e2e/moosefs) are left out. As root, scripts/test.sh is the command: it runs the mount tests
# on a fresh mount namespace.
#
#   scripts/check.sh              everything above
#   scripts/check.sh PACKAGES...  the tests of PACKAGES only (the static checks still cover
#                                 the whole tree)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ]; then
  echo "check.sh: running as root: the tests that need root run too, in this mount namespace (scripts/test.sh runs them on a fresh one)" >&2
fi
for v in $(env | sed -n 's/^\(IOTAP_REQUIRE_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
step() { printf '\n=== %s\n' "$*"; }

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt needed:"; echo "$unformatted"; exit 1; fi

step "go vet"
go vet ./...

step "go mod tidy"
go mod tidy -diff

step "golangci-lint"
lint=$(command -v golangci-lint || true)
if [ -z "$lint" ]; then
  lint="$(go env GOPATH)/bin/golangci-lint"
  [ -x "$lint" ] || GOFLAGS= go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
fi
"$lint" run --timeout 10m ./...

step "iotap builds for arm64"
GOARCH=arm64 go build ./...

step "tests"
if [ $# -gt 0 ]; then
  go test -p 1 -count 1 -timeout 30m "$@"
  exit
fi
# Packages whose tests never mount run in parallel; the others one at a time, as in
# scripts/test.sh (scripts/packages.sh).
# shellcheck disable=SC2046 # one argument per package
go test -count 1 -timeout 20m $(scripts/packages.sh nomount)
# shellcheck disable=SC2046
go test -p 1 -count 1 -timeout 30m $(scripts/packages.sh mount)
