package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestRunDispatch(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		code       int
		stdout     string // substring expected on stdout
		stderr     string // substring expected on stderr
		notCommand string // a hidden command that must not be listed
	}{
		{name: "no args", args: nil, code: exitUsage, stdout: "Commands:"},
		{name: "help", args: []string{"--help"}, code: exitOK, stdout: "Exit codes:"},
		{name: "help lists commands", args: []string{"help"}, code: exitOK, stdout: "record"},
		{name: "help of a command", args: []string{"help", "report"}, code: exitOK, stdout: "--format"},
		{name: "command --help", args: []string{"replay", "--help"}, code: exitOK, stdout: "--timing"},
		{name: "version", args: []string{"version"}, code: exitOK, stdout: "iotap "},
		{name: "unknown command", args: []string{"frobnicate"}, code: exitUsage, stderr: `unknown command "frobnicate"`},
		{name: "unknown flag", args: []string{"report", "--bogus"}, code: exitUsage, stderr: "unknown flag: --bogus"},
		{name: "missing trace", args: []string{"info", "/nonexistent/x.iotap"}, code: exitError, stderr: "does not exist"},
		{name: "no trace given", args: []string{"report"}, code: exitUsage, stderr: "no trace given"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), tc.args, strings.NewReader(""), &out, &errb)
			if code != tc.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), tc.stdout) {
				t.Errorf("stdout lacks %q:\n%s", tc.stdout, out.String())
			}
			if !strings.Contains(errb.String(), tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, errb.String())
			}
		})
	}
}

func TestExitCodeMapping(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		code int
	}{
		{"nil", nil, exitOK},
		{"job exit code", &exitCodeError{code: 42}, 42},
		{"command not found", fmt.Errorf("start: %w", &exitCodeError{code: exitNotFound, err: errors.New("no such command")}), exitNotFound},
		{"usage", usageErrorf("bad %s", "flag"), exitUsage},
		{"damaged", fmt.Errorf("%w: a.iotap", errDamaged), exitDamaged},
		{"other", errors.New("disk on fire"), exitError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := exitCode(io.Discard, "test", tc.err); got != tc.code {
				t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.code)
			}
		})
	}
}
