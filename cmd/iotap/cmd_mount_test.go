package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iotap/iotap/fusefs/fusetest"
	"github.com/iotap/iotap/internal/sysinfo"
	"github.com/iotap/iotap/trace"
)

// mountDirs makes data/ (with a file), mnt/ and the trace path in a temp dir.
func mountDirs(t *testing.T) (target, mnt, out string) {
	t.Helper()
	dir := t.TempDir()
	target, mnt, out = filepath.Join(dir, "data"), filepath.Join(dir, "mnt"), filepath.Join(dir, "t.iotap")
	for _, d := range []string{target, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(target, "in"), []byte("input\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return target, mnt, out
}

// startMount runs `iotap mount` and returns once the mount is serving: iotap says so on
// the pipe it gets as --ready-fd 3.
func startMount(t *testing.T, target, mnt, out string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(iotapBin, "mount", "--target", target, "--mount-at", mnt, "-o", out, "--ready-fd", "3")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	line, err := startReady(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			_ = exec.Command("umount", "-l", mnt).Run()
		}
	})
	if line != "ready\n" {
		t.Fatalf("iotap mount did not report ready (read %q); stderr: %s", line, stderr.String())
	}
	if m, ok, err := sysinfo.IsMountPoint(mnt); !ok || m.FSType != "fuse.iotap" {
		t.Fatalf("ready, but %s is not an iotap mount: %+v %v", mnt, m, err)
	}
	return cmd
}

// startReady starts cmd with a pipe as its descriptor 3 and returns what cmd writes there
// before closing it (or exiting), read for at most 20 s.
func startReady(cmd *exec.Cmd) (string, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return "", err
	}
	defer func() { _ = r.Close() }()
	cmd.ExtraFiles = []*os.File{w}
	err = cmd.Start()
	_ = w.Close() // the child holds the write end now
	if err != nil {
		return "", err
	}
	if err := r.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		return "", err
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return string(b), fmt.Errorf("read the ready descriptor: %w", err)
	}
	return string(b), nil
}

// TestMountReadyFD: --ready-fd names an inherited descriptor; a mount that fails closes it
// without a line, so the reader is not left waiting.
func TestMountReadyFD(t *testing.T) {
	requireRecord(t)
	target, mnt, out := mountDirs(t)
	t.Run("mount fails", func(t *testing.T) {
		cmd := exec.Command(iotapBin, "mount", "--target", target, "--mount-at", filepath.Join(mnt, "missing"), "-o", out, "--ready-fd", "3")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		line, err := startReady(cmd)
		werr := cmd.Wait()
		if err != nil || line != "" || werr == nil {
			t.Fatalf("read %q (%v), exit %v, want no line and a failure; stderr: %s", line, err, werr, stderr.String())
		}
	})
	for _, tc := range []struct{ name, fd, want string }{
		{"not open", "987", "--ready-fd 987: not an open file descriptor"},
		{"stdout", "1", "--ready-fd 1: want an inherited descriptor of 3 or more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := run(context.Background(), []string{"mount", "--target", target, "--mount-at", mnt, "-o", out, "--ready-fd", tc.fd}, nil, &stderr, &stderr)
			if code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr.String(), exitUsage, tc.want)
			}
		})
	}
}

