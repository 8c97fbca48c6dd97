// Where the trace goes and what the paths a spec names resolve to.

package recorder

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/iotap/iotap/internal/private"
	"github.com/iotap/iotap/internal/s3store"
	"github.com/iotap/iotap/internal/sysinfo"
	"github.com/iotap/iotap/trace"
)

// realOrSelf is p with symlinks resolved, or p itself when that fails.
func realOrSelf(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// checkDir makes p absolute and checks it is an existing directory. It returns the clean
// absolute path and the path with symlinks resolved.
func checkDir(p, what string) (abs, real string, err error) {
	abs, err = filepath.Abs(p)
	if err != nil {
		return "", "", fmt.Errorf("%s %s: %w", what, p, err)
	}
	st, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", "", usageErrorf("%s %s does not exist", what, p)
	case err != nil:
		return "", "", usageErrorf("%s %s: %v", what, p, err)
	case !st.IsDir():
		return "", "", usageErrorf("%s %s is not a directory", what, p)
	}
	real, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return "", "", fmt.Errorf("%s %s: %w", what, p, err)
	}
	return abs, real, nil
}

// mapDir maps a directory inside target to the same place under view; others stay.
func mapDir(dir, target, view string) string {
	real := realOrSelf(dir)
	if !sysinfo.Within(real, target) {
		return dir
	}
	rel, err := filepath.Rel(target, real)
	if err != nil {
		return dir
	}
	return filepath.Join(view, rel)
}

// resolveOutput expands placeholders, picks the default name, and refuses a trace inside
// the traced tree (the job would see it change, and in place it would be hidden).
func resolveOutput(out, realTarget, realView string) (string, error) {
	if out == "" {
		dir, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("current directory: %w", err)
		}
		rdir := realOrSelf(dir)
		if sysinfo.Within(rdir, realTarget) {
			if realTarget == "/" {
				return "", usageErrorf("the target is /: name the trace with -o FILE outside it")
			}
			rdir = filepath.Dir(realTarget)
		}
		out = filepath.Join(rdir, "iotap-"+nowUTC().Format("20060102T150405Z")+".iotap")
	} else {
		out = expandOutput(out, os.Getenv, sysinfo.Hostname(), os.Getpid())
	}
	if s3store.IsURL(out) {
		return out, nil // uploaded as it is written; never inside the traced tree
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return "", fmt.Errorf("output %s: %w", out, err)
	}
	dir := filepath.Dir(abs)
	rdir, err := resolveMissing(dir)
	if err != nil {
		return "", usageErrorf("output %s: %v", abs, err)
	}
	rout := filepath.Join(rdir, filepath.Base(abs))
	if sysinfo.Within(rout, realTarget) {
		return "", usageErrorf("output %s is inside the traced tree %s: write the trace elsewhere (-o)", abs, realTarget)
	}
	if realView != "" && sysinfo.Within(rout, realView) {
		return "", usageErrorf("output %s is inside the mount point %s: write the trace elsewhere (-o)", abs, realView)
	}
	if st, err := os.Stat(abs); err == nil && st.IsDir() {
		return "", usageErrorf("output %s is a directory", abs)
	}
	return abs, nil
}

// resolveMissing resolves symlinks in dir, which may not exist yet: its longest existing
// ancestor is resolved and the missing rest appended.
func resolveMissing(dir string) (string, error) {
	var rest []string
	for {
		r, err := filepath.EvalSymlinks(dir)
		if err == nil {
			st, serr := os.Stat(r)
			if serr != nil {
				return "", serr
			}
			if !st.IsDir() {
				return "", fmt.Errorf("%s is not a directory", dir)
			}
			for i := len(rest) - 1; i >= 0; i-- {
				r = filepath.Join(r, rest[i])
			}
			return r, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", err
		}
		rest = append(rest, filepath.Base(dir))
		dir = parent
	}
}

// createOutput checks early that the trace can be written (the recorder truncates it), and
// reports whether it made the file. Missing directories are created (a per-job directory
// such as traces/%j/ cannot exist beforehand).
func createOutput(path string) (created bool, err error) {
	if s3store.IsURL(path) {
		return false, nil // checked when the recorder opens the upload
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, usageErrorf("cannot write the trace: %v", err)
	}
	_, serr := os.Lstat(path)
	f, err := private.OpenFile(path, os.O_WRONLY)
	if err != nil {
		return false, usageErrorf("cannot write the trace: %v", err)
	}
	return errors.Is(serr, fs.ErrNotExist), f.Close()
}

// removeIfEmpty removes the trace createOutput made when the recording ended before
// anything was written to it (the recorder failed before the trace was created).
func removeIfEmpty(path string) {
	if st, err := os.Lstat(path); err == nil && st.Mode().IsRegular() && st.Size() == 0 {
		_ = os.Remove(path)
	}
}

// expandOutput replaces %j (Slurm job id), %n (node name), %t (task id), %h (host name),
// %p (pid) and %% in an output file name.
func expandOutput(s string, getenv func(string) string, host string, pid int) string {
	if !strings.Contains(s, "%") {
		return s
	}
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	short := host
	if i := strings.IndexByte(short, '.'); i > 0 {
		short = short[:i]
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'j':
			b.WriteString(or(getenv("SLURM_JOB_ID"), "nojob"))
		case 'n':
			b.WriteString(or(getenv("SLURMD_NODENAME"), short))
		case 't':
			b.WriteString(or(getenv("SLURM_PROCID"), "0"))
		case 'h':
			b.WriteString(host)
		case 'p':
			b.WriteString(strconv.Itoa(pid))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// slurmLabels turns the Slurm job placement variables that are set into labels.
func slurmLabels(getenv func(string) string) []trace.Label {
	var out []trace.Label
	for _, k := range []string{"SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_NODEID", "SLURM_PROCID", "SLURMD_NODENAME"} {
		if v := getenv(k); v != "" {
			out = append(out, trace.Label{Key: k, Value: v})
		}
	}
	return out
}

// createTrace creates a trace file, or an s3:// object uploaded as it is written (a crash
// loses at most the last flush interval: see internal/s3store). Finish with the returned
// close function instead of w.Close: for S3 it also completes the upload.
func createTrace(ctx context.Context, store TraceStore, name string, h trace.Header, o trace.WriterOptions) (w *trace.Writer, closeTrace func() error, err error) {
	if !s3store.IsURL(name) {
		w, err := trace.Create(name, h, o)
		if err != nil {
			return nil, nil, err
		}
		return w, w.Close, nil
	}
	so := s3store.Options{Client: s3store.ClientOptions{Endpoint: store.Endpoint, Region: store.Region, Profile: store.AWSProfile}}
	so.Log = o.Logger
	up, err := s3store.Create(ctx, name, so)
	if err != nil {
		return nil, nil, err
	}
	w, err = trace.NewWriter(up, h, o)
	if err != nil {
		_ = up.Close()
		return nil, nil, err
	}
	return w, func() error { return errors.Join(w.Close(), up.Close()) }, nil
}
