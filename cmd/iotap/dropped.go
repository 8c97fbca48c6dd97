package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
)

// errDropped marks a command that completed on a trace whose recorder dropped events (its
// footer counts them): the trace reads whole, but every figure made from it leaves those
// events out.
var errDropped = errors.New("the recording dropped events")

// droppedNote describes the events the footer f of trace name counts as dropped, or
// returns "" when there are none.
func droppedNote(name string, f *trace.Footer) string {
	if f == nil || f.Dropped == 0 {
		return ""
	}
	why := "the recorder's buffer was full"
	switch {
	case f.Lost >= f.Dropped:
		why = "a write of the trace failed: " + f.WriteError
	case f.Lost > 0:
		why = fmt.Sprintf("%d when the recorder's buffer was full, %d when a write of the trace failed: %s",
			f.Dropped-f.Lost, f.Lost, f.WriteError)
	}
	return fmt.Sprintf("%s lacks %d of its %d events (%s)", name, f.Dropped, f.Events+f.Dropped, why)
}

// droppedNotes returns the notes of the traces files (aggregated into per, one each) whose
// recorders dropped events.
func droppedNotes(files []string, per []*stats.Stats) []string {
	var notes []string
	for i, s := range per {
		if n := droppedNote(files[i], s.Sources[0].Footer); n != "" {
			notes = append(notes, n)
		}
	}
	return notes
}

// droppedError returns an errDropped error with notes (each once), or nil when there are
// none.
func droppedError(notes []string) error {
	if len(notes) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s; the figures leave them out", errDropped, strings.Join(slices.Compact(slices.Sorted(slices.Values(notes))), "; "))
}

// nonEmpty returns s alone in a slice, or nil for "".
func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