func TestMountUnmount(t *testing.T) {
	requireRecord(t)
	tests := []struct {
		name string
		stop func(t *testing.T, cmd *exec.Cmd, mnt string)
	}{
		{name: "iotap unmount", stop: func(t *testing.T, _ *exec.Cmd, mnt string) {
			var stderr bytes.Buffer
			if code := run(context.Background(), []string{"unmount", mnt}, nil, &stderr, &stderr); code != 0 {
				t.Fatalf("unmount: exit %d: %s", code, stderr.String())
			}
		}},
		{name: "fusermount3 -u", stop: func(t *testing.T, _ *exec.Cmd, mnt string) {
			if out, err := exec.Command("fusermount3", "-u", mnt).CombinedOutput(); err != nil {
				t.Fatalf("fusermount3: %v: %s", err, out)
			}
		}},
		{name: "SIGTERM", stop: func(t *testing.T, cmd *exec.Cmd, _ string) {
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "SIGINT", stop: func(t *testing.T, cmd *exec.Cmd, _ string) {
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target, mnt, out := mountDirs(t)
			cmd := startMount(t, target, mnt, out)
			// Load from a child process, never from this one.
			// Absolute paths: a child that chdirs into the mount before its exec would be
			// attributed to this test binary for a while (fusefs caches comm per thread).
			got, err := exec.Command("sh", "-c", `cd "$1"; cat in; echo written > new; cat new`, "sh", mnt).Output()
			if err != nil || string(got) != "input\nwritten\n" {
				t.Fatalf("through the mount: %q %v", got, err)
			}
			tt.stop(t, cmd, mnt)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("iotap mount ended with %v; stderr: %s", err, cmd.Stderr)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("iotap mount still running after unmount; stderr: %s", cmd.Stderr)
			}
			if data, err := os.ReadFile(filepath.Join(target, "new")); err != nil || string(data) != "written\n" {
				t.Errorf("file in the target: %q %v", data, err)
			}
			if _, ok, _ := sysinfo.IsMountPoint(mnt); ok {
				t.Errorf("%s still mounted", mnt)
			}
			tc := readTrace(t, out)
			if !tc.footer {
				t.Errorf("trace has no footer (not closed cleanly)")
			}
			if !tc.has(trace.OpRead, "in", "cat") || !tc.has(trace.OpCreate, "new", "sh") || !tc.has(trace.OpWrite, "new", "") {
				t.Errorf("trace lacks expected ops:\n%s", tc.dump())
			}
			if tc.hdr.Target.Path != target || len(tc.hdr.Command) != 0 {
				t.Errorf("header %+v", tc.hdr)
			}
		})
	}
}

func TestUnmountRefusesOtherMounts(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{name: "not a mount", args: []string{"unmount", dir}, code: 1, want: "not an iotap mount (nothing is mounted there)"},
		{name: "another file system", args: []string{"unmount", "/proc"}, code: 1, want: "not an iotap mount (it is a proc mount"},
		{name: "no argument", args: []string{"unmount"}, code: 2, want: "exactly one directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := run(context.Background(), tt.args, nil, &stderr, &stderr)
			if code != tt.code || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("exit %d %q, want %d %q", code, stderr.String(), tt.code, tt.want)
			}
		})
	}
}

func TestMountNeedsBothDirs(t *testing.T) {
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"mount", "--target", t.TempDir()}, nil, &stderr, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), "--mount-at are both required") {
		t.Errorf("exit %d %q", code, stderr.String())
	}
}

// TestRecordMountAt exposes the traced view at another directory: the job's working
// directory inside the target is mapped to the same place under the view.
func TestRecordMountAt(t *testing.T) {
	if iotapBin == "" {
		t.Fatal("no iotap binary")
	}
	fusetest.Require(t)
	target, mnt, out := mountDirs(t)
	p := startIotap(t, target, "record", "--mount-at", mnt, "-o", out, "--cache", "kernel", "--",
		"sh", "-c", `pwd; cat in; echo x > y`)
	_ = p.stdin.Close()
	code, stdout := p.wait(t)
	if code != 0 || stdout != mnt+"\ninput\n" {
		t.Fatalf("exit %d stdout %q; stderr %s", code, stdout, p.stderr)
	}
	if _, err := os.Stat(filepath.Join(target, "y")); err != nil {
		t.Error(err)
	}
	if _, ok, _ := sysinfo.IsMountPoint(mnt); ok {
		t.Errorf("%s still mounted", mnt)
	}
	tc := readTrace(t, out)
	if tc.hdr.FUSE.Cache != "kernel" || !tc.has(trace.OpCreate, "y", "sh") {
		t.Errorf("header %+v events:\n%s", tc.hdr.FUSE, tc.dump())
	}
}
