package trace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
)

// failingReader returns its data, then err on every later read.
type failingReader struct {
	data []byte
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

// TestReaderInputError: an input that fails (an I/O error, a pipe closed with an error)
// ends the reading with that error, strict or not, after the events before it; it is no
// damaged chunk to skip, which would read the failing input again and again.
func TestReaderInputError(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testHeader(), WriterOptions{ChunkEvents: 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 25 {
		w.Append(&Event{Op: OpGetattr, Start: int64(i), Dur: 1, Tid: 1, Path: RootPath})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, eio := range []error{
		errors.New("input/output error"),
		// An input that passes on another reader's error, a damaged chunk there.
		fmt.Errorf("copy: %w", &ChunkError{Offset: 1, Reason: "payload checksum mismatch", Err: ErrCorrupt}),
	} {
		for _, strict := range []bool{false, true} {
			readFailing(t, buf.Bytes(), eio, strict)
		}
	}
}

// readFailing reads data less its last 100 bytes (the last events chunk and the footer),
// then the error eio, and checks that the reader ends with eio.
func readFailing(t *testing.T, data []byte, eio error, strict bool) {
	t.Helper()
	r, err := NewReader(&failingReader{data: data[:len(data)-100], err: eio})
	if err != nil {
		t.Fatal(err)
	}
	r.SetStrict(strict)
	n := 0
	for {
		if _, err = r.Next(); err != nil {
			break
		}
		n++
	}
	if !errors.Is(err, eio) || err == io.EOF || n == 0 {
		t.Errorf("%v, strict %v: %d events, then %v: want some events, then the input's error", eio, strict, n, err)
	}
	if _, err2 := r.Next(); !errors.Is(err2, eio) {
		t.Errorf("%v, strict %v: the next Next gave %v", eio, strict, err2)
	}
}
