package slurm

import (
	"fmt"
	"slices"
	"time"
)

// NodeStat is one node's aggregate, as a report's per-node view (--by host) has it.
type NodeStat struct {
	Name   string        // node (or group) name, e.g. "host=n2"
	IOTime time.Duration // sum of the node's op durations (the report's "job I/O time")
	Wall   time.Duration // first op's start to last op's end on that node
	Ops    []OpLatency   // per operation
}

// OpLatency is one operation's count and p99 latency on a node.
type OpLatency struct {
	Op    string
	Count uint64
	P99   time.Duration
}

// StragglerOptions are the thresholds of [Stragglers]; zero fields take the defaults.
type StragglerOptions struct {
	Factor       float64       // I/O or wall time above Factor × the others' median [1.5]
	MinExcess    time.Duration // ... and at least this much above it [100ms]
	P99Factor    float64       // an op's p99 above P99Factor × the others' median p99 [2]
	MinP99Excess time.Duration // ... and at least this much above it [1ms]
	MinOps       uint64        // an op's p99 counts only with this many calls on both nodes [1000]: with fewer, p99 is one or two slow calls
}

func (o StragglerOptions) withDefaults() StragglerOptions {
	if o.Factor <= 0 {
		o.Factor = 1.5
	}
	if o.MinExcess <= 0 {
		o.MinExcess = 100 * time.Millisecond
	}
	if o.P99Factor <= 0 {
		o.P99Factor = 2
	}
	if o.MinP99Excess <= 0 {
		o.MinP99Excess = time.Millisecond
	}
	if o.MinOps == 0 {
		o.MinOps = 1000
	}
	return o
}

// Straggler names a node and the figure that makes it stand out.
type Straggler struct {
	Node    string
	Metric  string        // "I/O time", "wall time" or "<op> p99"
	Value   time.Duration // the node's figure
	Typical time.Duration // the median of the other nodes' figures
}

// Ratio is Value / Typical.
func (s Straggler) Ratio() float64 {
	if s.Typical <= 0 {
		return 0
	}
	return float64(s.Value) / float64(s.Typical)
}

func (s Straggler) String() string {
	return fmt.Sprintf("straggler: %s: %s %v is %.1fx the other nodes' median %v",
		s.Node, s.Metric, s.Value.Round(time.Microsecond), s.Ratio(), s.Typical.Round(time.Microsecond))
}

// Stragglers returns the nodes whose I/O time, wall time or an op's p99 stands out from the
// other nodes (the rule in the package doc), in the order of nodes, then I/O time, wall
// time, ops. It needs at least two nodes; with fewer it returns nil.
func Stragglers(nodes []NodeStat, o StragglerOptions) []Straggler {
	if len(nodes) < 2 {
		return nil
	}
	o = o.withDefaults()
	var out []Straggler
	others := func(i int, f func(NodeStat) (time.Duration, bool)) []time.Duration {
		var v []time.Duration
		for j, n := range nodes {
			if j == i {
				continue
			}
			if d, ok := f(n); ok {
				v = append(v, d)
			}
		}
		return v
	}
	check := func(node, metric string, v time.Duration, rest []time.Duration, factor float64, floor time.Duration) {
		if len(rest) == 0 {
			return
		}
		m := median(rest)
		if float64(v) > factor*float64(m) && v-m >= floor {
			out = append(out, Straggler{Node: node, Metric: metric, Value: v, Typical: m})
		}
	}
	for i, n := range nodes {
		check(n.Name, "I/O time", n.IOTime, others(i, func(x NodeStat) (time.Duration, bool) { return x.IOTime, true }), o.Factor, o.MinExcess)
		check(n.Name, "wall time", n.Wall, others(i, func(x NodeStat) (time.Duration, bool) { return x.Wall, true }), o.Factor, o.MinExcess)
		for _, op := range n.Ops {
			if op.Count < o.MinOps {
				continue
			}
			rest := others(i, func(x NodeStat) (time.Duration, bool) {
				for _, xo := range x.Ops {
					if xo.Op == op.Op && xo.Count >= o.MinOps {
						return xo.P99, true
					}
				}
				return 0, false
			})
			check(n.Name, op.Op+" p99", op.P99, rest, o.P99Factor, o.MinP99Excess)
		}
	}
	return out
}

// median of v (the lower middle value for an even count, so a slow half does not lift it).
func median(v []time.Duration) time.Duration {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}
