package trace

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
)

// TestCmdlineRoundTrip: command lines go through a trace with their processes, cut at
// MaxCmdline; a record without one reads back nil.
func TestCmdlineRoundTrip(t *testing.T) {
	long := []string{"sqlite3", strings.Repeat("x", MaxCmdline), "never kept"}
	ps := []Process{
		{Tid: 10, Pid: 10, PPid: 1, Comm: "sqlite3", Exe: "/usr/bin/sqlite3", Cmdline: []string{"sqlite3", "db.sqlite", "insert into t values (1)", ""}},
		{Tid: 11, Pid: 10, PPid: 1, Comm: "sqlite3"},
		{Tid: 12, Pid: 12, PPid: 10, Comm: "sh", Cmdline: long},
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testHeader(), WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		w.AddProcess(p)
	}
	w.Append(&Event{Op: OpGetattr, Path: RootPath, Tid: 12, Pid: 12, Start: 1, Dur: 1})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := r.Next(); err != nil {
			break
		}
	}
	if d := r.Damage(); len(d) > 0 {
		t.Fatalf("damage: %v", d)
	}
	got := r.Processes()
	want := append([]Process(nil), ps...)
	want[2].Cmdline = []string{"sqlite3", strings.Repeat("x", MaxCmdline-len("sqlite3"))}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("processes read back:\n got %+v\nwant %+v", got, want)
	}
}

// TestCmdlineLayout: the records of a processes payload are laid out as before command
// lines existed, which follow them: a payload without them reads with every Cmdline nil,
// and the records of one with them are byte for byte the payload a writer without them
// wrote, so that a reader that stops after the records (as readers that predate command
// lines do) reads them unchanged.
func TestCmdlineLayout(t *testing.T) {
	ps := []Process{
		{Tid: 7, Pid: 7, PPid: 1, FirstSeen: 3, Comm: "tar", Exe: "/bin/tar", Cmdline: []string{"tar", "cf", "x.tar", "."}},
		{Tid: 8, Pid: 7, PPid: 1, FirstSeen: -4, Comm: "tar", Exe: "/bin/tar"},
	}
	var old []byte // the layout without command lines
	old = binary.AppendUvarint(old, uint64(len(ps)))
	for _, p := range ps {
		old = binary.AppendUvarint(old, uint64(p.Tid))
		old = binary.AppendUvarint(old, uint64(p.Pid))
		old = binary.AppendUvarint(old, uint64(p.PPid))
		old = binary.AppendVarint(old, p.FirstSeen)
		old = appendString(old, p.Comm)
		old = appendString(old, p.Exe)
	}
	payload := appendProcesses(nil, ps)
	if !bytes.HasPrefix(payload, old) {
		t.Fatalf("the records changed layout:\n got %x\nwant %x...", payload, old)
	}
	read := func(b []byte) ([]Process, error) {
		var out []Process
		err := decodeProcesses(b, func(p Process) error { out = append(out, p); return nil })
		return out, err
	}
	got, err := read(old)
	if err != nil {
		t.Fatal(err)
	}
	want := []Process{ps[0], ps[1]}
	want[0].Cmdline = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("payload without command lines: got %+v, want %+v", got, want)
	}
	if got, err = read(payload); err != nil || !reflect.DeepEqual(got, ps) {
		t.Errorf("payload with command lines: got %+v, %v; want %+v", got, err, ps)
	}
	// One byte over the limit, as no writer writes it, is corrupt.
	bad := binary.AppendUvarint(append([]byte(nil), old...), 1)
	bad = appendString(bad, strings.Repeat("y", MaxCmdline+1))
	bad = binary.AppendUvarint(bad, 0)
	if _, err := read(bad); err == nil || !strings.Contains(err.Error(), "exceeds the limit") {
		t.Errorf("a command line over MaxCmdline: %v, want an error", err)
	}
}

func TestCutCmdline(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want []string
	}{
		{"nil", nil, nil},
		{"fits", []string{"a", "b"}, []string{"a", "b"}},
		{"exactly", []string{strings.Repeat("a", MaxCmdline-1), "b"}, []string{strings.Repeat("a", MaxCmdline-1), "b"}},
		{"cut", []string{strings.Repeat("a", MaxCmdline-1), "bc", "d"}, []string{strings.Repeat("a", MaxCmdline-1), "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CutCmdline(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("CutCmdline = %q, want %q", got, tc.want)
			}
		})
	}
}
