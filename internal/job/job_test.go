package job

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestStartAndExitCodes(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "noexec.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		argv     []string
		wantCode int
		startErr bool
	}{
		{name: "exit code passes", argv: []string{"sh", "-c", "exit 3"}, wantCode: 3},
		{name: "killed by signal", argv: []string{"sh", "-c", "kill -TERM $$"}, wantCode: 128 + int(syscall.SIGTERM)},
		{name: "not found in PATH", argv: []string{"iotap-no-such-command"}, wantCode: CodeNotFound, startErr: true},
		{name: "not found by path", argv: []string{"./missing"}, wantCode: CodeNotFound, startErr: true},
		{name: "not executable", argv: []string{"./noexec.sh"}, wantCode: CodeNotExecutable, startErr: true},
		{name: "directory", argv: []string{"/"}, wantCode: CodeNotExecutable, startErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, err := Start(Spec{Argv: tt.argv, Dir: dir})
			if tt.startErr {
				var se *StartError
				if !errors.As(err, &se) {
					t.Fatalf("Start error = %v, want *StartError", err)
				}
				if se.Code != tt.wantCode {
					t.Fatalf("code = %d, want %d (%v)", se.Code, tt.wantCode, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			code, err := Wait(cmd)
			if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantCode {
				t.Fatalf("code = %d, want %d", code, tt.wantCode)
			}
		})
	}
}

func TestRelativeCommandResolvedInDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "job.sh"), []byte("#!/bin/sh\necho \"$PWD\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd, err := Start(Spec{Argv: []string{"./job.sh"}, Dir: dir, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := Wait(cmd); err != nil || code != 0 {
		t.Fatalf("code %d err %v", code, err)
	}
	if got := strings.TrimSpace(out.String()); got != dir {
		t.Errorf("PWD = %q, want %q", got, dir)
	}
}

func TestForward(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	cmd, err := Start(Spec{Argv: []string{"sh", "-c", `trap 'echo got; exit 42' TERM; echo ready; while :; do sleep 0.05; done`}, Stdout: w})
	_ = w.Close()
	if err != nil {
		t.Fatal(err)
	}
	stop := Forward(cmd.Process)
	defer stop()
	br := bufio.NewReader(r)
	if line, err := br.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("read %q, %v", line, err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, err := Wait(cmd)
	if err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(br)
	if code != 42 || string(rest) != "got\n" {
		t.Fatalf("code %d output %q", code, rest)
	}
}
