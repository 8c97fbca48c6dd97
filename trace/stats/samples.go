package stats

import "github.com/iotap/iotap/trace"

// sampler is a Resolver that also holds resource series: a *trace.Reader.
type sampler interface {
	Samples() []trace.Samples
}

// samplesOf returns the resource series r holds, if it holds any.
func samplesOf(r Resolver) []trace.Samples {
	if s, ok := r.(sampler); ok {
		return s.Samples()
	}
	return nil
}

// moved returns the bytes the job read and wrote: reads, writes and copy_file_range.
func moved(ops *[trace.NumOps]OpStats) uint64 {
	return ops[trace.OpRead].Bytes + ops[trace.OpWrite].Bytes + ops[trace.OpCopyFileRange].Bytes
}
