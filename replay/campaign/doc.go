// Package campaign replays one recorded trace as a campaign: onto each of several
// targets, Repeat times with the targets interleaved, each run as one replay or as Copies
// of the job at once; and it says what the runs found together. The replay command
// (cmd/iotap) fills a Spec from its flags and prints nothing of its own: the campaign
// writes its progress and results to the Env's streams.
//
// # Spec, New and Run
//
// A Spec is what the user asked for, as the replay command's flags give it. New checks it
// whole before the trace is read and before any place is touched: every value, and every
// place the campaign writes (the results directory, the targets, the stores). Its errors
// name the replay command's flags, since that is where a user corrects them, and wrap
// ErrUsage. Run reads the trace (its starting state, and what is damaged in it), then
// either checks which ops can reproduce their outcome (DryRun) or runs.
//
// # A run
//
// Before run R of target T, the starting state is made: through the target, or in the
// target's store (Stores: the directory or bucket behind the target), so that the first
// access through the target is cold; before later runs the store is restored keeping what
// the previous run left unchanged, so that they start warm. BetweenRuns then runs (a
// remount, a cache flush). The run writes, under the results prefix PREFIX:
//
//	PREFIX.tT.rR.iotap          the replay trace
//	PREFIX.tT.rR.json           its summary (replay.Summary)
//	PREFIX.tT.rR.requests.json  the backend's own requests, when it counts them (S3)
//
// With Copies N, the N copies run at once, copy K onto its own part of the target
// (TARGET/copyK: a subdirectory, or a key prefix) with its own starting state, each
// writing PREFIX.tT.rR.cK.*; PREFIX.tT.rR.copies.json holds the run's figures
// (CopiesSummary, docs/copies.md).
//
// # After the runs
//
// For Repeat > 1, each target's prediction from its runs together
// (replay.MergePredictions) and, per operation, run 1 beside the later runs (cold and warm
// with a store); for several targets, their comparison, the first as the baseline, as
// `iotap compare` prints it.
//
// # Backends
//
// The campaign speaks no S3: Env.Places opens every place it names and checks the ones
// that are not directories, and the command chooses the backend by the place's URL scheme
// (a table in cmd/iotap/replay_places.go: replay/s3 for s3://; a directory without one).
// golangci-lint's depguard rule replay-core-speaks-no-s3 holds for this package as for
// the engine; replay-engine-knows-no-campaign keeps the engine and its backends from
// importing it.
package campaign
