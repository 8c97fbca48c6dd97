// The flags record and mount share, and the recorder spec they fill.

package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/iotap/iotap/internal/recorder"
)

// layerOptions are the settings of the tracing layer and the trace writer that `record`
// and `mount` share.
type layerOptions struct {
	Target        string
	Output        string
	Cache         string
	MountAt       string
	Labels        []string
	Include       []string
	Exclude       []string
	UIDs          []uint
	Comms         []string
	StatsInterval time.Duration
	StatsFormat   string
	Metrics       string
	DropWhenFull  bool
	AllowOther    bool
	FUSEDebug     bool
	ServerProcs   int
	Legs          string
	Data          string
	sampleOptions
	traceStore
}

func (o *layerOptions) addFlags(fs *pflag.FlagSet, targetHelp string) {
	fs.StringVar(&o.Target, "target", "", targetHelp)
	fs.StringVarP(&o.Output, "output", "o", "", "write the trace to `file` (default iotap-<UTC time>.iotap outside the target; "+
		"placeholders: %j Slurm job id, %n node name, %t task id, %h host name, %p pid, %% a percent sign)")
	fs.StringVar(&o.Cache, "cache", "none", "fidelity `mode`: none (every call reaches the layer at its own size; replay needs this) "+
		"or kernel (page, write-back and attribute caching on, as on a kernel file system: the trace shows what reached the backend)")
	fs.StringArrayVar(&o.Labels, "label", nil, "attach a `key=value` label to the trace (repeatable)")
	fs.StringArrayVar(&o.Include, "include", nil, "record only paths matching `glob` (repeatable; relative to the target)")
	fs.StringArrayVar(&o.Exclude, "exclude", nil, "do not record paths matching `glob` (repeatable)")
	fs.UintSliceVar(&o.UIDs, "uid", nil, "record only calls by user `id` (repeatable)")
	fs.StringArrayVar(&o.Comms, "comm", nil, "record only calls by processes whose comm is `name` (repeatable)")
	fs.DurationVar(&o.StatsInterval, "stats-interval", 0, "print a live line (ops/s, MB/s, p99) on stderr every `interval` (e.g. 1s); SIGUSR1 prints one at any time")
	fs.StringVar(&o.StatsFormat, "stats-format", "text", "`format` of the live line: text, or json (one object per line)")
	fs.StringVar(&o.Metrics, "metrics", "", "serve Prometheus metrics at http://`addr`/metrics while the layer is mounted "+
		"(PORT or :PORT: on 127.0.0.1 only; HOST:PORT, e.g. 0.0.0.0:9464, on that address)")
	fs.BoolVar(&o.DropWhenFull, "drop-when-full", false, "drop events instead of slowing the job when the trace buffer is full (drops are counted)")
	fs.BoolVar(&o.AllowOther, "allow-other", false, "let other users use the traced view (adds default_permissions)")
	fs.BoolVar(&o.FUSEDebug, "fuse-debug", false, "print every FUSE request (very verbose)")
	fs.IntVar(&o.ServerProcs, "server-procs", 0, "CPUs the layer's Go code may use at once (GOMAXPROCS of the serving process; `n`=0: one per 4 CPUs, at least 1; "+
		"a job that keeps many requests in flight on slow storage runs faster, and is timed closer, with 4)")
	fs.StringVar(&o.Legs, "legs", "auto", "how to measure the FUSE legs outside the layer (what a replay leaves out of think times): "+
		"`source` kernel (every request and system call, from kernel tracepoints; needs root), probe (a sampled round trip), "+
		"or auto (kernel where possible, else probe)")
	fs.StringVar(&o.Data, "data", "auto", "how reads and writes are recorded: `path` kernel (kernel FUSE passthrough serves them from the "+
		"backing files at native speed, and the kernel times each call in the application's thread; needs root, a kernel with FUSE "+
		"passthrough and --cache none), layer (each is a FUSE request the layer serves and times), or auto (kernel where possible, else layer)")
	o.sampleOptions.addFlags(fs)
	o.addStoreFlags(fs)
}

// spec is the recorder spec the flags fill. The S3 flags apply to an s3:// trace only.
func (o *layerOptions) spec() (recorder.Spec, error) {
	if err := o.usedBy(o.Output); err != nil {
		return recorder.Spec{}, err
	}
	s := recorder.Spec{
		Target: o.Target, MountAt: o.MountAt, Output: o.Output, Cache: o.Cache, Labels: o.Labels,
		Include: o.Include, Exclude: o.Exclude, Comms: o.Comms,
		StatsInterval: o.StatsInterval, StatsFormat: o.StatsFormat, Metrics: o.Metrics,
		DropWhenFull: o.DropWhenFull, AllowOther: o.AllowOther, FUSEDebug: o.FUSEDebug,
		ServerProcs: o.ServerProcs, Legs: o.Legs, Data: o.Data, Sample: o.sampling(),
		Store: recorder.TraceStore{Endpoint: o.Endpoint, Region: o.Region, AWSProfile: o.AWSProfile},
	}
	for _, u := range o.UIDs {
		s.UIDs = append(s.UIDs, uint32(u))
	}
	return s, nil
}
