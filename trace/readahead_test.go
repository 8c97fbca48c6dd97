package trace

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"
)

// TestReadAheadSameAsNext: a ReadAhead hands out the events the Reader's Next does, in
// the same order, with the same damage, and PathName answers the same after each event,
// also when a path record comes after events that name its id.
func TestReadAheadSameAsNext(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2)) // reading ahead needs two CPUs
	}
	good := smallTrace(t, 1000, 100) // header, paths, 10 events chunks, footer
	offs := chunkOffsets(t, good)
	// The paths chunk moved after the fifth events chunk: the first 500 events name an
	// id with no record yet.
	late := append(append(append(bytes.Clone(good[:offs[1]]), good[offs[2]:offs[7]]...), good[offs[1]:offs[2]]...), good[offs[7]:]...)
	flipped := bytes.Clone(good)
	flipped[offs[5]+frameSize+10] ^= 0x40
	cases := []struct {
		name string
		data []byte
	}{
		{"clean", good},
		{"one-chunk", smallTrace(t, 10, 100)},
		{"late-paths", late},
		{"payload-bit", flipped},
		{"cut-in-chunk", good[:offs[5]+frameSize+5]},
	}
	files, _ := filepath.Glob("../testdata/*/*.iotap")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct {
			name string
			data []byte
		}{filepath.Base(f), b})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := readAhead(t, tc.data, false)
			got := readAhead(t, tc.data, true)
			if len(want.evs) == 0 {
				t.Fatal("no events")
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("read ahead: %d events, damage %v\nwant %d events, damage %v", len(got.evs), got.damage, len(want.evs), want.damage)
			}
		})
	}
	if got := readAhead(t, late, true); got.names[0] == got.names[len(got.names)-1] {
		t.Errorf("late-paths: the first and last events' paths are both %q", got.names[0])
	}
}

type readResult struct {
	evs    []Event
	names  []string // PathName of each event's path, asked after Next returned it
	damage []string
	err    string
	final  string // PathName of the last event's path after the end
}

func readAhead(t *testing.T, data []byte, ahead bool) readResult {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	next := r.Next
	if ahead {
		a := NewReadAhead(r)
		if a.out == nil {
			t.Fatal("not reading ahead")
		}
		defer a.Close()
		next = a.Next
	}
	var res readResult
	for {
		ev, err := next()
		if err != nil {
			if err != io.EOF {
				res.err = err.Error()
			}
			break
		}
		res.evs = append(res.evs, *ev)
		res.names = append(res.names, r.PathName(ev.Path))
	}
	for _, d := range r.Damage() {
		res.damage = append(res.damage, d.Error())
	}
	if n := len(res.evs); n > 0 {
		res.final = r.PathName(res.evs[n-1].Path) + fmt.Sprint(len(r.Processes()))
	}
	return res
}
