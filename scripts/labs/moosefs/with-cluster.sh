#!/bin/bash
# with-cluster.sh CMD [ARGS...]: start the MooseFS lab, run CMD with MFSLAB_MNT exported
# (the mount point), always stop the lab, exit with CMD's status.
# Same MFSLAB_* settings as start.sh (lib.sh). Example:
#   scripts/labs/moosefs/with-cluster.sh sh -c 'cd "$MFSLAB_MNT" && sh ~/job.sh'
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
[ $# -gt 0 ] || { echo "usage: $0 CMD [ARGS...]" >&2; exit 2; }
trap '"$HERE/stop.sh"' EXIT
"$HERE/start.sh" >&2 || exit 1
MFSLAB_MNT=$(cat "$(realpath -m "$MFSLAB_DIR")/ready")
export MFSLAB_DIR MFSLAB_MNT
"$@"
