package trace

import (
	"reflect"
	"testing"
)

// TestEventHasNoPointers: the writer keeps events in memory the garbage collector does not
// scan (newEventStore), which is only sound while Event holds no pointers.
func TestEventHasNoPointers(t *testing.T) {
	typ := reflect.TypeFor[Event]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		switch f.Type.Kind() {
		case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
			reflect.Float32, reflect.Float64:
		default:
			t.Errorf("Event.%s is a %s: the event store outside the Go heap must not hold pointers", f.Name, f.Type)
		}
	}
}

// TestEventStore: the store is zeroed, writable and released without a fault.
func TestEventStore(t *testing.T) {
	ev, release := newEventStore(1 << 12)
	if len(ev) != 1<<12 {
		t.Fatalf("len %d", len(ev))
	}
	for i := range ev {
		if ev[i] != (Event{}) {
			t.Fatalf("event %d not zero", i)
		}
		ev[i].Start = int64(i)
	}
	if ev[len(ev)-1].Start != 1<<12-1 {
		t.Fatal("write lost")
	}
	release()
}
