// Package private creates output files that only their owner can read and write: a trace,
// and every report, export and summary made from one, names the paths of a job.
package private

import (
	"fmt"
	"os"
)

// Mode is the permission of every output file.
const Mode os.FileMode = 0o600

// OpenFile opens path for writing with flag (os.O_CREATE is added), creating it with Mode.
// An existing regular file gets Mode too: output written over a file readable by others
// must not stay readable by them. Other files (a terminal, /dev/null, a pipe) keep theirs.
func OpenFile(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|os.O_CREATE, Mode)
	if err != nil {
		return nil, err
	}
	if err := restrict(f); err != nil {
		_ = f.Close() // nothing written yet
		return nil, err
	}
	return f, nil
}

func restrict(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() || st.Mode().Perm() == Mode {
		return nil
	}
	if err := f.Chmod(Mode); err != nil {
		return fmt.Errorf("make %s private (mode %v): %w", f.Name(), Mode, err)
	}
	return nil
}

// WriteFile writes data to path as os.WriteFile does, with OpenFile's permissions.
func WriteFile(path string, data []byte) error {
	f, err := OpenFile(path, os.O_WRONLY|os.O_TRUNC)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Restrict gives f, opened for writing, Mode if it is a regular file (as OpenFile does).
func Restrict(f *os.File) error { return restrict(f) }
