package stats_test

import (
	"fmt"
	"io"
	"log"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
)

// Aggregate two traces of a multi-node job and read the exact merged read percentiles.
func Example() {
	total := stats.New()
	for _, name := range []string{"node1.iotap", "node2.iotap"} {
		r, err := trace.Open(name)
		if err != nil {
			log.Fatal(err)
		}
		acc := stats.NewAccumulator(name, r.Header(), stats.Options{})
		for {
			ev, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				log.Fatal(err)
			}
			acc.Add(ev)
		}
		footer, _ := r.Footer()
		total.Merge(acc.Finish(r, footer, r.Damage()))
		if err := r.Close(); err != nil {
			log.Fatal(err)
		}
	}
	rd := &total.Ops[trace.OpRead]
	fmt.Printf("reads %d, p99 %d ns, max %d ns\n", rd.Count, rd.Percentile(99), rd.MaxNs)
}
