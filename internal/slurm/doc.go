// Package slurm holds what iotap needs to run as a Slurm job step: the task's place in the
// step (from Slurm's environment), the rule that shares a job's traces among the tasks of a
// replay step, a start barrier on a shared directory, and straggler detection over per-node
// aggregates. It starts no Slurm command and needs no Slurm installation: Slurm itself is
// the launcher (srun, sbatch), iotap only reads what Slurm tells each task.
//
// # Shard rule
//
// [Shard] sorts the traces in natural order (runs of digits compare as numbers, so n2 sorts
// before n10) and gives trace k to task k mod N, where N is the number of tasks. So:
//
//   - as many traces as tasks: task i replays the i-th trace. Traces recorded with
//     -o 'traces/%j/%n-%t.iotap' sort by node name, so with the same node names the same
//     task id gets the same node's trace back.
//   - more traces than tasks: task i replays traces i, i+N, i+2N, ... one after another;
//     the job's load is then lower than recorded (fewer concurrent streams). Use as many
//     tasks as traces to keep it.
//   - fewer traces than tasks: tasks M..N-1 get no trace and have nothing to do (they still
//     take part in the barrier).
//
// # Stragglers
//
// A straggler is a node whose I/O stands out from the other nodes of the same job: its
// summed I/O time or its wall time (first op to last op) exceeds Factor times the median of
// the other nodes and the excess is at least MinExcess, or, for an operation with at least
// MinOps calls on that node and on another one, its p99 latency exceeds P99Factor times the
// median p99 of the other nodes by at least MinP99Excess. Medians of the others, not of all
// nodes, so that with two nodes the slow one is compared with the fast one only. Absolute
// floors keep tiny jobs and microsecond noise from naming stragglers. See [Stragglers].
//
// # Clocks
//
// Durations in a trace come from each node's monotonic clock and are exact on that node.
// Start times are placed on a common time line by each node's wall clock, so a per-node
// timeline is off by the clock offset between nodes (chrony or ntpd keep it to well under a
// millisecond on cloud clusters; more without time sync). Do not read sub-millisecond
// ordering across nodes into a merged timeline.
package slurm
