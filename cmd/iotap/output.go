package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/iotap/iotap/internal/private"
	"github.com/iotap/iotap/internal/s3store"
)

// outputFile is the -o of a command that builds its whole output before writing it
// (report, compare). It is opened before any work, so that an -o that cannot be written
// is a usage error (exit 2) as in every command, and it is left as it was until the
// output is written: a command that fails keeps an existing file and removes one it made.
type outputFile struct {
	path    string
	f       *os.File // nil: standard output
	created bool     // f did not exist before
}

// openOutput opens path ("" or "-": standard output) for writing without changing it.
func openOutput(path string) (*outputFile, error) {
	o := &outputFile{path: path}
	if path == "" || path == "-" {
		return o, nil
	}
	if err := checkOutputNotInput(path, nil); err != nil {
		return nil, err
	}
	_, err := os.Lstat(path)
	o.created = errors.Is(err, fs.ErrNotExist)
	if o.f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE, private.Mode); err != nil {
		return nil, usageErrorf("create output: %v", err)
	}
	return o, nil
}

// write writes data as the whole output, and closes the file.
func (o *outputFile) write(e *env, data []byte) error {
	if o.f == nil {
		_, err := e.stdout.Write(data)
		return err
	}
	f := o.f
	o.f = nil
	err := private.Restrict(f)
	if err == nil {
		// A regular file is cut to the new output; a device or a pipe (-o /dev/null,
		// /dev/stdout) cannot be and need not be.
		if fi, serr := f.Stat(); serr != nil {
			err = serr
		} else if fi.Mode().IsRegular() {
			err = f.Truncate(0)
		}
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", o.path, err)
	}
	return nil
}

// abandon closes a file nothing was written to, and removes it if it was made for the
// output. It does nothing after write.
func (o *outputFile) abandon() {
	if o.f == nil {
		return
	}
	_ = o.f.Close() // nothing written
	o.f = nil
	if o.created {
		_ = os.Remove(o.path)
	}
}

// checkOutputNotInput checks an output file (-o) before the traces are read: its
// directory must exist, and it must not be one of the input traces, which would be
// overwritten with the report of itself (usage errors, as for every command's -o).
func checkOutputNotInput(output string, files []string) error {
	if output == "" || output == "-" {
		return nil
	}
	if fi, err := os.Stat(filepath.Dir(output)); err != nil || !fi.IsDir() {
		return usageErrorf("write report: -o %s: its directory %s does not exist", output, filepath.Dir(output))
	}
	out, err := os.Stat(output)
	if err != nil {
		return nil // not there yet: no input
	}
	for _, f := range files {
		if f == "-" || s3store.IsURL(f) {
			continue
		}
		if in, err := os.Stat(f); err == nil && os.SameFile(in, out) {
			return usageErrorf("-o %s is the trace %s itself", output, f)
		}
	}
	return nil
}
