# Sourced by start.sh and stop.sh, with the helpers all labs share (scripts/labs/lib.sh). Settings
# (all optional, via env):
#   MFSLAB_DIR        state, configs, chunk storage, logs, pid files   [/var/tmp/iotap-mfslab]
#                     (the daemons run as user mfs: every parent directory must be
#                      searchable by it; disk-backed, since it holds the chunks)
#   MFSLAB_MNT        where the file system is mounted                  [$MFSLAB_DIR/mnt]
#   MFSLAB_ADDR       private address of the lab's network namespace    [10.254.1.1]
#                     (not 127.x: the chunk server refuses loopback addresses)
#   MFSLAB_PORT_BASE  master ports BASE (metaloggers), BASE+1 (chunk servers),
#                     BASE+2 (clients); the chunk server listens on BASE+3  [9419]
#   MFSLAB_HDD_LIMIT  space limit of the chunk server's disk, as in mfshdd.cfg: -20GiB
#                     leaves 20 GiB free, 20GiB caps the disk's total use at 20 GiB  []
#                     (the chunk server always leaves 256 MiB free)
#   MFSLAB_GOAL       copies kept of each chunk (one chunk server: 1)    [1]
#   MFSLAB_TRASHTIME  seconds deleted files stay in MooseFS's trash      [0]
#   MFSLAB_MOUNT_OPTS extra mfsmount -o options (e.g. mfscachemode=DIRECT) []
#   MFSLAB_TIMEOUT    seconds to wait for each step of start.sh          [30]
#   MFSLAB_INSTALL    1: apt-get install the moosefs packages if missing [0]
#   MFSLAB_KEEP       1: stop.sh (and a failed start.sh) keep $MFSLAB_DIR [0]

MFSLAB_DIR=${MFSLAB_DIR:-/var/tmp/iotap-mfslab}
MFSLAB_MNT=${MFSLAB_MNT:-$MFSLAB_DIR/mnt}
MFSLAB_ADDR=${MFSLAB_ADDR:-10.254.1.1}
MFSLAB_PORT_BASE=${MFSLAB_PORT_BASE:-9419}
MFSLAB_HDD_LIMIT=${MFSLAB_HDD_LIMIT:-}
MFSLAB_GOAL=${MFSLAB_GOAL:-1}
MFSLAB_TRASHTIME=${MFSLAB_TRASHTIME:-0}
MFSLAB_MOUNT_OPTS=${MFSLAB_MOUNT_OPTS:-}
MFSLAB_TIMEOUT=${MFSLAB_TIMEOUT:-30}
MFSLAB_INSTALL=${MFSLAB_INSTALL:-0}
MFSLAB_KEEP=${MFSLAB_KEEP:-0}
export PATH=$PATH:/usr/sbin:/sbin

MFSLAB_PKGS="moosefs-master moosefs-chunkserver moosefs-client"

LAB_NAME=mfslab
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/lib.sh"
