package legs

import (
	"encoding/binary"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/trace"
)

// These tests need no root: they read the compiled object and the kernel's BTF.

// TestRecordLayout checks the Go types that decode the program's records against the
// object's BTF: same size, and each field at the offset and of the size the C struct has.
func TestRecordLayout(t *testing.T) {
	spec, err := loadLegs()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		typ  reflect.Type
	}{
		{"req_rec", reflect.TypeFor[legsReqRec]()},
		{"call_rec", reflect.TypeFor[legsCallRec]()},
		{"data_rec", reflect.TypeFor[legsDataRec]()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st *btf.Struct
			if err := spec.Types.TypeByName(tc.name, &st); err != nil {
				t.Fatal(err)
			}
			if int(st.Size) != int(tc.typ.Size()) {
				t.Fatalf("C %d bytes, Go %d", st.Size, tc.typ.Size())
			}
			var goFields []reflect.StructField
			for i := range tc.typ.NumField() {
				if f := tc.typ.Field(i); f.Name != "_" {
					goFields = append(goFields, f)
				}
			}
			if len(goFields) != len(st.Members) {
				t.Fatalf("C %d members, Go %d", len(st.Members), len(goFields))
			}
			for i, m := range st.Members {
				f := goFields[i]
				size, err := btf.Sizeof(m.Type)
				if err != nil {
					t.Fatal(err)
				}
				if uintptr(m.Offset.Bytes()) != f.Offset || uintptr(size) != f.Type.Size() {
					t.Errorf("%s: C at %d (%d bytes), Go %s at %d (%d bytes)", m.Name, m.Offset.Bytes(), size, f.Name, f.Offset, f.Type.Size())
				}
			}
			// The record's kind is its first two bytes: apply reads it there.
			if st.Members[0].Name != "kind" || st.Members[0].Offset != 0 {
				t.Errorf("first member %s at %d, want kind at 0", st.Members[0].Name, st.Members[0].Offset)
			}
		})
	}
}

// TestRelocatesOnThisKernel computes the CO-RE relocation of every access the program
// makes to a kernel structure against the running kernel's BTF, as the loader will: none
// may fail (a member the kernel does not have, or a local type taken for a kernel one).
func TestRelocatesOnThisKernel(t *testing.T) {
	kernel, err := btf.LoadKernelSpec()
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) {
		testenv.Skip(t, testenv.FUSE, "the kernel's BTF is not readable here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	spec, err := loadLegs()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for name, p := range spec.Programs {
		var relos []*btf.CORERelocation
		for i := range p.Instructions {
			if r := btf.CORERelocationMetadata(&p.Instructions[i]); r != nil {
				relos = append(relos, r)
			}
		}
		fixups, err := btf.CORERelocate(relos, []*btf.Spec{kernel}, binary.LittleEndian,
			func(btf.Type) (btf.TypeID, error) { return 0, errors.New("no local type ids") })
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for i, f := range fixups {
			n++
			if strings.Contains(f.String(), "poison") {
				t.Errorf("%s: %s does not relocate: %s", name, relos[i], f.String())
			}
		}
	}
	if n < 20 {
		t.Errorf("only %d relocations: the program reads kernel structures through CO-RE", n)
	}
}

// TestProgramsLoaded: every program of the object is one Open loads for some options, each
// as the field of objects its name says; those that follow mapped files are loaded only
// where they can be attached (their tracepoints' names are the programs' attach points).
func TestProgramsLoaded(t *testing.T) {
	spec, err := loadLegs()
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{} // program name: objects' field
	typ := reflect.TypeFor[legsPrograms]()
	for i := range typ.NumField() {
		fields[typ.Field(i).Tag.Get("ebpf")] = typ.Field(i).Name
	}
	var obj objects
	val := reflect.ValueOf(&obj.legsPrograms).Elem()
	loaded := map[string]bool{}
	for _, o := range []Options{{}, {DataCalls: true}, {JobOnly: true}, {DataCalls: true, JobOnly: true}} {
		for _, maps := range []string{"", "no tracepoint"} {
			names := map[string]bool{}
			for _, p := range obj.programs(o, maps) {
				if spec.Programs[p.name] == nil {
					t.Errorf("%+v: Open loads program %q, which the object does not have", o, p.name)
				}
				if names[p.name] {
					t.Errorf("%+v: program %q loaded twice", o, p.name)
				}
				names[p.name] = true
				if f := val.FieldByName(fields[p.name]); !f.IsValid() || f.Addr().Interface() != any(p.p) {
					t.Errorf("program %q is not kept in objects' field %s", p.name, fields[p.name])
				}
				loaded[p.name] = true
			}
		}
	}
	for name := range spec.Programs {
		if !loaded[name] {
			t.Errorf("program %q is loaded with no options", name)
		}
	}
	var faults []string
	for _, p := range obj.faultPrograms() {
		faults = append(faults, spec.Programs[p.name].AttachTo)
		for _, maps := range []string{"", "no tracepoint"} {
			got := slices.ContainsFunc(obj.programs(Options{DataCalls: true}, maps), func(q program) bool { return q.name == p.name })
			if got != (maps == "") {
				t.Errorf("fault program %q loaded %v where mapped files are not followed for %q", p.name, got, maps)
			}
		}
	}
	slices.Sort(faults)
	if want := slices.Sorted(slices.Values(faultTracepoints)); !slices.Equal(faults, want) {
		t.Errorf("the fault programs attach to %v, the kernel is checked for %v", faults, want)
	}
}

