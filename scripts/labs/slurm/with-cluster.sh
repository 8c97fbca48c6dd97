#!/bin/bash
# with-cluster.sh CMD [ARGS...]: start the slurmlab cluster, run CMD with
# SLURM_CONF exported, always stop the cluster, exit with CMD's status.
# Same SLURMLAB_* settings as start.sh (lib.sh). Example (CI):
#   SLURMLAB_INSTALL=1 scripts/labs/slurm/with-cluster.sh go test -tags slurm ./...
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
[ $# -gt 0 ] || { echo "usage: $0 CMD [ARGS...]" >&2; exit 2; }
trap '"$HERE/stop.sh"' EXIT
"$HERE/start.sh" >&2 || exit 1
export SLURM_CONF
"$@"
