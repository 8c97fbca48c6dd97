#!/bin/sh
# replay-shard.sh BIN TRACES OUT TARGETROOT [REPLAY FLAGS...]
#
# Run by every task of `srun -N2 replay-shard.sh ...`: replays this task's share of the
# traces in TRACES (a directory) under the shard rule of internal/slurm (slurmshard prints
# the share: natural order, trace k to task k mod SLURM_NTASKS), the stand-in for
# `iotap replay TRACES --shard auto` until replay has it. Each trace replays onto its own
# TARGETROOT/<trace name>; results go to OUT/<trace name>.t1.r1.{iotap,json}.
#
# Start together: every task first prepares the starting state of its traces
# (--prepare only), then waits at a barrier in OUT (a shared directory), then replays
# (--prepare skip). A task without a trace still takes part in the barrier.
set -eu
bin=$1 traces=$2 out=$3 root=$4
shift 4
mkdir -p "$out"
mine=$("$bin/slurmshard" "$traces")
echo "task $SLURM_PROCID of $SLURM_NTASKS on $SLURMD_NODENAME:" ${mine:-no trace}
for t in $mine; do
	name=$(basename "$t" .iotap)
	mkdir -p "$root/$name"
	"$bin/iotap" replay "$t" --target "$root/$name" --scratch --prepare only --progress never "$@"
done
"$bin/slurmshard" --barrier "$out" --timeout 2m
for t in $mine; do
	name=$(basename "$t" .iotap)
	"$bin/iotap" replay "$t" --target "$root/$name" --prepare skip --progress never -o "$out/$name" "$@"
done
