package fusefs

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestTracerDefinesEveryRawMethod fails when go-fuse's RawFileSystem gains a method that
// tracer does not declare itself (an embedded or promoted method would go through untimed).
func TestTracerDefinesEveryRawMethod(t *testing.T) {
	iface := reflect.TypeFor[fuse.RawFileSystem]()
	tt := reflect.TypeFor[*tracer]()
	st := reflect.TypeFor[tracer]()
	for i := 0; i < st.NumField(); i++ {
		if st.Field(i).Anonymous {
			t.Fatalf("tracer embeds %s: every method must be declared explicitly", st.Field(i).Type)
		}
	}
	for i := 0; i < iface.NumMethod(); i++ {
		m := iface.Method(i)
		if _, ok := tt.MethodByName(m.Name); !ok {
			t.Errorf("tracer does not implement RawFileSystem.%s", m.Name)
		}
	}
	if iface.NumMethod() != 48 {
		t.Logf("note: RawFileSystem has %d methods (48 in go-fuse v2.12.1)", iface.NumMethod())
	}
}

// TestTracerLayout: what every request reads of the tracer is in its first two lines, and
// the fields of the commonest path in the first.
func TestTracerLayout(t *testing.T) {
	var tr tracer
	for _, f := range []struct {
		name       string
		end, limit uintptr
	}{
		{"inner", unsafe.Offsetof(tr.inner) + unsafe.Sizeof(tr.inner), 64},
		{"comms", unsafe.Offsetof(tr.comms) + unsafe.Sizeof(tr.comms), 64},
		{"procs", unsafe.Offsetof(tr.procs) + unsafe.Sizeof(tr.procs), 128},
		{"filter", unsafe.Offsetof(tr.filter) + unsafe.Sizeof(tr.filter), 128},
	} {
		if f.end > f.limit {
			t.Errorf("tracer.%s ends at byte %d, beyond %d", f.name, f.end, f.limit)
		}
	}
}