// TestDataEvent turns records of each kind into the events a recording stores.
func TestDataEvent(t *testing.T) {
	tr := &Tracer{origin: 1_000_000}
	for _, tc := range []struct {
		name string
		rec  legsDataRec
		want trace.Event
	}{
		{"read", legsDataRec{Kind: uint16(legsRecKindREC_DATA), Nr: 0, Tid: 7, Pid: 5, Uid: 1000, Gid: 100,
			Op: uint32(legsDataOpDATA_READ), Fh: 3, Node: 9, Pos: 8192, Size: 4096, Ret: 4096,
			Start: 1_000_500, End: 1_003_500, ThinkRd: 11, Woken: 1_000_100, Waker: 6},
			trace.Event{Op: trace.OpRead, Passthrough: true, Node: 9, Handle: 3, Offset: 8192, Size: 4096, Ret: 4096,
				Tid: 7, Pid: 5, Uid: 1000, Gid: 100, Start: 500, Dur: 3000, Queued: 500, Done: 3500,
				CallStart: 500, CallEnd: 3500, RunDelay: 11, WokenAt: 100, Waker: 6}},
		{"write failed", legsDataRec{Kind: uint16(legsRecKindREC_DATA), Nr: 18, Tid: 7, Pid: 5,
			Op: uint32(legsDataOpDATA_WRITE), Fh: 3, Node: 9, Pos: 0, Size: 1 << 33, Ret: -28,
			Start: 1_000_500, End: 1_000_900},
			trace.Event{Op: trace.OpWrite, Passthrough: true, Node: 9, Handle: 3, Size: 1<<32 - 1, Errno: 28,
				Tid: 7, Pid: 5, Start: 500, Dur: 400, Queued: 500, Done: 900, CallStart: 500, CallEnd: 900, CallNr: 18}},
		{"async", legsDataRec{Kind: uint16(legsRecKindREC_ASYNC), Nr: 209, Tid: 7, Pid: 5,
			Op: uint32(legsDataOpDATA_READ), Fh: 4, Node: 9, Pos: 4096, Size: 4096, Ret: 4096,
			Start: 1_000_500, End: 1_090_500, CallEnd: 1_000_800},
			trace.Event{Op: trace.OpRead, Passthrough: true, Node: 9, Handle: 4, Offset: 4096, Size: 4096, Ret: 4096,
				Tid: 7, Pid: 5, Start: 500, Dur: 90_000, Queued: 500, Done: 90_500, CallStart: 500, CallEnd: 800, CallNr: 209}},
		{"fault", legsDataRec{Kind: uint16(legsRecKindREC_FAULT), Tid: 7, Pid: 5, Uid: 1000, Gid: 100,
			Op: uint32(legsDataOpDATA_READ), Fh: 4, Node: 9, Pos: 1 << 20, Size: 65536, Ret: 9000,
			Start: 1_000_500, End: 1_000_500},
			trace.Event{Op: trace.OpRead, Passthrough: true, Flags: trace.MapFault, Node: 9, Handle: 4, Offset: 1 << 20, Size: 65536,
				Ret: 9000, Tid: 7, Pid: 5, Uid: 1000, Gid: 100, Start: 500, Queued: 500, Done: 500}},
		{"dirtied", legsDataRec{Kind: uint16(legsRecKindREC_FAULT), Tid: 7, Pid: 5,
			Op: uint32(legsDataOpDATA_WRITE), Fh: 4, Node: 9, Pos: 8192, Size: 4096, Ret: 4096,
			Start: 1_000_700, End: 1_000_700},
			trace.Event{Op: trace.OpWrite, Passthrough: true, Flags: trace.MapFault, Node: 9, Handle: 4, Offset: 8192, Size: 4096,
				Ret: 4096, Tid: 7, Pid: 5, Start: 700, Queued: 700, Done: 700}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got trace.Event
			tr.dataEvent(&tc.rec, &got)
			if got != tc.want {
				t.Errorf("\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestApplyRequest fills an event from a request record and the call record of its system
// call, through the ring's bytes as the program writes them.
func TestApplyRequest(t *testing.T) {
	tr := &Tracer{origin: 1_000_000, slots: make([]slot, TableSlots)}
	req := legsReqRec{Kind: uint16(legsRecKindREC_REQ), Nr: 257, Tid: 7, Unique: 42, Queued: 1_000_200, Done: 1_000_900,
		Enter: 1_000_100, ThinkRd: 5, Woken: 1_000_050, Waker: 8, Opcode: 14}
	call := legsCallRec{Kind: uint16(legsRecKindREC_CALL), Nr: 257, Tid: 7, Unique: 42, Enter: 1_000_100, Exit: 1_001_000, Nreq: 1}
	tr.apply(bytesOf(&req))
	tr.apply(bytesOf(&call))
	tr.apply([]byte{1}) // too short to be anything: ignored
	evs := []trace.Event{{Unique: 42}, {Unique: 44}, {}}
	tr.Fill(evs)
	want := trace.Event{Unique: 42, Queued: 200, Done: 900, CallStart: 100, CallEnd: 1000, CallNr: 257, RunDelay: 5, WokenAt: 50, Waker: 8}
	if evs[0] != want {
		t.Errorf("\n got %+v\nwant %+v", evs[0], want)
	}
	if evs[1] != (trace.Event{Unique: 44}) || tr.stats.Filled != 1 || tr.stats.Missing != 1 {
		t.Errorf("unknown request filled: %+v, stats %+v", evs[1], tr.stats)
	}
}

// bytesOf returns r's bytes, as the ring holds them.
func bytesOf[R any](r *R) []byte {
	b := make([]byte, reflect.TypeFor[R]().Size())
	if _, err := binary.Encode(b, binary.LittleEndian, r); err != nil {
		panic(err)
	}
	return b
}
