// Package slurm holds iotap's end-to-end tests on a real Slurm cluster: a controller and two
// compute nodes (n1, n2) started on this machine by scripts/labs/slurm/start.sh, each node with
// its own host name and private /tmp. The tests build the iotap binary, record a 2-node sbatch job
// (one trace per node), report on the job, replay it sharded over both nodes, compare, and
// check exit codes and that no FUSE daemon or mount outlives a job step, under
// proctrack/linuxproc and proctrack/cgroup.
//
// They need root, slurm-wlm and munge (apt-get install slurm-wlm munge) and /dev/fuse.
// Without them the tests skip, naming what is missing; with IOTAP_REQUIRE_SLURM=1 they
// fail instead. SLURMLAB_CTLD_PORT and SLURMLAB_PORT_BASE choose the cluster's ports.
// See docs/slurm.md.
package slurm
