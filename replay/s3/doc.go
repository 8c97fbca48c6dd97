// Package s3 is the replay backend for a key prefix of an S3 bucket: filesystem calls
// become the S3 requests that one S3 client would issue for them.
//
// # Profiles
//
// A profile is the mapping of one client, a type in its own file implementing the
// profile interface (profile.go), chosen with Options.Profile:
//
//   - "mountpoint" (mountpoint.go): Mountpoint for Amazon S3. Sequential writes only,
//     prefetched reads, no rename, links, metadata or in-place changes.
//   - "s3fs" (s3fs.go): s3fs-fuse. A stat cache, writes through a local copy uploaded at
//     fsync and close, rename and metadata by CopyObject, symlinks as objects.
//   - "sdk" (sdk.go): an application calling the SDK directly. One request per call,
//     streamed uploads, rename by copy, nothing else.
//
// The Backend does what every profile shares: it checks names, times each call and counts
// its requests, answers the calls that no client sends to S3 (statfs, fstat, seek, and
// locks, which the kernel keeps for a FUSE client without a lock handler, conflicting
// between open files), and keeps the files being written and the directories a profile
// holds locally. Calls a profile cannot do return a *RefusedError (counted as refused)
// that unwraps to the errno that client returns. The replay checks sizes, not contents:
// read data is not kept past the call, except what a client holds in memory itself
// (Mountpoint's prefetch windows, parts of uploads in flight), so that the replayer's
// memory is that client's.
//
// # Settings
//
// A profile's parameters are set with Options.Params (iotap replay --s3-opt key=value) or
// the target URL's query (s3://bucket/prefix?prefetch_max=64MiB&memory_limit=512MiB),
// which wins and may name the profile (profile=s3fs): several targets of one replay can
// sweep them. Keys (SettingsHelp): mountpoint prefetch_initial, prefetch_max,
// read_part_size, concurrency, memory_limit, part_size; s3fs multipart_size,
// multipart_threshold, parallel_count; sdk part_size, concurrency. An unknown key or a
// bad value is an error marked ErrSetting, which CheckSettings finds without reaching S3. Backend.Given names the settings given; the target's Mount
// field shows them after the profile.
//
// # Concurrency
//
// Calls on different open files run concurrently. Calls on one open file are served one
// at a time (file.mu, held across the file's requests): its state (the prefetch window,
// the ranges fetched, the local copy, the streamed upload) is per handle and changes with
// every read or write, as the client's own does. A replayed thread that kept several
// reads of one descriptor in flight (io_uring, libaio) therefore reaches S3 one request
// at a time per descriptor; its reads of several files overlap as recorded.
//
// # Requests
//
// Every call is timed and its requests counted by S3 operation (with payload bytes,
// retries and 503 SlowDown responses) through a middleware on the SDK client, by phase
// (replay.Backend.BeginPhase); Backend implements replay.RequestCounter, and `iotap
// report` prints the tallies.
//
// While preparing (phase "prepare"), directories are made as name/ marker objects and
// symlinks as objects holding their target for every profile, and chmod is accepted
// without a request, so that any profile can start from the same state.
//
// # Confinement
//
// Every key is the prefix plus a name checked with replay.CheckName: nothing outside the
// prefix is read or written. Close deletes the objects this backend created unless Keep
// was set, and aborts multipart uploads left open. The prefix's own marker object
// ("prefix/", made by s3fs for a directory made through it) is the directory the target
// is, not an entry of it: IsEmpty does not count it and Reset keeps it.
package s3
