// The flags that choose what is sampled while recording and replaying (recorder.Sampling).

package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/iotap/iotap/internal/procsample"
	"github.com/iotap/iotap/internal/recorder"
)

// sampleOptions are the flags that choose what is sampled, shared by record, mount and
// replay.
type sampleOptions struct {
	ClientPIDs     []int
	SampleInterval time.Duration
}

func (o *sampleOptions) addFlags(fs *pflag.FlagSet) {
	fs.IntSliceVar(&o.ClientPIDs, "client-pid", nil, "sample the memory, CPU and I/O of process `pid` as the storage client "+
		"(repeatable; default: the FUSE daemon serving the target's mount, found by itself)")
	fs.DurationVar(&o.SampleInterval, "sample-interval", procsample.DefaultInterval,
		"sample the storage client and iotap itself every `interval` into the trace (0: no sampling)")
}

// sampling is what the flags ask to sample.
func (o *sampleOptions) sampling() recorder.Sampling {
	return recorder.Sampling{ClientPIDs: o.ClientPIDs, Interval: o.SampleInterval}
}
