// Package recorder is the recording lifecycle of `iotap record` and `iotap mount`: from the
// user's spec to a closed trace and the summary. The commands (cmd/iotap) fill a Spec from
// their flags, call Record or Mount, and map the outcome to an exit code: an error wrapping
// ErrUsage is the user's to correct, an *ExitError carries the job's exit status.
//
// # Spec
//
// A Spec is what the user asked for. Record and Mount check it before anything is mounted
// or run: every value, the target and the mount point, and where the trace goes (the
// placeholders of its name expanded, never inside the traced tree or the view). The checked
// spec, with its paths resolved, is the plan the serving process receives.
//
// # The recorder process
//
// Record finds the job's command, checks the trace can be written and binds the metrics'
// address, all before anything is mounted; it then re-executes the program as the recorder,
// the hidden ChildCommand (the program's main must run RunChild for it), handing it the plan
// as JSON on descriptor 3 and the metrics' listener on descriptor 4. Traced in place, the
// recorder gets a mount namespace of its own, whose mounts it makes slaves of the host's
// before mounting anything: the layer over the target is seen by the job alone, and the
// host's unmounts still reach it. Mount serves in the calling process instead, at another
// directory, until the view is unmounted or its context ends.
//
// # The session
//
// In the serving process, a session is the trace writer (a file, or an s3:// object
// uploaded as it is written), the layer mounted on top of the target (package fusefs,
// reaching the real directory through a descriptor opened before), and what runs beside
// them: the kernel's measurement of the legs outside the layer (kernel.go, the one file
// that knows package legs), the sampler of the storage client and of the recorder (package
// procsample), the metrics (package metrics, served on the bound listener once the layer
// is mounted), the round-trip probe (a process of its own, ProbeCommand, timing lookups
// through the mount; record only) and the live line.
//
// # The job
//
// The recorder starts the job as its own child, in the job's directory under the view,
// with the descriptors of the layer marked close-on-exec. It relays the signals a shell
// would to the job (job.Forward); the job's command dies with the recorder (Pdeathsig),
// and the recorder ends the job when the iotap process that started it dies. Processes the
// job leaves behind stay below the recorder (a subreaper) and are ended when iotap is told
// to stop.
//
// # Teardown and summary
//
// When the job ends, or the view is unmounted, the layer is taken down (lazily if
// something still uses it, and never waiting long for a backend that hangs), the sampler
// stopped, the trace closed with its footer, the metrics' endpoint closed after the
// trace's last events reached it, and the kernel's measurement detached. The summary on
// stderr then says how the run ended, what the layer counted per operation, what the
// writer wrote and dropped, what recording cost, and how the legs were measured. Record's
// outcome is the job's exit status; a trace that could not be finished is the outcome only
// when the job succeeded.
package recorder
