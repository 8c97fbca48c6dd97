package fusefs_test

import (
	"fmt"
	"log"
	"time"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/trace"
)

// Example_mount traces /data, mounted in place, into a trace file until unmounted.
func Example_mount() {
	o := fusefs.Options{Cache: fusefs.CacheNone}
	w, err := trace.Create("/tmp/job.trace", trace.Header{Kind: "record", FUSE: o.TraceOptions()}, trace.WriterOptions{})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := fusefs.Mount("/data", "/data", w, o)
	if err != nil {
		log.Fatal(err)
	}
	// ... run the job, then:
	_ = srv.Unmount()
	srv.Wait()
	st := srv.Cost()
	fmt.Println(st.Ops, "requests,", st.Self/time.Duration(max(st.Ops, 1)), "of the layer's own work per request")
	w.SetLayerCost(st.LayerCost()) // kept in the trace's footer
	_ = w.Close()
}
