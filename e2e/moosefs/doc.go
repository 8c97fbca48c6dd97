// Package moosefs holds iotap's end-to-end tests on a real shared file system: MooseFS, a
// metadata server (mfsmaster), a chunk server (mfschunkserver) and a FUSE client (mfsmount),
// the shape of Lustre or EFS (metadata calls are round trips to a server, data goes to other
// servers). scripts/labs/moosefs/start.sh runs all three on this machine, in a network
// namespace of their own, and mounts the file system; the tests start and stop it themselves.
//
// The tests build the iotap binary, record the genomics job (scripts/workload-genomics.sh)
// over a MooseFS directory and over a local one, check that both runs wrote byte-identical
// outputs, replay the local recording onto MooseFS and the MooseFS recording onto a local
// directory (op counts, bytes and divergences), compare the traces, and check that the lab
// scripts leave nothing behind: after a stop, after a failed start, and with a busy mount.
//
// They need root, the moosefs-master, moosefs-chunkserver and moosefs-client packages
// (scripts/install-deps.sh installs them), /dev/fuse, samtools, sqlite3, tar and awk.
// Without them the tests skip, naming what is missing; with IOTAP_REQUIRE_MOOSEFS=1 they
// fail instead. IOTAP_E2E_DIR sets where the work directory goes (default /var/tmp; the
// daemons run as user mfs, so every parent directory must be searchable by it), and
// IOTAP_E2E_KEEP=1 keeps it after a passing run. MFSLAB_ADDR and MFSLAB_PORT_BASE pass
// through to the lab.
package moosefs
