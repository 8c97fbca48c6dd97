# Sourced by start.sh, stop.sh and check.sh, with the helpers all labs share (scripts/labs/lib.sh).
# Settings (all optional, via env):
#   SLURMLAB_DIR        state, config, logs, sockets, pid files     [/run/iotap-slurmlab]
#                       (not under /tmp when SLURMLAB_PRIVATE_TMP=1: each node
#                        gets its own /tmp, which would hide it from the nodes)
#   SLURMLAB_NODES      number of compute nodes                      [2]
#   SLURMLAB_CPUS       CPUs per node (may exceed the host's)        [2]
#   SLURMLAB_MEM        RealMemory per node, MB                      [1024]
#   SLURMLAB_PREFIX     node names PREFIX1..PREFIXN                  [n]
#   SLURMLAB_PARTITION  default partition                            [debug]
#   SLURMLAB_CLUSTER    ClusterName                                  [slurmlab]
#   SLURMLAB_CTLD_PORT  slurmctld port (127.0.0.1)                   [6817]
#   SLURMLAB_PORT_BASE  node i's slurmd listens on BASE+i            [17000]
#   SLURMLAB_PROCTRACK  linuxproc | pgid | cgroup                    [linuxproc]
#   SLURMLAB_NS         1: each slurmd in its own UTS+mount namespace (hostname =
#                       node name); 0: plain multiple-slurmd         [1]
#   SLURMLAB_PRIVATE_TMP 1: with NS=1, each node gets a private /tmp
#                       (bind of $SLURMLAB_DIR/nodes/<node>/tmp)     [1]
#   SLURMLAB_INSTALL    1: apt-get install slurm-wlm munge if missing [0]
#   SLURMLAB_TIMEOUT    seconds to wait for slurmctld to answer, then    [60]
#                       for the nodes to be idle
#   SLURMLAB_KEEP       stop.sh: 1 keeps $SLURMLAB_DIR (logs)        [0]

SLURMLAB_DIR=${SLURMLAB_DIR:-/run/iotap-slurmlab}
SLURMLAB_NODES=${SLURMLAB_NODES:-2}
SLURMLAB_CPUS=${SLURMLAB_CPUS:-2}
SLURMLAB_MEM=${SLURMLAB_MEM:-1024}
SLURMLAB_PREFIX=${SLURMLAB_PREFIX:-n}
SLURMLAB_PARTITION=${SLURMLAB_PARTITION:-debug}
SLURMLAB_CLUSTER=${SLURMLAB_CLUSTER:-slurmlab}
SLURMLAB_CTLD_PORT=${SLURMLAB_CTLD_PORT:-6817}
SLURMLAB_PORT_BASE=${SLURMLAB_PORT_BASE:-17000}
SLURMLAB_PROCTRACK=${SLURMLAB_PROCTRACK:-linuxproc}
SLURMLAB_NS=${SLURMLAB_NS:-1}
SLURMLAB_PRIVATE_TMP=${SLURMLAB_PRIVATE_TMP:-1}
SLURMLAB_INSTALL=${SLURMLAB_INSTALL:-0}
SLURMLAB_TIMEOUT=${SLURMLAB_TIMEOUT:-60}
SLURMLAB_KEEP=${SLURMLAB_KEEP:-0}
export SLURM_CONF=$SLURMLAB_DIR/slurm.conf

slurmlab_nodes() { local i; for i in $(seq 1 "$SLURMLAB_NODES"); do echo "$SLURMLAB_PREFIX$i"; done; }

LAB_NAME=slurmlab
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/lib.sh"
